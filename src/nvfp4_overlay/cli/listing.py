"""The list command: stacks by release, series and revisions, what the dist dir holds (no build machinery)."""

from __future__ import annotations

from typing import Any

from ..audit import sglang_raw
from ..patch import all_targets, load_stacks, load_upstream, read_series
from .context import Context


def cmd_list(ctx: Context) -> int:
    stacks = load_stacks(ctx.patches_dir)
    series: list[dict[str, Any]] = []
    for target in all_targets(ctx.patches_dir):
        upstream = load_upstream(ctx.patches_dir, target)
        patches = read_series(upstream.directory).patches
        stem = upstream.wheels[0].filename.split("-", 1)[0]
        built = sorted(p.name for p in ctx.dist_dir.glob(f"{stem}-{upstream.local_version}-*.whl"))
        series.append({"target": str(target), "revision": upstream.revision, "local_version": upstream.local_version,
                       "patches": [p.name for p in patches], "wheels": len(upstream.wheels), "built": built})
    remaining = _remaining_raw(ctx)
    conditional = _conditional_raw(ctx)
    compile_list = _compile_list(ctx)
    document = {
        "default": stacks.default,
        "stacks": {s.name: [str(t) for t in s.targets] for s in stacks.ordered()},
        "upstream": {s.name: [str(t) for t in s.upstream] for s in stacks.ordered() if s.upstream},
        "series": series,
        "remaining_raw": remaining,
        "conditional_raw": conditional,
        "compile_list": compile_list,
    }
    lines = ["stacks:"]
    for stack in stacks.ordered():
        lines.append(f"  {stack.name}{' (default)' if stack.name == stacks.default else ''}: "
                     + ", ".join([*map(str, stack.targets), *(f"{t} (upstream, unpatched)" for t in stack.upstream)]))
        if stack.name in remaining:
            lines.append("    SGLang's compiled regions, raw FlashInfer or SGLang code left: "
                         f"{_raw_line(remaining[stack.name])} in the audited regions")
    if remaining:  # the same for every stack: said once
        lines.append("  " + sglang_raw.outside(conditional))
    lines.append("series:")
    for s in series:
        state = f"built: {', '.join(s['built'])}" if s["built"] else "not built"
        lines.append(f"  {s['target']} revision {s['revision']}, {len(s['patches'])} patches, {s['wheels']} wheels; {state}")
    lines.append("FlashInfer's own compile list under torch.compile(fullgraph=True), patched (docs/compile-list.md):")
    for run in compile_list:
        span = run["releases"][0] if len(run["releases"]) == 1 else f"{run['releases'][0]}-{run['releases'][-1]}"
        groups: dict[str, int] = {}
        for name in run["compile_safe"]:
            groups[name.split(".", 1)[0]] = groups.get(name.split(".", 1)[0], 0) + 1
        lines.append(f"  flashinfer-python {span}: {len(run['compile_safe'])} compile-safe ("
                     + ", ".join(f"{g} {n}" for g, n in groups.items()) + ")")
        by_reason: dict[str, list[str]] = {}
        for name, why in run["eager_only"].items():
            by_reason.setdefault(why, []).append(name.split(".", 1)[1])  # rope.apply_rope -> apply_rope
        for why, names in by_reason.items():
            lines.append(f"    eager-only: {', '.join(names)}: {why}")
    ctx.emit(document, "\n".join(lines))
    return 0


def _compile_list(ctx: Context) -> list[dict[str, Any]]:
    """Per run of flashinfer-python releases alike, the compile list's compile-safe and eager-only
    functions (patches/flashinfer-python/audit-compile-list.json, oracle/compile_table.py)."""
    from ..oracle import compile_table

    return compile_table.compile_safe(compile_table.load_table(ctx.patches_dir))


def _remaining_raw(ctx: Context) -> dict[str, Any]:
    """stack -> region -> GPU -> what still breaks torch.compile(fullgraph=True) in that region under the
    stack's patched wheels (patches/sglang/audit-regions.json, against the overlay's routes)."""
    from ..audit import sglang_audit
    from ..oracle import sglang_releases

    return sglang_releases.remaining_by_stack(ctx.patches_dir, sglang_audit.read_routes(ctx.overlay_dir / "flashinfer-python"))


def _conditional_raw(ctx: Context) -> list[dict[str, Any]]:
    """The calls outside the audited regions (sglang_raw), against what the overlay source routes."""
    from ..audit import sglang_audit

    return sglang_raw.conditional_calls(sglang_audit.read_routes(ctx.overlay_dir / "flashinfer-python"))


def _raw_line(regions: dict[str, Any]) -> str:
    """Each region with what breaks it, in a few words (the whole sentence is in --json)."""
    if not regions:
        return "none"
    return "; ".join(f"{region} ({_what(next(iter(next(iter(by_gpu.values()), [])), ''))})"
                     for region, by_gpu in regions.items())


def _what(sentence: str) -> str:
    if sentence.startswith("SGLang's own code"):
        return "SGLang's own code"
    return sentence.split("(", 1)[0].rsplit(".", 1)[-1] or sentence[:60]
