"""nvfp4-overlay: the hand-written fakes, for the routed entry points whose wrapper cannot run as its own fake.

Most entry points' fake is upstream's wrapper itself (faking.py); entries.py names the few that are
written here, each with its reason (a value read on the host, a kernel's answer read back, a cache
of upstream's own, a library's compiler). A fake takes, by name, the parameters of the entry point
that it reads (no others: entries.py declares the rest as not shaping the outputs, and opaque.py
refuses to route a release whose signature has a parameter that neither names; enums decoded to the
release's own members) and returns empty tensors with the shapes, strides and dtypes that upstream's
public function and the inner op it calls produce when the kernel writes nothing. A refusal upstream
makes before the kernel is made here too where the allocation depends on it; any other refusal
happens when the graph runs, in upstream's code. The trace ladder and the explored space
(tests/releases/test_trace_flashinfer.py) hold each fake to upstream's wrapper run with a no-op kernel,
for every carried release. Where upstream's allocation changed between releases, the release that
changed it is named here (RELEASE is the upstream release this wheel was built from).
"""

from typing import Any, List, Tuple

import torch
from packaging.version import Version

from .._build_meta import __version__ as _upstream_version

RELEASE = Version(_upstream_version)

# From 0.6.8 on, fp4_quantize views a swizzled scale buffer as (-1, round_up(k // sf_vec_size, 4))
# columns; before, as (-1, k // sf_vec_size).
_SF_COLS_PADDED = RELEASE >= Version("0.6.8")
# Up to 0.6.6, nvfp4_quantize asks fp4_quantize for the swizzled layout whatever sfLayout says
# (layout_linear gives 128x4); from 0.6.7 on, layout_linear is linear.
_NVFP4_LINEAR_HONOURED = RELEASE >= Version("0.6.7")
# nvfp4_quantize(per_token_activation=True) refuses every backend but cuda up to 0.6.12; from
# 0.6.13 on the CuTe-DSL kernel takes it too.
_PER_TOKEN_CUTE_DSL = RELEASE >= Version("0.6.13")
# From 0.6.8 on, nvfp4_quantize_paged_kv_cache refuses a page size or head_dim its V-scale swizzle
# cannot take with a ValueError; before, the swizzle's reshape raises.
_PAGED_KV_CHECKED = RELEASE >= Version("0.6.8")
# From 0.7.4 on, nvfp4_quantize_cute_dsl's TMA kernel pads the 8x4 layout's rows to 8 as the other does.
RELEASE_074 = RELEASE >= Version("0.7.4")


def _round_up(x: int, y: int) -> int:
    return (x + y - 1) // y * y


def fp4_quantize(  # fp4_quantize's cuda path, as nvfp4_quantize and the paged KV cache call it
    input: torch.Tensor,
    sf_vec_size: int = 16,
    is_sf_swizzled_layout: bool = True,
    is_sf_8x4_layout: bool = False,
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


def _layout(value: Any, default: str) -> str:
    """A decoded SfLayout member's name (layout_128x4, layout_8x4, layout_linear), or the default."""
    return default if value is None else value.name


def nvfp4_quantize(
    a: torch.Tensor,
    sfLayout: Any = None,  # noqa: N803 - upstream's name
    sf_vec_size: int = 16,
    backend: str = "cuda",
    per_token_activation: bool = False,
    expanded_idx_to_permuted_idx: Any = None,
) -> Tuple[torch.Tensor, ...]:
    # Routed without do_shuffle. backend from 0.6.8, per_token_activation from 0.6.11.
    layout = _layout(sfLayout, "layout_128x4")
    if per_token_activation:
        # (fp4 (m, k/2) uint8, scales (rows, cols) uint8, per-token scales (m,) float32) from either
        # backend: nvfp4_quant_and_per_token_scale_sm100 (cuda) and nvfp4_quantize_per_token_cute_dsl
        # allocate alike. Upstream's refusals before either kernel, in its order.
        if sf_vec_size != 16:
            raise ValueError("Per-token NVFP4 quantization only supports sf_vec_size=16")
        if backend != "cuda" and not _PER_TOKEN_CUTE_DSL:
            raise ValueError("Per-token NVFP4 quantization only supports backend='cuda'")
        if backend == "cute-dsl" and expanded_idx_to_permuted_idx is not None:
            raise ValueError("CuTe-DSL per-token NVFP4 quantization does not support expanded_idx_to_permuted_idx")
        m, k = a.shape
        x_q, sf = _cute_dsl_outputs(a.cuda(), m, k, layout)
        return x_q, sf, x_q.new_empty((m,), dtype=torch.float32)
    if backend == "cute-dsl":
        if sf_vec_size != 16:
            raise ValueError(f"CuTe-DSL backend only supports sf_vec_size=16, got {sf_vec_size}")
        # nvfp4_quantize_cute_dsl flattens the leading dimensions into m
        k = a.shape[-1]
        return _cute_dsl_outputs(a.cuda(), a.numel() // k, k, layout)
    # backend "cuda": upstream's call of fp4_quantize(a.cuda(), ...).
    swizzled = layout != "layout_linear" or not _NVFP4_LINEAR_HONOURED
    return fp4_quantize(a.cuda(), sf_vec_size=sf_vec_size, is_sf_swizzled_layout=swizzled,
                        is_sf_8x4_layout=layout == "layout_8x4")


def _cute_dsl_outputs(input: torch.Tensor, m: int, k: int, layout: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """The CuTe-DSL quantizers' buffers (and the cuda per-token op's): fp4 (m, k // 2) uint8 and the
    scale factors (rows, cols) uint8, rows padded to 128 or 8 and cols to 4 unless linear; contiguous."""
    cols = k // 16 if layout == "layout_linear" else _round_up(k // 16, 4)
    rows = m if layout == "layout_linear" else _round_up(m, 8 if layout == "layout_8x4" else 128)
    x_q = input.new_empty((m, k // 2), dtype=torch.uint8)
    return x_q, input.new_empty((rows * cols,), dtype=torch.uint8).reshape(-1, cols)


def silu_and_mul_nvfp4_quantize(
    input: torch.Tensor,
    sf_vec_size: int = 16,
    is_sf_swizzled_layout: bool = True,
    is_sf_8x4_layout: bool = False,
) -> Tuple[torch.Tensor, torch.Tensor]:
    # CuTe DSL only (0.6.16 on): input (..., 2 * k), gate then up; upstream's refusals first.
    if sf_vec_size != 16:
        raise NotImplementedError("sf_vec_size can only be 16 for silu_and_mul_nvfp4_quantize")
    assert input.is_contiguous(), "input must be row-major contiguous"
    assert input.shape[-1] % 2 == 0, "the last dimension must be even (gate and up concatenated)"
    k = input.shape[-1] // 2
    assert k % sf_vec_size == 0
    layout = ("layout_linear" if not is_sf_swizzled_layout else "layout_8x4" if is_sf_8x4_layout
              else "layout_128x4")
    return _cute_dsl_outputs(input, input.numel() // input.shape[-1], k, layout)


def nvfp4_quantize_paged_kv_cache(
    k_cache: torch.Tensor, v_cache: torch.Tensor, kv_layout: str = "HND",
) -> Tuple[Tuple[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor], torch.Tensor, torch.Tensor]:
    # (0.6.7 on) fp4_quantize of each cache as (-1, head_dim), linear scales, viewed back in the
    # cache's own layout; V's scales (and, up to 0.6.7.post3, K's) swizzled into a fresh contiguous
    # tensor; the two host floats (1 / global_sf) as the op carries them (entries.py, "float").
    if kv_layout == "NHD":
        _, page_size, _, head_dim = k_cache.shape
    else:
        _, _, page_size, head_dim = k_cache.shape
    lead = tuple(k_cache.shape[:3])
    packed, scales = [], []
    for cache in (k_cache, v_cache):
        q, sf = fp4_quantize(cache.reshape(-1, head_dim), 16, is_sf_swizzled_layout=False)
        packed.append(q.reshape(*lead, head_dim // 2))
        scales.append(sf.view(torch.float8_e4m3fn).reshape(*lead, head_dim // 16))
    if page_size % 4 != 0 or head_dim % 64 != 0:
        if _PAGED_KV_CHECKED:
            raise ValueError("V-scale swizzling requires page_size % 4 == 0 and head_dim % 64 == 0, "
                             f"got page_size={page_size}, head_dim={head_dim}.")
        raise RuntimeError(f"shape is invalid for the scale swizzle: page_size={page_size}, head_dim={head_dim}")
    host = torch.empty((), dtype=torch.float64)
    return (packed[0], packed[1]), (scales[0], scales[1].contiguous()), host, torch.empty_like(host)


def nothing() -> None:
    """tinygemm_bf16: it writes into `out` and returns None."""
    return None


def mm_fp4(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype = torch.bfloat16,
           out: Any = None) -> torch.Tensor:
    # mm_fp4: torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=out_dtype) unless given.
    if out is not None:
        return out
    # torch.empty as upstream, not a.new_empty: out_dtype=None is torch's default dtype there, not a's
    return torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=out_dtype)


def fp8_blockscale_gemm_sm90(input: torch.Tensor, weight: torch.Tensor, out: Any = None,
                             out_dtype: Any = None) -> torch.Tensor:
    # fp8_blockscale_gemm_sm90: the caller's out, else torch.empty(M, N, dtype=out_dtype or
    # torch.bfloat16, device=input.device), M from input (M, K), N from weight (N, K); 0.6.1-0.7.4.
    if out is not None:
        return out
    return input.new_empty((input.shape[0], weight.shape[0]), dtype=out_dtype or torch.bfloat16)


def trtllm_fp4_block_scale_moe(hidden_states: torch.Tensor, output: Any = None,
                               valid_hidden_size: Any = None) -> List[torch.Tensor]:
    # The finalized output: the caller's, else (tokens, hidden) bf16, hidden counted in values (an
    # FP4 activation packs two a byte), narrowed to valid_hidden_size from 0.7.0.
    if output is not None:
        return [output]
    hidden = hidden_states.shape[-1] * (2 if hidden_states.dtype == torch.uint8 else 1)
    width = hidden if valid_hidden_size is None else valid_hidden_size
    return [hidden_states.new_empty((hidden_states.shape[0], width), dtype=torch.bfloat16)]


# The routed variant's finalized output is allocated as the other's.
trtllm_fp4_block_scale_routed_moe = trtllm_fp4_block_scale_moe


def cutlass_fused_moe(input: torch.Tensor, fc2_expert_weights: torch.Tensor, output_dtype: torch.dtype,
                      output: Any = None) -> List[torch.Tensor]:
    # Not min_latency_mode (upstream refuses it): [output, num_active_experts_per_node (1,) int32,
    # experts_to_token_score (experts, tokens) float32, active_expert_global_ids (experts,) int32],
    # output the caller's or a fresh (tokens, fc2_expert_weights.shape[1]) of output_dtype; the
    # same in every release 0.6.1-0.7.4, whatever the quantization.
    experts, tokens = fc2_expert_weights.shape[0], input.shape[0]
    if output is None:
        output = input.new_empty((tokens, fc2_expert_weights.shape[1]), dtype=output_dtype)
    return [output, input.new_empty((1,), dtype=torch.int32),
            input.new_empty((experts, tokens), dtype=torch.float32),
            input.new_empty((experts,), dtype=torch.int32)]
