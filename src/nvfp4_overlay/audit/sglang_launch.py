"""Whether an SGLang server's launch line runs a fullgraph region, per release, and what stays raw in it.

A pure function of the SGLang release, its launch arguments and, where known, the GPU and the
model's architecture, over a per-release table read from the SGLang wheels (docs/patches.md
"Which SGLang launch lines compile with fullgraph"): the prefill graph mode by default, the flags
that turn the fullgraph region (the piecewise runner, or the `tc_piecewise` prefill backend) on,
and what turns it off. doctor --sglang-args reads the installed SGLang and asks this.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from ..errors import UsageError

# Models whose piecewise graph SGLang turns off by itself (NSA/DSA attention: GLM-5, DeepSeek-V3.2;
# is_piecewise_cuda_graph_disabled_model, 0.5.10 on).
DSA_MODELS = ("GlmMoeDsaForCausalLM", "DeepseekV32ForCausalLM")


@dataclass(frozen=True)
class Mode:
    """One run of SGLang releases alike: how the fullgraph region is reached there."""

    first: str
    last: str
    default_on: bool
    default_mode: str  # the prefill graph mode a plain launch line gets on a CUDA GPU
    on_flags: tuple[str, ...] = ()  # flags (with their value where one is needed) that turn it on
    off_flags: tuple[str, ...] = ()  # flags that turn it off
    enforce: str | None = None  # keeps it on past SGLang's own switches-off
    auto_off: bool = False  # SGLang turns it off by itself for some models, backends and features
    auto_on_models: tuple[str, ...] = ()  # architectures SGLang switches it on for by itself
    notes: tuple[str, ...] = field(default_factory=tuple)


_AUTO_OFF = ("--enable-torch-compile", "--enable-dp-attention", "--moe-a2a-backend", "--enable-lora", "--pp-size")
MODES: tuple[Mode, ...] = (
    Mode("0.5.8", "0.5.9", False, "CUDA graph for decode only; prefill eager",
         on_flags=("--enable-piecewise-cuda-graph",)),
    Mode("0.5.10", "0.5.13.post1", True, "piecewise CUDA graph (install_torch_compiled(fullgraph=True))",
         off_flags=("--disable-piecewise-cuda-graph",), enforce="--enforce-piecewise-cuda-graph", auto_off=True,
         notes=("--moe-runner-backend flashinfer_trtllm or flashinfer_mxfp4 turns it off for every model but "
                "GPT-OSS unless --enforce-piecewise-cuda-graph (0.5.10-0.5.12); on SM100, auto picks flashinfer_trtllm "
                "for DeepSeek NVFP4",)),
    Mode("0.5.14", "0.5.14", True, "tc_piecewise prefill (torch.compile, fullgraph=True)",
         off_flags=("--cuda-graph-backend-prefill=breakable", "--cuda-graph-backend-prefill=disabled",
                    "--disable-piecewise-cuda-graph"), enforce="--enforce-piecewise-cuda-graph", auto_off=True),
    Mode("0.5.15", "0.5.18", False, "breakable prefill (no torch.compile)",
         on_flags=("--cuda-graph-backend-prefill=tc_piecewise", "--enforce-piecewise-cuda-graph"), auto_off=True),
    Mode("0.5.19", "0.5.19", False, "breakable prefill (no torch.compile)",
         on_flags=("--cuda-graph-backend-prefill=tc_piecewise", "--enforce-piecewise-cuda-graph"), auto_off=True,
         auto_on_models=("MiniMaxM3Sparse",)),
    Mode("0.5.20", "0.5.21", False, "breakable prefill (no torch.compile)",
         on_flags=("--cuda-graph-backend-prefill=tc_piecewise",), auto_off=True, auto_on_models=("MiniMaxM3Sparse",),
         notes=("--enforce-piecewise-cuda-graph is gone",)),
    Mode("0.5.22", "9999", False, "breakable prefill (no torch.compile); tc_piecewise refused",
         notes=("--enable-torch-compile compiles without fullgraph: a raw call is a graph break there, not a crash",)),
)


def mode_of(version: str) -> Mode | None:
    v = Version(Version(version).public)
    return next((m for m in MODES if Version(m.first) <= v <= Version(m.last)), None)


def flags(args: str) -> dict[str, str]:
    """--name value and --name=value pairs of a launch line ('' for a bare flag)."""
    out: dict[str, str] = {}
    try:
        words = shlex.split(args)
    except ValueError as exc:
        msg = f"--sglang-args: {exc} in {args!r}; give the server's launch arguments as one quoted string"
        raise UsageError(msg, item="--sglang-args", expected="the launch arguments, quoted as the shell quotes them",
                         found=args, fix="close every quote inside the arguments") from exc
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        name, eq, value = word.partition("=")
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("--"):
            value = words[i + 1]
        out[name] = value
    return out


def _given(spec: str, given: dict[str, str]) -> bool:
    name, eq, value = spec.partition("=")
    return name in given and (not eq or given[name] == value)


def fullgraph_region(version: str, args: str, *, gpu: str | None = None, arch: str | None = None) -> dict[str, Any]:
    """{"runs": True/False/None (cannot tell), "why": [...]} for this release and launch line."""
    mode = mode_of(version)
    if mode is None:
        return {"runs": None, "why": [f"SGLang {version}: no table row (docs/patches.md)"]}
    given = flags(args)
    why = [f"SGLang {version}: by default {mode.default_mode}"]
    on = mode.default_on or any(_given(f, given) for f in mode.on_flags)
    if not mode.default_on and on:
        why.append("turned on by " + ", ".join(f for f in mode.on_flags if _given(f, given)))
    if not on and arch and any(arch.startswith(m) for m in mode.auto_on_models):
        on = True
        why.append(f"SGLang turns tc_piecewise on by itself for {arch}")
    off = [f for f in mode.off_flags if _given(f, given)]
    if on and off:
        return {"runs": False, "why": [*why, "turned off by " + ", ".join(off)]}
    if on and mode.auto_off and not (mode.enforce and mode.enforce in given):
        reasons = _auto_off(mode, given, gpu, arch)
        if reasons:
            return {"runs": False, "why": [*why, *reasons]}
        if arch is None or gpu is None:
            why.append("unless SGLang turns it off by itself for this model or GPU (name them to know)")
    return {"runs": on, "why": [*why, *mode.notes]}


def _auto_off(mode: Mode, given: dict[str, str], gpu: str | None, arch: str | None) -> list[str]:
    out = [f"SGLang turns it off by itself: {f} given" for f in _AUTO_OFF
           if f in given and given[f] not in ("none", "1")]
    if arch in DSA_MODELS:
        out.append(f"SGLang turns it off by itself for NSA/DSA models ({arch})")
    if mode.first == "0.5.10":
        backend = given.get("--moe-runner-backend", "auto")
        deepseek_auto = backend == "auto" and gpu == "10.0" and (arch or "").startswith("DeepseekV3")
        if (backend in ("flashinfer_trtllm", "flashinfer_mxfp4") or deepseek_auto) and arch != "GptOssForCausalLM":
            picked = "flashinfer_trtllm (auto on SM100 for DeepSeek NVFP4)" if deepseek_auto else backend
            out.append(f"SGLang turns it off by itself: --moe-runner-backend {picked}")
    return out


def raw_left(region: dict[str, Any], calls: list[dict[str, Any]], given: str, gpu: str | None) -> list[str]:
    """The conditional raw FlashInfer calls (sglang_raw) this launch line reaches in its fullgraph region."""
    if not region["runs"]:
        return []
    args = flags(given)
    out = []
    for call in calls:
        if call["routed"]:
            continue
        if call["function"] == "fp8_blockscale_gemm_sm90" and args.get("--fp8-gemm-backend") != "flashinfer_deepgemm":
            continue
        if call["function"] == "fp8_blockscale_gemm_sm90" and gpu not in (None, "9.0"):
            continue
        out.append(f"{call['function']} ({call['condition']})")
    return out
