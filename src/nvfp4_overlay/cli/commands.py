"""The commands that carry the series to new releases: drift, refresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from ..carry import by_design, drift_json, matrix, refresh, releases, report
from ..errors import ConfigError, Exit, Refused
from ..patch import Target, all_targets
from .context import Context


def cmd_drift(ctx: Context) -> int:
    """The matrix for every series (of --dist) against the --against releases."""
    targets = all_targets(ctx.patches_dir)
    if ctx.args.dist:
        targets = [t for t in targets if t.dist == canonicalize_name(ctx.args.dist)]
    if not targets:
        of = f" of {ctx.args.dist}" if ctx.args.dist else ""
        msg = f"{ctx.patches_dir}: no series{of} (no */*/upstream.toml)"
        raise ConfigError(msg, path=ctx.patches_dir, fix="check --patches-dir and --dist")
    markdown = Path(ctx.args.markdown) if ctx.args.markdown else None
    if markdown is not None and not markdown.parent.is_dir():  # before the work, not after it
        msg = f"--markdown {markdown}: the directory {markdown.parent} does not exist"
        raise ConfigError(msg, path=markdown.parent, item="--markdown",
                          fix=f"make it ('mkdir -p {markdown.parent}') or name another file")
    if markdown is not None and markdown.is_dir():
        msg = f"--markdown {markdown}: is a directory"
        raise ConfigError(msg, path=markdown, item="--markdown", expected="a file", found="a directory",
                          fix=f"name a file, e.g. {markdown / 'drift.md'}")
    known: dict[str, list[Version]] = {}

    def versions(dist: str) -> list[Version]:
        if dist not in known:
            known[dist] = releases.index_versions(dist, ctx.source, ctx.patches_dir)
        return known[dist]

    plan = matrix.plan_releases(ctx.args.against, targets, versions)
    unpatched = by_design.shipped_unpatched(ctx.patches_dir, ctx.overlay_dir, ctx.log)
    found = matrix.run_drift(plan, ctx.patches_dir, ctx.source, ctx.log, unpatched)
    works = _check_new_releases(ctx, targets, plan, unpatched) if ctx.args.check else {}
    text = report.markdown(found) + report.works_markdown(works)
    if markdown is not None:
        markdown.write_text(text)
    ctx.emit({**drift_json.document(found), "works": works}, report.table(found) + report.works_table(works))
    return max(found.exit_code, Exit.NEEDS_PERSON if any(not w["works"] for w in works.values()) else Exit.OK)


def _check_new_releases(ctx: Context, targets: list[Target], plan: dict[Target, list[str]],
                        unpatched: dict[Target, str]) -> dict[str, Any]:
    """A dry-run refresh from each distribution's newest series to each release after it, but those a
    stack ships unpatched by design (nothing to port there)."""
    out: dict[str, Any] = {}
    for dist in sorted({t.dist for t in targets}):
        newest = max((t for t in targets if t.dist == dist), key=lambda t: Version(t.version))
        for version in plan.get(newest, []):
            if Version(version) <= Version(newest.version) or Target(dist, version) in unpatched:
                continue
            key = f"{dist}=={version}"
            ctx.log(f"{key}: porting {newest} there and checking it by behaviour (a dry run)")
            try:
                asked = refresh.Request(ctx.patches_dir, ctx.overlay_dir, ctx.source, dist, newest.version, version,
                                        drop_upstream=True, dry_run=True)
                refresh.refresh(asked, log=ctx.log)
                out[key] = {"from": newest.version, "works": True, "problems": []}
            except Refused as exc:
                out[key] = {"from": newest.version, "works": False, "problems": list(exc.problems) or [str(exc)]}
    return out


def _request(ctx: Context) -> refresh.Request:
    """refresh's arguments as its one request."""
    a = ctx.args
    return refresh.Request(ctx.patches_dir, ctx.overlay_dir, ctx.source, a.dist, a.from_version, a.to_version,
                   drop_upstream=a.drop_upstream, dry_run=a.dry_run, quick=a.quick)


def cmd_refresh(ctx: Context) -> int:
    """Write patches/DIST/TO when every hunk applies or merges and the port behaves like upstream."""
    try:
        done = refresh.refresh(_request(ctx), log=ctx.log)
    except Refused as exc:
        if exc.report is not None:
            ctx.emit({**drift_json.document(exc.report), "error": exc.data()}, report.table(exc.report))
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


def cmd_propose(ctx: Context) -> int:
    from ..carry import github, propose

    forge = propose.Printed() if ctx.args.dry_run else github.GitHub.from_environment(ctx.args.repo, ctx.args.base)
    done = propose.propose(ctx.patches_dir, ctx.overlay_dir, ctx.source, forge, log=ctx.log, quick=ctx.args.quick)
    ctx.emit(propose.document(done), propose.text(done, ctx.args.dry_run))
    return Exit.NEEDS_PERSON if any(not o.proposal.pull for o in done) else Exit.OK
