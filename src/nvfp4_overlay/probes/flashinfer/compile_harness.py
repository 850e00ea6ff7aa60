"""A torch.compile harness that cannot count an eager call as a pass: every binding compiled, every run counted.

FlashInfer's own compile mode (its tests/conftest.py, FLASHINFER_TEST_TORCH_COMPILE=1) replaces a
function in its defining module alone, so a test that calls ``flashinfer.apply_rope`` or a name it
imported runs eagerly and passes. This harness replaces every name a function is reachable by: each
module attribute (and class attribute, for a method) whose value is the function, whatever the
module (the top-level ``flashinfer.X``, the defining module, every module that imported it by
name). The replacement calls ``torch.compile(fn, fullgraph=True)`` through a backend that wraps
each compiled graph, so that a call counts as compiled only when a graph dynamo made for it ran;
each graph's opaque ops (custom ops outside aten and prims) are counted as the graph runs.
A call that ran no graph (dynamo made none: nothing in it was a tensor op) is counted apart,
``uncompiled``: a case whose calls all landed there compiled nothing, and says so.

Standard library and torch only, and nothing of nvfp4-overlay: the CPU probe (compile_list.py)
uses it with the GPU faked, and FlashInfer's own tests on a GPU load it as a pytest plugin
through compile_plugin.py.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

# Namespaces whose ops are the tracer's own vocabulary, not an opaque call.
_TRACED_NAMESPACES = ("aten", "prims", "higher_order", "_operator", "operator")


@dataclass
class Counts:
    """What the calls of one case did: made, ran through a compiled graph, ran none, and the opaque ops."""

    calls: int = 0
    compiled_runs: int = 0  # calls during which a graph dynamo made ran
    uncompiled: int = 0  # calls that ran no graph: nothing of them compiled
    graphs: int = 0  # graphs dynamo handed to the backend (a cache hit makes none)
    opaque_ops: int = 0  # opaque op calls in the graphs that ran
    ops: dict[str, int] = field(default_factory=dict)  # opaque op -> calls, in the graphs that ran
    errors: list[str] = field(default_factory=list)  # the first line of each compile error

    def passed(self) -> bool:
        """Every call ran a compiled graph with at least one opaque op per call."""
        return self.calls > 0 and self.compiled_runs == self.calls and self.opaque_ops >= self.calls


def opaque_targets(graph: Any) -> list[str]:
    """The graph's call_function targets that are custom ops (an OpOverload outside the tracer's namespaces)."""
    out = []
    for node in graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            continue
        namespace = node.target.namespace if hasattr(node.target, "namespace") else str(node.target).split(".")[0]
        if namespace not in _TRACED_NAMESPACES:
            out.append(str(node.target))
    return out


def counting_backend(counts: Callable[[], Counts], inner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A dynamo backend: `inner` compiles the graph; the callable it returns counts each run (into
    the Counts that counts() gives at run time, the current case's) and the graph's opaque ops."""

    def backend(gm: Any, example_inputs: Any) -> Any:
        targets = opaque_targets(gm.graph)
        counts().graphs += 1
        compiled = inner(gm, example_inputs)

        def run(*args: Any) -> Any:
            now = counts()
            now.compiled_runs += 1
            now.opaque_ops += len(targets)
            for t in targets:
                now.ops[t] = now.ops.get(t, 0) + 1
            return compiled(*args)

        run._boxed_call = getattr(compiled, "_boxed_call", False)  # type: ignore[attr-defined]
        return run

    return backend


def resolve(qualname: str) -> tuple[Any, str, Any]:
    """'flashinfer.rope.apply_rope' or 'flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper.run':
    (the object that holds it, its attribute name, the function)."""
    parts = qualname.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            holder: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:-1]:
            holder = getattr(holder, part)
        return holder, parts[-1], vars(holder).get(parts[-1], getattr(holder, parts[-1]))
    raise ImportError(qualname)


def bindings(fn: Any, holder: Any, attr: str, package: str) -> list[tuple[Any, str]]:
    """Every (namespace, name) bound to fn: the holder's attribute and every module of the package
    (and every class in it, for a method) whose attribute is fn itself."""
    found = [(holder, attr)]
    for name, module in list(sys.modules.items()):
        if module is None or not (name == package or name.startswith(package + ".")):
            continue
        spaces = [module] + ([v for v in vars(module).values() if isinstance(v, type)] if isinstance(holder, type) else [])
        for space in spaces:
            for key, value in list(vars(space).items()):
                if value is fn and (space, key) not in found:
                    found.append((space, key))
    return found


class Harness:
    """Compile-everywhere replacement of named functions, with the counts of the current case."""

    def __init__(self, inner: Callable[[Any, Any], Any] | str = "eager") -> None:
        self.current = Counts()
        if isinstance(inner, str):
            inner = _named_backend(inner)
        self.backend = counting_backend(lambda: self.current, inner)
        self.patched: list[tuple[Any, str, Any]] = []  # (namespace, name, the original)

    @contextlib.contextmanager
    def case(self) -> Iterator[Counts]:
        """The Counts of the calls made inside the block."""
        self.current = Counts()
        try:
            yield self.current
        finally:
            self.current = Counts()

    def install(self, qualnames: Sequence[str], package: str | None = None) -> dict[str, list[str]]:
        """Replace every binding of each named function in its package (the name's first part, unless
        given); {qualname: the names replaced} (a missing one: [])."""
        out: dict[str, list[str]] = {}
        for qualname in qualnames:
            try:
                holder, attr, fn = resolve(qualname)
            except (ImportError, AttributeError):
                out[qualname] = []
                continue
            replacement = self._compiled(fn)
            names = []
            for space, key in bindings(fn, holder, attr, package or qualname.split(".")[0]):
                self.patched.append((space, key, vars(space)[key]))
                setattr(space, key, replacement)
                names.append(f"{getattr(space, '__module__', '') + '.' if isinstance(space, type) else ''}"
                             f"{getattr(space, '__qualname__', getattr(space, '__name__', ''))}.{key}")
            out[qualname] = names
        return out

    def uninstall(self) -> None:
        for space, key, original in reversed(self.patched):
            setattr(space, key, original)
        del self.patched[:]

    def _compiled(self, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        # The compiled frame is this one, which calls fn, as a caller's own code does: dynamo reads the
        # source of the frame it compiles (torch/_dynamo/pgo.py hashes its file), the caller's, not the wheel's.
        compiled = torch.compile(call, fullgraph=True, backend=self.backend)

        @functools.wraps(fn)
        def replacement(*args: Any, **kwargs: Any) -> Any:
            now = self.current
            now.calls += 1
            before = now.compiled_runs
            try:
                return compiled(*args, **kwargs)
            except Exception as exc:
                now.errors.append(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}")
                raise
            finally:
                if now.compiled_runs == before:
                    now.uncompiled += 1

        replacement.__nvfp4_compile_harness__ = fn  # type: ignore[attr-defined]
        return replacement  # a function: as a class attribute, a method like the one it replaces


def _named_backend(name: str) -> Callable[[Any, Any], Any]:
    """The graph's own forward ("eager"), AOT autograd's functional graph ("aot_eager"), or inductor."""
    if name == "eager":
        return lambda gm, example_inputs: gm.forward
    if name == "aot_eager":
        from torch._dynamo.backends.debugging import boxed_nop
        from torch._functorch.aot_autograd import aot_module_simplified

        return lambda gm, example_inputs: aot_module_simplified(gm, example_inputs, fw_compiler=boxed_nop)
    if name == "inductor":
        from torch._inductor.compile_fx import compile_fx

        return compile_fx  # type: ignore[no-any-return]
    raise ValueError(f"no backend {name!r}: eager, aot_eager or inductor")
