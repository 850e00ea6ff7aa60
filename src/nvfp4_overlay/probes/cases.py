"""The calls the trace probe makes of each entry point: layouts and argument tables, per release.

cases(name, fn) yields (case id, make) where make(torch) -> (args, kwargs) builds fresh inputs.
A case uses only the parameters the release's signature has, and names the values it sets apart
from the defaults, so a parameter that fails to reach the op shows as different kernel arguments
(or, for a value upstream refuses, as a compiled call that does not refuse it). SfLayout values
are the release's own members, read from the module that defines the entry point.

mxfp8_quantize runs on ``meta`` tensors: its inner op takes a host branch for a CPU tensor (another
kernel, another allocation) and the CUDA branch for any other device; the wrapper never asks a meta
tensor for its compute capability.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

Make = Callable[[Any], tuple[tuple[Any, ...], dict[str, Any]]]
# (case id, keyword arguments, positional inputs(torch))
Row = tuple[str, dict[str, Any], Callable[[Any], tuple[Any, ...]]]

# fp4_quantize layouts: (id, keyword arguments, column-major input)
FP4_LAYOUTS = [
    ("swizzled128-sf16", {"sf_vec_size": 16}, False),
    ("swizzled8x4-sf16", {"sf_vec_size": 16, "is_sf_8x4_layout": True}, False),
    ("linear-sf16", {"sf_vec_size": 16, "is_sf_swizzled_layout": False}, False),
    ("swizzled128-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True}, False),
    ("swizzled8x4-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True, "is_sf_8x4_layout": True}, False),
    ("linear-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True, "is_sf_swizzled_layout": False}, False),
    ("colmajor-swizzled128-sf16", {"sf_vec_size": 16}, True),
    ("colmajor-linear-sf16", {"sf_vec_size": 16, "is_sf_swizzled_layout": False}, True),
    ("colmajor-swizzled128-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True}, True),
    ("pdl-inverted", {"sf_vec_size": 16, "enable_pdl": True, "is_global_scale_inversed": True}, False),
]
# K = 224: K / sf_vec_size (14, 7) is not a multiple of 4, where 0.6.8 changed the scale factors' view.
FP4_ODD_K = [
    ("k224-swizzled128-sf16", {"sf_vec_size": 16}, False),
    ("k224-swizzled8x4-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True, "is_sf_8x4_layout": True}, False),
    ("k224-linear-sf16", {"sf_vec_size": 16, "is_sf_swizzled_layout": False}, False),
    ("k224-colmajor-swizzled128-sf16", {"sf_vec_size": 16}, True),
]


def cases(name: str, fn: Callable[..., Any], *, quick: bool = False) -> Iterator[tuple[str, Make]]:
    params = set(inspect.signature(fn).parameters)
    table = _TABLES.get(name)
    if table is None:
        return
    found = list(table(params, inspect.unwrap(fn).__globals__.get("SfLayout")))
    yield from found[:1] if quick else found


def _cases(params: set[str], table: list[tuple[str, dict[str, Any], Callable[[Any], tuple[Any, ...]]]],
           needs: dict[str, set[str]] | None = None) -> Iterator[tuple[str, Make]]:
    """(id, keyword arguments, inputs(torch)) rows; a row runs where the signature has every keyword
    it sets (and the parameters `needs` names for it)."""
    for case_id, kwargs, inputs in table:
        if not set(kwargs) <= params or not (needs or {}).get(case_id, set()) <= params:
            continue

        def make(torch: Any, kwargs: dict[str, Any] = kwargs, inputs: Any = inputs) -> Any:
            return inputs(torch), {k: v(torch) if callable(v) else v for k, v in kwargs.items()}

        yield case_id, make


def _x(*shape: int, device: str = "cpu") -> Callable[[Any], Any]:
    return lambda torch: torch.randn(*shape, dtype=torch.bfloat16, device=device)


def _alone(*shape: int, device: str = "cpu") -> Callable[[Any], tuple[Any, ...]]:
    """The input tensor as the only positional argument."""
    return lambda torch: (_x(*shape, device=device)(torch),)


def _with_scale(*shape: int) -> Callable[[Any], tuple[Any, ...]]:
    return lambda torch: (_x(*shape)(torch), torch.tensor([2.0]))


def _column_major(*shape: int) -> Callable[[Any], tuple[Any, ...]]:
    return lambda torch: (_x(*shape)(torch).t(), torch.tensor([2.0]))


def _fp4_quantize(params: set[str], sf_layout: Any) -> Iterator[tuple[str, Make]]:
    for case_id, kwargs, column_major in FP4_LAYOUTS + FP4_ODD_K:
        given = {k: v for k, v in kwargs.items() if k in params}
        k = 224 if case_id.startswith("k224") else 256

        def make(torch: Any, given: dict[str, Any] = given, column_major: bool = column_major, k: int = k) -> Any:
            x = torch.randn(40, k, dtype=torch.bfloat16)
            if column_major:
                x = x.t()  # stride(-2) == 1: quantized along dim -2
            return (x, torch.tensor([2.0])), dict(given)

        yield case_id, make


def _nvfp4_quantize(params: set[str], sf_layout: Any) -> Iterator[tuple[str, Make]]:
    # 0.6.1-0.6.6: layout_linear gives the 128x4 layout (upstream's, reproduced by the fake)
    rows: list[Row] = [
        ("swizzled128", {}, _with_scale(40, 256)),
        ("swizzled8x4", {"sfLayout": sf_layout.layout_8x4}, _with_scale(40, 256)),
        ("linear", {"sfLayout": sf_layout.layout_linear}, _with_scale(40, 256)),
        ("sf32-pdl", {"sf_vec_size": 32, "enable_pdl": True}, _with_scale(40, 256)),
        ("colmajor-8x4", {"sfLayout": sf_layout.layout_8x4}, _column_major(40, 256)),
        ("k224-linear", {"sfLayout": sf_layout.layout_linear}, _with_scale(40, 224)),
        ("positional-8x4", {}, lambda torch: (*_with_scale(40, 256)(torch), sf_layout.layout_8x4, False, 16)),
        ("backend-cuda", {"backend": "cuda"}, _with_scale(40, 256)),
        ("4over6-off", {"nvfp4_4over6": None}, _with_scale(40, 256)),
        # upstream refuses these without per_token_activation: the compiled call must refuse them too
        ("expanded-idx", {"expanded_idx_to_permuted_idx": lambda torch: torch.arange(40, dtype=torch.int32)},
         _with_scale(40, 256)),
        ("out-scale", {"out_scale": lambda torch: torch.tensor([1.0])}, _with_scale(40, 256)),
    ]
    yield from _cases(params, rows)


def _mxfp4_quantize(params: set[str], sf_layout: Any) -> Iterator[tuple[str, Make]]:
    rows: list[Row] = [
        ("swizzled128", {}, _alone(40, 256)),
        ("linear", {"sfLayout": getattr(sf_layout, "layout_linear", None)}, _alone(40, 256)),
        ("swizzled8x4", {"sfLayout": getattr(sf_layout, "layout_8x4", None)}, _alone(40, 256)),
        ("backend-cuda-pdl", {"backend": "cuda", "enable_pdl": True}, _alone(40, 256)),
        ("k224", {}, _alone(40, 224)),  # K / 32 = 7: up to 0.6.7.post3 the scale factors' view raises
        ("3d", {}, _alone(2, 40, 256)),
    ]
    yield from _cases(params, rows)


def _nvfp4_batched_quantize(params: set[str], sf_layout: Any) -> Iterator[tuple[str, Make]]:
    rows: list[Row] = [
        ("sf16", {}, _with_scale(2, 40, 256)),
        ("sf32", {"sf_vec_size": 32}, _with_scale(2, 40, 256)),
        ("k224-m200", {}, _with_scale(3, 200, 224)),
        ("4over6-off", {"nvfp4_4over6": None}, _with_scale(2, 40, 256)),
    ]
    yield from _cases(params, rows)


def _grouped(groups: int, m: int, k: int) -> Callable[[Any], tuple[Any, ...]]:
    # (a, mask, a_global_sf): the valid rows per group (int32) and one scale per group (float32)
    return lambda torch: (_x(groups, m, k)(torch), torch.tensor([m, m // 2, 1][:groups], dtype=torch.int32),
                          torch.tensor([2.0, 3.0, 4.0][:groups]))


def _scaled_fp4_grouped_quantize(params: set[str], sf_layout: Any) -> Iterator[tuple[str, Make]]:
    rows: list[Row] = [
        ("l2-m40-k256", {}, _grouped(2, 40, 256)),
        ("l3-m200-k224", {}, _grouped(3, 200, 224)),
        ("k200", {}, _grouped(2, 40, 200)),  # k % 16 != 0: upstream asserts
        ("4over6-off", {"nvfp4_4over6": None}, _grouped(2, 40, 256)),
    ]
    yield from _cases(params, rows)


def _silu_and_mul_scaled_nvfp4_experts_quantize(params: set[str],
                                                 sf_layout: Any) -> Iterator[tuple[str, Make]]:
    # a is (l, m, 2 * k): gate, then up
    rows: list[Row] = [
        ("l2-m40-k256", {}, _grouped(2, 40, 512)),
        ("l3-m200-k224", {}, _grouped(3, 200, 448)),
        ("k200", {}, _grouped(2, 40, 400)),  # k % 16 != 0: upstream asserts
        ("4over6-off", {"nvfp4_4over6": None}, _grouped(2, 40, 512)),
    ]
    yield from _cases(params, rows)


def _nvfp4_kv_quantize(params: set[str], sf_layout: Any) -> Iterator[tuple[str, Make]]:
    rows: list[Row] = [
        ("m40-k256", {}, _with_scale(40, 256)),
        ("m200-k224", {}, _with_scale(200, 224)),
        ("k200", {}, _with_scale(40, 200)),  # K % 16 != 0: upstream raises ValueError
        ("skip-check", {"skip_check": True}, _with_scale(40, 256)),  # backend_requirement's keyword
    ]
    yield from _cases(params | {"skip_check"}, rows)


def _mxfp8_quantize(params: set[str], sf_layout: Any) -> Iterator[tuple[str, Make]]:
    meta = functools.partial(_alone, device="meta")
    rows: list[Row] = [
        ("swizzled", {}, meta(40, 256)),
        ("linear", {"is_sf_swizzled_layout": False}, meta(40, 256)),
        ("align64-k224", {"alignment": 64}, meta(40, 224)),
        ("pdl-3d", {"enable_pdl": True}, meta(2, 40, 256)),
        ("layout-8x4", {"sf_swizzle_layout": getattr(sf_layout, "layout_8x4", None)}, meta(40, 256)),
        ("layout-linear-over-bool", {"sf_swizzle_layout": getattr(sf_layout, "layout_linear", None)},
         meta(40, 256)),
        ("backend-cuda", {"backend": "cuda", "is_sf_swizzled_layout": False}, meta(40, 256)),
        ("k200", {}, meta(40, 200)),  # K % 32 != 0: upstream asserts
    ]
    yield from _cases(params, rows)


_TABLES: dict[str, Callable[[set[str], Any], Iterator[tuple[str, Make]]]] = {
    "fp4_quantize": _fp4_quantize,
    "nvfp4_quantize": _nvfp4_quantize,
    "nvfp4_batched_quantize": _nvfp4_batched_quantize,
    "scaled_fp4_grouped_quantize": _scaled_fp4_grouped_quantize,
    "silu_and_mul_scaled_nvfp4_experts_quantize": _silu_and_mul_scaled_nvfp4_experts_quantize,
    "nvfp4_kv_quantize": _nvfp4_kv_quantize,
    "mxfp8_quantize": _mxfp8_quantize,
    "mxfp4_quantize": _mxfp4_quantize,
}

# The public entry points the trace ladder calls (in this order); the overlay's entries.py says which it routes.
CANDIDATES: tuple[str, ...] = tuple(_TABLES)
