"""The trace ladder's calls of nvfp4_quantize (cuda, CuTe DSL, per token) and silu_and_mul_nvfp4_quantize.

Tables of probes/flashinfer/tables/cases.py (probes/flashinfer/tables/rows.py's Row, the same contract: each row names the values it sets apart from the
defaults, from the release whose signature takes them); cases.py holds them in its _TABLES. Per
token is SGLang's Inkling call (flashinfer_trtllm.py, SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION:
a (1,) float32 scale tensor, the linear layout, backend="cute-dsl"). The CuTe-DSL kernels are the
probe's recording stand-ins (probes/flashinfer/stubs/cute_dsl_stub.py): what upstream allocates is upstream's code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nvfp4_overlay.probes.flashinfer.tables.rows import Row, bf16, with_scale


def _column_major(*shape: int) -> Callable[[Any], tuple[Any, ...]]:
    return lambda torch: (bf16(*shape)(torch).t(), torch.tensor([2.0]))


# SGLang's per-token scale: 1 / (448 * 6), a (1,) float32 tensor (0.5.16 on), a host float before
_PER_TOKEN = with_scale(40, 256, scale=1.0 / (448.0 * 6.0))


def _per_token_float(torch: Any) -> tuple[Any, ...]:
    return bf16(40, 256)(torch), 1.0 / (448.0 * 6.0)


def _idx(torch: Any) -> Any:
    return torch.arange(40, dtype=torch.int32)


def _nvfp4_quantize(sf_layout: Any) -> list[Row]:
    # 0.6.1-0.6.6: layout_linear gives the 128x4 layout (upstream's, reproduced by the fake)
    return [
        Row("swizzled128", {}, with_scale(40, 256)),
        Row("swizzled8x4", {"sfLayout": sf_layout.layout_8x4}, with_scale(40, 256)),
        Row("linear", {"sfLayout": sf_layout.layout_linear}, with_scale(40, 256)),
        Row("sf32-pdl", {"sf_vec_size": 32, "enable_pdl": True}, with_scale(40, 256)),
        Row("colmajor-8x4", {"sfLayout": sf_layout.layout_8x4}, _column_major(40, 256)),
        Row("k224-linear", {"sfLayout": sf_layout.layout_linear}, with_scale(40, 224)),
        Row("positional-8x4", {}, lambda torch: (*with_scale(40, 256)(torch), sf_layout.layout_8x4, False, 16)),
        Row("backend-cuda", {"backend": "cuda"}, with_scale(40, 256), since="0.6.8"),
        Row("4over6-off", {"nvfp4_4over6": None}, with_scale(40, 256), since="0.7.1"),
        # upstream refuses these without per_token_activation: the compiled call must refuse them too
        Row("expanded-idx", {"expanded_idx_to_permuted_idx": _idx}, with_scale(40, 256), since="0.6.11"),
        Row("out-scale", {"out_scale": lambda torch: torch.tensor([1.0])}, with_scale(40, 256), since="0.7.1"),
        *_cute_dsl_rows(sf_layout),
        *_per_token_rows(sf_layout),
    ]


def _cute_dsl_rows(sf_layout: Any) -> list[Row]:
    cute = {"backend": "cute-dsl"}
    return [
        Row("cute-dsl", cute, with_scale(40, 256), since="0.6.8"),
        Row("cute-dsl-linear", {**cute, "sfLayout": sf_layout.layout_linear}, with_scale(40, 256), since="0.6.8"),
        Row("cute-dsl-8x4", {**cute, "sfLayout": sf_layout.layout_8x4}, with_scale(40, 256), since="0.6.8"),
        Row("cute-dsl-3d-k224", cute, with_scale(2, 40, 224), since="0.6.8"),  # m flattened
        Row("cute-dsl-colmajor", cute, _column_major(256, 40), since="0.6.8"),  # made contiguous
        Row("cute-dsl-sf32", {**cute, "sf_vec_size": 32}, with_scale(40, 256), since="0.6.8"),  # refused
        # a host float: the CuTe-DSL kernel takes it from 0.6.17 (before, a_global_sf.cuda() refuses it)
        Row("cute-dsl-float", cute, lambda torch: (bf16(40, 256)(torch), 2.0), since="0.6.8"),
        Row("cuda-float", {}, lambda torch: (bf16(40, 256)(torch), 2.0)),  # upstream refuses (.cuda() of a float)
    ]


def _per_token_rows(sf_layout: Any) -> list[Row]:
    # 0.6.11-0.6.12: per token with CuTe DSL is refused (cuda only), as the compiled call must be
    token, cute = {"per_token_activation": True}, {"per_token_activation": True, "backend": "cute-dsl"}
    return [
        Row("per-token-inkling", {**cute, "sfLayout": sf_layout.layout_linear}, _PER_TOKEN, since="0.6.11"),
        Row("per-token-cute-dsl-128x4", cute, _PER_TOKEN, since="0.6.11"),
        Row("per-token-cute-dsl-8x4-k224", {**cute, "sfLayout": sf_layout.layout_8x4},
             with_scale(200, 224, scale=1.0 / 2688.0), since="0.6.11"),
        Row("per-token-cuda", token, _PER_TOKEN, since="0.6.11"),
        # SGLang 0.5.13-0.5.15's call: a host float, the linear layout, the cuda backend
        Row("per-token-float-linear", {**token, "sfLayout": sf_layout.layout_linear}, _per_token_float,
             since="0.6.11"),
        Row("per-token-cute-dsl-float", cute, _per_token_float, since="0.6.11"),
        Row("per-token-cuda-linear", {**token, "backend": "cuda", "sfLayout": sf_layout.layout_linear},
             _PER_TOKEN, since="0.6.11"),
        Row("per-token-cuda-8x4-idx", {**token, "sfLayout": sf_layout.layout_8x4,
                                        "expanded_idx_to_permuted_idx": _idx}, _PER_TOKEN, since="0.6.11"),
        Row("per-token-cute-dsl-out-scale", {**cute, "out_scale": lambda torch: torch.tensor([0.5])},
             _PER_TOKEN, since="0.7.1"),
        # upstream refuses: so must the compiled call
        Row("per-token-cute-dsl-idx", {**cute, "expanded_idx_to_permuted_idx": _idx}, _PER_TOKEN, since="0.6.11"),
        Row("per-token-sf32", {**token, "sf_vec_size": 32}, _PER_TOKEN, since="0.6.11"),
        Row("per-token-cuda-out-scale", {**token, "backend": "cuda", "out_scale": lambda torch: torch.tensor([0.5])},
             _PER_TOKEN, since="0.7.1"),
    ]


def _silu_and_mul_nvfp4_quantize(sf_layout: Any) -> list[Row]:
    # input (m, 2k): gate, then up
    return [
        Row("swizzled128", {}, with_scale(40, 512)),
        Row("swizzled8x4", {"is_sf_8x4_layout": True}, with_scale(40, 512)),
        Row("linear", {"is_sf_swizzled_layout": False}, with_scale(40, 512)),
        Row("3d-k224-pdl", {"enable_pdl": True}, with_scale(2, 40, 448)),
        Row("4over6-off", {"nvfp4_4over6": None}, with_scale(40, 512), since="0.7.1"),
        # upstream refuses: so must the compiled call
        Row("sf32", {"sf_vec_size": 32}, with_scale(40, 512)),
        Row("not-contiguous", {}, _column_major(512, 40)),
    ]


TABLES: dict[str, Callable[[Any], list[Row]]] = {
    "nvfp4_quantize": _nvfp4_quantize,
    "silu_and_mul_nvfp4_quantize": _silu_and_mul_nvfp4_quantize,
}
