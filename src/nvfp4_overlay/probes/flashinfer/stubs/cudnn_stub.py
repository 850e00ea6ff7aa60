"""Probe stub: cuDNN's frontend (the ``cudnn`` Python package) as a kernel library that records.

mm_fp4's ``cudnn`` backend, and its ``auto`` backend (whose heuristic asks every backend's
requirement, cuDNN's included), need the cuDNN frontend, which a CPU machine does not have: without
it upstream refuses both. Installed by serving_stubs for the trace ladder, this stands in for it the
way the recording JIT modules stand in for a built kernel: FlashInfer's own code builds its cuDNN
graph (tensors, block-scale dequantize, matmul, plans) against it and executes it, and the execution
is recorded as a launch (the variant pack's tensors by uid, the workspace), writing nothing. It
reports a frontend 1.16 over a backend 9.16: cuDNN's FP4 GEMM, without the override-shape graphs
(backend 9.21 and later). Everything else it is asked for answers with a placeholder.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nvfp4_overlay.probes.flashinfer.stubs.recording import Placeholder, describe

BACKEND_VERSION = 91600
FRONTEND_VERSION = "1.16.0"


class CudnnPlaceholder(Placeholder):
    """What the frontend answers for a name, a value or a call it is not asked a number of."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self if self._name.rsplit(".", 1)[-1].startswith("set_") else CudnnPlaceholder(f"{self._name}()")

    def __repr__(self) -> str:
        return f"<cudnn {self._name}>"


class Graph(CudnnPlaceholder):
    """A cuDNN graph: built as FlashInfer asks, executed by recording the call."""

    def __init__(self, box: Any) -> None:
        super().__init__("graph")
        self._box = box

    def _placeholder(self, name: str) -> Any:
        return CudnnPlaceholder(name)  # a graph's builder methods (tensor, matmul, ...) answer placeholders

    def get_workspace_size(self) -> int:
        return 0

    def get_execution_plan_count(self) -> int:
        return 1

    def execute(self, variant_pack: dict[Any, Any], workspace: Any, *args: Any, **kwargs: Any) -> None:
        self._record("cudnn.execute", variant_pack, workspace, args)

    def execute_plan_at_index(self, variant_pack: dict[Any, Any], workspace: Any, index: Any, *args: Any,
                              **kwargs: Any) -> None:
        self._record("cudnn.execute_plan_at_index", variant_pack, workspace, (index, *args))

    def _record(self, name: str, variant_pack: dict[Any, Any], workspace: Any, args: tuple[Any, ...]) -> None:
        pack = [[str(uid), describe(t)] for uid, t in sorted(variant_pack.items(), key=lambda kv: str(kv[0]))]
        self._box.launches.append([name, pack, describe(workspace), *[describe(a) for a in args]])


def module(box: Any) -> types.ModuleType:
    """The stand-in ``cudnn`` module, recording into box.launches."""
    cudnn = types.ModuleType("cudnn")
    cudnn.__version__ = FRONTEND_VERSION  # type: ignore[attr-defined]

    @contextmanager
    def graph(*args: Any, **kwargs: Any) -> Iterator[tuple[Graph, None]]:
        yield Graph(box), None

    def getattr_(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return CudnnPlaceholder(name)

    cudnn.backend_version = lambda: BACKEND_VERSION  # type: ignore[attr-defined]
    cudnn.create_handle = lambda *a, **k: 1  # type: ignore[attr-defined]
    cudnn.set_stream = lambda *a, **k: None  # type: ignore[attr-defined]
    cudnn.graph = graph  # type: ignore[attr-defined]
    cudnn.pygraph = lambda *a, **k: Graph(box)  # type: ignore[attr-defined]
    cudnn.__getattr__ = getattr_  # type: ignore[method-assign]  # PEP 562: every other name
    return cudnn


def install(box: Any) -> None:
    """The stand-in where FlashInfer's modules look for the frontend (they import it at their own import)."""
    import torch

    cudnn = module(box)
    sys.modules.setdefault("cudnn", cudnn)
    for name, loaded in list(sys.modules.items()):
        if name.startswith("flashinfer") and loaded is not None and hasattr(loaded, "CUDNN_AVAILABLE"):
            loaded.cudnn = cudnn  # type: ignore[attr-defined]
            loaded.CUDNN_AVAILABLE = True  # type: ignore[attr-defined]
    # cuDNN is handed the current stream; a CPU build of torch has none
    torch.cuda.current_stream = lambda device=None: types.SimpleNamespace(cuda_stream=0)
