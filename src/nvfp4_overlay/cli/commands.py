"""The commands: each takes the checked Context, calls the library, prints through ctx, returns an exit status."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .. import doctor, index, matrix, releases, report, wheels
from ..errors import ConfigError, Exit, Refused
from ..manifest import Stack, Target, all_targets, load_stacks, load_upstream, resolve_targets
from ..patching import read_series
from ..refresh import refresh
from ..verify import verify_wheel
from .context import Context


def cmd_build(ctx: Context) -> int:
    stacks = load_stacks(ctx.patches_dir)
    targets = resolve_targets(stacks, ctx.args.stack, ctx.args.targets, ctx.patches_dir / "stacks.toml")
    built = wheels.build_targets(targets, ctx.options(), ctx.log)
    shipped = [] if ctx.args.targets or ctx.args.stack == "all" else list(
        stacks.get(ctx.args.stack or stacks.default, ctx.patches_dir / "stacks.toml").upstream)
    install = wheels.install_commands(built, shipped, ctx.dist_dir)
    document = {"built": [_built_json(b) for b in built], "dist_dir": str(ctx.dist_dir), "install": install}
    ctx.emit(document, "\n".join([*(f"built {b.wheel}" for b in built), "install with:", *(f"  {c}" for c in install)]))
    return 0


def _built_json(b: wheels.Built) -> dict[str, Any]:
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
    verdicts = [verify_wheel(Path(w), ctx.patches_dir, ctx.overlay_dir) for w in ctx.args.wheels]
    lines = []
    for v in verdicts:
        lines.append(f"{'ok' if v.ok else 'FAILED'}  {v.wheel}")
        lines += [f"  - {p}" for p in v.problems] + [f"  note: {n}" for n in v.notes]
    document = {"wheels": [{"wheel": str(v.wheel), "ok": v.ok, "problems": v.problems, "notes": v.notes} for v in verdicts]}
    ctx.emit(document, "\n".join(lines))
    return Exit.OK if all(v.ok for v in verdicts) else Exit.INTEGRITY


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
        "stacks": {s.name: [str(t) for t in s.targets] for s in stacks.stacks},
        "upstream": {s.name: [str(t) for t in s.upstream] for s in stacks.stacks if s.upstream},
        "series": series,
    }
    lines = ["stacks:"] + [
        f"  {s.name}{' (default)' if s.name == stacks.default else ''}: "
        + ", ".join([*map(str, s.targets), *(f"{t} (upstream, unpatched)" for t in s.upstream)])
        for s in sorted(stacks.stacks, key=_stack_order)
    ]
    lines.append("series:")
    for s in series:
        state = f"built: {', '.join(s['built'])}" if s["built"] else "not built"
        lines.append(f"  {s['target']} revision {s['revision']}, {len(s['patches'])} patches, {s['wheels']} wheels; {state}")
    ctx.emit(document, "\n".join(lines))
    return 0


def _stack_order(stack: Stack) -> tuple[str, Version]:
    """sglang-0.5.8 before sglang-0.5.10: by the release, not the string."""
    family, _, version = stack.name.rpartition("-")
    try:
        return family, Version(version)
    except InvalidVersion:
        return stack.name, Version("0")


def cmd_drift(ctx: Context) -> int:
    """The matrix for every series (of --dist) against the --against releases."""
    targets = all_targets(ctx.patches_dir)
    if ctx.args.dist:
        targets = [t for t in targets if t.dist == canonicalize_name(ctx.args.dist)]
    if not targets:
        of = f" of {ctx.args.dist}" if ctx.args.dist else ""
        msg = f"{ctx.patches_dir}: no series{of} (no */*/upstream.toml); check --patches-dir and --dist"
        raise ConfigError(msg, path=ctx.patches_dir)
    markdown = Path(ctx.args.markdown) if ctx.args.markdown else None
    if markdown is not None and not markdown.parent.is_dir():  # before the work, not after it
        msg = f"--markdown {markdown}: the directory {markdown.parent} does not exist; make it or name another file"
        raise ConfigError(msg, path=markdown.parent, item="--markdown", fix=f"mkdir -p {markdown.parent}")
    known: dict[str, list[Version]] = {}

    def versions(dist: str) -> list[Version]:
        if dist not in known:
            known[dist] = releases.index_versions(dist, ctx.source, ctx.patches_dir)
        return known[dist]

    plan = matrix.plan_releases(ctx.args.against, targets, versions)
    found = matrix.run_drift(plan, ctx.patches_dir, ctx.source, ctx.log)
    works = _check_new_releases(ctx, targets, plan) if ctx.args.check else {}
    text = report.markdown(found) + report.works_markdown(works)
    if markdown is not None:
        markdown.write_text(text)
    ctx.emit({**report.document(found), "works": works}, report.table(found) + report.works_table(works))
    return max(found.exit_code, Exit.NEEDS_PERSON if any(not w["works"] for w in works.values()) else Exit.OK)


def _check_new_releases(ctx: Context, targets: list[Target], plan: dict[Target, list[str]]) -> dict[str, Any]:
    """A dry-run refresh from each distribution's newest series to each release after it."""
    out: dict[str, Any] = {}
    for dist in sorted({t.dist for t in targets}):
        newest = max((t for t in targets if t.dist == dist), key=lambda t: Version(t.version))
        for version in plan.get(newest, []):
            if Version(version) <= Version(newest.version):
                continue
            key = f"{dist}=={version}"
            ctx.log(f"{key}: porting {newest} there and checking it by behaviour (a dry run)")
            try:
                refresh(ctx.patches_dir, ctx.overlay_dir, ctx.source, dist, newest.version, version,
                        drop_upstream=True, log=ctx.log, dry_run=True)
                out[key] = {"from": newest.version, "works": True, "problems": []}
            except Refused as exc:
                out[key] = {"from": newest.version, "works": False, "problems": list(exc.problems) or [exc.message]}
    return out


def cmd_refresh(ctx: Context) -> int:
    """Write patches/DIST/TO when every hunk applies or merges and the port behaves like upstream."""
    try:
        done = refresh(ctx.patches_dir, ctx.overlay_dir, ctx.source, ctx.args.dist, ctx.args.from_version,
                       ctx.args.to_version, drop_upstream=ctx.args.drop_upstream, log=ctx.log,
                       dry_run=ctx.args.dry_run)
    except Refused as exc:
        if exc.report is not None:
            ctx.emit({**report.document(exc.report), "error": exc.data()}, report.table(exc.report))
        else:
            ctx.emit({"error": exc.data()}, "\n".join(exc.problems))
        ctx.log(f"error: {exc}")
        return exc.exit_code
    for line in done.ported.dropped:
        ctx.log(f"note: {line}")
    if done.directory is None:
        ctx.emit({"written": None, "patches": [n for n, _ in done.ported.patches], "works": True},
                 f"dry run: the port to {ctx.args.to_version} applies and behaves; nothing written")
        return Exit.OK
    document = {
        "written": str(done.directory),
        "patches": [n for n, _ in done.ported.patches],
        "dropped": list(done.ported.dropped),
        "wheels": [{"filename": w.filename, "sha256": w.sha256} for w in done.wheels],
    }
    ctx.emit(document, f"wrote {done.directory}: {len(done.ported.patches)} patches, {len(done.wheels)} wheels")
    return Exit.OK


def cmd_doctor(ctx: Context) -> int:
    document, finding = doctor.diagnose(ctx.patches_dir, trace=not ctx.args.no_trace, timeout=ctx.args.trace_timeout)
    ctx.emit(document, doctor.render(document))
    return finding.exit_code


def cmd_index(ctx: Context) -> int:
    output = Path(ctx.args.output) if ctx.args.output else ctx.dist_dir / "simple"
    by_project = index.write_index(ctx.dist_dir, output)
    url = output.resolve().as_uri()
    document = {
        "index": str(output),
        "url": url,
        "projects": {
            p: [{"filename": w.filename, "version": w.version, "sha256": w.sha256, "size": w.size} for w in ws]
            for p, ws in by_project.items()
        },
    }
    lines = [f"wrote {output} ({sum(len(ws) for ws in by_project.values())} wheels)"]
    for project, found in by_project.items():
        lines += [f"  {project}: {', '.join(w.version for w in found)}"]
    example = next(iter(by_project.values()))[-1]
    lines.append(f"install with: pip install --index-url {url} --no-deps {example.project}=={example.version}")
    ctx.emit(document, "\n".join(lines))
    return Exit.OK


def cmd_propose(ctx: Context) -> int:
    from .. import github, propose

    forge = propose.Printed() if ctx.args.dry_run else github.GitHub.from_environment(ctx.args.repo, ctx.args.base)
    done = propose.propose(ctx.patches_dir, ctx.overlay_dir, ctx.source, forge, log=ctx.log)
    ctx.emit(propose.document(done), propose.text(done, ctx.args.dry_run))
    return Exit.NEEDS_PERSON if any(not o.proposal.pull for o in done) else Exit.OK


COMMANDS: dict[str, Callable[[Context], int]] = {
    "build": cmd_build, "verify": cmd_verify, "list": cmd_list, "drift": cmd_drift, "refresh": cmd_refresh,
    "doctor": cmd_doctor, "index": cmd_index, "propose": cmd_propose,
}
