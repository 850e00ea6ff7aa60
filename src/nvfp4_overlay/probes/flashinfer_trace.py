"""Probe: the trace ladder of FlashInfer's FP4/MXFP8 entry points, on a CPU, for behaviour.py.

``python -m nvfp4_overlay.probes.flashinfer_trace < plan.json`` prints one JSON document: for each
tree (an unpacked upstream or patched wheel), for each GPU of the plan (the compute capability is
faked, tensors are CPU or meta tensors), for each entry point the release has and each of its
cases (probes/cases.py):

- ``eager``: the outputs (shape, stride, dtype) of an eager call and the kernel launches it made;
- ``compiled`` (every case of a patched tree, the first of each entry point of an upstream one):
  ``torch.compile(fullgraph=True)`` of the same call: the error, or the graph's
  call_function targets, the op's fake outputs as dynamo saw them (the graph's output meta), the
  outputs and launches of the compiled run; and what happened while dynamo traced: processes
  started and FlashInfer files opened (an audit hook; dynamo's own linecache reads of traced
  source are counted apart).

Only the JIT build is stubbed: every JitSpec's build_and_load takes the spec's file lock, as
upstream's does, and returns a module whose functions record their arguments and do nothing, so
everything above the kernel, the output allocation included, is the wheel's own code. CUDA-only
calls that a CPU build of torch refuses (``Tensor.cuda()``, ``torch.cuda.current_device()``) are
made identities, every binding of ``get_compute_capability`` answers the faked GPU, and the JIT
context targets it. Entry points whose inner op takes a host branch for CPU tensors
(mxfp8_quantize) run on ``meta`` tensors; for those cases the overlay's op gets upstream's wrapper
as its Meta kernel (a custom op's Meta kernel is its fake), so that the compiled run reaches the
recording kernel as an eager call does.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
from types import FrameType
from typing import Any

import torch

from nvfp4_overlay.probes import cases as case_table
from nvfp4_overlay.probes import forking

SPAWN = ("subprocess.Popen", "os.posix_spawn", "os.spawn", "os.system", "os.fork", "os.forkpty")
OP_PREFIX = "nvfp4_overlay.flashinfer_"


def main() -> None:
    plan = json.load(sys.stdin)
    result = forking.each_tree(plan["trees"], lambda tree: probe_tree(tree, plan), plan.get("jobs", 1))
    json.dump(result, sys.stdout)


class Box:
    """The faked machine and the recorders, shared by every case of one tree."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.phase = "setup"
        self.events: list[list[str]] = []
        self.launches: list[list[Any]] = []

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.phase != "trace":
            return
        if event in SPAWN or event.startswith("os.exec"):
            self.events.append([event, repr(args[0])[:160]])
        elif event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.abspath(os.fsdecode(args[0]))
            if path.startswith(self.package + os.sep) and not _by_linecache():
                self.events.append(["open", path[len(self.package) + 1:]])


def _by_linecache() -> bool:
    # Dynamo reads the source of what it traces through linecache for its messages: that is the
    # tracer looking at code, not FlashInfer doing I/O.
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if os.path.basename(frame.f_code.co_filename) == "linecache.py":
            return True
        frame = frame.f_back
    return False


def describe(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ["tensor", list(value.shape), list(value.stride()), str(value.dtype), str(value.device.type)]
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    return ["value", repr(value)]


def probe_tree(tree: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    torch.version.cuda = plan.get("torch_cuda", "12.8")  # a CUDA build of torch, as on the server
    for var in ("CUDA_HOME", "CUDA_PATH"):
        os.environ.pop(var, None)
    os.environ["FLASHINFER_WORKSPACE_BASE"] = tree.get("workspace") or os.path.join(tree["path"], ".workspace")
    sys.path.insert(0, tree["path"])
    import flashinfer
    from flashinfer.jit import core as jit_core

    box = Box(os.path.dirname(os.path.abspath(flashinfer.__file__)))
    _stub_kernels(jit_core, box)
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.cuda.current_device = lambda: 0
    sys.addaudithook(box.audit)
    # Dynamo's first compile in a process imports and sets up much; do it once, before the forks.
    torch.compile(lambda t: t + 1, fullgraph=True, backend="eager")(torch.zeros(1))
    entries = {name: getattr(flashinfer, name) for name in plan["entries"] if hasattr(flashinfer, name)}
    out: dict[str, Any] = {"version": flashinfer.__version__, "entries": {}, "routed": _routed(),
                           "probed": list(plan["entries"])}
    for name, fn in entries.items():
        out["entries"][name] = {"signature": _parameters(fn), "schema": _schema(fn)}
    out["lookups"] = forking.in_child(lambda: lookups_under_fullgraph(box))
    # An upstream tree (no overlay) compiles the first case of each entry point, the one
    # behaviour.upstream_fails reads; its other cases run eagerly, for the patched tree's eager
    # calls to be held to. A patched tree compiles every case and logs its eager dispatcher ops.
    overlay = bool(out["routed"])
    for cc in plan["gpus"]:
        key = f"{cc[0]}.{cc[1]}"
        _fake_capability(tuple(cc))
        out[key] = {}
        for name, fn in entries.items():
            runs = {}
            for i, (case_id, make) in enumerate(case_table.cases(name, fn, quick=plan.get("quick", False))):
                runs[case_id] = forking.in_child(
                    functools.partial(run_case, fn, make, box, compile=overlay or i == 0))
            out[key][name] = runs
        out[key]["eager_ops"] = {
            name: forking.in_child(functools.partial(eager_op_log, fn, name))
            for name, fn in entries.items() if overlay
        }
        out[key]["opt_in_fp4_op"] = forking.in_child(functools.partial(opt_in_fp4_op, box))
    return out


def opt_in_fp4_op(box: Box) -> dict[str, Any]:
    """Upstream's own torch.ops.flashinfer.fp4_quantize (0.6.12+) and the public fp4_quantize, each
    called eagerly with enable_pdl=True: the kernel launches each makes (None: no such op)."""
    if not hasattr(torch.ops.flashinfer, "fp4_quantize"):
        return {"launches": None}
    import flashinfer

    out: dict[str, Any] = {}
    calls = {"launches": torch.ops.flashinfer.fp4_quantize, "public": flashinfer.fp4_quantize}
    for key, call in calls.items():
        del box.launches[:]
        try:
            call(torch.randn(40, 256, dtype=torch.bfloat16), torch.tensor([2.0]), enable_pdl=True)
        except Exception as exc:  # noqa: BLE001
            out[key] = {"error": [type(exc).__name__, str(exc)[:500]]}
        else:
            out[key] = list(box.launches)
    return out


def run_case(fn: Any, make: Any, box: Box, *, compile: bool = True) -> dict[str, Any]:
    args, kwargs = make(torch)
    result: dict[str, Any] = {}
    del box.launches[:]
    try:
        result["eager"] = {"outputs": describe(fn(*args, **kwargs)), "launches": list(box.launches)}
    except Exception as exc:  # noqa: BLE001 - upstream's own refusal is a result too
        result["eager"] = {"error": [type(exc).__name__, str(exc)[:500]]}
    if not compile:
        return result
    graphs: list[dict[str, Any]] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        box.phase = "run"
        (output,) = [n for n in gm.graph.nodes if n.op == "output"]
        vals = [a.meta.get("example_value", a.meta.get("val")) if hasattr(a, "meta") else None
                for a in _flatten(output.args[0])]
        graphs.append({"targets": [str(n.target) for n in gm.graph.nodes if n.op == "call_function"],
                       "fake_outputs": [describe(v) for v in vals]})
        return gm.forward

    torch._dynamo.reset()
    op = getattr(fn, "__nvfp4_overlay_op__", None)
    if op is not None and any(isinstance(a, torch.Tensor) and a.is_meta for a in [*args, *kwargs.values()]):
        # A custom op's Meta kernel is its fake: on meta inputs the compiled run would never reach
        # upstream's wrapper. In this case's child, upstream's wrapper (the op's own body) is the
        # Meta kernel, so the compiled run hands the recording kernel what an eager call hands it.
        op.register_kernel("meta", op._init_fn)
    del box.launches[:], box.events[:]
    box.phase = "trace"
    try:
        compiled = torch.compile(lambda *a: fn(*a, **kwargs), fullgraph=True, backend=backend)(*args)
        result["compiled"] = {"outputs": describe(compiled), "launches": list(box.launches)}
    except Exception as exc:  # noqa: BLE001 - upstream fails here; the message says where
        result["compiled"] = {"error": [type(exc).__name__, str(exc)[:6000]]}
    box.phase = "after"
    result["compiled"]["trace_events"] = list(box.events)
    if graphs:
        result["compiled"].update(graphs[0])
    return result


def lookups_under_fullgraph(box: Box) -> dict[str, Any]:
    """get_cuda_version() and is_cuda_version_at_least() inside torch.compile(fullgraph=True)."""
    from flashinfer.jit import cpp_ext

    def gated(t: Any) -> Any:
        v = cpp_ext.get_cuda_version()
        if cpp_ext.is_cuda_version_at_least("12.8") and not cpp_ext.is_cuda_version_at_least("12.9"):
            t = t + v.major
        if cpp_ext.is_cuda_version_at_least("12.8.0") and cpp_ext.is_cuda_version_at_least("12"):
            t = t * 2
        if cpp_ext.is_cuda_version_at_least("13.0"):
            t = t - 1000
        return t

    del box.events[:]
    box.phase = "trace"
    try:
        value = torch.compile(gated, fullgraph=True, backend="eager")(torch.zeros(2))
        result: dict[str, Any] = {"value": value.tolist()}
    except Exception as exc:  # noqa: BLE001 - upstream fails here (nvcc in a subprocess)
        result = {"error": [type(exc).__name__, str(exc)[:2000]]}
    box.phase = "after"
    result["events"] = list(box.events)
    return result


def eager_op_log(fn: Any, name: str) -> dict[str, Any]:
    """The dispatcher ops an eager call goes through: no nvfp4_overlay op may be among them."""
    made = next(iter(case_table.cases(name, fn, quick=True)), None)
    if made is None:
        return {"ops": []}
    args, kwargs = made[1](torch)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        try:
            fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            return {"error": [type(exc).__name__, str(exc)[:300]]}
    return {"ops": sorted({e.name for e in prof.events()})}


# Keywords a decorator of upstream's takes beyond the signature: backend_requirement's wrapper
# (nvfp4_kv_quantize, 0.6.7+) pops skip_check from its kwargs.
HIDDEN_KEYWORDS = ("skip_check",)


def _parameters(fn: Any) -> list[str]:
    """What a caller may pass: the signature's parameters, then the hidden keywords a wrapper on
    the __wrapped__ chain reads (the name is a constant of its code)."""
    names = list(inspect.signature(fn).parameters)
    for keyword in HIDDEN_KEYWORDS:
        f = fn
        while hasattr(f, "__wrapped__"):
            if keyword in getattr(getattr(f, "__code__", None), "co_consts", ()):
                names.append(keyword)
                break
            f = f.__wrapped__
    return names


def _routed() -> list[str]:
    try:
        from flashinfer._nvfp4_overlay.entries import ENTRIES
    except ImportError:
        return []  # upstream
    return sorted(ENTRIES)


def _schema(fn: Any) -> list[str] | None:
    op = getattr(fn, "__nvfp4_overlay_op__", None)
    if op is None:
        return None
    overload = getattr(torch.ops.nvfp4_overlay, f"flashinfer_{fn.__name__}").default
    return [a.name for a in overload._schema.arguments]


def _stub_kernels(jit_core: Any, box: Box) -> None:
    class RecordingModule:
        def __getattr__(self, name: str) -> Any:
            def launch(*args: Any) -> None:
                box.launches.append([name, *[describe(a) for a in args]])
            return launch

    def build_and_load(self: Any, *args: Any, **kwargs: Any) -> Any:
        # Every release's loader takes the spec's file lock before it builds and loads (the lock is
        # where dynamo gives up on a loader whose spec starts no process); only the build and the
        # dlopen are left out.
        with jit_core.FileLock(self.lock_path, thread_local=False):
            return RecordingModule()

    for obj in list(vars(jit_core).values()):
        if isinstance(obj, type) and issubclass(obj, jit_core.JitSpec):
            obj.build_and_load = build_and_load  # type: ignore[attr-defined]
    jit_core.check_cuda_arch = lambda: None


def _fake_capability(cc: tuple[int, int]) -> None:
    """Every binding of get_compute_capability in FlashInfer (utils', the fp4 module's, activation's),
    and the GPU the JIT context would have found: a CPU build of torch sees none, and the JIT specs
    that ask the context for their architectures (mxfp8, the KV quantizer) would refuse to exist."""
    from flashinfer.jit import core as jit_core

    from nvfp4_overlay.probes.doctor_trace import fake_capability  # doctor's: the same bindings

    fake_capability(torch, cc)

    jit_core.current_compilation_context.TARGET_CUDA_ARCHS = {(cc[0], f"{cc[1]}a")}


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flatten(v)]
    return [value]


if __name__ == "__main__":
    main()
