"""Where SGLang's own code stops a fullgraph compile before FlashInfer, and which patched label fixes it.

Joined from the whole-layer table, patches/sglang/audit-layer.json (the layer probe's runs per release,
model, stack and GPU; docs/sglang-regions.md renders it), never from a list kept here: for an upstream
SGLang, each run of the upstream stack that failed in an SGLang frame (GLM-5's DSA indexer on 0.5.9,
is_musa on 0.5.20 and 0.5.21), and each run of a control (the series less one patch) that failed where a
patch of the series reaches (0.5.21's MXFP8 tactic pin: met once is_musa is fixed); for a patched SGLang,
each run of the patched stack that failed in an SGLang frame. A stop names the series' patches that
change its file or name its module, and the patched label, where the patched stack's run of that model
and GPU compiled whole.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..audit import sglang_models
from ..errors import ConfigError
from ..formats import read_json
from ..patch import Target, load_upstream, read_series
from .doctor_report import SglangStop

LAYER = Path("sglang") / "audit-layer.json"
DEFAULT_MODEL = "qwen3-moe"  # the layer probe's own model: a release's "cases" (oracle/sglang_layer.py)
CASE = re.compile(r"^(?P<stack>.+?)-(?P<gpu>sm\d+)-")  # <stack>-<gpu>-<moe runner backend>[-<option>]
FRAME = re.compile(r"\((?P<file>(?:sglang|flashinfer)/\S+\.py) \w+\)$")  # oracle/sglang_layer.where's last frame


def stops(patches_dir: Path, release: str, patched: bool, gpu: str, architecture: str) -> list[SglangStop]:
    """The stops the layer table records for this release, its stack, the GPU family and the model's architecture."""
    table = read_json(patches_dir / LAYER, what="the whole-layer table") if (patches_dir / LAYER).is_file() else {}
    entry = table.get("releases", {}).get(release)
    if entry is None:
        return []
    series, label = _series(patches_dir, release)
    found: dict[tuple[str, str, str, bool], SglangStop] = {}
    for model, cases in {DEFAULT_MODEL: entry.get("cases", {}), **entry.get("models", {})}.items():
        if _architecture(model) != architecture:
            continue
        for case, row in cases.items():
            stop = _stop(model, case, row, cases, series, label, patched, gpu)
            if stop is not None:
                found.setdefault((stop.model, stop.gpu, stop.where, stop.behind), stop)
    return list(found.values())


def _stop(model: str, case: str, row: dict[str, Any], cases: dict[str, Any], series: dict[str, str],
          label: str | None, patched: bool, gpu: str) -> SglangStop | None:
    named, frame = CASE.match(case), FRAME.search(row.get("where", ""))
    if row.get("whole") or named is None or frame is None or named["gpu"] not in (gpu, {"sm121": "sm120"}.get(gpu)):
        return None
    stack, path = named["stack"], frame["file"]
    reached = [name for name, text in series.items() if _reaches(text, path)]
    own = path.startswith("sglang/")
    behind = stack.startswith("control-")
    if patched and not (stack == "patched" and own):
        return None
    if not patched and not ((stack.startswith("upstream") and own) or (behind and reached)):
        return None
    whole = any(r.get("whole") for c, r in cases.items() if c.startswith(f"patched-{named['gpu']}-"))
    return SglangStop(model=model, gpu=named["gpu"], where=row["where"], behind=behind,
                      fixed_by=label if whole and not patched else None, patches=reached)


def _reaches(patch: str, path: str) -> bool:
    """A patch changes the file (SGLang's), or names the FlashInfer module, or its package, SGLang called into
    there (`flashinfer.autotuner`: 0.5.21's tactic pin)."""
    if path.startswith("sglang/"):
        return f"+++ b/{path}" in patch
    module = path.removesuffix(".py").replace("/", ".")
    return any(re.search(rf"\b{re.escape(name)}\b", patch) for name in (module, module.rsplit(".", 1)[0]))


def _series(patches_dir: Path, release: str) -> tuple[dict[str, str], str | None]:
    """The release's series (patch name -> text) and its patched label; none where patches/ has no series."""
    try:
        upstream = load_upstream(patches_dir, Target("sglang", release))
        read = read_series(upstream.directory)
    except ConfigError:
        return {}, None
    return {p.name: p.path.read_text(encoding="utf-8", errors="replace") for p in read.patches}, upstream.local_version


def _architecture(model: str) -> str | None:
    """The architecture of a layer-table model: the model of audit/sglang_models.py its name starts with, longest
    first (glm-5-model and glm-5+torchada are GLM-5's runs, qwen3-moe-fp8 Qwen3-MoE's)."""
    names = sorted((n for n in sglang_models.MODELS if model == n or model.startswith((n + "-", n + "+"))), key=len)
    return sglang_models.MODELS[names[-1]]["architectures"][0] if names else None
