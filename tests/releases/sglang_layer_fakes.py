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
from typing import Any

import torch

Tensor = torch.Tensor


def kimi_k2_moe_fused_gate(module: Any) -> None:
    """sgl-kernel's Kimi-K2 router (384 experts, one group: sigmoid, correction bias, top-k), an opaque
    op of its outputs' shapes: float32 weights and int32 ids, tokens x topk."""
    @torch.library.custom_op("sglfake::kimi_k2_moe_fused_gate", mutates_args=())
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


def gemma_rmsnorm(module: Any) -> None:
    """sgl-kernel's Gemma RMSNorm (weight offset by one) and its fused residual add, as opaque ops."""
    def norm(x: Tensor, w: Tensor, eps: float) -> Tensor:
        return torch.nn.functional.rms_norm(x.float(), (x.shape[-1],), 1.0 + w.float(), eps).to(x.dtype)

    @torch.library.custom_op("sglfake::gemma_rmsnorm", mutates_args=())
    def rms(x: Tensor, w: Tensor, eps: float) -> Tensor:
        return norm(x, w, eps)

    @torch.library.custom_op("sglfake::gemma_fused_add_rmsnorm", mutates_args=("x", "residual"))
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


def gdn_triton(tree_has: Callable[[str], bool]) -> None:
    """Qwen3.5's GatedDeltaNet around its core (which is SGLang's split op): SGLang's own Triton
    kernels, absent here with Triton, as opaque ops of their outputs' shapes: the fused QKVZ/BA split
    (``jit_kernel/triton/gdn_fused_proj.py``) and FLA's gated RMSNorm (``layernorm_gated.layernorm_fn``)."""
    @torch.library.custom_op("sglfake::gdn_split", mutates_args=())
    def split(qkvz: Tensor, ba: Tensor, heads_qk: int, heads_v: int, head_qk: int,
              head_v: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        rows = qkvz.shape[0]
        return (qkvz.new_zeros((rows, heads_qk * head_qk * 2 + heads_v * head_v)),
                qkvz.new_zeros((rows, heads_v, head_v)), ba.new_zeros((rows, heads_v)), ba.new_zeros((rows, heads_v)))

    @torch.library.custom_op("sglfake::rms_norm_gated", mutates_args=())
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

    proj = importlib.import_module("sglang.jit_kernel.triton.gdn_fused_proj")
    proj.fused_qkvzba_split_reshape_cat_contiguous = fused_split
    proj.triton.cdiv = lambda a, b: -(-a // b)  # Triton's stand-in: the head counts its caller divides
    importlib.import_module("sglang.srt.layers.attention.fla.layernorm_gated").layernorm_fn = layernorm_fn


SGLANG_FAKES: dict[str, Callable[[Callable[[str], bool]], None]] = {"gdn_triton": gdn_triton}


def deep_gemm(module: Any) -> None:
    """DeepGEMM's stand-in (the DSA indexer's logits kernels, absent here): the SM count it asks at build."""
    module.get_num_sms = lambda: torch.cuda.get_device_properties(0).multi_processor_count


def torchada(module: Any) -> None:
    """torchada (MUSA's CUDA shim, absent on a CUDA server), imported: 0.5.20's is_musa imports it inside
    a try, and dynamo ignores is_musa's lru_cache, tracing the import; absent, dynamo stops at it
    ("Import failure"). With it importable, is_musa answers False (torch.version has no musa)."""


STAND_INS: dict[str, Callable[[Any], None]] = {"deep_gemm": deep_gemm, "torchada": torchada}
EXTRA_FAKES: dict[str, Callable[[Any], None]] = {"kimi_k2_moe_fused_gate": kimi_k2_moe_fused_gate,
                                                 "gemma_rmsnorm": gemma_rmsnorm}
