"""Probe: the trace ladder of FlashInfer's FP4/MXFP8 entry points, on a CPU, for behaviour.py.

``python -m nvfp4_overlay.probes.flashinfer_trace < plan.json`` prints one JSON document: for each
tree (an unpacked upstream or patched wheel), for each GPU of the plan (the compute capability is
faked, tensors are CPU or meta tensors), for each entry point the release has and each of its
cases (probes/cases.py):

- ``eager``: the outputs (shape, stride, dtype) of an eager call and the kernel launches it made;
- ``compiled`` (every case of a patched tree, the first of each entry point of an upstream one):
  ``torch.compile(fullgraph=True)``: the error (its kind, first line, the builtin dynamo gave up
  on, dynamo's user stack as file:function), or the graph's call_function targets, the op's fake
  outputs as dynamo saw them (the graph's output meta), the outputs and launches of the compiled
  run; and what happened while dynamo traced: processes started and FlashInfer files opened (an
  audit hook; dynamo's own linecache reads of traced source are counted apart). The cases that
  reach the kernel are traced together, one call each in one function (run_entry says why).

Results name no path of this machine (the tree is ``<tree>``), so that an upstream result can be
kept as a fact about its wheel (oracle.py) and held to a patched tree's line for line.

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
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from nvfp4_overlay.oracle import make_toolkit
from nvfp4_overlay.probes import cases as case_table
from nvfp4_overlay.probes import forking, serving_stubs

SPAWN = ("subprocess.Popen", "os.posix_spawn", "os.spawn", "os.system", "os.fork", "os.forkpty")
OP_PREFIX = "nvfp4_overlay.flashinfer_"


def main() -> None:
    plan = json.load(sys.stdin)
    out, sys.stdout = sys.stdout, sys.stderr  # what upstream prints (0.6.8.post1's cuDNN handle) is no result
    result = forking.each_tree(plan["trees"], lambda tree: probe_tree(tree, plan), plan.get("jobs", 1))
    json.dump(result, out)


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
    os.environ.pop("CUDA_PATH", None)
    # The toolkit both trees find is torch's CUDA release (without one upstream falls back to
    # /usr/local/cuda, which differs from machine to machine): where a path asks the CUDA release
    # (mm_fp4's backend heuristic), upstream and the patched tree hear the same, and the ladder holds
    # routing alone. patch 0001's answers are the CUDA grid's to hold.
    os.environ["CUDA_HOME"] = str(make_toolkit(Path(tempfile.mkdtemp(prefix="nvfp4-toolkit-")), torch.version.cuda))
    os.environ["FLASHINFER_WORKSPACE_BASE"] = tree.get("workspace") or os.path.join(tree["path"], ".workspace")
    sys.path.insert(0, tree["path"])
    import flashinfer
    from flashinfer.jit import core as jit_core

    box = Box(os.path.dirname(os.path.abspath(flashinfer.__file__)))
    _stub_kernels(jit_core, box)
    serving_stubs.install(box)  # the cubin loader, the AutoTuner, kernels whose return the wrapper reads
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.cuda.current_device = lambda: 0
    sys.addaudithook(box.audit)
    # Dynamo's first compile in a process imports and sets up much; do it once, before the forks.
    torch.compile(lambda t: t + 1, fullgraph=True, backend="eager")(torch.zeros(1))
    entries = {name: getattr(flashinfer, name) for name in plan["entries"] if hasattr(flashinfer, name)}
    out: dict[str, Any] = {"version": flashinfer.__version__, "entries": {}, "routed": _routed(),
                           "probed": list(plan["entries"])}
    for name, fn in entries.items():
        out["entries"][name] = {"signature": case_table.parameters(fn), "schema": _schema(fn)}
    out["lookups"] = forking.in_child(lambda: lookups_under_fullgraph(box, tree["path"]))
    # An upstream tree (no overlay) compiles the first case of each entry point, the one
    # behaviour.upstream_fails reads; its other cases run eagerly, for the patched tree's eager
    # calls to be held to. A patched tree compiles every case and logs its eager dispatcher ops.
    overlay = bool(out["routed"])
    for cc in plan["gpus"]:
        key = f"{cc[0]}.{cc[1]}"
        _fake_capability(tuple(cc))
        out[key] = {}
        for name, fn in entries.items():
            made = list(case_table.cases(name, fn, quick=plan.get("quick", False)))
            out[key][name] = forking.in_child(
                functools.partial(run_entry, fn, made, box, tree["path"], compile_all=overlay))
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


def run_entry(fn: Any, made: list[tuple[str, Any]], box: Box, tree: str, *, compile_all: bool) -> dict[str, Any]:
    """Every case of one entry point: each called eagerly, then compiled with fullgraph.

    The cases that reach the kernel eagerly are compiled together, one call each in one traced
    function (one dynamo trace instead of one per case; each call is its own node, and the
    compiled run's launches and outputs are split back per case); a case upstream refuses is
    compiled alone, since a refusal ends a trace. Without compile_all (an upstream tree) only the
    first case is compiled: upstream fails in the JIT loader, the cases after it would fail alike.
    """
    runs: dict[str, Any] = {}
    for case_id, make in made:
        args, kwargs = make(torch)
        del box.launches[:]
        try:
            runs[case_id] = {"eager": {"outputs": describe(fn(*args, **kwargs)), "launches": list(box.launches)}}
        except Exception as exc:  # noqa: BLE001 - upstream's own refusal is a result too
            runs[case_id] = {"eager": {"error": [type(exc).__name__, _clean(str(exc)[:500], tree)]}}
    chosen = made if compile_all else made[:1]
    reached = [(c, m) for c, m in chosen if "error" not in runs[c]["eager"]]
    refused = [(c, m) for c, m in chosen if "error" in runs[c]["eager"]]
    for group in ([reached] if reached else []) + [[one] for one in refused]:
        for case_id, compiled in compile_cases(fn, group, box, tree, [runs[c]["eager"] for c, _ in group]).items():
            runs[case_id]["compiled"] = compiled
    return runs


def compile_cases(fn: Any, group: list[tuple[str, Any]], box: Box, tree: str,
                  eager: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """torch.compile(fullgraph=True) of one function that calls fn once per case, run once."""
    inputs = [make(torch) for _, make in group]
    flat = [a for args, _ in inputs for a in args]
    spans: list[tuple[int, int, dict[str, Any]]] = []  # (first positional input, how many, keyword arguments) per case
    for args, kwargs in inputs:
        spans.append((sum(n for _, n, _ in spans), len(args), kwargs))
    graphs: list[dict[str, Any]] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        box.phase = "run"
        (output,) = [n for n in gm.graph.nodes if n.op == "output"]
        vals = [a.meta.get("example_value", a.meta.get("val")) if hasattr(a, "meta") else None
                for a in _flatten(output.args[0])]
        targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        # each op call's fresh outputs as its fake gave them (a parameter handed back, `out=`, is no
        # output of the graph: the compiled function returns its input)
        fresh = [[describe(v) for v in n.meta.get("example_value") or ()] for n in gm.graph.nodes
                 if n.op == "call_function" and str(n.target).startswith(OP_PREFIX)]
        graphs.append({"targets": list(dict.fromkeys(targets)),  # each once, in order
                       "op_calls": sum(t.startswith(OP_PREFIX) for t in targets),
                       "fake_outputs": [describe(v) for v in vals], "fresh": fresh})
        return gm.forward

    def calls(*a: Any) -> list[Any]:
        return [fn(*a[first:first + n], **kwargs) for first, n, kwargs in spans]

    torch._dynamo.reset()
    op = getattr(fn, "__nvfp4_overlay_op__", None)
    if op is not None and any(isinstance(a, torch.Tensor) and a.is_meta
                              for args, kwargs in inputs for a in [*args, *kwargs.values()]):
        # A custom op's Meta kernel is its fake: on meta inputs the compiled run would never reach
        # upstream's wrapper. In this child, upstream's wrapper (the op's own body) is the Meta
        # kernel, so the compiled run hands the recording kernel what an eager call hands it.
        op.register_kernel("meta", op._init_fn)
    del box.launches[:], box.events[:]
    tactics = getattr(box, "tactics", [])
    del tactics[:]
    box.phase = "trace"
    ids = [case_id for case_id, _ in group]
    try:
        results = torch.compile(calls, fullgraph=True, backend=backend)(*flat)
    except Exception as exc:  # noqa: BLE001 - upstream fails here; the message says where
        box.phase = "after"
        failed = {"error": error_summary(exc, tree), "trace_events": list(box.events)}
        return {case_id: dict(failed) for case_id in ids}
    box.phase = "after"
    out: dict[str, dict[str, Any]] = {}
    launches, fakes = list(box.launches), graphs[0]["fake_outputs"] if graphs else []
    fresh = graphs[0]["fresh"] if graphs and len(graphs[0]["fresh"]) == len(ids) else None
    for i, (case_id, result, theirs) in enumerate(zip(ids, results, eager)):
        tensors = len(_flatten_tensors(result))
        mine = len(theirs.get("launches", []))
        seen = fakes[:tensors] if fresh is None else _as_seen(result, inputs[i], fresh[i])
        out[case_id] = {"outputs": describe(result), "launches": launches[:mine], "trace_events": list(box.events),
                        "fake_outputs": seen,
                        "targets": graphs[0]["targets"] if graphs else [],
                        "op_calls": graphs[0]["op_calls"] if graphs else 0, "calls": len(ids),
                        # the AutoTuner's tactic choices of the trace and the run, with whether dynamo
                        # was tracing (serving_stubs); of every case of the group, the same in each
                        "tactics": list(tactics)}
        launches, fakes = launches[mine:], fakes[tensors:]
    if launches:  # launches no eager call made: the last case gets them, and differs from its eager call
        out[ids[-1]]["launches"] = out[ids[-1]]["launches"] + launches
    return out


def _as_seen(result: Any, inputs: tuple[tuple[Any, ...], dict[str, Any]], fresh: list[Any]) -> list[Any]:
    """The outputs of one case's call as dynamo saw them: each tensor the call hands back from its
    inputs (``out=``) as that input, the others as its op's fake gave them, in order; fake outputs
    left over (a fake that allocates where upstream hands a parameter back) after them."""
    given = [a for a in [*inputs[0], *inputs[1].values()] if isinstance(a, torch.Tensor)]
    left = iter(fresh)
    seen = [describe(t) if any(t is g for g in given) else next(left, ["missing"]) for t in _flatten_tensors(result)]
    return seen + list(left)


def error_summary(exc: BaseException, tree: str) -> dict[str, Any]:
    """What a compile error says, without this machine's paths: its kind, its first line, the builtin
    dynamo gave up on, and dynamo's user stack (file:function, files of the tree relative to it)."""
    text = str(exc)
    lines = text.strip().splitlines()
    explanation = next((line.strip() for line in lines if line.strip().startswith("Explanation:")), "")
    stack = []
    for line in lines:
        match = _FRAME.match(line)
        if match:
            path, function = match.group(1), match.group(2)
            where = os.path.relpath(path, tree) if path.startswith(tree + os.sep) else "<outside>/" + os.path.basename(path)
            stack.append(f"{where}:{function}")
    return {"kind": type(exc).__name__, "reason": _clean(lines[0] if lines else "", tree),
            "explanation": _clean(explanation, tree), "stack": stack, "head": _clean(text[:600], tree)}


_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+, in (\S+)')


def _clean(text: str, tree: str) -> str:
    return text.replace(tree, "<tree>")


def _flatten_tensors(value: Any) -> list[Any]:
    return [v for v in _flatten(value) if isinstance(v, torch.Tensor)]


def lookups_under_fullgraph(box: Box, tree: str) -> dict[str, Any]:
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
        result = {"error": error_summary(exc, tree)}
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
        torch.ones(1)  # the instrument's own control: an op it must see (an in-place entry point allocates none)
        try:
            fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            return {"error": [type(exc).__name__, str(exc)[:300]]}
    return {"ops": sorted({e.name for e in prof.events()})}


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
