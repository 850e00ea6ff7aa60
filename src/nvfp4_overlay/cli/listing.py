"""The list command: stacks by release, series and revisions, what the dist dir holds (no build machinery)."""

from __future__ import annotations

from typing import Any

from ..manifest import all_targets, load_stacks, load_upstream
from ..patching import read_series
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
    document = {
        "default": stacks.default,
        "stacks": {s.name: [str(t) for t in s.targets] for s in stacks.ordered()},
        "upstream": {s.name: [str(t) for t in s.upstream] for s in stacks.ordered() if s.upstream},
        "series": series,
    }
    lines = ["stacks:"] + [
        f"  {s.name}{' (default)' if s.name == stacks.default else ''}: "
        + ", ".join([*map(str, s.targets), *(f"{t} (upstream, unpatched)" for t in s.upstream)])
        for s in stacks.ordered()
    ]
    lines.append("series:")
    for s in series:
        state = f"built: {', '.join(s['built'])}" if s["built"] else "not built"
        lines.append(f"  {s['target']} revision {s['revision']}, {len(s['patches'])} patches, {s['wheels']} wheels; {state}")
    ctx.emit(document, "\n".join(lines))
    return 0
