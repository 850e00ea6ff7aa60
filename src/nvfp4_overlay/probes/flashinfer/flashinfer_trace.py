"""Probe: the trace ladder of FlashInfer's FP4/MXFP8 entry points, on a CPU, for oracle/behaviour.py.

``python -m nvfp4_overlay.probes.flashinfer.flashinfer_trace < plan.json`` prints one JSON document: for each
tree (an unpacked upstream or patched wheel), for each GPU of the plan (the compute capability is
faked, tensors are CPU or meta tensors), for each entry point the release has and each of its
cases (probes/flashinfer/tables/cases.py):

- ``eager``: the outputs (shape, stride, dtype) of an eager call, the kernel launches it made and
  the AutoTuner's tactic choices (serving_stubs records each with whether dynamo was tracing);
- ``compiled`` (every case of a patched tree, the first of each entry point of an upstream one):
  ``torch.compile(fullgraph=True)``, the graph through AOT autograd's functionalization as
  ``aot_eager`` and ``inductor`` take it (compile_calls): the error (its kind, first line, the builtin dynamo gave up
  on, dynamo's user stack as file:function), or the graph's call_function targets, the op's fake
  outputs as dynamo saw them (the graph's output meta; a tensor the caller passed and gets back,
  ``output=``, as it was passed), the outputs, launches and tactic choices of the compiled run;
  and what happened while dynamo traced: processes started and FlashInfer files opened (an audit
  hook; dynamo's own reads of traced source are counted apart, probes/io_audit.py). The cases that reach
  the kernel are traced together, one call each in one function (run_entry says why).

Results name no path of this machine (the tree is ``<tree>``), so that an upstream result can be
kept as a fact about its wheel (oracle/oracle.py) and held to a patched tree's line for line.

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

import contextlib
import functools
import os
import re
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch
from torch._dynamo.backends.debugging import boxed_nop
from torch._functorch.aot_autograd import aot_module_simplified

from nvfp4_overlay.probes import forking, io_audit, stdio
from nvfp4_overlay.probes.capability import fake_capability
from nvfp4_overlay.probes.flashinfer.stubs import serving_stubs
from nvfp4_overlay.probes.flashinfer.stubs.recording import describe
from nvfp4_overlay.probes.flashinfer.tables import cases as case_table
from nvfp4_overlay.probes.toolkit import make_toolkit

OP_PREFIX = "nvfp4_overlay.flashinfer_"
# How the op carries a host float of upstream's result (the overlay's entries.py, "float"), as describe() gives it.
HOST_FLOAT = ["tensor", [], [], "torch.float64", "cpu"]


def run(plan: dict[str, Any]) -> dict[str, Any]:
    """{tree key: its ladder}, each tree in a child of its own (probes/serve.py calls this too)."""
    with stdio.prints_to_stderr():
        return forking.each_tree(plan["trees"], lambda tree: probe_tree(tree, plan), plan.get("jobs", 1))


class Box(io_audit.Watched):
    """The faked machine and the recorders, shared by every case of one tree; what the trace does, heard
    by io_audit.Watched's audit (each process started, each of the package's files opened)."""

    def __init__(self, package: str) -> None:
        super().__init__(package + os.sep)
        self.package = package
        self.launches: list[list[Any]] = []
        self.tactics: list[list[Any]] = []  # the AutoTuner's choices (serving_stubs): [op, while tracing?]
        self.loader_setups: list[str] = []  # the libraries handed to the cubin loader (serving_stubs)


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
    with warnings.catch_warnings(record=True) as caught:  # the overlay says here what it does not route, and why
        warnings.simplefilter("always")
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
    entries = {name: fn for name in plan["entries"] if (fn := public(flashinfer, name)) is not None}
    out: dict[str, Any] = {"version": flashinfer.__version__, "entries": {}, "routed": _routed(),
                           "probed": list(plan["entries"]),
                           "warnings": [_clean(str(w.message), tree["path"]) for w in caught
                                        if str(w.message).startswith("nvfp4-overlay")]}
    for name, fn in entries.items():
        out["entries"][name] = {"signature": case_table.parameters(fn), "schema": _schema(fn)}
    out["lookups"] = forking.in_child(lambda: lookups_under_fullgraph(box, tree["path"]))
    # An upstream tree (no overlay) compiles the first case of each entry point, the one
    # behaviour.upstream_fails reads, each in a child of its own; its other cases run eagerly, for
    # the patched tree's eager calls to be held to. A patched tree runs each GPU in one child: every
    # case eagerly, then every case that reached the kernel compiled together (run_gpu), and logs
    # its eager dispatcher ops.
    overlay = bool(out["routed"])
    quick = plan.get("quick", False)
    for cc in plan["gpus"]:
        key = f"{cc[0]}.{cc[1]}"
        _fake_capability(tuple(cc))
        only = plan.get("gpu_entries", {}).get(key)  # a GPU the plan runs some entry points on alone
        here = {name: fn for name, fn in entries.items() if only is None or name in only}
        made = {name: list(case_table.cases(name, fn, quick=quick)) for name, fn in here.items()}
        if overlay:
            out[key] = forking.in_child(functools.partial(run_gpu, here, made, box, tree["path"]))
            out[key]["eager_ops"] = forking.in_child(functools.partial(eager_op_log, here, made))
        else:
            out[key] = {name: forking.in_child(functools.partial(run_entry, fn, made[name], box, tree["path"]))
                        for name, fn in here.items()}
        if only is None:
            out[key]["opt_in_fp4_op"] = forking.in_child(functools.partial(opt_in_fp4_op, box))
    return out


# Where the public functions the ladder calls are bound: flashinfer itself, else its gemm package
# (fp8_blockscale_gemm_sm90 and tinygemm_bf16 are exported there alone).
PUBLIC_PACKAGES = ("flashinfer", "flashinfer.gemm")


def public(flashinfer: Any, name: str) -> Any:
    """The public function `name` of the first package of PUBLIC_PACKAGES that binds it, or None."""
    import importlib

    for package in PUBLIC_PACKAGES:
        module = flashinfer if package == "flashinfer" else importlib.import_module(package)
        if hasattr(module, name):
            return getattr(module, name)
    return None


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


Call = tuple[str, str, Any, Any]  # (entry point, case id, fn, make)


def eager_runs(calls: list[Call], box: Box, tree: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Each case called eagerly: its outputs, kernel launches and tactic choices, or upstream's refusal.

    Each case is called once on inputs of its own before the call that is kept: a first call fills
    the process's caches (the module, the cubin loader's setup, a MoE runner built per dtype), which
    the compiled run then finds filled; the kept eager call sees the process as the compiled one does.
    """
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for name, case_id, fn, make in calls:
        warm_args, warm_kwargs = make(torch)
        with contextlib.suppress(Exception):  # a refusal is the kept call's to report
            fn(*warm_args, **warm_kwargs)
        args, kwargs = make(torch)
        del box.launches[:], box.tactics[:]
        try:
            runs[name, case_id] = {"outputs": describe(fn(*args, **kwargs)), "launches": list(box.launches),
                                   "tactics": list(box.tactics)}
        except Exception as exc:  # noqa: BLE001 - upstream's own refusal is a result too
            runs[name, case_id] = {"error": [type(exc).__name__, _clean(str(exc)[:500], tree)]}
    return runs


def run_entry(fn: Any, made: list[tuple[str, Any]], box: Box, tree: str) -> dict[str, Any]:
    """An upstream tree's entry point: every case eagerly, the first compiled (upstream fails in the
    JIT loader; the cases after it would fail alike)."""
    calls = [("", case_id, fn, make) for case_id, make in made]
    eager = eager_runs(calls, box, tree)
    runs = {case_id: {"eager": eager["", case_id]} for _, case_id, _, _ in calls}
    for (_, case_id), compiled in compile_calls(calls[:1], box, tree, eager).items():
        runs[case_id]["compiled"] = compiled
    return runs


def run_gpu(entries: dict[str, Any], made: dict[str, list[tuple[str, Any]]], box: Box, tree: str) -> dict[str, Any]:
    """A patched tree on one GPU: every case of every entry point eagerly, then compiled.

    The cases that reach the kernel are compiled together, one call each in one traced function
    (one dynamo trace instead of one per case: each call is its own node, and the compiled run's
    launches and outputs are split back per case). Where that trace fails or does I/O, each entry
    point is traced alone, and where that fails, each case alone, so that a problem is named where
    it is. A case upstream refuses is compiled alone: a refusal ends a trace.
    """
    calls = [(name, case_id, fn, make) for name, fn in entries.items() for case_id, make in made[name]]
    eager = eager_runs(calls, box, tree)
    compiled: dict[tuple[str, str], dict[str, Any]] = {}
    reached = [c for c in calls if "error" not in eager[c[0], c[1]]]
    groups = [reached] if reached else []
    while groups:
        group = groups.pop()
        found = compile_calls(group, box, tree, eager)
        if len(group) > 1 and any("error" in r or r["trace_events"] for r in found.values()):
            names = list(dict.fromkeys(c[0] for c in group))
            groups += [[c for c in group if c[0] == n] for n in names] if len(names) > 1 else [[c] for c in group]
            continue
        compiled.update(found)
    for call in calls:
        if "error" in eager[call[0], call[1]]:
            compiled.update(compile_calls([call], box, tree, eager))
    return {name: {case_id: {"eager": eager[name, case_id], "compiled": compiled[name, case_id]}
                   for case_id, _ in made[name]} for name in entries}


def compile_calls(group: list[Call], box: Box, tree: str,
                  eager: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """torch.compile(fullgraph=True) of one function that makes every call of the group, run once.

    The backend records dynamo's graph and hands it to AOT autograd (aot_module_simplified), whose
    functionalization every compiler but dynamo's own ``eager`` runs first (``aot_eager``,
    ``inductor``, SGLang's piecewise ``inductor``): an op whose schema it refuses fails the group
    here. The functional graph it makes is the one that runs, as it is (aot_eager's compiler).
    """
    inputs = [make(torch) for _, _, _, make in group]
    flat = [a for args, _ in inputs for a in args]
    spans: list[tuple[Any, int, int, dict[str, Any]]] = []  # (fn, first positional input, how many, keywords)
    for (_, _, fn, _), (args, kwargs) in zip(group, inputs):
        spans.append((fn, sum(n for _, _, n, _ in spans), len(args), kwargs))
    graphs: list[dict[str, Any]] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        box.phase = "run"
        (output,) = [n for n in gm.graph.nodes if n.op == "output"]
        vals = [a.meta.get("example_value", a.meta.get("val")) if hasattr(a, "meta") else None
                for a in _flatten(output.args[0])]
        targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        # each op call's fresh outputs as its fake gave them (a parameter handed back, `out=`, is no
        # output of the graph: the compiled function returns its input)
        fresh = [[describe(v) for v in _made(n)] for n in gm.graph.nodes
                 if n.op == "call_function" and str(n.target).startswith(OP_PREFIX)]
        graphs.append({"targets": targets, "fake_outputs": [describe(v) for v in vals], "fresh": fresh})
        return aot_module_simplified(gm, example_inputs, fw_compiler=boxed_nop)

    def calls(*a: Any) -> list[Any]:
        return [fn(*a[first:first + n], **kwargs) for fn, first, n, kwargs in spans]

    torch._dynamo.reset()
    for fn, _, _, _ in spans:
        op = getattr(fn, "__nvfp4_overlay_op__", None)
        if op is not None and any(isinstance(a, torch.Tensor) and a.is_meta for a in [*flat, *_kwarg_values(spans)]):
            # A custom op's Meta kernel is its fake: on meta inputs the compiled run would never reach
            # upstream's wrapper. In this child, upstream's wrapper (the op's own body) is the Meta
            # kernel, so the compiled run hands the recording kernel what an eager call hands it.
            op.register_kernel("meta", op._init_fn)
    del box.launches[:], box.events[:], box.tactics[:]
    box.phase = "trace"
    ids = [(name, case_id) for name, case_id, _, _ in group]
    try:
        results = torch.compile(calls, fullgraph=True, backend=backend)(*flat)
    except Exception as exc:  # noqa: BLE001 - upstream fails here; the message says where
        box.phase = "after"
        failed = {"error": error_summary(exc, tree), "trace_events": list(box.events)}
        return {i: dict(failed) for i in ids}
    box.phase = "after"
    targets = graphs[0]["targets"] if graphs else []
    out: dict[tuple[str, str], dict[str, Any]] = {}
    launches, fakes = list(box.launches), graphs[0]["fake_outputs"] if graphs else []
    # one op call per case: each case's fresh outputs are its own op's; else the graph's outputs in order
    fresh = graphs[0]["fresh"] if graphs and len(graphs[0]["fresh"]) == len(ids) else None
    for i, ((name, case_id), result, (args, kwargs)) in enumerate(zip(ids, results, inputs)):
        mine = len(eager[name, case_id].get("launches", []))
        given = [*args, *kwargs.values()]
        if fresh is None:
            handed_back, fakes = _fake_outputs(result, given, fakes)
        else:
            handed_back = _as_seen(result, given, fresh[i])
        op = f"{OP_PREFIX}{name}.default"
        out[name, case_id] = {
            "outputs": describe(result), "launches": launches[:mine], "trace_events": list(box.events),
            "fake_outputs": handed_back, "targets": list(dict.fromkeys(targets)),  # each once, in order
            "op_calls": targets.count(op), "calls": sum(n == name for n, _ in ids),
            "tactics": list(box.tactics)}  # the group's AutoTuner choices: [op, while tracing?]
        launches = launches[mine:]
    if fresh is None and fakes:  # graph outputs no result tensor took (a fake that allocates where upstream hands back)
        out[ids[-1]]["fake_outputs"] = out[ids[-1]]["fake_outputs"] + fakes
    if launches:  # launches no eager call made: the last case gets them, and differs from its eager call
        out[ids[-1]]["launches"] = out[ids[-1]]["launches"] + launches
    return out


def _made(node: Any) -> list[Any]:
    """An op call's tensors as the trace made them: those the traced path allocated for a parameter
    the op writes into (``out=None``: upstream hands back what it allocates, the op writes into what
    the traced path allocated as upstream would), then the op's own fresh outputs, as its fake gave them."""
    written = [a for a, arg in zip(node.args, node.target._schema.arguments)
               if arg.alias_info is not None and arg.alias_info.is_write]
    allocated = [a.meta.get("example_value") for a in written if hasattr(a, "op") and a.op != "placeholder"]
    return allocated + _as_list(node.meta.get("example_value"))


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [] if value is None else [value]


def _kwarg_values(spans: list[tuple[Any, int, int, dict[str, Any]]]) -> list[Any]:
    return [v for _, _, _, kwargs in spans for v in kwargs.values()]


def _fake_outputs(result: Any, given: list[Any], fakes: list[Any]) -> tuple[list[Any], list[Any]]:
    """What the trace saw of one case's result tensors, and the graph outputs left for the next case.

    A tensor of the result that is one of the case's own inputs (``output=`` handed back) is no
    output of the graph (dynamo returns a graph input as it is): the trace saw the caller's tensor.
    Every other result tensor is the next output of the graph, as the op's fake made it; a host
    float of the result is one too, its carrier (a 0-dim float64 tensor), which no tensor of
    upstream's result stands for.
    """
    return _seen(result, given, fakes, None)


def _as_seen(result: Any, given: list[Any], fresh: list[Any]) -> list[Any]:
    """One case's result tensors as the trace saw them, from its own op call's fresh outputs: a tensor
    handed back from the case's inputs (``out=``) as that input, the others as the fake made them, in
    order (a host float's carrier, a 0-dim float64 tensor, stands for no tensor of the result); fresh
    outputs left over (a fake that allocates where upstream hands a parameter back) after."""
    seen, left = _seen(result, given, fresh, ["missing"])
    return seen + left


def _seen(result: Any, given: list[Any], outputs: list[Any], missing: Any) -> tuple[list[Any], list[Any]]:
    """Walk the result's values against the outputs the trace made, in order: (what stands for each
    result tensor, the outputs left over); `missing` where the outputs ran out."""
    left = list(outputs)
    seen = []
    for value in _flatten(result):
        if isinstance(value, float):
            carrier = left.pop(0) if left else missing
            if carrier != HOST_FLOAT:
                seen.append(carrier)
        elif isinstance(value, torch.Tensor):
            seen.append(describe(value) if any(value is g for g in given) else left.pop(0) if left else missing)
    return seen, left


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


def eager_op_log(entries: dict[str, Any], made: dict[str, list[tuple[str, Any]]]) -> dict[str, Any]:
    """The dispatcher ops an eager call of each entry point (its first case) goes through: no
    nvfp4_overlay op may be among them."""
    out: dict[str, Any] = {}
    for name, fn in entries.items():
        if not made[name]:
            out[name] = {"ops": []}
            continue
        args, kwargs = made[name][0][1](torch)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            torch.ones(1)  # the instrument's own control: an op it must see (an in-place entry point allocates none)
            try:
                fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001
                out[name] = {"error": [type(exc).__name__, str(exc)[:300]]}
                continue
        out[name] = {"ops": sorted({e.name for e in prof.events()})}
    return out


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

    fake_capability(torch, cc)
    jit_core.current_compilation_context.TARGET_CUDA_ARCHS = {(cc[0], f"{cc[1]}a")}


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flatten(v)]
    return [value]


if __name__ == "__main__":
    stdio.answer(run)
