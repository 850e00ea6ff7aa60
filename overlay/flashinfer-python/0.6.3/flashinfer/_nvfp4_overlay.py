"""nvfp4-overlay: flashinfer.fp4_quantize as one op that torch.compile does not trace into.

Added by nvfp4-overlay to flashinfer-python 0.6.3. While dynamo traces, the public
fp4_quantize returns fp4_quantize_opaque(...) instead of running its body. Dynamo records
one call of torch.ops.nvfp4_overlay.flashinfer_fp4_quantize and asks the fake below for
its outputs; the JIT loader (nvcc, file locks, dlopen) and the kernel launch run only
when the compiled graph executes, through the unchanged upstream body. Eager callers
never reach this module.
"""

from typing import Optional, Tuple

import torch

OP_NAME = "nvfp4_overlay::flashinfer_fp4_quantize"

# Upstream reshapes a swizzled scale buffer to (-1, round_up(k // sf_vec_size, 4)) from
# 0.6.8 on, and to (-1, k // sf_vec_size) before.
_SF_COLS_PADDED = False


@torch.library.custom_op(OP_NAME, mutates_args=())
def fp4_quantize_opaque(
    input: torch.Tensor,
    global_scale: Optional[torch.Tensor],
    sf_vec_size: int,
    sf_use_ue8m0: bool,
    is_sf_swizzled_layout: bool,
    is_sf_8x4_layout: bool,
    enable_pdl: Optional[bool],
) -> Tuple[torch.Tensor, torch.Tensor]:
    from .fp4_quantization import fp4_quantize

    # Runs at execution, where is_compiling() is False: the upstream body, as for eager.
    return fp4_quantize(
        input,
        global_scale,
        sf_vec_size,
        sf_use_ue8m0,
        is_sf_swizzled_layout=is_sf_swizzled_layout,
        is_sf_8x4_layout=is_sf_8x4_layout,
        enable_pdl=enable_pdl,
    )


@fp4_quantize_opaque.register_fake
def _fp4_quantize_fake(
    input: torch.Tensor,
    global_scale: Optional[torch.Tensor],
    sf_vec_size: int,
    sf_use_ue8m0: bool,
    is_sf_swizzled_layout: bool,
    is_sf_8x4_layout: bool,
    enable_pdl: Optional[bool],
) -> Tuple[torch.Tensor, torch.Tensor]:
    return fp4_quantize_outputs_like(
        input, sf_vec_size, is_sf_swizzled_layout, is_sf_8x4_layout
    )


def fp4_quantize_outputs_like(
    input: torch.Tensor,
    sf_vec_size: int,
    is_sf_swizzled_layout: bool,
    is_sf_8x4_layout: bool,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Empty outputs allocated and viewed as upstream fp4_quantize and fp4_quantize_sm100 do.

    Shapes, strides and dtypes follow from these steps alone, never from the kernel,
    so the fake and the real op agree for every layout argument.
    """
    is_column_major = input.stride(-2) == 1
    if is_column_major:
        input = input.transpose(-2, -1)
    m = input.numel() // input.shape[-1]
    k = input.shape[-1]
    x_q = input.new_empty((*input.shape[:-1], k // 2), dtype=torch.uint8)
    if is_sf_swizzled_layout:
        row_size = 8 if is_sf_8x4_layout else 128
        sf_rows = (m + row_size - 1) // row_size * row_size
        sf_size = sf_rows * ((k // sf_vec_size + 3) // 4 * 4)
    else:
        sf_size = m * k // sf_vec_size
    sf = input.new_empty((sf_size,), dtype=torch.uint8)
    if is_sf_swizzled_layout and _SF_COLS_PADDED:
        sf = sf.reshape((-1, (k // sf_vec_size + 3) // 4 * 4))
    else:
        sf = sf.reshape((-1, k // sf_vec_size))
    if is_column_major:
        x_q = x_q.transpose(-2, -1)
        sf = sf.transpose(-2, -1)
    return x_q, sf
