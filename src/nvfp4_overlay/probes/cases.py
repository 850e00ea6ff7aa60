"""The calls the trace probe makes of each entry point: layouts and argument tables, per release.

cases(name, fn) yields (case id, make) where make(torch) -> (args, kwargs) builds fresh inputs.
A case uses only the parameters the release's signature has, and names the values it sets apart
from the defaults, so a parameter that fails to reach the op shows as different kernel arguments.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

Make = Callable[[Any], tuple[tuple[Any, ...], dict[str, Any]]]

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
    found = list(table(params))
    yield from found[:1] if quick else found


def _fp4_quantize(params: set[str]) -> Iterator[tuple[str, Make]]:
    for case_id, kwargs, column_major in FP4_LAYOUTS + FP4_ODD_K:
        given = {k: v for k, v in kwargs.items() if k in params}
        k = 224 if case_id.startswith("k224") else 256

        def make(torch: Any, given: dict[str, Any] = given, column_major: bool = column_major, k: int = k) -> Any:
            x = torch.randn(40, k, dtype=torch.bfloat16)
            if column_major:
                x = x.t()  # stride(-2) == 1: quantized along dim -2
            return (x, torch.tensor([2.0])), dict(given)

        yield case_id, make


_TABLES: dict[str, Callable[[set[str]], Iterator[tuple[str, Make]]]] = {
    "fp4_quantize": _fp4_quantize,
}
