"""Probe: FlashInfer's own compile list under torch.compile(fullgraph=True), on a CPU with the GPU faked.

``python -m nvfp4_overlay.probes.flashinfer.compile_list < plan.json`` prints one JSON document: for
each tree (an unpacked upstream or patched wheel), with the GPU of the plan faked as the trace
ladder fakes it (flashinfer_trace.py: the JIT build a recording module, the cubin loader and the
AutoTuner stubbed), for each function of the compile list (compile_cases.py) the release has, and
each of its cases:

- ``eager``: the outputs (shape, stride, dtype) of an eager call and the kernel launches it made,
  or upstream's refusal;
- ``compiled``: the same call made through compile_harness (every name the function is bound to
  replaced by its ``torch.compile(fullgraph=True)``, the graph through AOT autograd's
  functionalization as every compiler but dynamo's ``eager`` takes it): the counts (calls, the
  calls that ran a compiled graph, those that ran none, opaque ops by op), the graph's outputs as
  the trace saw them (the ops' fakes), the outputs and launches of the compiled run, and what
  happened while dynamo traced (processes started, FlashInfer files opened: probes/io_audit.py);
  or the error, summarised as the ladder summarises it (where dynamo gave up, the wheel's frames).

Each function runs in a child of its own (a compile error leaves dynamo's state to that child).
Results name no path of this machine, so that upstream's result is a fact about its wheel.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from nvfp4_overlay.probes import forking, stdio
from nvfp4_overlay.probes.flashinfer import flashinfer_trace
from nvfp4_overlay.probes.flashinfer.compile_harness import Harness, resolve
from nvfp4_overlay.probes.flashinfer.stubs import serving_stubs
from nvfp4_overlay.probes.flashinfer.stubs.recording import describe, kernel_of
from nvfp4_overlay.probes.flashinfer.tables import compile_cases
from nvfp4_overlay.probes.toolkit import make_toolkit


def run(plan: dict[str, Any]) -> dict[str, Any]:
    """{tree key: its results}, each tree in a child of its own (probes/serve.py calls this too)."""
    with stdio.prints_to_stderr():
        return forking.each_tree(plan["trees"], lambda tree: probe_tree(tree, plan), plan.get("jobs", 1))


def probe_tree(tree: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    with warnings.catch_warnings(record=True) as caught:  # the overlay says here what it does not route, and why
        warnings.simplefilter("always")
        flashinfer, box = setup(tree, (plan["gpu"][0], plan["gpu"][1]), plan.get("torch_cuda", "12.8"))
    out: dict[str, Any] = {"version": flashinfer.__version__, "functions": {},
                           "warnings": [flashinfer_trace._clean(str(w.message), tree["path"]) for w in caught
                                        if str(w.message).startswith("nvfp4-overlay")]}
    for qualname in plan["functions"]:
        out["functions"][qualname] = forking.in_child(functools.partial(probe_function, qualname, box, tree["path"],
                                                                        flashinfer.__version__))
    return out


def setup(tree: dict[str, Any], gpu: tuple[int, int], torch_cuda: str) -> tuple[Any, flashinfer_trace.Box]:
    """The tree's flashinfer imported on the faked GPU, its kernels recording (into the Box returned)."""
    torch.version.cuda = torch_cuda
    os.environ.pop("CUDA_PATH", None)
    os.environ["CUDA_HOME"] = str(make_toolkit(Path(tempfile.mkdtemp(prefix="nvfp4-toolkit-")), torch.version.cuda))
    os.environ["FLASHINFER_WORKSPACE_BASE"] = tree.get("workspace") or os.path.join(tree["path"], ".workspace")
    sys.path.insert(0, tree["path"])
    import flashinfer
    from flashinfer.jit import core as jit_core

    box = flashinfer_trace.Box(os.path.dirname(os.path.abspath(flashinfer.__file__)))
    serving_stubs.install(box)
    _opaque_kernels(jit_core, box)
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.cuda.current_device = lambda: 0
    _stand_in_cuda(tree)
    sys.addaudithook(box.audit)
    flashinfer_trace._fake_capability(gpu)
    return flashinfer, box


def _opaque_kernels(jit_core: Any, box: flashinfer_trace.Box) -> None:
    """Every JitSpec's build_and_load takes the spec's file lock, as upstream's does, and returns a module
    whose kernel functions record their call and answer (recording.kernel_of), each one that dynamo
    may not enter (torch.compiler.disable): on a GPU they are the built library's foreign functions,
    which dynamo cannot trace, so a compiled call that reaches one fails here as it fails there
    (a wrapper's run(), whose module its plan() loaded eagerly, reaches it without the loader)."""

    class OpaqueModule:
        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return torch.compiler.disable(kernel_of(box, name), recursive=True)

    def build_and_load(self: Any, *args: Any, **kwargs: Any) -> Any:
        with jit_core.FileLock(self.lock_path, thread_local=False):
            return OpaqueModule()

    for obj in list(vars(jit_core).values()):
        if isinstance(obj, type) and issubclass(obj, jit_core.JitSpec):
            obj.build_and_load = build_and_load  # type: ignore[attr-defined]
    jit_core.check_cuda_arch = lambda: None


class PhiloxStandIn:
    """CUDA's default generator as FlashInfer's get_seed_and_offset reads and advances it: a 16-byte
    Philox state, (seed, offset) as int64 (a CPU generator's state is the Mersenne Twister's, 5 kB)."""

    def __init__(self) -> None:
        self.state = torch.tensor([0, 0], dtype=torch.int64).view(torch.uint8)

    def get_state(self) -> Any:
        return self.state.clone()

    def set_state(self, state: Any) -> None:
        self.state = state.clone()


class _DefaultGenerators:
    """torch.cuda.default_generators for any device index (a CPU tensor's is None)."""

    def __init__(self) -> None:
        self.generator = PhiloxStandIn()

    def __getitem__(self, index: Any) -> PhiloxStandIn:
        return self.generator


def _stand_in_cuda(tree: dict[str, Any]) -> None:
    """What a CPU build of torch refuses and the compile list's eager paths ask for, answered as a GPU
    would: pinned host memory (the wrappers' plan buffers), the cuBLAS handle (bmm_fp8's runner hands it to the kernel), the default CUDA generator
    (sampling without a generator), and the attention templates the single-request JIT specs render
    (flashinfer/data/csrc's top-level files, which the probes' trees leave out: read from the
    release's wheel, no patch touches them, into a directory of this run's own)."""
    import zipfile

    from flashinfer.jit import env as jit_env

    empty = torch.empty

    def unpinned(*args: Any, pin_memory: bool = False, **kwargs: Any) -> Any:
        return empty(*args, **kwargs)  # the wrappers' pinned host buffers: ordinary ones (no CUDA, no pinning)

    torch.empty = unpinned
    torch.cuda.current_blas_handle = lambda: 0
    torch.cuda.init = lambda: None
    torch.cuda.default_generators = _DefaultGenerators()
    if tree.get("wheel"):
        csrc = Path(tempfile.mkdtemp(prefix="nvfp4-csrc-"))
        with zipfile.ZipFile(tree["wheel"]) as wheel:
            for name in wheel.namelist():
                if name.startswith("flashinfer/data/csrc/") and name.count("/") == 3:
                    (csrc / name.rsplit("/", 1)[1]).write_bytes(wheel.read(name))
        jit_env.FLASHINFER_CSRC_DIR = csrc


def probe_function(qualname: str, box: flashinfer_trace.Box, tree: str, release: str) -> dict[str, Any]:
    """Every case of one function, eagerly and then compiled; {"missing": True} where the release lacks it."""
    try:
        holder, attr, fn = resolve(f"flashinfer.{qualname}")
    except (ImportError, AttributeError):
        return {"missing": True}
    made = list(compile_cases.cases(qualname, release))
    out: dict[str, Any] = {"routed": getattr(fn, "__nvfp4_overlay_op__", None) is not None, "cases": {}}
    eager = {case_id: eager_call(holder, attr, make, box) for case_id, make in made}
    graphs: list[list[Any]] = []
    harness = Harness(functools.partial(_recording_backend, box, graphs))
    out["bound"] = harness.install([f"flashinfer.{qualname}"])[f"flashinfer.{qualname}"]
    for case_id, make in made:
        out["cases"][case_id] = {"eager": eager[case_id], "compiled": compiled_call(harness, holder, attr, make, box,
                                                                                      graphs, tree)}
    harness.uninstall()
    return out


def eager_call(holder: Any, attr: str, make: Any, box: flashinfer_trace.Box) -> dict[str, Any]:
    """One eager call on fresh inputs (after one on inputs of its own, which fills the loaders' caches)."""
    fn = getattr(holder, attr)
    try:
        args, kwargs = make(torch)
        fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - upstream's refusal is the answer
        return {"error": [type(exc).__name__, str(exc)[:300]]}
    del box.launches[:]
    args, kwargs = make(torch)
    result = fn(*args, **kwargs)
    return {"outputs": describe(result), "launches": _stable(box.launches)}


def compiled_call(harness: Harness, holder: Any, attr: str, make: Any, box: flashinfer_trace.Box,
                  graphs: list[list[Any]], tree: str) -> dict[str, Any]:
    """The same call through the harness (the replaced binding): its counts, fakes, outputs, launches and trace I/O."""
    args, kwargs = make(torch)
    torch._dynamo.reset()
    del box.launches[:], box.events[:], graphs[:]
    box.phase = "trace"
    with harness.case() as counts:
        try:
            result = getattr(holder, attr)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - upstream fails here; the message says where
            box.phase = "after"
            return {"error": flashinfer_trace.error_summary(exc, tree), "trace_events": list(box.events),
                    "counts": _counts(counts)}
    box.phase = "after"
    return {"counts": _counts(counts), "fake_outputs": graphs[0] if graphs else None, "outputs": describe(result),
            "launches": _stable(box.launches), "trace_events": list(box.events)}


def _recording_backend(box: flashinfer_trace.Box, graphs: list[list[Any]], gm: Any, example_inputs: Any) -> Any:
    """AOT autograd's functional graph, as aot_eager compiles it; the graph's outputs as the trace saw them."""
    from torch._dynamo.backends.debugging import boxed_nop
    from torch._functorch.aot_autograd import aot_module_simplified

    box.phase = "run"
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    graphs.append([describe(a.meta.get("example_value")) if hasattr(a, "meta") else describe(a)
                   for a in flashinfer_trace._flatten(output.args[0])])
    return aot_module_simplified(gm, example_inputs, fw_compiler=boxed_nop)


_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _stable(launches: list[Any]) -> Any:
    """The launches with no object's address in them (a plan's answer handed to run() is described by
    its repr), so that the same calls give the same record in every process."""
    return json.loads(_ADDRESS.sub("", json.dumps(launches)))


def _counts(counts: Any) -> dict[str, Any]:
    return {"calls": counts.calls, "compiled_runs": counts.compiled_runs, "uncompiled": counts.uncompiled,
            "graphs": counts.graphs, "opaque_ops": counts.opaque_ops, "ops": dict(counts.ops)}


if __name__ == "__main__":
    stdio.answer(run)
