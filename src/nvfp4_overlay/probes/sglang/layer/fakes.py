"""The fakes a target architecture's whole layer needs beyond the probe's common ones, by name.

- ``EXTRA_FAKES``: sgl-kernel functions (SGLang's CUDA kernels, absent here), set on sgl_kernel's
  stand-in before SGLang imports them: opaque ``sglfake::*`` custom ops whose fakes give the
  kernels' output shapes and dtypes, their CPU bodies a reference.
- ``SGLANG_FAKES``: SGLang's own Triton kernels (Triton is absent here), replaced in their modules
  by opaque ops likewise; none of them calls FlashInfer.
- ``STAND_INS``: packages absent here, made permissive stand-in modules that stay while dynamo
  traces, each given what the layer asks of it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeAlias

import torch

from nvfp4_overlay.probes.sglang.layer.kernels import custom_op

Tensor: TypeAlias = torch.Tensor  # torch is skipped by mypy: Any there


def kimi_k2_moe_fused_gate(module: Any) -> None:
    """sgl-kernel's Kimi-K2 router (384 experts, one group: sigmoid, correction bias, top-k), an opaque
    op of its outputs' shapes: float32 weights and int32 ids, tokens x topk."""
    @custom_op("sglfake::kimi_k2_moe_fused_gate", mutates_args=())
    def gate(gating_output: Tensor, correction_bias: Tensor, topk: int, renormalize: bool,
             routed_scaling_factor: float, apply_on_output: bool) -> tuple[Tensor, Tensor]:
        scores = gating_output.float().sigmoid()
        _, ids = torch.topk(scores + correction_bias.float(), topk, dim=-1)
        weights = scores.gather(1, ids)
        if renormalize:
            weights = weights / weights.sum(-1, keepdim=True)
        return weights * (routed_scaling_factor if apply_on_output else 1.0), ids.to(torch.int32)

    def shapes(gating_output: Tensor, correction_bias: Tensor, topk: int, *rest: Any) -> tuple[Tensor, Tensor]:
        rows = gating_output.shape[0]
        return (gating_output.new_empty((rows, topk), dtype=torch.float32),
                gating_output.new_empty((rows, topk), dtype=torch.int32))

    gate.register_fake(shapes)

    def kimi_k2_moe_fused_gate(input: Tensor, bias: Tensor, topk: int, renormalize: bool = True,
                               routed_scaling_factor: float = 1.0,
                               apply_routed_scaling_factor_on_output: bool = False) -> tuple[Tensor, Tensor]:
        result: tuple[Tensor, Tensor] = torch.ops.sglfake.kimi_k2_moe_fused_gate(
            input, bias, topk, renormalize, float(routed_scaling_factor or 1.0),
            apply_routed_scaling_factor_on_output)
        return result

    module.kimi_k2_moe_fused_gate = kimi_k2_moe_fused_gate


def moe_fused_gate(module: Any) -> None:
    """sgl-kernel's grouped router (DeepSeek-V3's noaux_tc: sigmoid, correction bias, top groups, top-k),
    which 0.5.8-0.5.10 call from sgl_kernel, an opaque op of its outputs' shapes: float32 weights and
    int32 ids, tokens x topk (the fused shared experts' slots included)."""
    @custom_op("sglfake::grouped_moe_fused_gate", mutates_args=())
    def gate(gating_output: Tensor, correction_bias: Tensor, num_expert_group: int, topk_group: int,
             topk: int, routed_scaling_factor: float) -> tuple[Tensor, Tensor]:
        scores = gating_output.float().sigmoid()
        biased = (scores + correction_bias.float()).view(scores.shape[0], num_expert_group, -1)
        groups = biased.topk(2, dim=-1).values.sum(-1).topk(topk_group, dim=-1).indices
        keep = torch.zeros_like(biased[..., 0]).scatter_(1, groups, 1.0).unsqueeze(-1).bool()
        _, ids = biased.masked_fill(~keep, float("-inf")).flatten(1).topk(topk, dim=-1)
        weights = scores.gather(1, ids)
        return weights / weights.sum(-1, keepdim=True) * routed_scaling_factor, ids.to(torch.int32)

    def shapes(gating_output: Tensor, correction_bias: Tensor, num_expert_group: int, topk_group: int,
               topk: int, routed_scaling_factor: float) -> tuple[Tensor, Tensor]:
        rows = gating_output.shape[0]
        return (gating_output.new_empty((rows, topk), dtype=torch.float32),
                gating_output.new_empty((rows, topk), dtype=torch.int32))

    gate.register_fake(shapes)

    def moe_fused_gate(input: Tensor, bias: Tensor, num_expert_group: int, topk_group: int, topk: int,
                       num_fused_shared_experts: int = 0, routed_scaling_factor: float = 1.0,
                       apply_routed_scaling_factor_on_output: bool = False) -> tuple[Tensor, Tensor]:
        result: tuple[Tensor, Tensor] = torch.ops.sglfake.grouped_moe_fused_gate(
            input, bias, num_expert_group, topk_group, topk,
            float(routed_scaling_factor or 1.0) if apply_routed_scaling_factor_on_output else 1.0)
        return result

    module.moe_fused_gate = moe_fused_gate


def gemma_rmsnorm(module: Any) -> None:
    """sgl-kernel's Gemma RMSNorm (weight offset by one) and its fused residual add, as opaque ops."""
    def norm(x: Tensor, w: Tensor, eps: float) -> Tensor:
        return torch.nn.functional.rms_norm(x.float(), (x.shape[-1],), 1.0 + w.float(), eps).to(x.dtype)

    @custom_op("sglfake::gemma_rmsnorm", mutates_args=())
    def rms(x: Tensor, w: Tensor, eps: float) -> Tensor:
        return norm(x, w, eps)

    @custom_op("sglfake::gemma_fused_add_rmsnorm", mutates_args=("x", "residual"))
    def add_rms(x: Tensor, residual: Tensor, w: Tensor, eps: float) -> None:
        residual.add_(x)
        x.copy_(norm(residual, w, eps))

    rms.register_fake(lambda x, w, eps: torch.empty_like(x))
    add_rms.register_fake(lambda x, residual, w, eps: None)

    def gemma_rmsnorm(input: Tensor, weight: Tensor, eps: float = 1e-6, out: Any = None,
                      enable_pdl: Any = None) -> Tensor:
        result: Tensor = torch.ops.sglfake.gemma_rmsnorm(input, weight, eps)
        return out.copy_(result) if out is not None else result

    def gemma_fused_add_rmsnorm(input: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6,
                                enable_pdl: Any = None) -> None:
        torch.ops.sglfake.gemma_fused_add_rmsnorm(input, residual, weight, eps)

    module.gemma_rmsnorm, module.gemma_fused_add_rmsnorm = gemma_rmsnorm, gemma_fused_add_rmsnorm


# Where each release keeps the GatedDeltaNet's Triton kernels: the fused QKVZ/BA split (none in 0.5.9:
# torch code; 0.5.10-0.5.16, then 0.5.17 on) and FLA's gated RMSNorm (0.5.9-0.5.15, then 0.5.16 on)
GDN_SPLIT = ("sglang.jit_kernel.triton.gdn_fused_proj", "sglang.kernels.ops.attention.triton_gdn_fused_proj")
GATED_NORM = ("sglang.srt.layers.attention.fla.layernorm_gated", "sglang.kernels.ops.attention.fla.layernorm_gated")


def gdn_triton(tree_has: Callable[[str], bool]) -> None:
    """Qwen3.5's GatedDeltaNet around its core (which is SGLang's split op): SGLang's own Triton
    kernels, absent here with Triton, as opaque ops of their outputs' shapes, in the modules the
    release keeps them in: the fused QKVZ/BA split (``GDN_SPLIT``) and FLA's gated RMSNorm
    (``GATED_NORM``'s ``layernorm_fn``)."""
    @custom_op("sglfake::gdn_split", mutates_args=())
    def split(qkvz: Tensor, ba: Tensor, heads_qk: int, heads_v: int, head_qk: int,
              head_v: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        rows = qkvz.shape[0]
        return (qkvz.new_zeros((rows, heads_qk * head_qk * 2 + heads_v * head_v)),
                qkvz.new_zeros((rows, heads_v, head_v)), ba.new_zeros((rows, heads_v)), ba.new_zeros((rows, heads_v)))

    @custom_op("sglfake::rms_norm_gated", mutates_args=())
    def gated(x: Tensor, weight: Tensor, z: Tensor, eps: float) -> Tensor:
        normed = torch.nn.functional.rms_norm(x.float(), (x.shape[-1],), weight.float(), eps)
        return (normed * torch.nn.functional.silu(z.float())).to(x.dtype)

    split.register_fake(lambda qkvz, ba, heads_qk, heads_v, head_qk, head_v: (
        qkvz.new_empty((qkvz.shape[0], heads_qk * head_qk * 2 + heads_v * head_v)),
        qkvz.new_empty((qkvz.shape[0], heads_v, head_v)), ba.new_empty((ba.shape[0], heads_v)),
        ba.new_empty((ba.shape[0], heads_v))))
    gated.register_fake(lambda x, weight, z, eps: torch.empty_like(x))

    def fused_split(qkvz: Tensor, ba: Tensor, heads_qk: int, heads_v: int, head_qk: int,
                    head_v: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        result: tuple[Tensor, Tensor, Tensor, Tensor] = torch.ops.sglfake.gdn_split(
            qkvz, ba, int(heads_qk), int(heads_v), head_qk, head_v)
        return result

    def layernorm_fn(x: Tensor, weight: Tensor, bias: Any, z: Any = None, eps: float = 1e-6,
                     *args: Any, **kwargs: Any) -> Tensor:
        result: Tensor = torch.ops.sglfake.rms_norm_gated(x, weight, z, eps)
        return result

    for name in (n for n in GDN_SPLIT if tree_has(n.replace(".", "/") + ".py")):
        proj: Any = importlib.import_module(name)
        proj.fused_qkvzba_split_reshape_cat_contiguous = fused_split
        proj.triton.cdiv = lambda a, b: -(-a // b)  # Triton's stand-in: the head counts its caller divides
    for name in (n for n in GATED_NORM if tree_has(n.replace(".", "/") + ".py")):
        norm: Any = importlib.import_module(name)
        norm.layernorm_fn = layernorm_fn


# Where each release keeps Qwen3.5's fused QK norm + rope + gate kernel (Triton; 0.5.15, then 0.5.16 on)
QK_NORM_ROPE_GATE = ("sglang.srt.layers.fused_qk_rmsnorm_rope_gate",
                     "sglang.kernels.ops.attention.fused_qk_rmsnorm_rope_gate")


def qk_norm_rope_gate(tree_has: Callable[[str], bool]) -> None:
    """Qwen3.5's full attention on CUDA from 0.5.15 (``forward_prepare_cuda_fused``): SGLang's Triton
    ``fused_qk_gemma_rmsnorm_rope_gate`` (QK Gemma RMSNorm, NeoX rope, the gate split from the
    interleaved query; 0.5.19 on: mrope's axis map too), an opaque op of its outputs' shapes; its CPU
    body the norms and the split, the rope left out (the compiled graph is not run)."""
    @custom_op("sglfake::fused_qk_gemma_rmsnorm_rope_gate", mutates_args=())
    def fused(q_gate: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor, eps: float, num_q_heads: int,
              num_kv_heads: int, head_dim: int, has_gate: bool) -> tuple[Tensor, Tensor, Tensor]:
        rows = q_gate.shape[0]
        heads = q_gate.view(rows, num_q_heads, -1)
        q, gate = heads[..., :head_dim], heads[..., head_dim:]
        norm = [torch.nn.functional.rms_norm(x.float(), (head_dim,), 1.0 + w.float(), eps).to(x.dtype)
                for x, w in ((q, q_weight), (k.view(rows, num_kv_heads, head_dim), k_weight))]
        return norm[0].reshape(rows, -1), norm[1].reshape(rows, -1), (gate if has_gate else q).contiguous()

    fused.register_fake(lambda q_gate, k, q_weight, k_weight, eps, num_q_heads, num_kv_heads, head_dim, has_gate: (
        q_gate.new_empty((q_gate.shape[0], num_q_heads * head_dim)), k.new_empty(k.shape),
        q_gate.new_empty((q_gate.shape[0], num_q_heads, head_dim))))

    def fused_qk_gemma_rmsnorm_rope_gate(q_gate: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor,
                                         cos_sin_cache: Tensor, positions: Tensor, eps: float, num_q_heads: int,
                                         num_kv_heads: int, head_dim: int, rotary_dim: int, has_gate: bool = True,
                                         mrope_axis_map: Any = None) -> tuple[Tensor, Tensor, Tensor | None]:
        q, k_out, gate = torch.ops.sglfake.fused_qk_gemma_rmsnorm_rope_gate(
            q_gate, k, q_weight, k_weight, eps, num_q_heads, num_kv_heads, head_dim, has_gate)
        return q, k_out, gate if has_gate else q

    for name in (n for n in QK_NORM_ROPE_GATE if tree_has(n.replace(".", "/") + ".py")):
        module: Any = importlib.import_module(name)
        module.fused_qk_gemma_rmsnorm_rope_gate = fused_qk_gemma_rmsnorm_rope_gate


# Where each release keeps the Triton fused_sigmoid_mul of the attention's output gate (0.5.14-0.5.15,
# 0.5.16, then 0.5.17 on)
SIGMOID_MUL = ("sglang.srt.layers.elementwise", "sglang.kernels.ops.layernorm.elementwise",
               "sglang.kernels.ops.elementwise.elementwise")


def sigmoid_mul(tree_has: Callable[[str], bool]) -> None:
    """Qwen3.5's sigmoid gates on CUDA from 0.5.14, SGLang's Triton kernels as opaque ops whose CPU
    bodies compute them: ``fused_sigmoid_mul`` (the attention output times the sigmoid of its gate) and
    ``fused_gate_sigmoid_mul_add`` (the shared expert's output, gated, added to the routed experts')."""
    @custom_op("sglfake::fused_sigmoid_mul", mutates_args=())
    def fused(x: Tensor, gate: Tensor) -> Tensor:
        return (x.float() * gate.reshape(x.shape).float().sigmoid()).to(x.dtype)

    @custom_op("sglfake::fused_gate_sigmoid_mul_add", mutates_args=("out",))
    def gate_add(hidden: Tensor, weight: Tensor, shared: Tensor, out: Tensor) -> None:
        out.add_(((hidden.float() @ weight.float()).sigmoid().unsqueeze(1) * shared.float()).to(out.dtype))

    fused.register_fake(lambda x, gate: torch.empty_like(x))
    gate_add.register_fake(lambda hidden, weight, shared, out: None)

    def fused_sigmoid_mul(attn_output: Tensor, gate: Tensor, inplace: bool = False) -> Tensor:
        result: Tensor = torch.ops.sglfake.fused_sigmoid_mul(attn_output, gate)
        return attn_output.copy_(result) if inplace else result

    def fused_gate_sigmoid_mul_add(hidden_states: Tensor, gate_weight: Tensor, shared_output: Tensor,
                                   final_hidden_states: Tensor) -> None:
        torch.ops.sglfake.fused_gate_sigmoid_mul_add(hidden_states, gate_weight, shared_output, final_hidden_states)

    for name in (n for n in SIGMOID_MUL if tree_has(n.replace(".", "/") + ".py")):
        module = importlib.import_module(name)
        for fake in (fused_sigmoid_mul, fused_gate_sigmoid_mul_add):
            if hasattr(module, fake.__name__):
                setattr(module, fake.__name__, fake)


# Where the DSA indexer's Triton activation quantize lives (0.5.13-0.5.14 trace it before their split op)
DSA_ACT_QUANT = ("sglang.srt.layers.attention.dsa.triton_kernel", "sglang.srt.layers.attention.nsa.triton_kernel")


def dsa_act_quant(tree_has: Callable[[str], bool]) -> None:
    """The DSA indexer's Triton ``act_quant`` (per-block FP8 of the query, one float32 scale per block), an
    opaque op whose CPU body computes it, where the release traces it (0.5.13-0.5.14: before its
    ``k_cache_and_topk_result`` split)."""
    @custom_op("sglfake::dsa_act_quant", mutates_args=())
    def quant(x: Tensor, block_size: int) -> tuple[Tensor, Tensor]:
        blocks = x.float().reshape(*x.shape[:-1], -1, block_size)
        scale = blocks.abs().amax(-1).clamp(min=1e-4) / 448.0
        y = (blocks / scale.unsqueeze(-1)).reshape(x.shape).to(torch.float8_e4m3fn)
        return y, scale

    quant.register_fake(lambda x, block_size: (torch.empty_like(x, dtype=torch.float8_e4m3fn),
                                               x.new_empty(*x.shape[:-1], x.shape[-1] // block_size,
                                                           dtype=torch.float32)))

    def act_quant(x: Tensor, block_size: int = 128, scale_fmt: Any = None) -> tuple[Tensor, Tensor]:
        result: tuple[Tensor, Tensor] = torch.ops.sglfake.dsa_act_quant(x, block_size)
        return result

    for name in (n for n in DSA_ACT_QUANT if tree_has(n.replace(".", "/") + ".py")):
        module: Any = importlib.import_module(name)
        module.act_quant = act_quant


def flash_mla_metadata(module: Any) -> None:
    """sgl-kernel's FlashMLA scheduler metadata (``sgl_kernel.flash_mla.get_mla_metadata``), which the NSA
    backend computes eagerly for its decode kernel in ``init_forward_metadata``: the kernel's outputs,
    int32 (num_sm_parts, 8) tile-scheduler metadata and (batch + 1) split counts, num_sm_parts as
    get_mla_decoding_metadata derives it (SMs / KV heads / ceil(query tokens per KV head / 64)); zeros."""
    import sys

    from nvfp4_overlay.probes.sglang.sglang_imports import StubModule

    def get_mla_metadata(cache_seqlens: Tensor, num_q_tokens_per_head_k: int, num_heads_k: int,
                         num_heads_q: Any = None, is_fp8_kvcache: bool = False, topk: Any = None) -> tuple[Tensor, Tensor]:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        parts = max(sms // num_heads_k // -(-num_q_tokens_per_head_k // 64), 1)
        return (torch.zeros((parts, 8), dtype=torch.int32, device=cache_seqlens.device),
                torch.zeros(cache_seqlens.shape[0] + 1, dtype=torch.int32, device=cache_seqlens.device))

    flash_mla = StubModule("sgl_kernel.flash_mla")
    flash_mla.get_mla_metadata = get_mla_metadata  # type: ignore[attr-defined]
    sys.modules["sgl_kernel.flash_mla"] = module.flash_mla = flash_mla


SGLANG_FAKES: dict[str, Callable[[Callable[[str], bool]], None]] = {"dsa_act_quant": dsa_act_quant,
                                                                     "gdn_triton": gdn_triton,
                                                                     "qk_norm_rope_gate": qk_norm_rope_gate,
                                                                     "sigmoid_mul": sigmoid_mul}


def deep_gemm(module: Any) -> None:
    """DeepGEMM's stand-in (the DSA indexer's logits kernels, absent here): the SM count it asks at build."""
    module.get_num_sms = lambda: torch.cuda.get_device_properties(0).multi_processor_count


def torchada(module: Any) -> None:
    """torchada (MUSA's CUDA shim, absent on a CUDA server), imported: 0.5.20's is_musa imports it inside
    a try, and dynamo ignores is_musa's lru_cache, tracing the import; absent, dynamo stops at it
    ("Import failure"). With it importable, is_musa answers False (torch.version has no musa)."""


STAND_INS: dict[str, Callable[[Any], None]] = {"deep_gemm": deep_gemm, "torchada": torchada}
EXTRA_FAKES: dict[str, Callable[[Any], None]] = {"kimi_k2_moe_fused_gate": kimi_k2_moe_fused_gate,
                                                 "moe_fused_gate": moe_fused_gate,
                                                 "flash_mla_metadata": flash_mla_metadata,
                                                 "gemma_rmsnorm": gemma_rmsnorm}
