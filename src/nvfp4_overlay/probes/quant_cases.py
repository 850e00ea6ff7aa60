"""The trace ladder's calls of nvfp4_quantize (cuda, CuTe DSL, per token) and silu_and_mul_nvfp4_quantize.

Tables of probes/cases.py (Row, the same contract: each row names the values it sets apart from the
defaults, from the release whose signature takes them); cases.py holds them in its _TABLES. Per
token is SGLang's Inkling call (flashinfer_trtllm.py, SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION:
a (1,) float32 scale tensor, the linear layout, backend="cute-dsl"). The CuTe-DSL kernels are the
probe's recording stand-ins (probes/cute_dsl_stub.py): what upstream allocates is upstream's code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nvfp4_overlay.probes.cases import Row


def _row(*args: Any, **kwargs: Any) -> Row:
    from nvfp4_overlay.probes.cases import Row  # cases.py imports this module

    return Row(*args, **kwargs)


def _x(*shape: int) -> Callable[[Any], Any]:
    return lambda torch: torch.randn(*shape, dtype=torch.bfloat16)


def _with_scale(*shape: int, scale: float = 2.0) -> Callable[[Any], tuple[Any, ...]]:
    return lambda torch: (_x(*shape)(torch), torch.tensor([scale]))


def _column_major(*shape: int) -> Callable[[Any], tuple[Any, ...]]:
    return lambda torch: (_x(*shape)(torch).t(), torch.tensor([2.0]))


# SGLang's per-token scale: 1 / (448 * 6), a (1,) float32 tensor (0.5.16 on), a host float before
_PER_TOKEN = _with_scale(40, 256, scale=1.0 / (448.0 * 6.0))


def _per_token_float(torch: Any) -> tuple[Any, ...]:
    return _x(40, 256)(torch), 1.0 / (448.0 * 6.0)


def _idx(torch: Any) -> Any:
    return torch.arange(40, dtype=torch.int32)


def _nvfp4_quantize(sf_layout: Any) -> list[Row]:
    # 0.6.1-0.6.6: layout_linear gives the 128x4 layout (upstream's, reproduced by the fake)
    return [
        _row("swizzled128", {}, _with_scale(40, 256)),
        _row("swizzled8x4", {"sfLayout": sf_layout.layout_8x4}, _with_scale(40, 256)),
        _row("linear", {"sfLayout": sf_layout.layout_linear}, _with_scale(40, 256)),
        _row("sf32-pdl", {"sf_vec_size": 32, "enable_pdl": True}, _with_scale(40, 256)),
        _row("colmajor-8x4", {"sfLayout": sf_layout.layout_8x4}, _column_major(40, 256)),
        _row("k224-linear", {"sfLayout": sf_layout.layout_linear}, _with_scale(40, 224)),
        _row("positional-8x4", {}, lambda torch: (*_with_scale(40, 256)(torch), sf_layout.layout_8x4, False, 16)),
        _row("backend-cuda", {"backend": "cuda"}, _with_scale(40, 256), since="0.6.8"),
        _row("4over6-off", {"nvfp4_4over6": None}, _with_scale(40, 256), since="0.7.1"),
        # upstream refuses these without per_token_activation: the compiled call must refuse them too
        _row("expanded-idx", {"expanded_idx_to_permuted_idx": _idx}, _with_scale(40, 256), since="0.6.11"),
        _row("out-scale", {"out_scale": lambda torch: torch.tensor([1.0])}, _with_scale(40, 256), since="0.7.1"),
        *_cute_dsl_rows(sf_layout),
        *_per_token_rows(sf_layout),
    ]


def _cute_dsl_rows(sf_layout: Any) -> list[Row]:
    cute = {"backend": "cute-dsl"}
    return [
        _row("cute-dsl", cute, _with_scale(40, 256), since="0.6.8"),
        _row("cute-dsl-linear", {**cute, "sfLayout": sf_layout.layout_linear}, _with_scale(40, 256), since="0.6.8"),
        _row("cute-dsl-8x4", {**cute, "sfLayout": sf_layout.layout_8x4}, _with_scale(40, 256), since="0.6.8"),
        _row("cute-dsl-3d-k224", cute, _with_scale(2, 40, 224), since="0.6.8"),  # m flattened
        _row("cute-dsl-colmajor", cute, _column_major(256, 40), since="0.6.8"),  # made contiguous
        _row("cute-dsl-sf32", {**cute, "sf_vec_size": 32}, _with_scale(40, 256), since="0.6.8"),  # refused
        # a host float: the CuTe-DSL kernel takes it from 0.6.17 (before, a_global_sf.cuda() refuses it)
        _row("cute-dsl-float", cute, lambda torch: (_x(40, 256)(torch), 2.0), since="0.6.8"),
        _row("cuda-float", {}, lambda torch: (_x(40, 256)(torch), 2.0)),  # upstream refuses (.cuda() of a float)
    ]


def _per_token_rows(sf_layout: Any) -> list[Row]:
    # 0.6.11-0.6.12: per token with CuTe DSL is refused (cuda only), as the compiled call must be
    token, cute = {"per_token_activation": True}, {"per_token_activation": True, "backend": "cute-dsl"}
    return [
        _row("per-token-inkling", {**cute, "sfLayout": sf_layout.layout_linear}, _PER_TOKEN, since="0.6.11"),
        _row("per-token-cute-dsl-128x4", cute, _PER_TOKEN, since="0.6.11"),
        _row("per-token-cute-dsl-8x4-k224", {**cute, "sfLayout": sf_layout.layout_8x4},
             _with_scale(200, 224, scale=1.0 / 2688.0), since="0.6.11"),
        _row("per-token-cuda", token, _PER_TOKEN, since="0.6.11"),
        # SGLang 0.5.13-0.5.15's call: a host float, the linear layout, the cuda backend
        _row("per-token-float-linear", {**token, "sfLayout": sf_layout.layout_linear}, _per_token_float,
             since="0.6.11"),
        _row("per-token-cute-dsl-float", cute, _per_token_float, since="0.6.11"),
        _row("per-token-cuda-linear", {**token, "backend": "cuda", "sfLayout": sf_layout.layout_linear},
             _PER_TOKEN, since="0.6.11"),
        _row("per-token-cuda-8x4-idx", {**token, "sfLayout": sf_layout.layout_8x4,
                                        "expanded_idx_to_permuted_idx": _idx}, _PER_TOKEN, since="0.6.11"),
        _row("per-token-cute-dsl-out-scale", {**cute, "out_scale": lambda torch: torch.tensor([0.5])},
             _PER_TOKEN, since="0.7.1"),
        # upstream refuses: so must the compiled call
        _row("per-token-cute-dsl-idx", {**cute, "expanded_idx_to_permuted_idx": _idx}, _PER_TOKEN, since="0.6.11"),
        _row("per-token-sf32", {**token, "sf_vec_size": 32}, _PER_TOKEN, since="0.6.11"),
        _row("per-token-cuda-out-scale", {**token, "backend": "cuda", "out_scale": lambda torch: torch.tensor([0.5])},
             _PER_TOKEN, since="0.7.1"),
    ]


def _silu_and_mul_nvfp4_quantize(sf_layout: Any) -> list[Row]:
    # input (m, 2k): gate, then up
    return [
        _row("swizzled128", {}, _with_scale(40, 512)),
        _row("swizzled8x4", {"is_sf_8x4_layout": True}, _with_scale(40, 512)),
        _row("linear", {"is_sf_swizzled_layout": False}, _with_scale(40, 512)),
        _row("3d-k224-pdl", {"enable_pdl": True}, _with_scale(2, 40, 448)),
        _row("4over6-off", {"nvfp4_4over6": None}, _with_scale(40, 512), since="0.7.1"),
        # upstream refuses: so must the compiled call
        _row("sf32", {"sf_vec_size": 32}, _with_scale(40, 512)),
        _row("not-contiguous", {}, _column_major(512, 40)),
    ]


TABLES: dict[str, Callable[[Any], list[Row]]] = {
    "nvfp4_quantize": _nvfp4_quantize,
    "silu_and_mul_nvfp4_quantize": _silu_and_mul_nvfp4_quantize,
}
