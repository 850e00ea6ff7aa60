"""nvfp4-overlay: the outputs of each routed entry point, allocated as upstream's wrapper does.

A fake takes the entry point's arguments by name (every parameter of the release's signature) and
returns empty tensors with the shapes, strides and dtypes that upstream's public function and the
inner op it calls (``fp4_quantize_sm100`` and its kin) produce when the kernel writes nothing.
tests/test_trace_flashinfer.py holds each fake to upstream's wrapper run with a no-op kernel, for
every carried release and layout. Where upstream's allocation changed between releases, the
release that changed it is named here (RELEASE is the upstream release this wheel was built from).
"""

from typing import Any, Tuple

import torch
from packaging.version import Version

from .._build_meta import __version__ as _upstream_version

RELEASE = Version(_upstream_version)

# From 0.6.8 on, fp4_quantize views a swizzled scale buffer as (-1, round_up(k // sf_vec_size, 4))
# columns; before, as (-1, k // sf_vec_size).
_SF_COLS_PADDED = RELEASE >= Version("0.6.8")


def _round_up(x: int, y: int) -> int:
    return (x + y - 1) // y * y


def fp4_quantize(
    input: torch.Tensor,
    sf_vec_size: int = 16,
    is_sf_swizzled_layout: bool = True,
    is_sf_8x4_layout: bool = False,
    **_: Any,
) -> Tuple[torch.Tensor, torch.Tensor]:
    if sf_vec_size not in (16, 32):
        raise NotImplementedError("sf_vec_size can only be 16 or 32")
    is_column_major = input.stride(-2) == 1
    if is_column_major:
        input = input.transpose(-2, -1)
    assert input.shape[-1] % sf_vec_size == 0  # upstream asserts it before the launch
    m = input.numel() // input.shape[-1]
    k = input.shape[-1]
    x_q = input.new_empty((*input.shape[:-1], k // 2), dtype=torch.uint8)
    sf_cols = k // sf_vec_size
    if is_sf_swizzled_layout:
        sf_size = _round_up(m, 8 if is_sf_8x4_layout else 128) * _round_up(sf_cols, 4)
        if _SF_COLS_PADDED:
            sf_cols = _round_up(sf_cols, 4)
    else:
        sf_size = m * sf_cols
    sf = input.new_empty((sf_size,), dtype=torch.uint8).reshape((-1, sf_cols))
    if is_column_major:
        x_q = x_q.transpose(-2, -1)
        sf = sf.transpose(-2, -1)
    return x_q, sf
