"""patches/sglang/audit-launch.json (the launch-line matrix as each SGLang release resolves it) and the
tables rendered from it: docs/patches.md's per-line table and the README's per-release table.

One owner for the format: written by `nvfp4-overlay launch-table --resolve` from the probe's answers
(oracle/sglang_launch_runs.py), read here, rendered here; `launch-table --check` (CI) holds both
documents to the rendering.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..formats import render_between
from . import sglang_launch, sglang_models
from .sglang_audit import version_key

AUDIT = "audit-launch.json"
DOCS_BEGIN, DOCS_END = "<!-- audit:sglang-launch", "<!-- /audit:sglang-launch -->"
README_BEGIN, README_END = "<!-- audit:sglang-launch-readme", "<!-- /audit:sglang-launch-readme -->"


def load(patches_dir: Path) -> dict[str, Any]:
    path = patches_dir / "sglang" / AUDIT
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        msg = f"{path}: {exc}"
        raise ConfigError(msg, path=path,
                          fix="restore it from git, or write it anew with `make sglang-launch-table`") from exc
    return data


def dump(table: Mapping[str, Any]) -> str:
    return json.dumps(table, indent=1) + "\n"  # releases oldest first, lines in the matrix's order


def with_release(table: Mapping[str, Any], release: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    releases = {**table.get("releases", {}), release: dict(entry)}
    return {"matrix": sglang_launch.matrix(), "releases": dict(sorted(releases.items(), key=lambda kv: version_key(kv[0])))}


def answer(table: Mapping[str, Any], release: str, key: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = table.get("releases", {}).get(release, {}).get("lines", {}).get(key)
    return found


# --- docs/patches.md: one row per launch line, the releases in runs of alike answers -----------------


_LINE = re.compile(r"(\w+\.py):(\d+)")


def _runs(table: Mapping[str, Any], key: str) -> list[tuple[list[str], dict[str, Any]]]:
    """Runs of releases whose answer is alike: the same verdict, backend and rule, the rule's line aside
    (it moves between releases); where it moved, the cell names each release's line."""
    runs: list[tuple[list[str], dict[str, Any]]] = []
    for release in table["releases"]:
        entry = answer(table, release, key) or {"probe_error": "not resolved"}
        rule = _short_rule(entry)
        shown = {"verdict": sglang_launch.verdict(entry), "prefill": entry.get("prefill"),
                 "rule": _LINE.sub(r"\1", rule)}
        if runs and {k: v for k, v in runs[-1][1].items() if k not in ("lines", "first")} == shown:
            runs[-1][0].append(release)
            runs[-1][1]["lines"].append((release, _LINE.findall(rule)))
        else:
            runs.append(([release], {**shown, "lines": [(release, _LINE.findall(rule))], "first": rule}))
    for _, shown in runs:
        shown["rule"] = _with_lines(shown.pop("lines"), shown.pop("first"), shown["rule"])
    return runs


def _with_lines(lines: list[tuple[str, list[tuple[str, str]]]], first: str, rule: str) -> str:
    """The rule with its file:line, or the line of each run of releases where the line moved."""
    spans: list[tuple[list[str], list[tuple[str, str]]]] = []
    for release, found in lines:
        if spans and spans[-1][1] == found:
            spans[-1][0].append(release)
        else:
            spans.append(([release], found))
    if len(spans) == 1:  # the same line in every release of the run: the rule as the first one says it
        return first
    where = "; ".join(f"{', '.join(':'.join(f) for f in found)} in {_span(versions)}" for versions, found in spans)
    return f"{rule} ({where})"


def _short_rule(entry: Mapping[str, Any]) -> str:
    if "refused" in entry:
        return "refused by its parser" if entry["refused"] == "flag" else f"refused: {entry['message'][:80]}"
    if "probe_error" in entry:
        return f"not resolved: {entry['probe_error'][:80]}"
    rule = str(entry["rule"])
    if entry.get("fullgraph") is False and entry.get("prefill") in sglang_launch.COMPILED:
        rule = "the runner: " + str(entry.get("runner", "")).split(" returns at ")[-1]
    return rule.replace("sglang/srt/", "").replace("|", "\\|")


def _span(versions: list[str]) -> str:
    return versions[0] if len(versions) == 1 else f"{versions[0]}–{versions[-1]}"


def _label(line: Mapping[str, Any]) -> str:
    model = sglang_models.architecture(line["model"])
    flags = f"`{line['args']}`" if line["args"] else "(no graph flags)"
    return f"{line['model']} (`{model}`), {line['gpu']}: {flags}".replace("|", "\\|")


def markdown(table: Mapping[str, Any]) -> str:
    """docs/patches.md's table: per launch line, per run of releases alike, whether a fullgraph region is
    compiled, the prefill backend SGLang chose and the rule (file:line in that release) that decided it."""
    rows = ["| launch line (model, GPU, flags) | SGLang | fullgraph region | prefill backend | decided by |",
            "| --- | --- | --- | --- | --- |"]
    for line in table["matrix"]:
        for versions, shown in _runs(table, line["key"]):
            rows.append(f"| {_label(line)} | {_span(versions)} | {shown['verdict']} | {shown['prefill'] or ''} | "
                        f"{shown['rule']} |")
    return "\n".join(rows)


# --- the README: per run of releases alike, where a fullgraph region is compiled --------------------------


def _release_summary(table: Mapping[str, Any], release: str) -> tuple[str, str, str]:
    qwen = [line for line in table["matrix"] if line["model"] == "qwen3-moe"]
    plain = sglang_launch.verdict(answer(table, release, "qwen3-moe/sm120/plain") or {})
    on = [f"`{line['args']}`" for line in qwen if line["args"] and
          sglang_launch.verdict(answer(table, release, line["key"]) or {}) == "yes"]
    models = sorted({line["model"] for line in table["matrix"] if line["model"] != "qwen3-moe" and
                     sglang_launch.verdict(answer(table, release, line["key"]) or {}) == "yes"})
    default = "by default" if plain == "yes" else "not by default"
    with_flags = ", ".join(on) if on else "no launch line of the matrix"
    return default, with_flags.replace("|", "\\|"), ", ".join(models) or "none"


def readme(table: Mapping[str, Any]) -> str:
    rows = ["| your SGLang | a fullgraph region (Qwen3-MoE NVFP4, SM120) | compiled with | other target models "
            "compiled by some line |", "| --- | --- | --- | --- |"]
    runs: list[tuple[list[str], tuple[str, str, str]]] = []
    for release in table["releases"]:
        summary = _release_summary(table, release)
        if runs and runs[-1][1] == summary:
            runs[-1][0].append(release)
        else:
            runs.append(([release], summary))
    rows += [f"| {_span(v)} | {s[0]} | {s[1]} | {s[2]} |" for v, s in runs]
    return "\n".join(rows)


def render_docs(text: str, table: Mapping[str, Any]) -> str:
    return render_between(text, DOCS_BEGIN, DOCS_END, markdown(table) + "\n", "the launch-line table")


def render_readme(text: str, table: Mapping[str, Any]) -> str:
    return render_between(text, README_BEGIN, README_END, readme(table) + "\n", "the release table")
