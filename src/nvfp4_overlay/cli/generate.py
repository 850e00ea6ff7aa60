"""The commands that write committed files from upstream's text: routes (patch 0002), audit-api (the audit),
launch-table (the launch-line tables, from each SGLang release's own resolution).

Each writes only what differs and says which files did; with --check it writes nothing and exits 1
when a committed file differs from what it would write (CI runs both checks).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..audit import api_audit, api_rules, routes
from ..carry import releases
from ..errors import ConfigError, Exit
from ..patch import Target, all_targets
from ..wheel import WheelReader
from .context import Context

FLASHINFER = "flashinfer-python"


def cmd_routes(ctx: Context) -> int:
    """Patch 0002 of each named (default: every carried) flashinfer-python release, from its own text."""
    names = routes.routed_names(ctx.overlay_dir)
    found: dict[str, str] = {}
    for version in _versions(ctx, ctx.args.releases):
        text = routes.route_patch(_texts(ctx, version), names)
        path = ctx.patches_dir / FLASHINFER / version / routes.PATCH
        found[version] = _compare(path, text, ctx.args.check)
        ctx.log(f"{version}: {found[version]}")
    return _done(ctx, found, f"{routes.PATCH} of {len(found)} releases")


def cmd_audit_api(ctx: Context) -> int:
    """patches/flashinfer-python/audit-serving-api.json from scans of every carried flashinfer-python release."""
    keys: set[str] = set()
    versions = _versions(ctx, [])
    for version in versions:
        ctx.log(f"{version}: scanning its public functions that reach a kernel loader")
        keys |= {fn.key for fn in api_audit.scan(_texts(ctx, version), store=ctx.source.scans_dir)}
    rules = api_rules.rules(keys, routes.routed_names(ctx.overlay_dir))
    path = ctx.patches_dir / FLASHINFER / api_audit.AUDIT
    state = _compare(path, json.dumps({"rules": rules}, indent=1) + "\n", ctx.args.check)
    ctx.log(f"{path}: {state}: {len(rules)} rules for {len(keys)} functions of {len(versions)} releases")
    return _done(ctx, {api_audit.AUDIT: state}, str(path))


def cmd_launch_table(ctx: Context) -> int:
    """docs/patches.md's and the README's launch-line tables from patches/sglang/audit-launch.json; with
    --resolve, that file first, from the named (default: every) SGLang release's own code."""
    from ..audit import sglang_launch_table

    path = ctx.patches_dir / "sglang" / sglang_launch_table.AUDIT
    found: dict[str, str] = {}
    if ctx.args.resolve is not None:
        found[sglang_launch_table.AUDIT] = _compare(path, sglang_launch_table.dump(_resolved(ctx, ctx.args.resolve)), ctx.args.check)
    table = sglang_launch_table.load(ctx.patches_dir)
    root = ctx.patches_dir.resolve().parent
    for name, render in (("docs/patches.md", sglang_launch_table.render_docs), ("README.md", sglang_launch_table.render_readme)):
        document = root / name
        found[name] = _compare(document, render(document.read_text(encoding="utf-8"), table), ctx.args.check)
    return _done(ctx, found, "the launch-line tables")


def _resolved(ctx: Context, named: list[str]) -> dict[str, object]:
    """The committed table with the named releases' matrices resolved again (torch: the probe runs them)."""
    from ..audit import sglang_launch_table
    from ..oracle import sglang_launch_runs, sglang_releases

    releases = {r.version: r for r in sglang_releases.audit_releases(ctx.patches_dir)}
    unknown = [v for v in named if v not in releases]
    if unknown:
        msg = f"{', '.join(unknown)}: no stack installs that SGLang release"
        raise ConfigError(msg, path=ctx.patches_dir / "stacks.toml", item=", ".join(unknown),
                          expected="an SGLang release of a stack", found="none",
                          fix=f"name one of {', '.join(releases)}")
    path = ctx.patches_dir / "sglang" / sglang_launch_table.AUDIT
    table = sglang_launch_table.load(ctx.patches_dir) if path.is_file() else {"releases": {}}
    for version in named or list(releases):
        ctx.log(f"sglang {version}: resolving the launch-line matrix with its own code")
        table = sglang_launch_table.with_release(table, version, sglang_launch_runs.resolve_release(
            ctx.patches_dir, releases[version], ctx.source))
    return table


def _versions(ctx: Context, named: list[str]) -> list[str]:
    carried = [t.version for t in all_targets(ctx.patches_dir) if t.dist == FLASHINFER]
    unknown = [v for v in named if v not in carried]
    if unknown:
        msg = f"{', '.join(unknown)}: no series under {ctx.patches_dir / FLASHINFER}"
        raise ConfigError(msg, path=ctx.patches_dir / FLASHINFER, item=", ".join(unknown),
                          expected="a carried release", found="no series", fix="name carried releases")
    return named or carried


def _texts(ctx: Context, version: str) -> dict[str, str]:
    """The release's Python files as the scan reads them, from its pinned wheel (fetched if missing)."""
    wheel = releases.release_wheel(ctx.patches_dir, Target(FLASHINFER, version), ctx.source)
    with WheelReader(wheel.path) as reader:
        return api_audit.scan_wheel_files({n: reader.read(n) for n in reader.infos if api_audit.scanned(n)})


def _compare(path: Path, text: str, check: bool) -> str:
    """'same', else 'differs' (--check) or 'written'."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return "same"
    if check:
        return "differs"
    path.write_text(text, encoding="utf-8")
    return "written"


def _done(ctx: Context, found: dict[str, str], what: str) -> int:
    differ = sorted(k for k, state in found.items() if state == "differs")
    written = sorted(k for k, state in found.items() if state == "written")
    if differ:
        human = f"{what}: {', '.join(differ)} differ from what the generator writes; run it without --check"
    elif written:
        human = f"{what}: wrote {', '.join(written)}; review the diff and commit it"
    else:
        human = f"{what}: as the generator writes them"
    ctx.emit({"files": found, "differ": differ, "written": written}, human)
    return Exit.NEEDS_PERSON if differ else Exit.OK
