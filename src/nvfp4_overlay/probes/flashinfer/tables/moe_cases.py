"""The trace ladder's calls of the serving MoE entry points: the trtllm-gen FP4 pair and cutlass_fused_moe.

Tables of probes/flashinfer/tables/cases.py (probes/flashinfer/tables/rows.py's Row, the same contract: each row names the values it sets apart from the
defaults, from the release whose signature takes them); cases.py holds them in its _TABLES. The
shapes are small and the values random: on a CPU the kernels record their arguments and compute
nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from nvfp4_overlay.probes.flashinfer.tables.rows import Row, bf16, u8

_EXPERTS, _TOP_K, _HIDDEN, _INTER = 8, 2, 256, 128


def _moe(tokens: int, routed: bool, pair: bool = False) -> dict[str, Callable[[Any], Any] | Any]:
    """The keyword arguments of a trtllm-gen FP4 MoE call: (tokens, hidden/2) packed activations,
    FP4 weights of 8 experts, top-2 routing from logits (or packed/precomputed ids)."""
    def ids(torch: Any) -> Any:
        picked = torch.stack([torch.randperm(_EXPERTS)[:_TOP_K] for _ in range(tokens)]).to(torch.int32)
        if pair:
            return picked, torch.rand(tokens, _TOP_K, dtype=torch.bfloat16)
        return (torch.randint(1, 1 << 14, (tokens, _TOP_K), dtype=torch.int32) << 16) | picked

    def f8(*shape: int) -> Callable[[Any], Any]:
        return lambda torch: u8(*shape)(torch).view(torch.float8_e4m3fn)

    def scalars(torch: Any) -> Any:
        return torch.ones(_EXPERTS)

    args: dict[str, Any] = {
        "routing_bias": None, "hidden_states": u8(tokens, _HIDDEN // 2), "hidden_states_scale": f8(tokens, _HIDDEN // 16),
        "gemm1_weights": u8(_EXPERTS, 2 * _INTER, _HIDDEN // 2), "gemm1_weights_scale": f8(_EXPERTS, 2 * _INTER, _HIDDEN // 16),
        "gemm1_bias": None, "gemm1_alpha": None, "gemm1_beta": None, "gemm1_clamp_limit": None,
        "gemm2_weights": u8(_EXPERTS, _HIDDEN, _INTER // 2), "gemm2_weights_scale": f8(_EXPERTS, _HIDDEN, _INTER // 16),
        "gemm2_bias": None, "output1_scale_scalar": scalars, "output1_scale_gate_scalar": scalars,
        "output2_scale_scalar": scalars, "num_experts": _EXPERTS, "top_k": _TOP_K, "n_group": None, "topk_group": None,
        "intermediate_size": _INTER, "local_expert_offset": 0, "local_num_experts": _EXPERTS,
        "routed_scaling_factor": None, "routing_method_type": 1,
    }
    if routed:
        args["topk_ids"] = ids
    else:
        args["routing_logits"] = lambda torch: torch.randn(tokens, _EXPERTS, dtype=torch.bfloat16)
    return args


def _none(torch: Any) -> tuple[Any, ...]:
    return ()


def _moe_rows(routed: bool, sf_layout: Any) -> list[Row]:
    """The finalized trtllm-gen FP4 MoE (do_finalize=False, a data-dependent shape, stays upstream's
    path and has no row): each row sets apart a value that must reach the kernel, or that upstream
    refuses (the compiled call must refuse it too)."""
    out = {"output": lambda torch: torch.empty(40, _HIDDEN, dtype=torch.bfloat16)}
    deepseek = {"routing_method_type": 2, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
                "routing_bias": lambda torch: torch.randn(_EXPERTS, dtype=torch.bfloat16)}
    rows = [
        Row("finalize", _moe(40, routed), _none),
        Row("output-given", {**_moe(40, routed), **out}, _none),
        Row("decode-pdl", {**_moe(1, routed), "enable_pdl": True}, _none),
        Row("tune-max-512", {**_moe(40, routed), "tune_max_num_tokens": 512}, _none),
        Row("deepseek-routing", {**_moe(40, routed), **deepseek}, _none),
        Row("geglu", {**_moe(40, routed), "gated_act_type": 1}, _none, until="0.6.3"),
        Row("relu2", {**_moe(40, routed), "activation_type": 6}, _none, since="0.6.3"),
        # upstream refuses an output that is not bf16: so must the compiled call (when it runs)
        Row("output-fp16", {**_moe(40, routed), "output": lambda torch: torch.empty(40, _HIDDEN, dtype=torch.float16)},
            _none),
        Row("valid-hidden-200", {**_moe(40, routed), "valid_hidden_size": 200}, _none, since="0.7.0"),
        Row("scale-layout-linear", {**_moe(40, routed), "hidden_states_scale_layout":
                                    getattr(sf_layout, "layout_linear", None)}, _none, since="0.7.0"),
        Row("4over6-off", {**_moe(40, routed), "nvfp4_4over6": None}, _none, since="0.7.4"),
    ]
    if routed:
        rows.append(Row("precomputed-pair", _moe(40, routed, pair=True), _none, since="0.6.12"))
    return rows


def _cutlass(mode: str, tokens: int = 40) -> dict[str, Any]:
    """The keyword arguments of a cutlass_fused_moe call as SGLang's flashinfer_cutlass runner makes
    them: top-2 of 8 experts, hidden 256, intermediate 128, gated (fc1 is 2 * 128 wide), per mode:
    "nvfp4" (bf16 input, int64-packed FP4 weights, six scales: global, block scales seen as int32,
    alpha per GEMM), "nvfp4-prequant" (packed FP4 input with its scale factors), "fp8" (per-tensor
    FP8, four scales), "bf16" (quant_scales=None), "mxfp4-w4a16" (SM90's MXFP4 weights with bf16 input,
    biases and SwiGLU parameters, group scaling)."""
    e, h, i = _EXPERTS, _HIDDEN, _INTER

    def scales(*shape: int) -> Callable[[Any], Any]:  # FP8 block scales, seen as int32 as SGLang does
        return lambda torch: u8(*shape)(torch).view(torch.float8_e4m3fn).view(torch.int32)

    def weights(mode: str) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
        if mode.startswith("nvfp4"):
            return (lambda torch: u8(e, 2 * i, h // 2)(torch).view(torch.int64),
                    lambda torch: u8(e, h, i // 2)(torch).view(torch.int64))
        if mode == "fp8":
            return (lambda torch: u8(e, 2 * i, h)(torch).view(torch.float8_e4m3fn),
                    lambda torch: u8(e, h, i)(torch).view(torch.float8_e4m3fn))
        if mode == "bf16":
            return bf16(e, 2 * i, h), bf16(e, h, i)
        return u8(e, 2 * i, h // 2), u8(e, h, i // 2)  # mxfp4-w4a16

    def quant_scales(torch: Any) -> list[Any] | None:
        if mode.startswith("nvfp4"):
            return [torch.ones(1), scales(e, 2 * i, h // 16)(torch), torch.ones(e),
                    torch.ones(1), scales(e, h, i // 16)(torch), torch.ones(e)]
        if mode == "fp8":
            return [torch.ones(e), torch.ones(1), torch.ones(e), torch.ones(1)]
        if mode == "bf16":
            return None  # SGLang's bf16 quant info carries no scales
        return [scales(e, 2 * i, h // 32)(torch), scales(e, h, i // 32)(torch)]

    fc1, fc2 = weights(mode)
    args: dict[str, Any] = {
        "token_selected_experts": lambda torch: torch.stack(
            [torch.randperm(e)[:_TOP_K] for _ in range(tokens)]).to(torch.int32),
        "token_final_scales": lambda torch: torch.rand(tokens, _TOP_K),
        "fc1_expert_weights": fc1, "fc2_expert_weights": fc2,
        "output_dtype": lambda torch: torch.bfloat16, "quant_scales": quant_scales,
    }
    if mode == "nvfp4-prequant":
        args["input"] = u8(tokens, h // 2)
        args["input_sf"] = u8(tokens * h // 16)
    elif mode == "fp8":
        args["input"] = lambda torch: u8(tokens, h)(torch).view(torch.float8_e4m3fn)
    else:
        args["input"] = bf16(tokens, h)
    if mode == "mxfp4-w4a16":
        args.update(use_w4_group_scaling=True,
                    fc1_expert_biases=lambda torch: torch.zeros(e, 2 * i), fc2_expert_biases=lambda torch: torch.zeros(e, h),
                    swiglu_alpha=lambda torch: torch.ones(e), swiglu_beta=lambda torch: torch.ones(e),
                    swiglu_limit=lambda torch: torch.ones(e))
    return args


def _cutlass_fused_moe(sf_layout: Any) -> list[Row]:
    """cutlass_fused_moe, routed unless min_latency_mode (upstream refuses it) or backend="cake"."""
    out = {"output": lambda torch: torch.empty(40, _HIDDEN, dtype=torch.bfloat16)}

    def activation(name: str) -> Callable[[Any], Any]:
        # the release's own ActivationType member, as SGLang passes it
        return lambda torch: getattr(sys.modules["flashinfer.fused_moe.core"].ActivationType, name)

    return [
        Row("nvfp4", _cutlass("nvfp4"), _none),
        Row("nvfp4-output-given", {**_cutlass("nvfp4"), **out}, _none),
        Row("nvfp4-prequant-ep2", {**_cutlass("nvfp4-prequant"), **out, "ep_size": 2, "ep_rank": 1}, _none),
        Row("fp8-tp2", {**_cutlass("fp8"), "tp_size": 2, "tp_rank": 1}, _none),
        Row("bf16-decode-pdl", {**_cutlass("bf16", tokens=1), "enable_pdl": True}, _none),
        Row("mxfp4-w4a16", {**_cutlass("mxfp4-w4a16"), "tune_max_num_tokens": 64}, _none),
        Row("relu2", {**_cutlass("nvfp4"), "activation_type": activation("Relu2")}, _none),
        Row("unswizzled-sf", {**_cutlass("nvfp4-prequant"), "swizzled_input_sf": False}, _none, since="0.6.8"),
        Row("unfused-finalize", {**_cutlass("nvfp4"), "use_fused_finalize": False}, _none, since="0.6.15"),
        Row("profile-ids", {**_cutlass("nvfp4"), "profile_ids": [0, 1]}, _none, since="0.6.16"),
        Row("4over6-off", {**_cutlass("nvfp4"), "nvfp4_4over6": None}, _none, since="0.7.4"),
        # upstream refuses these: so must the compiled call
        Row("output-fp16", {**_cutlass("nvfp4"), "output": lambda torch: torch.empty(40, _HIDDEN, dtype=torch.float16)},
            _none),
        Row("min-latency", {**_cutlass("nvfp4"), "min_latency_mode": True}, _none),
    ]


TABLES: dict[str, Callable[[Any], list[Row]]] = {
    "trtllm_fp4_block_scale_moe": lambda sf_layout: _moe_rows(False, sf_layout),
    "trtllm_fp4_block_scale_routed_moe": lambda sf_layout: _moe_rows(True, sf_layout),
    "cutlass_fused_moe": _cutlass_fused_moe,
}
