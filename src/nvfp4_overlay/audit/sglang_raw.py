"""The FlashInfer calls SGLang makes in compiled code outside the audited regions, each with its condition.

The region audit (patches/sglang/audit-regions.json) covers the FP4/FP8 quantizers and the MoE entry
points; these calls sit in compiled code it does not hold, reached only on some GPUs, with some
flags or models, read from the SGLang wheels. `list` and `doctor` say for each whether the installed
(or the stack's) FlashInfer routes it, so that "none left" never stands without its scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ConditionalCall:
    """A FlashInfer function SGLang calls inside a compiled region when `condition` holds."""

    function: str
    condition: str
    where: str  # the SGLang file and releases it was read in


CONDITIONAL: tuple[ConditionalCall, ...] = (
    ConditionalCall("fp8_blockscale_gemm_sm90",
                    "SM90 with --fp8-gemm-backend flashinfer_deepgemm, FP8 block-scale models (DeepSeek FP8)",
                    "sglang/srt/layers/quantization/fp8_utils.py, 0.5.11 and 0.5.20"),
    ConditionalCall("tinygemm_bf16", "GPT-OSS (forward_dwdp)", "sglang/srt/models/gpt_oss.py, 0.5.20"),
)

# What neither the region audit nor these calls cover: SGLang's own custom ops keep top-k, the
# all-reduce fusion, the router GEMM and the MoE runners out of the graph, and no check traces the rest.
NOT_TRACED = ("attention preparation, the communicator, rope: not traced by these checks (SGLang's own "
              "custom ops keep top-k, the all-reduce fusion, the router GEMM and the MoE runners opaque)")


def conditional_calls(routes: Any) -> list[dict[str, Any]]:
    """Each conditional call with whether the FlashInfer whose routes these are (read_routes; None:
    an upstream FlashInfer) routes it."""
    routed = set(routes or ())
    return [{"function": c.function, "condition": c.condition, "where": c.where, "routed": c.function in routed}
            for c in CONDITIONAL]


def qualified(regions_said: str, calls: list[dict[str, Any]]) -> str:
    """The one-line answer of doctor: the audited regions' verdict, then each conditional call."""
    return f"{regions_said} in the audited regions; outside them: {_calls(calls)}"


def outside(calls: list[dict[str, Any]]) -> str:
    """list's sentence, once under its stacks: each conditional call, then what these checks do not trace."""
    return f"For every stack, outside the audited regions: {_calls(calls)}"


def _calls(calls: list[dict[str, Any]]) -> str:
    said = [f"{c['function']} ({c['condition']}): {'routed' if c['routed'] else 'raw'}" for c in calls]
    return "; ".join(said) + f"; {NOT_TRACED}"
