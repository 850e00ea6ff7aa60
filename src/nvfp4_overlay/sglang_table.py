"""Writes patches/sglang/audit-regions.json from the region probe, and docs/sglang-regions.md from it.

``python -m nvfp4_overlay.sglang_table table [VERSION...]`` probes the releases named (default:
every SGLang release of patches/stacks.toml) and writes their part of the table;
``python -m nvfp4_overlay.sglang_table docs`` renders the document's table from the committed one
and the overlay's entries.py (`make sglang-regions-table`, `make sglang-regions-docs`);
``... claims`` prints, per stack, the regions nothing remains raw in (for stack-claims.toml). Needs torch
(the probe); the trees are the pinned wheels, unpacked, and the patched ones built from the series.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import fetch, sglang_audit, sglang_releases, wheels
from .behaviour import unpack
from .manifest import Target, load_upstream
from .sglang_releases import Release


def release_trees(patches_dir: Path, overlay_dir: Path, release: Release, source: fetch.Source,
                  workdir: Path) -> tuple[str, dict[str, Path], dict[str, Path]]:
    """(FlashInfer pin, SGLang trees, FlashInfer trees) of a release, unpacked under workdir."""
    sglang_wheel = sglang_releases.upstream_wheel(patches_dir, release, source)
    pin = sglang_releases.flashinfer_pin(sglang_wheel)
    options = wheels.Options(patches_dir, overlay_dir, workdir / "dist", source)
    flashinfer = Target("flashinfer-python", pin)
    upstream = load_upstream(patches_dir, flashinfer)
    (fitting,) = fetch.select_wheels(upstream, source)
    (built,) = wheels.build_targets([flashinfer], options)
    sglang = {"upstream": unpack(sglang_wheel, workdir / "sglang-upstream")}
    if release.carried:
        (patched,) = wheels.build_targets([Target("sglang", release.version)], options)
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


def render_docs(patches_dir: Path, overlay_dir: Path, document: Path) -> None:
    table = sglang_audit.load_table(patches_dir)
    carried = {r.version: r.carried for r in sglang_releases.audit_releases(patches_dir)}
    routes = sglang_audit.read_routes(overlay_dir / "flashinfer-python")
    rendered = sglang_audit.markdown_table(table, carried, routes)
    document.write_text(sglang_audit.render_into(document.read_text(encoding="utf-8"), rendered), encoding="utf-8")


def covered_claims(patches_dir: Path, overlay_dir: Path) -> str:
    """stack-claims.toml's body for what holds now: per stack, the regions present where nothing
    remains raw (the overlay's ENTRIES, the committed table); a maintainer reviews it, then commits."""
    table = sglang_audit.load_table(patches_dir)
    routes = sglang_audit.read_routes(overlay_dir / "flashinfer-python")
    left = sglang_releases.remaining_by_stack(patches_dir, routes)
    lines = []
    for stack in sorted(left, key=lambda name: sglang_audit.version_key(name.split("-", 1)[1])):
        version = stack.split("-", 1)[1]
        tree = table["releases"][version]["sglang"]
        present = [r for r, cell in tree.get("patched", tree["upstream"]).items() if "absent" not in cell]
        covers = ", ".join(f'"{r}"' for r in present if r not in left[stack])
        lines.append(f'[stacks."{stack}"]\ncovers = [{covers}]\n')
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    root = Path.cwd()  # the checkout (make runs it there)
    patches, overlay = root / "patches", root / "overlay"
    if argv[:1] == ["table"]:
        write_table(patches, overlay, argv[1:], fetch.Source(fetch.default_cache_dir()))
        return 0
    if argv[:1] == ["docs"]:
        render_docs(patches, overlay, root / "docs" / "sglang-regions.md")
        return 0
    if argv[:1] == ["claims"]:
        print(covered_claims(patches, overlay), end="")
        return 0
    print("usage: python -m nvfp4_overlay.sglang_table table [VERSION...] | docs | claims", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
