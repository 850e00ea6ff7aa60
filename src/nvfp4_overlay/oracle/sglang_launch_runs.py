"""The launch-line matrix resolved by each SGLang release's own code: the probe over the release's trees.

``resolve(sglang_tree, flashinfer_tree)`` runs probes/sglang/sglang_launch.py (a fork of the warm probe
interpreter, one per GPU family of the matrix) and keeps what patches/sglang/audit-launch.json keeps
of each answer; ``resolve_release`` does it over the release's pinned upstream wheels, unpacked under
a scratch directory (no download: the wheels come from the cache, as `make test` fills it).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..audit import sglang_launch
from ..patch import Target, load_upstream
from ..wheel import fetch
from . import sglang_releases
from .probe_runner import run_probe, unpack


def resolve(sglang_tree: Path, flashinfer_tree: Path | None) -> dict[str, Any]:
    """key -> the compact answer, for every line of the matrix."""
    lines = sglang_launch.matrix()
    out: dict[str, Any] = {}
    for gpu in sorted({line["gpu"] for line in lines}):
        plan = {"sglang": str(sglang_tree), "flashinfer": str(flashinfer_tree) if flashinfer_tree else None,
                "gpu": list(sglang_launch.GPUS[gpu]), "lines": sglang_launch.plan_lines(lines, gpu)}
        found = run_probe("sglang_launch", plan, timeout=1800)
        out.update({key: sglang_launch.compact(answer) for key, answer in found["lines"].items()})
    return {line["key"]: out[line["key"]] for line in lines}


def resolve_release(patches_dir: Path, release: sglang_releases.Release, source: fetch.Source) -> dict[str, Any]:
    """{"flashinfer": pin, "lines": resolve(...)} over the release's pinned upstream wheels."""
    wheel = sglang_releases.upstream_wheel(patches_dir, release, source)
    pin = sglang_releases.flashinfer_pin(wheel)
    flashinfer = _flashinfer_wheel(patches_dir, pin, source)
    with tempfile.TemporaryDirectory(prefix="nvfp4-launch-") as scratch:
        sglang_tree = unpack(wheel, Path(scratch) / "sglang")
        flashinfer_tree = unpack(flashinfer, Path(scratch) / "flashinfer") if flashinfer else None
        return {"flashinfer": pin, "lines": resolve(sglang_tree, flashinfer_tree)}


def _flashinfer_wheel(patches_dir: Path, pin: str, source: fetch.Source) -> Path | None:
    try:
        upstream = load_upstream(patches_dir, Target("flashinfer-python", pin))
    except Exception:  # noqa: BLE001 - a pin no series carries: SGLang runs without it on the path
        return None
    (wheel,) = fetch.select_wheels(upstream, source)
    return fetch.upstream_wheel(upstream, wheel, source)
