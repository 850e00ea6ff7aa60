"""Torch bodies for the SGLang CUDA kernels a Qwen3-MoE FP8 layer calls, where no sgl-kernel is installed.

SGLang 0.5.11's layer calls sgl-kernel (a compiled package) and its own JIT kernels (sglang.jit_kernel,
built with nvcc on first call). Neither is run here: each call the layer makes is an opaque custom op
`sglbody::*` whose body computes the kernel's result in plain torch (CUDA-graph capturable: no host
sync, no data-dependent shapes) and whose fake gives its allocation, so dynamo and the piecewise
runner see what they see on a server. What is not a body of ours runs as SGLang ships it: Triton
(fused MoE), FlashInfer (the FP8 block-scale GEMM), torch (attention: SGLang's torch_native backend).

    sgl_kernel.rmsnorm, fused_add_rmsnorm           RMSNorm in float32, cast back
    sgl_kernel.topk_softmax                         softmax in float32, top-k, renormalized on request
    sgl_kernel.moe_align_block_size                 the Triton MoE's block-padded expert sort
    sgl_kernel.sgl_per_token_group_quant_8bit       FP8 activations, one float32 scale per 128 values
    sgl_kernel.weak_ref_tensor                      (the piecewise backend's captured outputs) an alias of
                                                    the tensor: a strong reference, where sgl-kernel's holds
                                                    none; the graph pool's memory stays allocated, the
                                                    values are the same
    sglang.jit_kernel.activation.silu_and_mul       silu(gate) * up
    sglang.jit_kernel.norm.fused_inplace_qknorm     per-head RMSNorm of q and k in place (its check,
                                                    can_use_fused_inplace_qknorm, answers without a build)
    sglang.jit_kernel.rope.apply_rope_with_cos_sin_cache_inplace   rotary embedding (NeoX or GPT-J), and
                                                    the fused KV-cache store when SGLang asks for it
    sglang.jit_kernel.kvcache.can_use_store_cache   False: the KV pool's own torch store (SGLang's fallback)
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

import torch

Tensor = torch.Tensor
BODIES = {
    "sgl_kernel": ("rmsnorm", "fused_add_rmsnorm", "topk_softmax", "moe_align_block_size",
                   "sgl_per_token_group_quant_8bit", "weak_ref_tensor"),
    "sglang.jit_kernel.activation": ("silu_and_mul",),
    "sglang.jit_kernel.rope": ("apply_rope_with_cos_sin_cache_inplace",),
    "sglang.jit_kernel.kvcache": ("can_use_store_cache",),
    "sglang.jit_kernel.norm": ("fused_inplace_qknorm", "can_use_fused_inplace_qknorm"),
}
# SGLang 0.5.20 moved its JIT kernels to sglang.kernels.ops (other signatures: the `*_0520` bodies below),
# where the layer calls them instead of sgl-kernel's; sgl-kernel keeps the norms, SiLU and the weak ref.
BODIES_0520 = {
    "sgl_kernel": ("rmsnorm", "fused_add_rmsnorm", "silu_and_mul", "weak_ref_tensor"),
    "sglang.kernels.ops.layernorm.norm": ("rmsnorm", "fused_add_rmsnorm", "fused_inplace_qknorm",
                                          "can_use_fused_inplace_qknorm"),
    "sglang.kernels.ops.activation.activation": ("silu_and_mul",),
    "sglang.kernels.ops.attention.rope": ("apply_rope_with_cos_sin_cache_inplace",),
    "sglang.kernels.ops.kvcache.kvcache": ("can_use_store_cache",),
    "sglang.kernels.ops.moe": ("moe_align_block_size", "topk_softmax"),
    "sglang.kernels.ops.quantization": ("per_token_group_quant",),
}


def _rms(x: Tensor, w: Tensor, eps: float) -> Tensor:
    x = x.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.float())


@torch.library.custom_op("sglbody::rmsnorm", mutates_args=())
def rmsnorm_op(x: Tensor, w: Tensor, eps: float) -> Tensor:
    return _rms(x, w, eps).to(x.dtype)


@torch.library.custom_op("sglbody::fused_add_rmsnorm", mutates_args=("x", "residual"))
def fused_add_rmsnorm_op(x: Tensor, residual: Tensor, w: Tensor, eps: float) -> None:
    total = x.float() + residual.float()
    residual.copy_(total)
    x.copy_(_rms(total, w, eps))


@torch.library.custom_op("sglbody::qknorm", mutates_args=("q", "k"))
def qknorm_op(q: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor, eps: float) -> None:
    q.copy_(_rms(q, q_weight, eps))
    k.copy_(_rms(k, k_weight, eps))


@torch.library.custom_op("sglbody::topk_softmax", mutates_args=("weights", "ids"))
def topk_softmax_op(weights: Tensor, ids: Tensor, logits: Tensor, renormalize: bool) -> None:
    top, index = torch.topk(logits.float().softmax(-1), weights.shape[-1], dim=-1)
    weights.copy_(top / top.sum(-1, keepdim=True) if renormalize else top)
    ids.copy_(index)


@torch.library.custom_op("sglbody::moe_align_block_size",
                         mutates_args=("sorted_ids", "expert_ids", "post_pad", "cumsum"))
def moe_align_op(topk_ids: Tensor, experts: int, block: int, sorted_ids: Tensor, expert_ids: Tensor,
                 post_pad: Tensor, cumsum: Tensor) -> None:
    """Token slots grouped by expert, each expert's group padded to a multiple of `block` with the
    slot count (the kernel's pad value); each block's expert; the padded total. `experts` counts the
    filtered expert -1 too (SGLang passes num_experts + 1); no slot here is filtered."""
    flat = topk_ids.reshape(-1).long()
    n, real = flat.numel(), experts - 1
    counts = torch.zeros(real, dtype=torch.long, device=flat.device).scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block - 1) // block * block
    ends = padded.cumsum(0)
    order = torch.argsort(flat, stable=True)
    grouped = flat[order]
    rank = torch.arange(n, device=flat.device) - (counts.cumsum(0) - counts)[grouped]
    sorted_ids.fill_(n)
    sorted_ids.scatter_(0, (ends - padded)[grouped] + rank, order.to(sorted_ids.dtype))
    starts = torch.arange(expert_ids.numel(), device=flat.device) * block
    expert_ids.copy_(torch.searchsorted(ends, starts, right=True).clamp(max=real - 1))
    post_pad.copy_(ends[-1:])
    cumsum.zero_()
    cumsum[1:real + 1].copy_(ends)


@torch.library.custom_op("sglbody::per_token_group_quant_fp8", mutates_args=("q", "scales"))
def group_quant_op(x: Tensor, q: Tensor, scales: Tensor, group: int, eps: float, fp8_min: float, fp8_max: float,
                   ue8m0: bool) -> None:
    grouped = x.float().reshape(*x.shape[:-1], x.shape[-1] // group, group)
    scale = grouped.abs().amax(-1).clamp(min=eps) / fp8_max
    if ue8m0:
        scale = torch.exp2(torch.ceil(torch.log2(scale)))
    q.copy_((grouped / scale[..., None]).clamp(fp8_min, fp8_max).reshape(q.shape).to(q.dtype))
    scales.copy_(scale.reshape(scales.shape))


@torch.library.custom_op("sglbody::silu_and_mul", mutates_args=())
def silu_and_mul_op(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return (torch.nn.functional.silu(x[..., :half].float()) * x[..., half:].float()).to(x.dtype)


@torch.library.custom_op("sglbody::rope", mutates_args=("q", "k"))
def rope_op(positions: Tensor, q: Tensor, k: Tensor, cos_sin_cache: Tensor, is_neox: bool) -> None:
    """q and k (tokens, heads, rotary dim) rotated in place; cos_sin_cache (positions, rotary dim): cos | sin."""
    cos, sin = cos_sin_cache[positions.long()].float().chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    for t in (q, k):
        x = t.float()
        if is_neox:
            x1, x2 = x.chunk(2, dim=-1)
            t.copy_(torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1))
        else:
            x1, x2 = x[..., 0::2], x[..., 1::2]
            t.copy_(torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2))


@torch.library.custom_op("sglbody::store_kv", mutates_args=("k_buffer", "v_buffer"))
def store_kv_op(key: Tensor, value: Tensor, k_buffer: Tensor, v_buffer: Tensor, loc: Tensor) -> None:
    k_buffer[loc.long()] = key.reshape(key.shape[0], -1).to(k_buffer.dtype)
    v_buffer[loc.long()] = value.reshape(value.shape[0], -1).to(v_buffer.dtype)


rmsnorm_op.register_fake(lambda x, w, eps: torch.empty_like(x))
silu_and_mul_op.register_fake(lambda x: x.new_empty((*x.shape[:-1], x.shape[-1] // 2)))
for _op in (fused_add_rmsnorm_op, qknorm_op, topk_softmax_op, moe_align_op, group_quant_op, rope_op, store_kv_op):
    _op.register_fake(lambda *args, **kwargs: None)


def rmsnorm(input: Tensor, weight: Tensor, eps: float = 1e-6, out: Tensor | None = None,
            enable_pdl: Any = None) -> Tensor:
    result = torch.ops.sglbody.rmsnorm(input, weight, eps)
    return out.copy_(result) if out is not None else result


def fused_add_rmsnorm(input: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6,
                      enable_pdl: Any = None) -> None:
    torch.ops.sglbody.fused_add_rmsnorm(input, residual, weight, eps)


def topk_softmax(topk_weights: Tensor, topk_ids: Tensor, gating_output: Tensor, renormalize: bool = False,
                 *args: Any, **kwargs: Any) -> None:
    torch.ops.sglbody.topk_softmax(topk_weights, topk_ids, gating_output, renormalize)


def moe_align_block_size(topk_ids: Tensor, num_experts: int, block_size: int, sorted_ids: Tensor,
                         expert_ids: Tensor, num_tokens_post_pad: Tensor, cumsum: Tensor, *args: Any) -> None:
    torch.ops.sglbody.moe_align_block_size(topk_ids, num_experts, block_size, sorted_ids, expert_ids,
                                           num_tokens_post_pad, cumsum)


def sgl_per_token_group_quant_8bit(x: Tensor, x_q: Tensor, x_s: Tensor, group_size: int, eps: float,
                                   fp8_min: float, fp8_max: float, scale_ue8m0: bool = False,
                                   fuse_silu_and_mul: bool = False, masked_m: Any = None, **kwargs: Any) -> None:
    if fuse_silu_and_mul or masked_m is not None:
        msg = "sglbody: per_token_group_quant_8bit has no fused SiLU or masked variant (this layer asks neither)"
        raise NotImplementedError(msg)
    torch.ops.sglbody.per_token_group_quant_fp8(x, x_q, x_s, group_size, eps, fp8_min, fp8_max, scale_ue8m0)


def weak_ref_tensor(tensor: Any) -> Any:
    """sgl-kernel's wrapper passes what is not a tensor through (a piece's SymInt output, 0.5.20 at 128 tokens)."""
    if not isinstance(tensor, torch.Tensor):
        return tensor
    return tensor.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())


def silu_and_mul(input: Tensor, out: Tensor | None = None, expert_ids: Any = None, expert_step: int = 1) -> Tensor:
    result = torch.ops.sglbody.silu_and_mul(input)  # expert_ids filter expert-parallel rows: none here
    return out.copy_(result) if out is not None else result


def apply_rope_with_cos_sin_cache_inplace(positions: Tensor, q: Tensor, k: Tensor, cos_sin_cache: Tensor,
                                          is_neox: bool, rope_dim: int = 0, fused_args: Any = None) -> None:
    q3 = q.view(q.shape[0], -1, cos_sin_cache.shape[-1]) if q.dim() == 2 else q
    k3 = k.view(k.shape[0], -1, cos_sin_cache.shape[-1]) if k.dim() == 2 else k
    torch.ops.sglbody.rope(positions, q3, k3, cos_sin_cache, is_neox)
    if fused_args is not None:
        torch.ops.sglbody.store_kv(k, fused_args.value, fused_args.k_buffer, fused_args.v_buffer,
                                   fused_args.cache_loc)


def fused_inplace_qknorm(q: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor, eps: float = 1e-6, *,
                         head_dim: int = 0) -> None:
    torch.ops.sglbody.qknorm(q, k, q_weight, k_weight, eps)


@torch.compiler.assume_constant_result  # as SGLang's own check is (dynamo folds it)
def can_use_fused_inplace_qknorm(head_dim: int, dtype: torch.dtype) -> bool:
    return head_dim in (64, 128, 256, 512, 1024)  # SGLang's own condition, less the build


def can_use_store_cache(size: int) -> bool:
    return False


# 0.5.20's own signatures, where they differ from sgl-kernel's and 0.5.11's JIT kernels'
def rmsnorm_0520(input: Tensor, weight: Tensor, out: Tensor | None = None, eps: float = 1e-6) -> None:
    (input if out is None else out).copy_(torch.ops.sglbody.rmsnorm(input, weight, eps))


def fused_add_rmsnorm_0520(input: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6, *,
                           cast_x_before_out_mul: bool = False) -> None:
    if cast_x_before_out_mul:
        msg = "sglbody: fused_add_rmsnorm has no HF-cast variant (this layer asks none)"
        raise NotImplementedError(msg)
    torch.ops.sglbody.fused_add_rmsnorm(input, residual, weight, eps)


def apply_rope_with_cos_sin_cache_inplace_0520(q: Tensor, k: Tensor, cos_sin_cache: Tensor, positions: Tensor, *,
                                               is_neox: bool, rope_dim: int = 0, fused_args: Any = None) -> None:
    apply_rope_with_cos_sin_cache_inplace(positions, q, k, cos_sin_cache, is_neox, rope_dim, fused_args)


def can_use_store_cache_0520(k_row_bytes: int, v_row_bytes: int = 0) -> bool:
    return False


def topk_softmax_0520(topk_weights: Tensor, topk_ids: Tensor, gating_output: Tensor, renormalize: bool = False,
                      moe_softcapping: float = 0.0, correction_bias: Tensor | None = None) -> None:
    if moe_softcapping or correction_bias is not None:
        msg = "sglbody: topk_softmax has no softcapping or correction bias (this layer asks neither)"
        raise NotImplementedError(msg)
    torch.ops.sglbody.topk_softmax(topk_weights, topk_ids, gating_output, renormalize)


def per_token_group_quant_0520(input: Tensor, output_q: Tensor | None = None, output_s: Tensor | None = None,
                               group_size: int = 128, scale_ue8m0: bool = False, fuse_silu_and_mul: bool = False,
                               masked_m: Tensor | None = None, expected_m: int | None = None, *,
                               out_dtype: torch.dtype | None = None, column_major_scales: bool = False) -> Any:
    """The JIT kernel's quantize into the caller's buffers (fp8_kernel's one call: its absmax floor 1e-10 and
    the FP8 range baked in, as the kernel bakes them)."""
    if output_q is None or output_s is None:
        msg = "sglbody: per_token_group_quant writes into the caller's buffers only (as fp8_kernel calls it)"
        raise NotImplementedError(msg)
    limit = torch.finfo(output_q.dtype).max
    sgl_per_token_group_quant_8bit(input, output_q, output_s, group_size, 1e-10, -limit, limit, scale_ue8m0,
                                   fuse_silu_and_mul, masked_m)
    return output_q, output_s


def install(sgl_kernel: types.ModuleType) -> dict[str, list[str]]:
    """The bodies on sgl_kernel's stand-in and on SGLang's JIT kernel modules (imported, not yet bound by
    the layers that import from them), the release's table (0.5.20's where the tree has sglang.kernels.ops);
    returns what was replaced, per module."""
    here = sys.modules[__name__]
    try:
        newer = importlib.util.find_spec("sglang.kernels.ops") is not None
    except ModuleNotFoundError:  # 0.5.11: no sglang.kernels at all
        newer = False
    done: dict[str, list[str]] = {}
    for name, functions in (BODIES_0520 if newer else BODIES).items():
        module = sgl_kernel if name == "sgl_kernel" else importlib.import_module(name)
        for function in functions:
            own = getattr(here, f"{function}_0520", None) if newer and name != "sgl_kernel" else None
            setattr(module, function, own or getattr(here, function))
        done[name] = list(functions)
    return done
