"""The serving-API audit's rules, written from scans of the carried releases: pure.

Names with an FP4/FP8/quantization marker (api_audit.MARKERS) get a rule each, by exact name; the
others a rule per module family. The verdict and the reason come from CATEGORIES below, the first
pattern that matches the function's full name; a name no category explains is refused (classify it
here by hand). `nvfp4-overlay audit-api` writes patches/flashinfer-python/audit-serving-api.json with
it and `audit-api --check` holds the committed audit to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ConfigError
from ..probes.flashinfer.tables import compile_cases
from .api_audit import MARKERS

__all__ = ["CATEGORIES", "SGLANG_RUNNERS", "is_routed", "rules", "verdict"]

OUT = "out of scope"
# What SGLang's MoE runners (moe_runner/flashinfer_trtllm.py and flashinfer_cutlass.py, 0.5.12-0.5.23;
# quantization/modelopt_quant.py before 0.5.15) call of FlashInfer besides the routed entry points:
# a rule each, by exact name, saying why it is not routed.
SGLANG_RUNNERS = {
    "trtllm_bf16_moe": "BF16 MoE: SGLang's flashinfer_trtllm bf16 runner (fused_experts_none_to_flashinfer_trtllm_bf16), "
                       "not the FP4 path; breaks fullgraph upstream like any loader",
    "trtllm_bf16_routed_moe": "BF16 MoE: SGLang's flashinfer_trtllm bf16 runner (fused_experts_none_to_flashinfer_trtllm_bf16), "
                              "not the FP4 path; breaks fullgraph upstream like any loader",
    "trtllm_fp8_block_scale_moe": "FP8 MoE: SGLang's flashinfer_trtllm fp8 runner (fused_experts_none_to_flashinfer_trtllm_fp8, "
                                  "0.5.19 on), not the FP4 path; breaks fullgraph upstream like any loader",
    "trtllm_fp8_block_scale_routed_moe": "FP8 MoE: SGLang's flashinfer_trtllm fp8 runner (0.5.23), not the FP4 path; breaks "
                                         "fullgraph upstream like any loader",
    "block_scale_interleave": "weight preparation: SGLang's flashinfer_trtllm runner calls it from "
                              "align_mxfp8_moe_weights_for_flashinfer_trtllm at weight-loading time, outside the compiled region",
    "AutoTuner": "the AutoTuner class: routed entry points choose tactics when their op runs; SGLang 0.5.23's flashinfer_cutlass "
                 "runner reads AutoTuner.get().is_tuning_mode in its SM120 non-gated NVFP4 path (_flashinfer_autotune_active), "
                 "which traces once the singleton exists (a startup autotune or any eager call made it) and fails on its "
                 "class lock before: SGLang's code, not a kernel entry point",
}
# Routed functions that are not FP4: why SGLang needs them routed, by exact name.
ROUTED_WHY = {
    "fp8_blockscale_gemm_sm90": (
        "routed to one opaque op while dynamo traces (entries.py): SGLang's FP8 block-scale linear layer calls it "
        "inside the compiled region (layers/quantization/fp8_utils.py, 0.5.11 and 0.5.20; SM90 with "
        "--fp8-gemm-backend flashinfer_deepgemm), where it breaks fullgraph in the JIT loader"),
    "tinygemm_bf16": (
        "routed to one opaque op while dynamo traces (entries.py): SGLang 0.5.20's GPT-OSS forward_dwdp "
        "(models/gpt_oss.py) calls it inside the compiled region, where it breaks fullgraph in the JIT loader"),
}
# Opt-in modules (experimental, generated-program Cake kernels, batch-invariant variants): a function
# there is another function than a routed one of the same name (0.7.1's cake_sampling).
OPT_IN = r"\.(experimental|cake|cake_\w+|prims_ts|batch_invariant)(\.|$)"
# FlashInfer's own compile list (probes/flashinfer/tables/compile_cases.py), routed by the overlay's compile_list.py.
COMPILE_LIST = frozenset(name.rsplit(".", 1)[1] for name in compile_cases.every_name())
COMPILE_LIST_WHY = ("routed to one opaque op while dynamo traces (compile_list.py): FlashInfer's own compile list, "
                    "docs/compile-list.md")
CATEGORIES: list[tuple[str, str, str]] = [
    (r"\.(jit|aot|artifacts|compilation_context|__main__|collect_env|jit_cache)(\.|$)", OUT,
     "build machinery: JIT spec generators, AOT packaging, artifact download; not called in a model's forward"),
    (r"\.autotuner\.", OUT, "the AutoTuner itself: tactic selection runs inside the entry points (at op run time for routed ones)"),
    (OPT_IN, OUT,
     "experimental or generated-program (Cake) kernels, and batch-invariant variants: opt-in paths outside the NVFP4 serving stack"),
    (r"\.(comm|moe_ep|dllm|nvshmem)(\.|$)", OUT,
     "communication (all-reduce, all-to-all, expert parallel): SGLang runs it outside the compiled region or in its own ops"),
    (r"\.(attention|decode|prefill|mla|cascade|pod|sparse|xqa|cudnn|sdsa|msa_ops|gqa_train|fmha\w*|page|rope|concat_ops)(\.|$)", OUT,
     "attention and KV-cache kernels (BF16/FP8): SGLang wraps its attention backends in its own custom ops, the piecewise graph's split points"),
    (r"\.(sampling|logits_processor|topk|topk_varlen)(\.|$)", OUT, "sampling: runs outside the compiled model region"),
    (r"\.(mamba|gdn\w*|kda\w*|mhc|diffusion_ops|chunked_lm_head|qwen_3_\d_block|cute_dsl)(\.|$)", OUT,
     "model-specific or CuTe-DSL kernels outside the NVFP4 GEMM/MoE/quantize path (CuTe DSL compiles without the JIT loader)"),
    (r"\.norm(\.|$)", OUT, "BF16 norms: not quantizing; SGLang wraps its norms or calls them outside fullgraph regions"),
    (r"\.activation\.", OUT, "BF16 activations: not quantizing"),
    (r"\.(utils|tllm_utils|api_logging|testing|trtllm_low_latency_gemm|grouped_mm|deep_gemm|routergemm\w*|tgv\w*)(\.|$)", OUT,
     "helpers, logging, or GEMMs that are not FP4 (BF16/FP8 DeepGEMM, router GEMM, low-latency BF16/FP8 GEMM)"),
    (r"fp8|mxfp8|int8|int4|w4a8|w4a16|mxint4", OUT,
     "FP8/INT quantization or GEMM/MoE: outside the NVFP4 path this project routes (breaks fullgraph upstream like any loader)"),
    (r"\.(gemm|fused_moe)(\.|$)", OUT,
     "BF16/FP8 GEMM and MoE machinery (module getters, runners, wrappers) or FP4 helpers not called in a forward pass"),
    (r"(dequant|interleave|shuffle|block_scale|packbits|e2m1|get_\w*module|_sf_)", OUT,
     "weight preparation, dequantization or module getters: run at load time or in tests, not in a compiled forward"),
    (r"fp4|nvfp|mxfp4|quant", OUT,
     "other FP4 quantizers and helpers no SGLang stack calls inside a compiled region (listed so a new one is noticed)"),
    (r"\.(\w+)\.", OUT, "a kernel family outside the FP4 serving path"),
]


def is_routed(key: str, routed: Sequence[str]) -> bool:
    """Whether the overlay's routing takes the function (module.name): its verdict is "routed" (an opt-in
    module's namesake stays upstream's)."""
    return key.rsplit(".", 1)[1] in routed and not re.search(OPT_IN, key)


def verdict(key: str, routed: Sequence[str]) -> tuple[str, str]:
    """The verdict and the reason for one function (module.name), or ConfigError when no category explains it."""
    name = key.rsplit(".", 1)[1]
    if is_routed(key, routed):
        default = COMPILE_LIST_WHY if name in COMPILE_LIST else "routed to one opaque op while dynamo traces (entries.py)"
        return "routed", ROUTED_WHY.get(name, default)
    if name in SGLANG_RUNNERS:
        return OUT, SGLANG_RUNNERS[name]
    for pattern, answer, why in CATEGORIES:
        if re.search(pattern, key):
            return answer, why
    msg = f"{key}: no category of audit/api_rules.py explains it"
    raise ConfigError(msg, item=key, expected="a category that explains it", found="none",
                      fix="add a rule for it to SGLANG_RUNNERS or CATEGORIES in src/nvfp4_overlay/audit/api_rules.py")


def rules(keys: Iterable[str], routed: Sequence[str]) -> list[dict[str, Any]]:
    """The audit's rules for the functions (module.name) the scans found, in the committed order."""
    out: list[dict[str, Any]] = []
    families: dict[tuple[str, str], None] = {}
    for key in sorted(set(keys)):
        module, name = key.rsplit(".", 1)
        answer, why = verdict(key, routed)
        if any(m in name.lower() for m in MARKERS) or answer != OUT or name in SGLANG_RUNNERS:
            out.append({"module": module, "name": name, "verdict": answer, "why": why})
        else:
            family = ".".join(module.split(".")[:2])
            families.setdefault((family, why), None)
    for (family, why) in families:
        out.append({"module": family if family == "flashinfer" else f"{family}*", "name": "*",
                    "verdict": OUT, "why": why})
    return out
