"""Launch lines as the SGLang launch-line probe takes them, the matrix of them per release, and its answers.

What a launch line does is SGLang's to say (probes/sglang/sglang_launch.py runs the release's own parser,
ServerArgs and the model runner's gate in a child interpreter); this module only shapes the question
(the words of the line, the model's config.json, the GPU) and reads the answer: the graph backends
SGLang chose, whether a fullgraph region is compiled, the SGLang rule that decided it.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import sglang_models

GPUS = {"sm90": (9, 0), "sm100": (10, 0), "sm120": (12, 0), "sm121": (12, 1)}
COMPILED = ("piecewise", "tc_piecewise")  # the prefill runners that compile with torch.compile(fullgraph=True)


def split_args(text: str) -> list[str]:
    """The launch line's words, as the shell splits them."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        msg = f"--sglang-args: {exc} in {text!r}"
        raise UsageError(msg, item="--sglang-args", expected="the launch arguments, quoted as the shell quotes them",
                         found=text,
                         fix="close every quote inside the arguments, and give them as one quoted string") from exc


def model_path(argv: list[str]) -> str | None:
    """The value of --model-path (or --model) in a launch line."""
    for i, word in enumerate(argv):
        for flag in ("--model-path", "--model"):
            if word == flag and i + 1 < len(argv):
                return argv[i + 1]
            if word.startswith(flag + "="):
                return word.split("=", 1)[1]
    return None


def local_config(argv: list[str]) -> Path | None:
    """The local model directory a launch line names, where it holds a config.json."""
    path = model_path(argv)
    if path and (Path(path) / "config.json").is_file():
        return Path(path)
    return None


def read_architecture(directory: Path) -> str:
    """architectures[0] of a model directory's config.json (exit 2 where it has none)."""
    file = directory / "config.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        return str(data["architectures"][0])
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        msg = f"{file}: no architectures[0] to read ({type(exc).__name__})"
        raise UsageError(msg, path=file, item="architectures", expected="a list naming the model's class",
                         found=type(exc).__name__, fix="give --model-arch NAME") from exc


# --- the matrix: the launch lines every release is asked -------------------------------------------------

DP = "--enable-dp-attention --tp-size 2 --dp-size 2"
OPTIONS = (  # (label, the line's flags) over Qwen3-MoE NVFP4 on SM120
    ("plain", ""), ("enable-piecewise", "--enable-piecewise-cuda-graph"),
    ("disable-piecewise", "--disable-piecewise-cuda-graph"), ("enforce-piecewise", "--enforce-piecewise-cuda-graph"),
    ("prefill-tc_piecewise", "--cuda-graph-backend-prefill tc_piecewise"),
    ("prefill-breakable", "--cuda-graph-backend-prefill breakable"),
    ("config-json-tc_piecewise", "--cuda-graph-config '{\"prefill\": {\"backend\": \"tc_piecewise\"}}'"),
    ("dp-attention", DP), ("prefill-tc_piecewise+dp-attention", f"--cuda-graph-backend-prefill tc_piecewise {DP}"),
    ("enforce+dp-attention", f"--enforce-piecewise-cuda-graph {DP}"),
    ("speculative-ngram", "--speculative-algorithm NGRAM"),
    ("prefill-tc_piecewise+speculative-ngram", "--cuda-graph-backend-prefill tc_piecewise --speculative-algorithm NGRAM"),
    ("breakable-graph", "--enable-breakable-cuda-graph"), ("torch-compile", "--enable-torch-compile"),
    ("moe-flashinfer_trtllm", "--moe-runner-backend flashinfer_trtllm"),
    ("moe-flashinfer_cutlass", "--moe-runner-backend flashinfer_cutlass"),
    ("lora", "--enable-lora --max-lora-rank 16 --lora-target-modules all"), ("pp-2", "--pp-size 2"),
)
ENABLING = ("enable-piecewise", "prefill-tc_piecewise")  # the opt-ins tried on every other model


def matrix() -> list[dict[str, Any]]:
    """Every launch line of the matrix: key, the flags, the model (sglang_models), the GPU family."""
    lines = [{"key": f"qwen3-moe/sm120/{label}", "args": args, "model": "qwen3-moe", "gpu": "sm120"}
             for label, args in OPTIONS]
    for model in sglang_models.MODELS:
        if model == "qwen3-moe":
            continue
        gpu = "sm90" if model == "deepseek-v3-fp8" else "sm120"
        lines.append({"key": f"{model}/{gpu}/plain", "args": "", "model": model, "gpu": gpu})
        lines += [{"key": f"{model}/{gpu}/{label}", "args": dict(OPTIONS)[label], "model": model, "gpu": gpu}
                  for label in ENABLING]
    lines += [{"key": "deepseek-v3/sm100/plain", "args": "", "model": "deepseek-v3", "gpu": "sm100"},
              {"key": "deepseek-v3-fp8/sm90/deepgemm", "args": "--fp8-gemm-backend flashinfer_deepgemm",
               "model": "deepseek-v3-fp8", "gpu": "sm90"}]
    return lines


def plan_lines(lines: list[dict[str, Any]], gpu: str) -> list[dict[str, Any]]:
    """The probe's plan entries of the lines of one GPU (the probe fakes one GPU an interpreter)."""
    return [{"key": line["key"], "argv": split_args(line["args"]), "config": sglang_models.config_for(line["model"])}
            for line in lines if line["gpu"] == gpu]


# --- the answer ------------------------------------------------------------------------------------------


def compact(answer: dict[str, Any]) -> dict[str, Any]:
    """What the committed resolutions keep of the probe's answer for one line."""
    if "refused" in answer:
        refused = answer["refused"]
        said = refused.get("message") or f"architecture {refused.get('architecture')} is not in its model registry"
        return {"refused": refused["kind"], "message": said}
    if "probe_error" in answer:
        return {"probe_error": answer["probe_error"]}
    return {"prefill": answer["prefill"], "decode": answer["decode"], "fullgraph": answer["fullgraph"],
            "torch_compile": answer["torch_compile"], "rule": rule_text(answer["rule"]),
            "runner": runner_text(answer.get("runner") or {})}


def rule_text(rule: dict[str, Any]) -> str:
    """The SGLang rule as one line: `file:line function: text`, the flag given, or the default's field."""
    if rule.get("by") == "flag":
        return f"the flag {rule['flag']}"
    where = f"{rule.get('file')}:{rule.get('line')}"
    if rule.get("by") == "default":
        return f"the default ({where}: {rule.get('text')})"
    return f"{where} {rule.get('function', '')}: {rule.get('text', '')}".strip()


def runner_text(runner: dict[str, Any]) -> str:
    if "not_run" in runner:
        return f"not asked ({runner['not_run']})"
    if runner.get("reached_model"):
        return f"{runner.get('method')} passes to the loaded model (its layers still decide)"
    returned = runner.get("returned_at") or {}
    return f"{runner.get('method')} returns at {returned.get('file')}:{returned.get('line')}"


def verdict(entry: dict[str, Any]) -> str:
    """yes / no / refused / unknown, for a table cell."""
    if "refused" in entry:
        return "refused"
    if entry.get("fullgraph") is None:
        return "unknown"
    return "yes" if entry["fullgraph"] else "no"
