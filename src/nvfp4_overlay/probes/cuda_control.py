"""The control of the CUDA-version grid: a FlashInfer module the audit has never seen, asking nvcc's question.

A new release can bring a JIT module that picks its nvcc flags from the toolkit's release through a
path no table lists (here: the check imported under an alias). Patched, it must get what upstream
gives it, the toolkit's release, and say once that the audit does not know it. ``inject`` writes the
module into an unpacked FlashInfer tree (a grid tree, or a release repacked by a test); the grid
probe then writes its build.ninja like any other spec's (``SPEC``), and ``nvcc_flags`` is its
answer alone.
"""

from __future__ import annotations

from pathlib import Path

PATH = "flashinfer/jit/fp4_quantization_sm120_v2.py"  # where a new upstream JIT module would land
MODULE = "flashinfer.jit.fp4_quantization_sm120_v2"
SITE = (MODULE, "sm120_nvcc_flags")  # the call site, as the audit and the overlay name it
SPEC: tuple[str, str, list[str]] = (MODULE, "gen_fp4_quantization_sm120_v2_module", [])  # for the grid
SOURCE = '''"""FP4 quantization for SM120, a JIT module whose architecture flags follow the toolkit."""

from . import env as jit_env
from .core import gen_jit_spec
from .cpp_ext import is_cuda_version_at_least as _toolkit_at_least


def sm120_nvcc_flags():
    # The family target 120f needs nvcc 12.9; an older toolkit builds the exact target 120a.
    suffix = "f" if _toolkit_at_least("12.9") else "a"
    return [f"-gencode=arch=compute_120{suffix},code=sm_120{suffix}", "-DENABLE_FP4"]


def gen_fp4_quantization_sm120_v2_module():
    return gen_jit_spec(
        "fp4_quantization_sm120_v2",
        [jit_env.FLASHINFER_CSRC_DIR / "nv_internal/tensorrt_llm/thop/fp4Quantize.cpp"],
        extra_cuda_cflags=sm120_nvcc_flags(),
    )
'''


def inject(tree: Path) -> Path:
    """Write the control module into the FlashInfer tree rooted at tree; its path."""
    path = tree / PATH
    if path.exists():
        msg = f"{path}: the release already has a module there; the control needs a name of its own"
        raise FileExistsError(msg)
    path.write_text(SOURCE)
    return path


def nvcc_flags(toolkit_at_least_12_9: bool) -> list[str]:
    """What the control hands nvcc when the release that answers it is, or is not, 12.9 or newer."""
    suffix = "f" if toolkit_at_least_12_9 else "a"
    return [f"-gencode=arch=compute_120{suffix},code=sm_120{suffix}", "-DENABLE_FP4"]
