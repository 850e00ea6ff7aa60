"""nvfp4-overlay: public FlashInfer entry points as opaque custom ops while dynamo traces.

Patch 0002 puts ``@route`` on each routed entry point (one line above its ``def``). Eager callers
get upstream's function unchanged, behind one ``torch.compiler.is_compiling()`` check. While dynamo
traces, the call becomes one ``torch.ops.nvfp4_overlay.flashinfer_<name>`` node (ops.py): dynamo asks
the op's fake for the outputs and never enters the JIT loader (nvcc, file locks, dlopen) or the
kernel wrapper itself; when the compiled graph runs, the op calls upstream's function with every
argument it was given. The fake is upstream's function too, run with the JIT layer stood in for
(faking.py), its result's form read off what it returns (forms.py), unless entries.py names one
written by hand (fakes.py), for a wrapper that cannot run that way.

The op is built from what the release itself says: its schema from the upstream signature (every
parameter, in order, keyword-only ones too), so a parameter upstream adds reaches the op with no
change here. entries.py holds the little that a signature cannot say: the outputs, which values
route, how to carry a value no schema type can (an enum, a sentinel), the types of parameters
upstream leaves unannotated, and keywords a decorator of upstream's takes beyond the signature
(``backend_requirement``'s ``skip_check``). A call whose values the op cannot carry as upstream
would receive them (a float where the schema holds a Tensor, an int where upstream compares
against its own enum) takes upstream's path.

For a hand-written fake and for an op that writes into a parameter, what upstream returns is
declared in entries.py (``returns``): fresh tensors, or a parameter upstream hands back when the
caller passed one (``out=``, ``output=``). The op returns the fresh
tensors only (an op's output may not alias its input) and writes in place into the parameters
entries.py says it mutates (``mutates``: ``out``, a residual), declared in its schema; the wrapper
puts upstream's result back together. An op that mutates nothing returns ``Tensor[]`` (a variant
may add a tensor). An op that mutates a parameter returns a fixed form (``()``, ``Tensor``, a tuple):
AOT autograd's functionalization (inductor, aot_eager) refuses a mutating custom op that returns
``Tensor[]``. So that its count is fixed, a hand-written fake's op always receives the parameter
upstream hands back: for a call that leaves it None, the traced path allocates it with the fake,
which allocates as upstream's wrapper does (tests/releases/test_trace_flashinfer.py holds it to
that), and upstream's function, when the graph runs, writes into it (upstream's own check of a given
``out`` passes); a derived fake's entry point sends that call to a second op, which leaves the
allocation to upstream (ops.py). A hand-written fake reads only the parameters it names; every other
parameter of the signature must be declared in entries.py as not shaping the outputs (``inert``),
or the entry point is not routed (a parameter a new release adds is a refusal, never passed by
silently); a derived fake reads them all.

What dynamo traces of a routed call is a function written for the entry point when it is routed
(traced.py): it binds the call by upstream's signature and checks, encodes and reassembles with
no Python call of its own, so that tracing a call costs what the op costs (dynamo inlines every
call a traced function makes, at milliseconds each: a generic binder cost about 170 ms a call).
"""

import functools
import inspect
import typing
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from packaging.version import Version

from . import ops
from .entries import ENTRIES, Entry
from .fakes import RELEASE
from .traced import UPSTREAM as _UPSTREAM
from .traced import is_tensor as _is_tensor
from .traced import is_tensor_or_none as _is_tensor_or_none
from .traced import traced_path as _traced_path

_SCHEMA_TYPES = {torch.Tensor: "Tensor", int: "int", float: "float", bool: "bool", str: "str",
                 torch.dtype: "ScalarType", torch.device: "Device"}


def route(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Patch 0002's decorator: fn for eager callers, one opaque op while dynamo traces.

    An entry point this module cannot route (a parameter of a type it does not know) stays
    exactly upstream's, with a warning: the overlay never makes an import fail.
    """
    try:
        plan = _plan(fn, ENTRIES[fn.__name__])
    except Exception as exc:  # noqa: BLE001 - any failure leaves upstream's function in place
        warnings.warn(f"nvfp4-overlay: {fn.__module__}.{fn.__name__} is not routed ({exc})", stacklevel=2)
        return fn
    return plan.wrapper()


@dataclass(frozen=True)
class _Plan:
    fn: Callable[..., Any]
    entry: Entry
    names: Tuple[str, ...]  # every parameter, in signature order, then the decorators' keywords
    positional: Tuple[str, ...]  # those a caller may pass by position
    defaults: Mapping[str, Any]
    encode: Mapping[str, Callable[[Any], Any]]
    accepts: Mapping[str, Callable[[Any], bool]]  # per parameter: can the op carry this value?
    op: Any
    form: Optional[int] = None  # a mutating op: how many tensors it returns (None: Tensor[], any number)
    types: Tuple[str, ...] = ()  # each parameter's schema type, in names' order
    fresh_op: Any = None  # a derived fake's mutating op for a call that leaves out (what upstream hands back) None
    fresh_form: Optional[int] = None

    def wrapper(self) -> Callable[..., Any]:
        fn, traced = self.fn, _traced_path(self)
        is_compiling = torch.compiler.is_compiling  # bound once: an eager call pays one call for it
        upstream_path = _UPSTREAM

        @functools.wraps(fn)
        def routed(*args: Any, **kwargs: Any) -> Any:
            if is_compiling():
                result = traced(*args, **kwargs)
                if result is not upstream_path:
                    return result
            return fn(*args, **kwargs)  # eager, or a call the op does not take: upstream's path

        routed.__nvfp4_overlay_op__ = self.op  # type: ignore[attr-defined]
        # The path a call takes while compiling, for a check to run under FakeTensorMode without dynamo.
        routed.__nvfp4_overlay_traced__ = traced  # type: ignore[attr-defined]
        return _Live(routed, fn) if self.entry.live_attributes else routed


class _Live(functools.partial):  # type: ignore[type-arg]
    """The routed function as an object whose attributes are upstream's wrapper's, live.

    backend_requirement sets ``suitable_auto_backends`` on its wrapper at each call, and mm_fp4's
    body reads it back through the module global, which is now this object: a copy made at import
    (functools.wraps) would be stale. A partial of the routed function with nothing bound, so that
    a call costs no Python frame of its own (a class with ``__call__`` costs an eager caller about
    1 us more); dynamo traces a partial as the function it holds.
    """

    def __new__(cls, routed: Callable[..., Any], upstream: Callable[..., Any]) -> "_Live":
        self = super().__new__(cls, routed)
        # Nothing of the wrapper's own attributes is copied: they are read from it when asked for.
        self.__dict__.update(__wrapped__=upstream, __name__=routed.__name__, __qualname__=routed.__qualname__,
                             __doc__=routed.__doc__, __module__=routed.__module__,
                             __nvfp4_overlay_op__=routed.__nvfp4_overlay_op__,  # type: ignore[attr-defined]
                             __nvfp4_overlay_traced__=routed.__nvfp4_overlay_traced__)  # type: ignore[attr-defined]
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["__wrapped__"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.__dict__["__wrapped__"], name, value)


def _plan(fn: Callable[..., Any], entry: Entry) -> _Plan:
    signature = inspect.signature(fn)
    inner = inspect.unwrap(fn)  # past @flashinfer_api: its annotations name the defining module's globals
    hints = typing.get_type_hints(inner)
    names, positional, defaults, types = [], [], {}, []
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is p.empty and p.kind is p.KEYWORD_ONLY:
            raise TypeError(f"parameter {p.name} ({p.kind.description}) has no place in a schema")
        names.append(p.name)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(p.name)
        if p.default is not p.empty:
            defaults[p.name] = p.default
        codec = entry.codecs.get(p.name)
        if codec:
            types.append(codec.schema)
        elif p.name in hints:
            types.append(_carries_none(_schema_type(hints[p.name], p.name)))
        elif p.name in entry.types:  # upstream left it unannotated
            types.append(_carries_none(entry.types[p.name]))
        else:
            raise TypeError(f"parameter {p.name} has no annotation; give it a type in entries.py")
    for name, (schema_type, default) in entry.hidden.items():
        if takes_keyword(fn, name):  # only while upstream's decorator still takes it
            names.append(name)
            types.append(schema_type)
            defaults[name] = default
    problems = disagreements(entry, names, RELEASE)
    if problems:
        raise TypeError("; ".join(problems))
    types = [_mutable(t, i) if n in entry.mutates else t for i, (n, t) in enumerate(zip(names, types))]
    codecs = {n: (c, c.scope(inner.__globals__)) for n, c in entry.codecs.items() if n in names}
    encode = {n: functools.partial(c.encode, scope) for n, (c, scope) in codecs.items()}
    decode = {n: functools.partial(c.decode, scope) for n, (c, scope) in codecs.items()}
    accepts = {n: functools.partial(c.accepts, scope) for n, (c, scope) in codecs.items()}
    for n, t in zip(names, types):  # a tensor parameter takes a tensor; a codec's own check stands
        if n not in codecs and t.startswith("Tensor") and not t.rstrip("?").endswith("[]"):
            accepts[n] = _is_tensor_or_none if t.endswith("?") else _is_tensor
    op, form, fresh_op, fresh_form = ops.defined(fn, entry, names, types, decode)
    return _Plan(fn, entry, tuple(names), tuple(positional), defaults, encode, accepts, op, form, tuple(types),
                 fresh_op, fresh_form)


def _carries_none(schema_type: str) -> str:
    """A scalar's schema type that also carries None: Python lets a caller pass None for an ``int`` or a
    ``str`` (0.7.4's nvfp4_quantize_paged_kv_cache(kv_layout=None) is HND, eagerly), and the op must hand
    upstream what the caller gave (a ``bool`` schema turns None into False)."""
    return schema_type + "?" if schema_type in _SCALARS else schema_type


_SCALARS = {"int", "float", "bool", "str", "ScalarType", "Device"}


def _mutable(schema_type: str, index: int) -> str:
    """Tensor -> Tensor(a3!): the op writes into it (each mutated parameter its own alias set)."""
    return f"Tensor(a{index}!){schema_type[len('Tensor'):]}"


def disagreements(entry: Entry, names: Sequence[str], release: Version) -> List[str]:
    """Where the fake and the release's signature (names: its parameters and hidden keywords) disagree.

    A hand-written fake: every parameter it reads is in the signature, unless entries.py says the
    release is older than the one that added it (``since``); every parameter of the signature is read
    by the fake, routed on (``routes``) or declared as not shaping the outputs (``inert``). A fake
    derived from upstream's wrapper reads every parameter, and upstream's result says what it returns:
    entries.py declares none of that for it, and an op that writes into a parameter has a fixed form
    (results.fixed_form) that only a declared result gives.
    """
    if entry.fake is None:
        stale = [f for f in ("inert", "since", "variants") if getattr(entry, f)]
        if bool(entry.mutates) != (entry.returns is not None):
            stale.append("returns" if entry.returns is not None else "mutates without returns")
        return [f"entries.py declares {', '.join(stale)} for an entry point whose fake is upstream's own wrapper "
                "(faking.py), which reads every parameter and whose result says what it returns (only an op that "
                "writes into a parameter declares its fixed form): drop them, or name a hand-written fake"] if stale else []
    reads = [p for p in inspect.signature(entry.fake).parameters]
    problems = [f"the fake reads {p!r}, which this release's signature lacks" for p in reads
                if p not in names and not (p in entry.since and release < Version(entry.since[p]))]
    problems += [f"parameter {n!r} is neither read by the fake nor declared in entries.py as not shaping "
                 f"the outputs" for n in names if n not in reads and n not in entry.inert and n not in entry.routes]
    return problems


def takes_keyword(fn: Callable[..., Any], name: str) -> bool:
    """Whether a wrapper on fn's __wrapped__ chain takes keyword `name` beyond the signature.

    ``backend_requirement``'s wrapper pops ``skip_check`` from its kwargs: the name is one of its
    code's constants. The function itself (the innermost) does not count: its parameters are the
    signature.
    """
    while hasattr(fn, "__wrapped__"):
        if name in getattr(getattr(fn, "__code__", None), "co_consts", ()):
            return True
        fn = fn.__wrapped__
    return False


def _schema_type(hint: Any, name: str) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union and set(args) == {float, torch.Tensor}:
        return "Tensor"  # rmsnorm_quant's scale: routed as a tensor; a float takes upstream's path
    if origin is typing.Union and len(args) == 2 and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        return _schema_type(inner, name) + "?"
    if origin in (list, List) and len(args) == 1:
        return _schema_type(args[0], name) + "[]"
    if origin is typing.Literal and args and all(isinstance(a, str) for a in args):
        return "str"  # backend: Literal["cuda", "cute-dsl"]; entries.py routes the values it takes
    if hint in _SCHEMA_TYPES:
        return _SCHEMA_TYPES[hint]
    raise TypeError(f"parameter {name}: no schema type for {hint!r}; give it a codec in entries.py")


def op_of(fn: Callable[..., Any]) -> Optional[Any]:
    """The custom op a routed entry point calls while tracing; None when it is not routed."""
    return getattr(fn, "__nvfp4_overlay_op__", None)
