"""Writes patches/sglang/audit-regions.json from the region probe, and docs/sglang-regions.md from it.

``nvfp4-overlay generate sglang-regions [VERSION...]`` probes the releases named (default: every SGLang
release of patches/stacks.toml) and writes their part of the table (write_table);
``generate sglang-regions-docs`` renders the document's tables from the committed ones (and the overlay's
entries.py; the whole-layer table from sglang_layer's) (rendered_docs); ``generate stack-claims`` prints, per
stack, the regions nothing remains raw in (covered_claims, for stack-claims.toml). Needs torch
(the probe); the trees are the pinned wheels, unpacked, and the patched ones built from the series.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..audit import sglang_audit, sglang_reach
from ..formats import render_between
from ..patch import Target, load_upstream
from ..wheel import build, fetch
from . import sglang_layer, sglang_releases
from .probe_runner import unpack
from .sglang_releases import Release

# --- docs/sglang-regions.md ---------------------------------------------------------------------------

BEGIN, END = "<!-- audit:sglang-regions", "<!-- /audit:sglang-regions -->"


def markdown_table(table: Mapping[str, Any], carried: Mapping[str, bool], routes: sglang_audit.Routes | None,
                   reach: Sequence[sglang_reach.Unreached] = ()) -> str:
    """Per region, runs of releases alike: the raw FlashInfer calls of the upstream stack, and what
    remains raw under each stack's patched wheels with these routes (call sites without line numbers),
    or that no compiled region reaches it; then why, per entry of `reach`."""
    rows = ["| region | SGLang | FlashInfer pin | raw FlashInfer calls, upstream stack | "
            "remaining under the patched stack |", "| --- | --- | --- | --- | --- |"]
    releases = sorted(table["releases"], key=sglang_audit.version_key)
    regions = list(dict.fromkeys(r for v in releases for r in table["releases"][v]["sglang"]["upstream"]))
    for region in regions:
        runs: list[tuple[tuple[str, str], list[str], list[str]]] = []
        for release in releases:
            entry = table["releases"][release]
            stack = entry["sglang"]["patched" if carried.get(release) else "upstream"].get(region, {"absent": ""})
            upstream = entry["sglang"]["upstream"].get(region, {"absent": ""})
            if "absent" in upstream:
                continue
            left = ("none: no compiled region reaches it (below)" if sglang_reach.unreached(reach, release, region)
                    else _per_gpu(stack, lambda cell: sglang_audit.remaining(cell, routes)))
            texts = (_per_gpu(upstream, _raw_text), left)
            if runs and runs[-1][0] == texts and runs[-1][1][-1] == releases[releases.index(release) - 1]:
                runs[-1][1].append(release)
                runs[-1][2].append(entry["flashinfer"])
            else:
                runs.append((texts, [release], [entry["flashinfer"]]))
        for (raw, left), versions, pins in runs:
            span = versions[0] if len(versions) == 1 else f"{versions[0]}–{versions[-1]}"
            pinned = pins[0] if len(set(pins)) == 1 else f"{pins[0]}–{pins[-1]}"
            rows.append(f"| `{region}` | {span} | {pinned} | {raw} | {left} |")
    return "\n".join(rows) + "\n" + _reach_notes(reach, releases)


def _reach_notes(reach: Sequence[sglang_reach.Unreached], releases: Sequence[str]) -> str:
    """Why no compiled region reaches a region, per entry: the releases of the table it covers."""
    notes = []
    for entry in reach:
        covered = [v for v in releases if entry.releases.contains(v, prereleases=True)]
        if covered:
            span = covered[0] if len(covered) == 1 else f"{covered[0]}–{covered[-1]}"
            what = "every region" if sglang_reach.EVERY_REGION in entry.regions else \
                ", ".join(f"`{r}`" for r in entry.regions)
            notes.append(f"- {what}, SGLang {span}: {_cell_text(entry.why)}")
    return "\nNo compiled region reaches (patches/sglang/region-reach.toml):\n\n" + "\n".join(notes) + "\n" \
        if notes else ""


def _raw_text(cell: Mapping[str, Any]) -> list[str]:
    return [sglang_audit.describe(c) for c in cell["calls"]] + ([f"SGLang's own code: {cell['sglang_break']}"]
                                                  if cell["sglang_break"] else [])


def _per_gpu(by_gpu: Mapping[str, Any], what: Any) -> str:
    texts = {gpu: "; ".join(_unnumbered(t) for t in what(by_gpu[gpu])) or "none" for gpu in sglang_audit.GPUS}
    if len(set(texts.values())) == 1:
        return _cell_text(texts[sglang_audit.GPUS[0]])
    return "; ".join(f"{gpu.upper()}: {_cell_text(t)}" for gpu, t in texts.items())


def _unnumbered(text: str) -> str:
    """A call site or break without its line number: releases alike read alike."""
    return re.sub(r"(\.py):\d+", r"\1", text)


def _cell_text(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_into(document: str, rendered: str) -> str:
    """The document with the table between its markers made anew (make sglang-regions-docs)."""
    return render_between(document, BEGIN, END, rendered, "the SGLang region table")


def release_trees(patches_dir: Path, overlay_dir: Path, release: Release, source: fetch.Source,
                  workdir: Path) -> tuple[str, dict[str, Path], dict[str, Path]]:
    """(FlashInfer pin, SGLang trees, FlashInfer trees) of a release, unpacked under workdir."""
    sglang_wheel = sglang_releases.upstream_wheel(patches_dir, release, source)
    pin = sglang_releases.flashinfer_pin(sglang_wheel)
    options = build.Options(patches_dir, overlay_dir, workdir / "dist", source)
    flashinfer = Target("flashinfer-python", pin)
    upstream = load_upstream(patches_dir, flashinfer)
    (fitting,) = fetch.select_wheels(upstream, source)
    (built,) = build.build_targets([flashinfer], options)
    sglang = {"upstream": unpack(sglang_wheel, workdir / "sglang-upstream")}
    if release.carried:
        (patched,) = build.build_targets([Target("sglang", release.version)], options)
        sglang["patched"] = unpack(patched.wheel, workdir / "sglang-patched")
    flashinfers = {"upstream": unpack(fetch.upstream_wheel(upstream, fitting, source), workdir / "fi-upstream"),
                   "patched": unpack(built.wheel, workdir / "fi-patched")}
    return pin, sglang, flashinfers


def write_table(patches_dir: Path, overlay_dir: Path, versions: Sequence[str], source: fetch.Source) -> Path:
    releases = [r for r in sglang_releases.audit_releases(patches_dir) if not versions or r.version in versions]
    path = patches_dir / "sglang" / sglang_audit.AUDIT
    table = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"releases": {}}
    for release in releases:
        with tempfile.TemporaryDirectory(prefix=f"sglang-{release.version}-") as tmp:
            pin, sglang, flashinfers = release_trees(patches_dir, overlay_dir, release, source, Path(tmp))
            results = sglang_releases.probe_release(sglang, flashinfers, Path(tmp) / "scratch")
        table["releases"][release.version] = sglang_audit.release_entry(pin, results)
        table["releases"] = dict(sorted(table["releases"].items(), key=lambda kv: sglang_audit.version_key(kv[0])))
        path.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")  # each release as it is done
        print(f"sglang {release.version}: probed (flashinfer-python {pin})", file=sys.stderr)
    return path


def rendered_docs(patches_dir: Path, overlay_dir: Path, document: str) -> str:
    """The document with its tables as the committed region, reach and layer tables and the routes render them."""
    table = sglang_audit.load_table(patches_dir)
    carried = {r.version: r.carried for r in sglang_releases.audit_releases(patches_dir)}
    routes = sglang_audit.read_routes(overlay_dir / "flashinfer-python")
    rendered = markdown_table(table, carried, routes, sglang_reach.load_reach(patches_dir))
    text = render_into(document, rendered)
    return sglang_layer.render_into(text, sglang_layer.markdown(sglang_layer.load_table(patches_dir)))


def covered_claims(patches_dir: Path, overlay_dir: Path) -> str:
    """stack-claims.toml's body for what holds now: per stack, the regions present that trace whole
    (nothing raw with the overlay's ENTRIES, in the committed table, reached or not: a claim is held to
    the probe); a maintainer reviews it, then commits."""
    table = sglang_audit.load_table(patches_dir)
    routes = sglang_audit.read_routes(overlay_dir / "flashinfer-python")
    carried = {r.version: r.carried for r in sglang_releases.audit_releases(patches_dir)}
    lines = []
    for version in sorted(carried, key=sglang_audit.version_key):
        left = sglang_audit.stack_remaining(table, version, carried[version], routes)
        tree = table["releases"][version]["sglang"]
        present = [r for r, cell in tree.get("patched", tree["upstream"]).items() if "absent" not in cell]
        covers = ", ".join(f'"{r}"' for r in present if r not in left)
        stack = f"sglang-{version}"
        lines.append(f'[stacks."{stack}"]\ncovers = [{covers}]\n')
    return "\n".join(lines)
