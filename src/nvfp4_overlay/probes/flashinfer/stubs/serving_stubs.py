"""Probe stubs for FlashInfer's serving APIs: a warm cubin cache, a recording AutoTuner, kernels that answer.

The GEMM and MoE entry points reach more than the JIT build that flashinfer_trace.py stubs: the
cubin loader (``flashinfer.jit.cubin_loader``: checksums, the kernel-list header and the cubins,
downloaded on a cache miss; ``setup_cubin_loader`` hands a ctypes callback to the built library),
the AutoTuner (``AutoTuner.get().choose_one``: the tactic), and kernel modules whose Python wrappers
use what a kernel function returns (a runner object, a tactic count, a workspace size). Stubbed here, each the way a
server with a warm cache sees it, so that everything above the kernel is the wheel's own code:

- the cubin cache is a directory of this process's own (``FLASHINFER_CUBIN_DIR``) that starts empty;
  a cache miss "downloads" by writing the file there (a checksum list that names the header, the
  kernel-list header ``flashinferMetaInfo.h`` as one kernel per architecture family, which 0.7.4
  parses before it builds, or a placeholder), with the checksum check off, so ``load_cubin``
  reads real files as upstream does (and logs first, which is where dynamo gives up upstream);
- ``setup_cubin_loader`` records the library it was handed (box.loader_setups: loading a module
  once per process, it is no kernel launch of any one call) instead of opening it with ctypes;
- ``AutoTuner.choose_one`` records each tactic choice (the op and whether dynamo was tracing) and
  answers upstream's own fallback (the first runner, tactic -1), without profiling;
- a kernel module's functions record their arguments, as flashinfer_trace's do, and return a value
  that answers any further call or attribute (a runner, a tactic count of 1), never a tensor;
- ``torch.cuda.device`` switches nothing (the tensors are the CPU's), where a CPU build refuses;
- CUTLASS kernel generation (the JIT build's sources) does nothing, as the build itself.

- the cuDNN frontend (probes/flashinfer/stubs/cudnn_stub.py) records a graph's execution as a launch, and the CuTe
  DSL (probes/flashinfer/stubs/cute_dsl_stub.py) compiles FlashInfer's CuTe kernels to recording ones: both are
  flashinfer-python's declared dependencies, which a CPU machine does not have.

install(box) applies them all after flashinfer_trace's own stubs; box.launches gets the kernel
calls, box.tactics the tactic choices, box.loader_setups the libraries handed to the cubin loader.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from nvfp4_overlay.probes.flashinfer.stubs import cudnn_stub, cute_dsl_stub
from nvfp4_overlay.probes.flashinfer.stubs.recording import kernel_of

# A checksum list for any artifact directory names every header the release's JIT specs ask
# get_meta_hash for (the kernel-list header, the batched-GEMM export headers): their names are the
# string constants ending in .h of flashinfer/jit/.
_HEADER = re.compile(r"[\"']([\w/]+\.h)[\"']")


class AnsweringModule:
    """A built JIT module whose every function records its call and answers (Answer)."""

    def __init__(self, box: Any) -> None:
        self._box = box

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return kernel_of(self._box, name)


def install(box: Any) -> None:
    """The stubs above, over the FlashInfer this process imported (after flashinfer_trace's)."""
    import torch

    if not hasattr(box, "tactics"):
        box.tactics = []
    if not hasattr(box, "loader_setups"):
        box.loader_setups = []
    # The GEMM runners ask for the current CUDA stream; a CPU build of torch has none (as
    # flashinfer_trace makes Tensor.cuda() an identity).
    torch._C._cuda_getCurrentRawStream = lambda device=None: 0
    # cutlass_fused_moe (0.6.16 on) launches under `with torch.cuda.device(input.device)`, which
    # refuses a CPU tensor's device: there is no device to switch to. Dynamo traces the real class
    # on its own terms (CUDADeviceVariable): it gets device 0 for the CPU tensor's device, as it
    # would for a GPU tensor, so that upstream's trace goes on to where a server's would stop.
    torch.cuda.device = _NoDeviceSwitch
    _device_switch_for_dynamo()
    # 0.7.x's stream-keyed scratch buffers (utils._get_stream_cache_buf, mm_fp4's workspace) come from
    # a CUDA memory pool on the stream's device; a CPU build of torch has neither: plain allocations.
    torch.cuda.MemPool = _NoMemPool  # a class: dynamo (torch 2.14 on) asks isinstance(value, torch.cuda.MemPool)
    torch.cuda.use_mem_pool = lambda *args, **kwargs: contextlib.nullcontext()
    torch.cuda.is_current_stream_capturing = lambda: False  # 0.7.4's cuDNN path asks; nothing captures here
    # The CuTe-DSL quantizers assert `input.is_cuda` after their `a.cuda()`, which flashinfer_trace
    # makes an identity: a tensor is where a GPU tensor would be (a meta tensor, mxfp8_quantize's
    # device branch, is told by its device, not by this).
    torch.Tensor.is_cuda = property(lambda self: self.device.type != "meta")
    # ... and size their grids by the GPU's SM count (utils.get_device_sm_count): the faked GPU's.
    torch.cuda.get_device_properties = _device_properties
    _answering_kernels(box)
    _no_kernel_generation()
    _warm_cubin_cache(box)
    _recording_tuner(box)
    cudnn_stub.install(box)  # mm_fp4's cudnn and auto backends: the cuDNN frontend, recording
    cute_dsl_stub.install(box)  # the CuTe DSL: FlashInfer's CuTe kernels compile to recording ones


def _device_properties(device: Any = None) -> Any:
    """The faked GPU's properties: its compute capability, as the probe fakes it, and its SM count
    (an RTX PRO 6000 Blackwell's 188 on SM120, a B200's 148 on SM100)."""
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    return types.SimpleNamespace(major=major, minor=minor, multi_processor_count=188 if major == 12 else 148,
                                 name=f"faked SM{major}{minor}", warp_size=32)


class _NoMemPool:
    """torch.cuda.MemPool() for the probe: a pool that holds nothing (allocations are the CPU's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


class _NoDeviceSwitch:
    """torch.cuda.device(d) for the probe's CPU tensors: a context that switches nothing."""

    def __init__(self, device: Any) -> None:
        self.device = device

    def __enter__(self) -> _NoDeviceSwitch:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _device_switch_for_dynamo() -> None:
    from torch._dynamo.variables import ctx_manager

    variable = getattr(ctx_manager, "CUDADeviceVariable", None)
    if variable is None:  # a torch whose dynamo has no such tracker
        return
    variable._get_device_index_fn = staticmethod(lambda device, optional=False: 0)
    variable._exchange_fn = staticmethod(lambda index: 0)
    variable._maybe_exchange_fn = staticmethod(lambda index: 0)


def _answering_kernels(box: Any) -> None:
    from flashinfer.jit import core as jit_core

    def build_and_load(self: Any, *args: Any, **kwargs: Any) -> Any:
        # As flashinfer_trace's stub: the spec's file lock is taken, as upstream's loader takes it.
        with jit_core.FileLock(self.lock_path, thread_local=False):
            return AnsweringModule(box)

    for obj in list(vars(jit_core).values()):
        if isinstance(obj, type) and issubclass(obj, jit_core.JitSpec):
            obj.build_and_load = build_and_load  # type: ignore[attr-defined]


def _no_kernel_generation() -> None:
    """CUTLASS kernel generation (``generate_gemm_operations``: the .cu instantiations a JIT spec
    compiles, written into the package's csrc up to 0.6.x) is part of the build, which the probe
    leaves out: every binding of it does nothing."""
    for module in _flashinfer_modules():
        if getattr(module, "generate_gemm_operations", None) is not None:
            module.generate_gemm_operations = lambda *args, **kwargs: None


def _warm_cubin_cache(box: Any) -> None:
    from flashinfer.jit import cubin_loader

    cache = Path(os.environ.get("NVFP4_OVERLAY_CUBIN_DIR") or tempfile.mkdtemp(prefix="cubins-"))
    os.environ["FLASHINFER_CUBIN_CHECKSUM_DISABLED"] = "1"
    for module in _flashinfer_modules():
        if getattr(module, "FLASHINFER_CUBIN_DIR", None) is not None:
            module.FLASHINFER_CUBIN_DIR = cache
    box.cubin_dir = str(cache)

    headers = {"flashinferMetaInfo.h", "flashInferMetaInfo.h"}
    for source in Path(cubin_loader.__file__).parent.rglob("*.py"):
        headers |= set(_HEADER.findall(source.read_text(errors="replace")))
    # what a header "downloaded" here holds, and the checksum list naming each by its digest
    checksums = "".join(f"{hashlib.sha256(_artifact(Path(h).name).encode()).hexdigest()} include/{h}\n"
                        for h in sorted(headers))

    def download_file(uri: str, path: str, *args: Any, **kwargs: Any) -> bool:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(checksums if target.name == "checksums.txt" else _artifact(target.name))
        return True

    def setup_cubin_loader(dll_path: str) -> None:
        box.loader_setups.append(os.path.basename(str(dll_path)))

    cubin_loader.download_file = download_file
    for module in _flashinfer_modules():
        if getattr(module, "setup_cubin_loader", None) is not None:
            module.setup_cubin_loader = setup_cubin_loader


# The kernel-list header as trtllm-gen publishes it (0.7.4's jit/trtllm_gen_metainfo.py filters it by
# architecture family before it compiles, and refuses a header with no list or no kernel of the
# family): one entry per family, Blackwell (Sm100a) and Rubin (Sm107a), and the list's length.
KERNEL_LIST = """\
#pragma once
static constexpr size_t tllmGenBatchedGemmListLen = 2;
static const batchedGemm::BatchedGemmConfig tllmGenBatchedGemmList[] = {
{nullptr, 0, 0, 0,
}, gemm::SmVersion::Sm100a},
{nullptr, 0, 0, 0,
}, gemm::SmVersion::Sm107a},
};
"""


def _artifact(name: str) -> str:
    """What a cache miss of `name` (a header's or a cubin's file name) writes."""
    return KERNEL_LIST if name.lower() == "flashinfermetainfo.h" else "placeholder\n"


def _recording_tuner(box: Any) -> None:
    import torch
    from flashinfer import autotuner

    def choose_one(self: Any, custom_op: str, runners: Any, *args: Any, **kwargs: Any) -> Any:
        box.tactics.append([custom_op, bool(torch.compiler.is_compiling())])
        return runners[0], -1  # upstream's fallback: the first runner, its default tactic

    autotuner.AutoTuner.choose_one = choose_one


def _flashinfer_modules() -> list[Any]:
    return [m for n, m in list(sys.modules.items()) if m is not None and n.startswith("flashinfer")]
