"""The generators of committed files, as `nvfp4-overlay generate --list` names them: data only, no imports of the work.

Each generator writes committed files from upstream's text or the probes' answers and is run by its name
(`nvfp4-overlay generate NAME`); one with a check (`--check`) writes nothing and exits 1 where a committed
file differs from what it would write, and `make check-generated` runs every such check. cli/generate.py runs
them; cli/parser.py builds their arguments from this table.
"""

from __future__ import annotations

from dataclasses import dataclass

WHEELS = "the pinned upstream wheel of every carried flashinfer-python release (the cache, else pip)"


@dataclass(frozen=True)
class Generator:
    name: str
    summary: str
    writes: tuple[str, ...]
    reads: tuple[str, ...]
    torch: str  # "no", "yes", or the option that makes it need torch
    check: bool  # has --check (make check-generated runs it)
    upstream: bool  # reads upstream wheels: takes the wheel source's options (--cache-dir, --offline, ...)
    positional: str = ""  # the releases it may be limited to (RELEASE or VERSION), if any


GENERATORS: tuple[Generator, ...] = (
    Generator("routes", "patch 0002 (the route patch) of flashinfer-python releases, from their own text: every "
              "entry point the overlay routes, placed by name",
              ("patches/flashinfer-python/*/0002-fp4-mxfp8-entry-points-opaque-to-dynamo.patch",),
              (WHEELS, "overlay/flashinfer-python/flashinfer/_nvfp4_overlay/entries.py"), "no", True, True, "RELEASE"),
    Generator("audit-api", "the serving-API audit from scans of every carried flashinfer-python release, and "
              "docs/serving-api.md's table from it",
              ("patches/flashinfer-python/audit-serving-api.json", "docs/serving-api.md"),
              (WHEELS, "src/nvfp4_overlay/audit/api_rules.py", "the overlay's entries.py"), "no", True, True),
    Generator("cuda-audit", "the CUDA-version audit made anew from every carried release's scan, each call with "
              "the releases it is in, every verdict kept (then generate cuda-docs)",
              ("patches/flashinfer-python/audit-cuda-versions.json",),
              (WHEELS, "patches/flashinfer-python/audit-cuda-versions.json (its verdicts)"), "no", True, True),
    Generator("cuda-docs", "docs/patches.md's CUDA audit table and the overlay's cuda_sites.py, from the CUDA audit",
              ("docs/patches.md", "overlay/flashinfer-python/flashinfer/_nvfp4_overlay/cuda_sites.py"),
              ("patches/flashinfer-python/audit-cuda-versions.json",), "no", True, False),
    Generator("launch-table", "docs/patches.md's launch-line table and the README's release table from "
              "patches/sglang/audit-launch.json (--resolve: that file first, from each SGLang release's own code)",
              ("docs/patches.md", "README.md", "patches/sglang/audit-launch.json (--resolve)"),
              ("patches/sglang/audit-launch.json", "each stack's SGLang wheel (--resolve)"),
              "with --resolve", True, False),
    Generator("compile-list", "FlashInfer's own compile list on every carried release, upstream and patched, "
              "from the compile-list probe (minutes a release, kept in the result cache; then compile-list-docs)",
              ("patches/flashinfer-python/audit-compile-list.json",),
              (WHEELS, "the series and the overlay (the patched side)"), "yes", False, True, "RELEASE"),
    Generator("compile-list-docs", "docs/compile-list.md's table from the compile-list audit",
              ("docs/compile-list.md",), ("patches/flashinfer-python/audit-compile-list.json",), "no", True, False),
    Generator("sglang-regions", "the SGLang region table from the region probe on every stack's SGLang release "
              "(minutes a release; then sglang-regions-docs)",
              ("patches/sglang/audit-regions.json",),
              ("each stack's SGLang and FlashInfer wheels, upstream and patched",), "yes", False, True, "VERSION"),
    Generator("sglang-regions-docs", "docs/sglang-regions.md's tables from the region, reach and layer tables "
              "and the overlay's routes",
              ("docs/sglang-regions.md",),
              ("patches/sglang/audit-regions.json", "patches/sglang/audit-layer.json", "patches/sglang/region-reach.toml",
               "the overlay's entries.py"), "no", True, False),
    Generator("stack-claims", "prints, per stack, the regions nothing remains raw in: the body of "
              "patches/sglang/stack-claims.toml, for a maintainer to review and commit",
              ("stdout (review it, then patches/sglang/stack-claims.toml)",),
              ("patches/sglang/audit-regions.json", "the overlay's entries.py"), "no", False, False),
)
