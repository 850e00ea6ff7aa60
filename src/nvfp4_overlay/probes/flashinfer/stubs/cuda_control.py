"""The control of the CUDA-version grid: a FlashInfer module the audit has never seen, asking nvcc's question.

A new release can bring a JIT module that picks its nvcc flags from the toolkit's release through a
path no table lists (here: the check imported under an alias). Patched, it must get what upstream
gives it, the toolkit's release, and say once that the audit does not know it. ``load`` imports it
into the running FlashInfer without touching the tree (the grid probe's ``control_module`` option;
tests/carrying/test_synthetic_releases.py ships ``SOURCE`` in a repacked release instead); the grid probe
then writes its build.ninja like any other spec's (``SPEC``), and ``nvcc_flags`` is its answer alone.
"""

from __future__ import annotations

import linecache
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

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


def nvcc_flags(toolkit_at_least_12_9: bool) -> list[str]:
    """What the control hands nvcc when the release that answers it is, or is not, 12.9 or newer."""
    suffix = "f" if toolkit_at_least_12_9 else "a"
    return [f"-gencode=arch=compute_120{suffix},code=sm_120{suffix}", "-DENABLE_FP4"]


def load(tree: Path) -> ModuleType:
    """The control module imported into the running FlashInfer (from tree) without writing to it, as if
    the release shipped it: a module of the flashinfer.jit package, its relative imports resolved."""
    module = ModuleType(MODULE)
    module.__package__ = MODULE.rpartition(".")[0]
    module.__file__ = str(tree / PATH)
    sys.modules[MODULE] = module
    # its source readable as a shipped module's is: the overlay names a call by its text
    linecache.cache[module.__file__] = (len(SOURCE), None, SOURCE.splitlines(keepends=True), module.__file__)
    exec(compile(SOURCE, module.__file__, "exec"), module.__dict__)
    return module


# A run-time call site of every carried release (the audit's: the mm_fp4 backend order), asked from a
# frame that bears its name: what the audit's run-time list answers, torch's release when patched.
RUN_TIME_SITE = ("flashinfer.gemm.gemm_base", "_heuristic_func_mm_fp4")


def ask_as(site: tuple[str, str], lookup: Callable[[], Any]) -> Any:
    """lookup() called as get_cuda_version() from a function named as the call site (module, a
    top-level function's name), its source readable as a module's is (the call is named by its text)."""
    module, name = site
    filename, source = f"<{module}>", f"def {name}():\n    return get_cuda_version()\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict[str, Any] = {"__name__": module, "get_cuda_version": lookup}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]()
