"""The commands that make and check wheels: build, verify."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..operate import Step, Sums, Tool, install_steps, verify_wheel, worst
from ..patch import Stack, load_stacks, load_upstream, resolve_targets
from ..wheel import build
from .context import Context


def cmd_build(ctx: Context) -> int:
    stacks = load_stacks(ctx.patches_dir)
    targets = resolve_targets(stacks, ctx.args.stack, ctx.args.targets, ctx.patches_dir / "stacks.toml")
    swept = build.sweep_leftovers(ctx.options())
    for left in swept:
        ctx.log(f"removed {left}: a temporary of a build that was killed before it could remove it")
    built = build.build_targets(targets, ctx.options(), ctx.log)
    stale = _refresh_index(ctx)
    if ctx.args.stack == "all":
        install = ["install a stack with: nvfp4-overlay install --stack NAME (nvfp4-overlay list names them)"]
    else:
        stack = (Stack(" ".join(map(str, targets)), tuple(targets)) if ctx.args.targets
                 else stacks.get(ctx.args.stack or stacks.default, ctx.patches_dir / "stacks.toml"))
        versions = {t: load_upstream(ctx.patches_dir, t).local_version for t in stack.targets}
        install = [s.shell for s in _with_cubins(ctx, stack, install_steps(stack, versions, Tool(),
                                                                         dist_dir=ctx.dist_dir.resolve()))]
    document = {"built": [_built_json(b) for b in built], "dist_dir": str(ctx.dist_dir), "install": install,
                "index": stale, "removed": [str(p) for p in swept]}
    ctx.emit(document, "\n".join([*(f"built {b.wheel}" for b in built), "install with:", *(f"  {c}" for c in install)]))
    return 0


def _with_cubins(ctx: Context, stack: Stack, steps: list[Step]) -> list[Step]:
    """install's cubin step (operate/cubins.py); under --offline, a note when neither the dist dir nor the cache holds it."""
    from ..operate import cubins

    if ctx.args.offline:
        line = cubins.missing_line(stack, ctx.patches_dir, [ctx.dist_dir, ctx.source.cache_dir / "wheels"])
        if line:
            ctx.log(f"note: {line}")
    return cubins.first_of(steps, stack, Tool(), ctx.patches_dir)


def _refresh_index(ctx: Context) -> str | None:
    """A dist dir that has an index (`index`'s default place) gets it rewritten, so it never goes stale: with the
    wheels `index` would publish (SHA256SUMS lists them and verify passes); each other one named in a warning."""
    simple = ctx.dist_dir / "simple"
    if not (simple / "index.html").is_file():
        return None
    from ..operate import index

    published, withheld = index.publishable(ctx.dist_dir, ctx.patches_dir, ctx.overlay_dir, ctx.source)
    for held in withheld:
        ctx.log(f"warning: the index {simple} leaves out {held}")
    index.write_index(ctx.dist_dir, simple, published)
    ctx.log(f"refreshed the index {simple} with what the dist dir now holds")
    return str(simple)


def _built_json(b: build.Built) -> dict[str, Any]:
    return {
        "target": str(b.target),
        "wheel": str(b.wheel),
        "sha256": b.sha256,
        "upstream": {"filename": b.upstream_filename, "sha256": b.upstream_sha256},
        "hunks": [
            {"patch": h.patch, "file": h.path, "hunk": h.number, "header": h.header,
             "offset": h.placement.offset, "fuzz": h.placement.fuzz}
            for h in b.hunks
        ],
        "overlay": list(b.overlay),
    }


def cmd_verify(ctx: Context) -> int:
    # A wheel handed alone (from a fleet index, say) is held to its anchor; one beside a SHA256SUMS must be listed.
    verdicts = [verify_wheel(Path(w), ctx.patches_dir, ctx.overlay_dir, ctx.source, sums=Sums.BESIDE)
                for w in ctx.args.wheels]
    lines = []
    for v in verdicts:
        lines.append(f"{_SAID[v.state]}  {v.wheel}")
        lines += [f"  - {p}" for p in v.problems] + ([f"  - {v.unverified}"] if v.unverified else [])
        lines += [f"  trust: {t}" for t in v.trusted] + [f"  note: {n}" for n in v.notes]
    ctx.emit({"wheels": [v.data() for v in verdicts]}, "\n".join(lines))
    return int(worst(verdicts))


_SAID = {"ok": "ok", "refused": "FAILED", "unverified": "UNVERIFIED", "taken on trust": "TAKEN ON TRUST"}
