"""patches/sglang/audit-layer.json, SGLang's piecewise compile of a whole decoder layer per release, and its docs table.

tests/releases/test_sglang_layer.py runs the layer probe (probes/sglang/layer/probe.py) per
release, model, stack, GPU, MoE runner backend and option; with NVFP4_OVERLAY_WRITE_LAYER=1 (`make
sglang-layer-table`) each run's entry is recorded here, otherwise the test holds each run to its entry.
Per release: ``flashinfer`` (its pin), ``cases`` (the probe's default model, Qwen3-MoE: case -> entry)
and ``models`` (each other target architecture: model -> case -> entry).
`make sglang-regions-docs` renders the table into docs/sglang-regions.md between its markers.
"""

from __future__ import annotations

import fcntl
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..audit import sglang_audit
from ..formats import render_between

AUDIT = "audit-layer.json"
BEGIN, END = "<!-- audit:sglang-layer", "<!-- /audit:sglang-layer -->"
# Whose custom op a graph node is: SGLang's own ops, the overlay's, FlashInfer's, the probe's sgl-kernel fakes
OWNERS = (("sglang.", "SGLang"), ("sgl_kernel.", "sgl-kernel (stand-in)"), ("nvfp4_overlay.", "overlay"),
          ("flashinfer.", "FlashInfer"), ("sglfake.", "sgl-kernel fake"))
DEFAULT_MODEL = "qwen3-moe"  # the probe's default model: its cases are a release's ``cases``


def gpu_name(gpu: tuple[int, int]) -> str:
    return f"sm{gpu[0]}{gpu[1]}"


def load_table(patches_dir: Path) -> dict[str, Any]:
    path = patches_dir / "sglang" / AUDIT
    return dict(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else {"releases": {}}


def entry(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the table keeps of a run: whole or where it failed, the ops of each piece (split pieces marked)
    and whether the communicator took its fused all-reduce branch."""
    kept: dict[str, Any] = {"whole": result["whole"], "allreduce_fusion": result.get("allreduce_fusion")}
    if not result["whole"]:
        kept["where"] = where(result.get("error", ""))
    kept["pieces"] = [("split: " if p["split"] else "") + ", ".join(_short(op) for op in p["ops"])
                      for p in result.get("pieces", [])]
    return kept


def where(error: str) -> str:
    """The dynamo failure in one line: its kind and the last SGLang or FlashInfer frame it was in."""
    kind = error.split("\n", 1)[0].split("  ", 1)[0][:120]
    frames = re.findall(r'File "[^"]*/((?:sglang|flashinfer)/[^"]+)", line \d+, in (\w+)', error)
    return f"{kind} ({frames[-1][0]} {frames[-1][1]})" if frames else kind


def _short(op: str) -> str:
    return op.removesuffix(".default")


def record(patches_dir: Path, release: str, pin: str, case: str, result: Mapping[str, Any],
           model: str = DEFAULT_MODEL) -> None:
    """One run's entry written into the table, under a lock: writers may run side by side."""
    path = patches_dir / "sglang" / AUDIT
    with (patches_dir / "sglang" / f".{AUDIT}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        table = load_table(patches_dir)
        releases = table["releases"]
        found = releases.setdefault(release, {"flashinfer": pin, "cases": {}})
        if model == DEFAULT_MODEL:
            found["cases"][case] = entry(result)
            found["cases"] = dict(sorted(found["cases"].items()))
        else:
            models = found.setdefault("models", {})
            models.setdefault(model, {})[case] = entry(result)
            found["models"] = {m: dict(sorted(models[m].items())) for m in sorted(models)}
        table["releases"] = dict(sorted(releases.items(), key=lambda kv: sglang_audit.version_key(kv[0])))
        path.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")


def cases(found: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """A release's entries by model: the default model's ``cases``, then each other model's."""
    return {DEFAULT_MODEL: found.get("cases", {}), **found.get("models", {})}


def markdown(table: Mapping[str, Any]) -> str:
    """Per release, model and stack, the runs alike in one row: GPUs and backends, whole or where it
    failed, the graph's pieces with their custom ops."""
    rows = ["| SGLang | FlashInfer | model | stack | GPU, MoE runner | compiled whole? | pieces (split ops marked) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for release, found in table["releases"].items():
        for model, entries in cases(found).items():
            for (stack, verdict, pieces), runs in _grouped(entries).items():
                rows.append(f"| {release} | {found['flashinfer']} | {model} | {stack} | {', '.join(runs)} | "
                            f"{_cell(verdict)} | {_cell(pieces)} |")
    return "\n".join(rows) + "\n"


def _grouped(entries: Mapping[str, Any]) -> dict[tuple[str, str, str], list[str]]:
    """One model's runs on one release, those of one stack alike in verdict and pieces together."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for case, kept in entries.items():
        stack, run = _stack_and_run(case)
        verdict = "yes" if kept["whole"] else f"no: {kept['where']}"
        if kept.get("allreduce_fusion"):
            verdict += "; fused all-reduce branch taken"
        pieces = " / ".join(f"`{p}`" if p else "(none)" for p in kept["pieces"]) or ""
        grouped.setdefault((stack, verdict, pieces), []).append(run)
    return grouped


def _stack_and_run(case: str) -> tuple[str, str]:
    match = re.match(r"(.*?)-(sm\d+)-(.*)$", case)
    if match is None:
        return case, ""
    stack, gpu, run = match.groups()
    return stack, f"{gpu.upper()} {run.replace('-allreduce-fusion', ' + allreduce fusion')}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_into(document: str, rendered: str) -> str:
    return render_between(document, BEGIN, END, rendered, "the SGLang layer table")
