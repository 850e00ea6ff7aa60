"""nvfp4-overlay: upstream's own wrapper as an op's fake, the JIT layer stood in for while it runs.

A derived fake (``derived``) calls the release's public function itself, under the FakeTensorMode
torch runs a fake in, so that every output is allocated by upstream's code: its shape rules, its
result's type and arity, whatever the release. Only what would build or launch a kernel answers
otherwise, and only in the thread that fakes, for as long as it fakes (``faking``):

- every JIT spec generator (a FlashInfer function named ``gen_*_module``) answers a stand-in spec,
  and every ``JitSpec.build_and_load`` a stand-in module: no nvcc, no file opened, no process, no
  dlopen; the stand-in module's kernels (and the module itself, called as a CuTe-DSL kernel is) do
  nothing and return None, so that a wrapper that reads what a kernel returns fails, never builds
  on a made-up value;
- a library's own compiler (CuTe DSL's ``cute.compile``, which releases before 0.7.4 call outside
  FlashInfer's loader) refuses, so that such a path fails the fake rather than compiling;
- every workspace getter that keeps its buffers in a cache of its own (``utils._get_cache_buf``, a
  module-level dict keyed by name and device) allocates a fresh buffer, kept nowhere: a fake tensor
  never enters upstream's cache, and an eager caller's real buffer is never handed to a fake;
- every ``functools.cache``d FlashInfer function (the module getters: ``get_fp4_quantization_module``
  and its kin) runs its own body, uncached: a module loaded eagerly before the compile is never
  called on fake tensors, and a stand-in is never kept in upstream's cache (a stand-in's kernel
  called outside a fake raises, so that one kept by a cache this module does not see is loud).

The bindings are switched in the loaded FlashInfer modules' namespaces and put back when the
outermost fake ends; a thread that does not fake gets upstream's own objects through them (the
switch passes its calls through), so an eager call made meanwhile is upstream's, cached. Fakes take
one lock, so two threads never fake at once. An eager caller never reaches this module.

A wrapper that cannot run this way (it reads a value from a tensor on the host, reads what a kernel
returns, allocates inside C++, or runs a library of its own such as CuTe DSL) keeps a hand-written
fake in fakes.py; entries.py says which and why.
"""

import functools
import re
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Tuple

_state = threading.local()
_lock = threading.RLock()
_GENERATOR = re.compile(r"gen_\w+_module$")  # FlashInfer's JIT spec generators, in every release
_OWN = __name__.rpartition(".")[0]  # flashinfer._nvfp4_overlay: never switched


def active() -> bool:
    """Whether this thread is running a derived fake."""
    return getattr(_state, "depth", 0) > 0


def derived(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The fake of a routed entry point whose entries.py row names none: upstream's function itself,
    called with the op's values (decoded) while the JIT layer is stood in for."""

    def fake(**values: Any) -> Any:
        with faking():
            return fn(**values)

    return fake


@contextmanager
def faking() -> Iterator[None]:
    """Stand in for the JIT layer in this thread (re-entrant: a fake may call a routed entry point)."""
    with _lock:
        depth = getattr(_state, "depth", 0)
        switched = _switch() if depth == 0 else []
        _state.depth = depth + 1
        try:
            yield
        finally:
            _state.depth = depth
            for owner, name, original, replacement in reversed(switched):
                if _get(owner, name) is replacement:  # put back what was there, unless upstream re-bound it
                    _set(owner, name, original)


class StandInModule:
    """What a JIT module's build_and_load answers while faking: every attribute a kernel that does
    nothing, and itself one (a CuTe-DSL spec loads one compiled kernel)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in_kernel(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return _stand_in_kernel(self._name)(*args, **kwargs)


def _stand_in_kernel(name: str) -> Callable[..., None]:
    def kernel(*args: Any, **kwargs: Any) -> None:
        if not active():
            raise RuntimeError(f"nvfp4-overlay: {name} is the stand-in of a kernel, called outside a fake: "
                               "a cache kept it while a fake ran; report it (the overlay's faking.py)")
        return None

    return kernel


class StandInSpec:
    """What a JIT spec generator answers while faking: a spec whose build_and_load is the stand-in module."""

    def __init__(self, name: str) -> None:
        self.name = name

    def build_and_load(self, *args: Any, **kwargs: Any) -> StandInModule:
        return StandInModule(self.name)


# --- the switch ---------------------------------------------------------------------------------------

Owner = Any  # a module's namespace (a dict), or a class
# [where, name, kind, upstream's object, its switch]: kind "cached", "generator", "loader", "workspace", "compiler"
Place = List[Any]
Switched = Tuple[Owner, str, Any, Any]  # (where, name, upstream's object, the switch)
_replacements: Dict[Tuple[int, str], Any] = {}  # (id of upstream's object, kind) -> its switch, made once
_kept: List[Any] = []  # upstream's objects that have a switch (so that their ids stay theirs)
_places: Dict[int, List[Place]] = {}  # len(sys.modules) -> where the switchable names are
# FlashInfer's workspace getters that keep what they allocate (name, bytes, device, zero_init=False).
_WORKSPACES = ("_get_cache_buf",)
# Libraries' own compilers a wrapper may call outside FlashInfer's loader: module -> names.
_COMPILERS = {"cutlass.cute": ("compile",)}


def _fresh_workspace(name: str, bytes: int, device: Any, zero_init: bool = False) -> Any:
    """What _get_cache_buf allocates on a miss, kept nowhere."""
    import torch

    return (torch.zeros if zero_init else torch.empty)(bytes, dtype=torch.uint8, device=device)


class NotDerivable(RuntimeError):
    """A wrapper called a library's own compiler while faking: its fake must be written by hand."""


def _switch() -> List[Switched]:
    """Bind every switchable name to its switch; what was switched, to put back. A place holds what it
    found there; a name re-bound since (a probe's stand-in, say) is looked at again."""
    switched = []
    for place in _where():
        owner, name, kind, original, replacement = place
        current = _get(owner, name)
        if current is not original:
            if current is None or kind != "compiler" and _kind(current) != kind:
                continue
            place[3], place[4] = current, _replacement(current, kind)
            original, replacement = place[3], place[4]
        _set(owner, name, replacement)
        switched.append((owner, name, original, replacement))
    return switched


def _get(owner: Owner, name: str) -> Any:
    return owner.get(name) if isinstance(owner, dict) else owner.__dict__.get(name)


def _set(owner: Owner, name: str, value: Any) -> None:
    if isinstance(owner, dict):
        owner[name] = value
    else:
        setattr(owner, name, value)


def _where() -> List[Place]:
    """Where something to switch is: FlashInfer's module namespaces, JitSpec and its subclasses, the
    libraries' compilers; found again when the set of loaded modules changes."""
    count = len(sys.modules)
    found = _places.get(count)
    if found is None:
        spots: List[Tuple[Owner, str, str]] = []
        for module_name, module in list(sys.modules.items()):
            if module is not None and _upstreams_module(module_name):
                namespace = vars(module)
                spots += [(namespace, n, k) for n, v in list(namespace.items()) if (k := _kind(v))]
        spots += [(cls, "build_and_load", "loader") for cls in _spec_classes()]
        spots += [(vars(sys.modules[m]), n, "compiler") for m, names in _COMPILERS.items()
                  if sys.modules.get(m) is not None for n in names if n in vars(sys.modules[m])]
        found = [[owner, name, kind, _get(owner, name), _replacement(_get(owner, name), kind)]
                 for owner, name, kind in spots]
        _places.clear()
        _places[count] = found
    return found


def _kind(value: Any) -> str:
    """What a module-level object of FlashInfer's is to a fake: "cached", "generator" or "" (nothing)."""
    if isinstance(value, functools._lru_cache_wrapper):  # type: ignore[attr-defined]
        wrapped = getattr(value, "__wrapped__", None)
        if _upstreams_module(getattr(wrapped, "__module__", None) or ""):
            return "generator" if _GENERATOR.match(getattr(wrapped, "__name__", "")) else "cached"
        return ""
    if callable(value) and _upstreams_module(getattr(value, "__module__", None) or "") \
            and _GENERATOR.match(getattr(value, "__name__", "") or ""):
        return "generator"
    if callable(value) and getattr(value, "__name__", "") == "build_and_load":
        return "loader"
    if callable(value) and getattr(value, "__name__", "") in _WORKSPACES \
            and _upstreams_module(getattr(value, "__module__", None) or ""):
        return "workspace"
    return ""


def _upstreams_module(name: str) -> bool:
    return (name == "flashinfer" or name.startswith("flashinfer.")) and not name.startswith(_OWN)


def _spec_classes() -> List[type]:
    """JitSpec and every subclass that defines its own build_and_load."""
    core = sys.modules.get("flashinfer.jit.core")
    base = getattr(core, "JitSpec", None)
    if base is None:
        return []
    classes, waiting = [], [base]
    while waiting:
        cls = waiting.pop()
        waiting += cls.__subclasses__()
        if "build_and_load" in cls.__dict__:
            classes.append(cls)
    return classes


def _replacement(original: Any, kind: str) -> Any:
    """The switch for upstream's object, by its kind, while this thread fakes: a generator answers a stand-in
    spec, a loader a stand-in module, a cached function runs its own body, a compiler refuses; upstream's
    object for every other call."""
    made = _replacements.get((id(original), kind))
    if made is not None:
        return made
    name = getattr(original, "__name__", kind)
    if kind == "compiler":
        def made(*args: Any, **kwargs: Any) -> Any:
            if active():
                raise NotDerivable(f"nvfp4-overlay: {name} of a library called while faking: this entry point's "
                                   "fake must be written by hand (the overlay's entries.py)")
            return original(*args, **kwargs)
    elif kind == "loader":
        def made(self: Any, *args: Any, **kwargs: Any) -> Any:
            return StandInModule(getattr(self, "name", "jit")) if active() else original(self, *args, **kwargs)
    elif kind == "generator":
        def made(*args: Any, **kwargs: Any) -> Any:
            return StandInSpec(name) if active() else original(*args, **kwargs)
    elif kind == "workspace":
        def made(*args: Any, **kwargs: Any) -> Any:
            return _fresh_workspace(*args, **kwargs) if active() else original(*args, **kwargs)
    else:
        body = original.__wrapped__

        def made(*args: Any, **kwargs: Any) -> Any:
            return body(*args, **kwargs) if active() else original(*args, **kwargs)
    functools.update_wrapper(made, original)
    _kept.append(original)
    _replacements[id(original), kind] = made
    return made
