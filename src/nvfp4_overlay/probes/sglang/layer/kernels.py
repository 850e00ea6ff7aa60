"""The common fakes of the layer probe: sgl-kernel's functions every decoder layer calls, and SGLang's Triton router.

sgl-kernel (SGLang's CUDA kernels) is not installable on a CPU, Triton is absent: each kernel a layer
calls becomes an opaque ``sglfake::*`` custom op whose fake gives the kernel's output shapes and dtypes
and whose CPU body computes the reference or nothing (the compiled graph is not run). The fakes a
model needs beyond these: fakes.py.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeAlias

import torch

Tensor: TypeAlias = torch.Tensor  # torch is skipped by mypy: Any there


def custom_op(name: str, mutates_args: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Any]:
    """torch.library.custom_op, typed: mypy skips torch, and its untyped decorator would untype each fake."""
    made: Callable[[Callable[..., Any]], Any] = torch.library.custom_op(name, mutates_args=mutates_args)
    return made


def sgl_kernel_fakes(module: Any) -> None:
    """sgl-kernel's functions the layer calls, as opaque custom ops with fakes, on the stand-in module."""
    _registered()
    ops = torch.ops.sglfake

    def rmsnorm(input: Tensor, weight: Tensor, eps: float = 1e-6, out: Any = None, enable_pdl: Any = None) -> Tensor:
        result = ops.rmsnorm(input, weight, eps)
        return out.copy_(result) if out is not None else result

    def fused_add_rmsnorm(input: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6,
                          enable_pdl: Any = None) -> None:
        ops.fused_add_rmsnorm(input, residual, weight, eps)

    def silu_and_mul(input: Tensor, out: Any = None, *args: Any, **kwargs: Any) -> Tensor:
        result = ops.silu_and_mul(input)
        return out.copy_(result) if out is not None else result

    def rotary_embedding(positions: Tensor, query: Tensor, key: Tensor, head_size: int, cos_sin_cache: Tensor,
                         is_neox: bool) -> None:
        ops.rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)

    def apply_rope_with_cos_sin_cache_inplace(positions: Tensor, query: Tensor, key: Tensor, head_size: int,
                                              cos_sin_cache: Tensor, is_neox: bool = True, **kwargs: Any) -> None:
        ops.rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)  # 0.5.8's rope

    def topk_softmax(topk_weights: Tensor, topk_ids: Tensor, gating_output: Tensor, renormalize: bool = False,
                     *args: Any, **kwargs: Any) -> None:
        ops.topk_softmax(topk_weights, topk_ids, gating_output, renormalize)

    for fn in (rmsnorm, fused_add_rmsnorm, silu_and_mul, rotary_embedding, apply_rope_with_cos_sin_cache_inplace,
               topk_softmax):
        setattr(module, fn.__name__, fn)


def _registered() -> None:
    """The sglfake ops of sgl-kernel's functions, with their fakes: their CPU bodies compute the reference
    or nothing (the compiled graph is not run)."""
    @custom_op("sglfake::rmsnorm", mutates_args=())
    def _rms(x: Tensor, w: Tensor, eps: float) -> Tensor:
        return torch.nn.functional.rms_norm(x.float(), (x.shape[-1],), w.float(), eps).to(x.dtype)

    @custom_op("sglfake::fused_add_rmsnorm", mutates_args=("x", "residual"))
    def _add_rms(x: Tensor, residual: Tensor, w: Tensor, eps: float) -> None:
        residual.add_(x)
        x.copy_(torch.nn.functional.rms_norm(residual.float(), (x.shape[-1],), w.float(), eps).to(x.dtype))

    @custom_op("sglfake::silu_and_mul", mutates_args=())
    def _silu_and_mul(x: Tensor) -> Tensor:
        half = x.shape[-1] // 2
        return torch.nn.functional.silu(x[..., :half]) * x[..., half:]

    @custom_op("sglfake::rotary_embedding", mutates_args=("query", "key"))
    def _rope(positions: Tensor, query: Tensor, key: Tensor, head_size: int, cos_sin_cache: Tensor,
              is_neox: bool) -> None:
        return None

    @custom_op("sglfake::topk_softmax", mutates_args=("topk_weights", "topk_ids"))
    def _topk_softmax(topk_weights: Tensor, topk_ids: Tensor, gating_output: Tensor, renormalize: bool) -> None:
        weights, ids = torch.topk(gating_output.float().softmax(-1), topk_weights.shape[-1], dim=-1)
        topk_weights.copy_(weights)
        topk_ids.copy_(ids)

    _rms.register_fake(lambda x, w, eps: torch.empty_like(x))
    _add_rms.register_fake(lambda x, residual, w, eps: None)
    _silu_and_mul.register_fake(lambda x: x.new_empty((*x.shape[:-1], x.shape[-1] // 2)))
    _rope.register_fake(lambda positions, query, key, head_size, cos_sin_cache, is_neox: None)
    _topk_softmax.register_fake(lambda topk_weights, topk_ids, gating_output, renormalize: None)


# SGLang's triton router (0.5.15 on, the CUDA top-k of a softmax MoE gate): where each release keeps it
MOE_FUSED_GATE = ("sglang.jit_kernel.moe_fused_gate", "sglang.kernels.ops.moe.moe_fused_gate")


def jit_topk_fake(ctx: Any) -> None:
    """SGLang's triton router `moe_fused_gate` (triton absent here) as an opaque custom op with a fake, on
    the module the top-k imports it from while traced: the softmax top-k, computed on the CPU."""
    @custom_op("sglfake::moe_fused_gate", mutates_args=())
    def _gate(scores: Tensor, topk: int, renormalize: bool) -> tuple[Tensor, Tensor]:
        weights, ids = torch.topk(scores.float().softmax(-1), topk, dim=-1)
        return (weights / weights.sum(-1, keepdim=True) if renormalize else weights), ids.to(torch.int32)

    _gate.register_fake(lambda scores, topk, renormalize: (
        scores.new_empty((scores.shape[0], topk), dtype=torch.float32),
        scores.new_empty((scores.shape[0], topk), dtype=torch.int32)))

    def moe_fused_gate(scores: Tensor, bias: Any, topk: int, scoring_func: str = "sigmoid",
                       num_fused_shared_experts: int = 0, renormalize: bool = True, *args: Any,
                       **kwargs: Any) -> tuple[Tensor, Tensor]:
        return torch.ops.sglfake.moe_fused_gate(scores, topk, renormalize)  # type: ignore[no-any-return]

    for name in MOE_FUSED_GATE:
        if ctx.has(name.replace(".", "/") + ".py"):
            module: Any = importlib.import_module(name)
            module.moe_fused_gate = moe_fused_gate
