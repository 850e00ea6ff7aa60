"""FlashInfer's fp4_quantize as an opaque torch.library custom op, for torch.compile (nvfp4-overlay).

Backport of SGLang 0.5.12 (srt/layers/quantization/fp4_utils.py, sgl-project/sglang#23745) to
SGLang 0.5.8-0.5.11 (one source for all of them) and their pins flashinfer-python 0.6.1-0.6.8.post1.
It has no ``backend`` argument: 0.6.1-0.6.7.post3 have none, and 0.6.8.post1's stays at its default
("cuda"), as upstream 0.5.11 leaves it (0.5.12 picks "cute-dsl" on SM100).
Upstream 0.5.8-0.5.11 call ``flashinfer.fp4_quantize`` in ``ModelOptFp4LinearMethod.apply`` on SM120;
under ``torch.compile(fullgraph=True)`` (``--enable-piecewise-cuda-graph``) dynamo traces into
FlashInfer's JIT loader (``nvcc --version`` in a subprocess, file locks) and fails. Here dynamo sees
one opaque op with a fake; eager callers reach ``flashinfer.fp4_quantize`` as before, without the
dispatcher (the op exists only for the tracer).
"""

from typing import Optional, Tuple

import torch
from flashinfer import __version__ as _flashinfer_version
from flashinfer import fp4_quantize as _flashinfer_fp4_quantize
from packaging.version import Version

# How the installed flashinfer shapes the swizzled scale factors: the kernel fills a flat uint8
# buffer of round_up(M, 128 or 8) * round_up(K // sf_vec_size, 4) bytes, which flashinfer views as
# round_up(K // sf_vec_size, 4) columns from 0.6.8 on, and as K // sf_vec_size columns before.
_SF_COLS_PADDED = Version(_flashinfer_version).release >= (0, 6, 8)


def _round_up(x: int, y: int) -> int:
    return (x + y - 1) // y * y


# The op, its fake and the wrapper take flashinfer.fp4_quantize's first seven parameters, in order.
@torch.library.custom_op("sglang::flashinfer_fp4_quantize", mutates_args=())
def flashinfer_fp4_quantize(
    input: torch.Tensor, global_scale: Optional[torch.Tensor] = None, sf_vec_size: int = 16,
    sf_use_ue8m0: bool = False, is_sf_swizzled_layout: bool = True, is_sf_8x4_layout: bool = False,
    enable_pdl: Optional[bool] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    return _flashinfer_fp4_quantize(input, global_scale, sf_vec_size, sf_use_ue8m0, is_sf_swizzled_layout,
                                    is_sf_8x4_layout, enable_pdl)


@flashinfer_fp4_quantize.register_fake
def _flashinfer_fp4_quantize_fake(
    input: torch.Tensor, global_scale: Optional[torch.Tensor] = None, sf_vec_size: int = 16,
    sf_use_ue8m0: bool = False, is_sf_swizzled_layout: bool = True, is_sf_8x4_layout: bool = False,
    enable_pdl: Optional[bool] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    # The same steps as flashinfer.fp4_quantize and its fp4_quantize_sm100 allocation, so the
    # shapes, strides and dtypes (uint8 both) are the real ones for every layout argument.
    is_column_major = input.stride(-2) == 1
    if sf_vec_size not in (16, 32):
        raise NotImplementedError("sf_vec_size can only be 16 or 32")
    input = input.transpose(-2, -1) if is_column_major else input
    torch._check(input.shape[-1] % sf_vec_size == 0)
    m, k = input.numel() // input.shape[-1], input.shape[-1]
    x_q = input.new_empty((*input.shape[:-1], k // 2), dtype=torch.uint8)
    sf_cols = k // sf_vec_size
    if not is_sf_swizzled_layout:
        sf = input.new_empty((m * sf_cols,), dtype=torch.uint8).reshape((-1, sf_cols))
    else:
        sf_size = _round_up(m, 8 if is_sf_8x4_layout else 128) * _round_up(sf_cols, 4)
        sf = input.new_empty((sf_size,), dtype=torch.uint8).reshape((-1, _round_up(sf_cols, 4) if _SF_COLS_PADDED
                                                                     else sf_cols))
    if is_column_major:
        return x_q.transpose(-2, -1), sf.transpose(-2, -1)
    return x_q, sf


def fp4_quantize(
    input: torch.Tensor, global_scale: Optional[torch.Tensor] = None, sf_vec_size: int = 16,
    sf_use_ue8m0: bool = False, is_sf_swizzled_layout: bool = True, is_sf_8x4_layout: bool = False,
    enable_pdl: Optional[bool] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``flashinfer.fp4_quantize`` with the same arguments; opaque to dynamo while it traces."""
    quantize = flashinfer_fp4_quantize if torch.compiler.is_compiling() else _flashinfer_fp4_quantize
    return quantize(input, global_scale, sf_vec_size, sf_use_ue8m0, is_sf_swizzled_layout, is_sf_8x4_layout,
                    enable_pdl)
