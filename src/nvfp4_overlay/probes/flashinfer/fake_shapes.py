"""Probe: each routed entry point's fake against upstream's wrapper, on inputs of every rank, no dynamo.

``run(plan)`` (probes/serve.py) answers, for a patched tree, per GPU of the plan (the capability faked,
as the trace ladder fakes it), per routed entry point, per case: every row of probes/flashinfer/tables/cases.py (all
of them, also under ``--quick``) and the same row with its first input reshaped to the other ranks
(1-D, 2-D, 3-D, 4-D: the rows kept, leading dimensions split), each called twice:

- ``wrapper``: upstream's function eagerly (the patched tree's eager path is upstream's own), the
  kernel a recording no-op (flashinfer_trace's stubs), so every output is allocated as upstream
  allocates it: the outputs (shape, stride, dtype, device), or upstream's refusal;
- ``fake``: the path a call takes while torch.compile traces (the wrapper's ``__nvfp4_overlay_traced__``),
  under FakeTensorMode: the op's fake, its outputs put back together as the caller gets them.

A shape rule that follows the input's rank or its leading dimensions (a release that keeps them)
shows as a case whose fake and wrapper differ. Cheap: no trace, no compile (seconds a release).
"""

from __future__ import annotations

import functools
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nvfp4_overlay.probes import forking, stdio
from nvfp4_overlay.probes.flashinfer import flashinfer_trace
from nvfp4_overlay.probes.flashinfer.stubs import recording, serving_stubs
from nvfp4_overlay.probes.flashinfer.tables import cases as case_table
from nvfp4_overlay.probes.toolkit import make_toolkit

RANKS = (1, 2, 3, 4)


def run(plan: dict[str, Any]) -> dict[str, Any]:
    """{tree key: its shapes}, each tree in a child of its own."""
    with stdio.prints_to_stderr():
        return forking.each_tree(plan["trees"], lambda tree: probe_tree(tree, plan), plan.get("jobs", 1))


def probe_tree(tree: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    """Each routed entry point's shapes on each GPU of the plan."""
    flashinfer = faked_machine(tree, plan)
    entries = {name: getattr(flashinfer, name) for name in plan["entries"]
               if getattr(getattr(flashinfer, name, None), "__nvfp4_overlay_traced__", None) is not None}
    out: dict[str, Any] = {"version": flashinfer.__version__, "entries": sorted(entries)}
    for cc in plan["gpus"]:
        out[f"{cc[0]}.{cc[1]}"] = forking.in_child(functools.partial(run_gpu, entries, tuple(cc), tree["path"]))
    return out


def faked_machine(tree: dict[str, Any], plan: dict[str, Any]) -> Any:
    """The tree's flashinfer imported on the trace ladder's faked machine (flashinfer_trace.probe_tree),
    without the tracer: a toolkit that answers, the kernels and serving libraries stood in for."""
    torch.version.cuda = plan.get("torch_cuda", "12.8")
    os.environ.pop("CUDA_PATH", None)
    os.environ["CUDA_HOME"] = str(make_toolkit(Path(tempfile.mkdtemp(prefix="nvfp4-toolkit-")), torch.version.cuda))
    os.environ["FLASHINFER_WORKSPACE_BASE"] = tree.get("workspace") or os.path.join(tree["path"], ".workspace")
    sys.path.insert(0, tree["path"])
    import flashinfer
    from flashinfer.jit import core as jit_core

    box = flashinfer_trace.Box(os.path.dirname(os.path.abspath(flashinfer.__file__)))
    flashinfer_trace._stub_kernels(jit_core, box)
    serving_stubs.install(box)
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.cuda.current_device = lambda: 0
    return flashinfer


def run_gpu(entries: dict[str, Any], cc: tuple[int, int], tree: str) -> dict[str, Any]:
    flashinfer_trace._fake_capability(cc)
    out: dict[str, Any] = {}
    for name, fn in entries.items():
        out[name] = {}
        for case_id, make in case_table.cases(name, fn):
            for rank, made in ranked(make):
                out[name][f"{case_id}@{rank}d"] = compare(fn, made, tree)
    return out


def ranked(make: case_table.Make) -> list[tuple[int, case_table.Make]]:
    """The row as it is, and with its first input (a contiguous tensor of rank >= 2) at each other rank:
    its rows (the product of the leading dimensions) kept, split 2 by 2 over the new leading dimensions,
    or the first row alone for 1-D."""
    args, _ = make(torch)
    first = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if first is None:
        return [(0, make)]
    found = [(first.dim(), make)]
    if first.dim() < 2 or not first.is_contiguous():
        return found
    rows, last = math.prod(first.shape[:-1]), first.shape[-1]
    for rank in RANKS:
        if rank == first.dim() or (rank > 2 and rows % 2 ** (rank - 2)):
            continue
        shape = (last,) if rank == 1 else (*(2,) * (rank - 2), rows // 2 ** (rank - 2), last)
        found.append((rank, _reshaped(make, shape, rank == 1)))
    return found


def _reshaped(make: case_table.Make, shape: tuple[int, ...], first_row: bool) -> case_table.Make:
    def made(torch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args, kwargs = make(torch)
        x = args[0].reshape(-1, args[0].shape[-1])
        return ((x[0].clone() if first_row else x.reshape(shape)), *args[1:]), kwargs

    return made


def compare(fn: Any, make: Callable[[Any], Any], tree: str) -> dict[str, Any]:
    """The wrapper's outputs and the fake's for the same call, each or its refusal."""
    result: dict[str, Any] = {}
    args, kwargs = make(torch)
    try:
        result["wrapper"] = recording.describe(fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - upstream's refusal is a result
        result["wrapper"] = {"error": [type(exc).__name__, flashinfer_trace._clean(str(exc)[:300], tree)]}
    args, kwargs = make(torch)
    try:
        result["fake"] = fake_outputs(fn.__nvfp4_overlay_traced__, args, kwargs)
    except Exception as exc:  # noqa: BLE001
        result["fake"] = {"error": [type(exc).__name__, flashinfer_trace._clean(str(exc)[:300], tree)]}
    return result


def fake_outputs(traced: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The traced path under FakeTensorMode: the op's fake, put back together as the caller gets it;
    "upstream": the op does not take this call (the traced path hands it to upstream's function)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._pytree import tree_map

    # As dynamo makes its fake tensors: an address read (data_ptr) refuses, as it does while dynamo traces.
    with torch._functorch.config.patch(fake_tensor_allow_unsafe_data_ptr_access=False):
        mode = FakeTensorMode(allow_non_fake_inputs=True)

    def fake(value: Any) -> Any:
        return mode.from_tensor(value) if isinstance(value, torch.Tensor) else value

    args, kwargs = tree_map(fake, args), tree_map(fake, kwargs)
    with mode:
        result = traced(*args, **kwargs)
    if type(result).__name__ == "_Upstream":
        return "upstream"
    return recording.describe(result)
