"""`nvfp4-overlay generate NAME [--check]`: the generators of committed files (cli/generators.py names them).

Each writes only what differs and says which files did; with --check it writes nothing and exits 1
when a committed file differs from what it would write (make check-generated runs every check). The
old spellings `routes`, `audit-api` and `launch-table` run the same generators.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ..audit import api_audit, api_rules, routes
from ..carry import releases
from ..errors import ConfigError, Exit, UsageError
from ..patch import Target, all_targets
from ..wheel import WheelReader
from .context import Context
from .generators import GENERATORS

FLASHINFER = "flashinfer-python"
CUDA_SITES = f"{FLASHINFER}/flashinfer/_nvfp4_overlay/cuda_sites.py"  # under the overlay dir
Found = dict[str, str]  # file -> "same", "differs" (--check) or "written"


def cmd_generate(ctx: Context) -> int:
    """Run the named generator, or with --list name every one: what it writes and reads, torch, --check."""
    if ctx.args.list:
        return _list(ctx)
    name = ctx.args.generator
    if name is None:
        msg = f"{ctx.prog} generate: name a generator; '{ctx.prog} generate --list' names them"
        raise UsageError(msg, item="NAME", expected="a generator", found="none", fix=f"{ctx.prog} generate --list")
    if name == "stack-claims":  # prints what a maintainer reviews; writes nothing
        body = _stack_claims(ctx)
        ctx.emit({"claims": body}, body.rstrip("\n"))
        return Exit.OK
    return _done(ctx, RUNS[name](ctx), name)


def cmd_routes(ctx: Context) -> int:
    """The old spelling of `generate routes`."""
    found = _routes(ctx)
    return _done(ctx, found, f"{routes.PATCH} of {len(found)} releases")


def cmd_audit_api(ctx: Context) -> int:
    """The old spelling of `generate audit-api`."""
    return _done(ctx, _audit_api(ctx), str(ctx.patches_dir / FLASHINFER / api_audit.AUDIT))


def cmd_launch_table(ctx: Context) -> int:
    """The old spelling of `generate launch-table`."""
    return _done(ctx, _launch_table(ctx), "the launch-line tables")


def _list(ctx: Context) -> int:
    document = {"generators": [{"name": g.name, "summary": g.summary, "writes": list(g.writes), "reads": list(g.reads),
                                "torch": g.torch, "check": g.check, "upstream_wheels": g.upstream} for g in GENERATORS]}
    lines = []
    for g in GENERATORS:
        needs = "needs torch" if g.torch == "yes" else "torch " + g.torch if g.torch != "no" else "no torch"
        lines += [f"{g.name}  ({'--check; ' if g.check else ''}{needs})", f"    {g.summary}",
                  f"    writes: {'; '.join(g.writes)}", f"    reads: {'; '.join(g.reads)}"]
    lines.append(f"Run one: {ctx.prog} generate NAME [--check]; make check-generated runs every --check.")
    ctx.emit(document, "\n".join(lines))
    return Exit.OK


def _routes(ctx: Context) -> Found:
    """Patch 0002 of each named (default: every carried) flashinfer-python release, from its own text."""
    names = routes.routed_names(ctx.overlay_dir)
    found: Found = {}
    for version in _versions(ctx, ctx.args.releases):
        text = routes.route_patch(_texts(ctx, version), names)
        path = ctx.patches_dir / FLASHINFER / version / routes.PATCH
        found[version] = _compare(path, text, ctx.args.check)
        ctx.log(f"{version}: {found[version]}")
    return found


def _audit_api(ctx: Context) -> Found:
    """patches/flashinfer-python/audit-serving-api.json from scans of every carried flashinfer-python release,
    then docs/serving-api.md's table from the audit as committed (written first, unless --check)."""
    keys: set[str] = set()
    versions = _versions(ctx, [])
    for version in versions:
        ctx.log(f"{version}: scanning its public functions that reach a kernel loader")
        keys |= {fn.key for fn in api_audit.scan(_texts(ctx, version), store=ctx.source.scans_dir)}
    rules = api_rules.rules(keys, routes.routed_names(ctx.overlay_dir))
    path = ctx.patches_dir / FLASHINFER / api_audit.AUDIT
    state = _compare(path, json.dumps({"rules": rules}, indent=1) + "\n", ctx.args.check)
    ctx.log(f"{path}: {state}: {len(rules)} rules for {len(keys)} functions of {len(versions)} releases")
    return {api_audit.AUDIT: state, **_documents(ctx, {"docs/serving-api.md": lambda text: api_audit.render_into(
        text, api_audit.load_audit(ctx.patches_dir))})}


def _launch_table(ctx: Context) -> Found:
    """docs/patches.md's and the README's launch-line tables from patches/sglang/audit-launch.json; with
    --resolve, that file first, from the named (default: every) SGLang release's own code."""
    from ..audit import sglang_launch_table

    path = ctx.patches_dir / "sglang" / sglang_launch_table.AUDIT
    found: Found = {}
    if ctx.args.resolve is not None:
        found[sglang_launch_table.AUDIT] = _compare(path, sglang_launch_table.dump(_resolved(ctx, ctx.args.resolve)), ctx.args.check)
    table = sglang_launch_table.load(ctx.patches_dir)
    return {**found, **_documents(ctx, {"docs/patches.md": lambda text: sglang_launch_table.render_docs(text, table),
                                        "README.md": lambda text: sglang_launch_table.render_readme(text, table)})}


def _cuda_audit(ctx: Context) -> Found:
    """patches/flashinfer-python/audit-cuda-versions.json made anew from every carried release's scan."""
    from ..audit import cuda_audit, cuda_audit_make

    path = ctx.patches_dir / FLASHINFER / cuda_audit.AUDIT
    return {cuda_audit.AUDIT: _compare(path, cuda_audit_make.rescanned(ctx.patches_dir, ctx.source), ctx.args.check)}


def _cuda_docs(ctx: Context) -> Found:
    """docs/patches.md's audit table and the overlay's cuda_sites.py, rendered from the CUDA audit."""
    from ..audit import cuda_audit

    audit = cuda_audit.load_audit(ctx.patches_dir)
    sites = ctx.overlay_dir / CUDA_SITES
    found = _documents(ctx, {"docs/patches.md": lambda text: cuda_audit.render_into(text, audit)})
    return {**found, f"overlay/{CUDA_SITES}": _compare(sites, cuda_audit.overlay_table(audit), ctx.args.check)}


def _compile_list(ctx: Context) -> Found:
    """FlashInfer's own compile list of the named (default: every carried) release, probed (torch)."""
    from ..oracle import compile_table

    path = compile_table.write_table(ctx.patches_dir, ctx.overlay_dir, ctx.args.releases, ctx.source.cache_dir)
    return {str(path): "written"}


def _compile_list_docs(ctx: Context) -> Found:
    from ..oracle import compile_table

    table = compile_table.load_table(ctx.patches_dir)
    return _documents(ctx, {"docs/compile-list.md": lambda text: compile_table.render_into(text, table)})


def _sglang_regions(ctx: Context) -> Found:
    """The region table's rows of the named (default: every) stack's SGLang release, probed (torch)."""
    from ..oracle import sglang_table

    return {str(sglang_table.write_table(ctx.patches_dir, ctx.overlay_dir, ctx.args.releases, ctx.source)): "written"}


def _sglang_regions_docs(ctx: Context) -> Found:
    from ..oracle import sglang_table

    return _documents(ctx, {"docs/sglang-regions.md": lambda text: sglang_table.rendered_docs(
        ctx.patches_dir, ctx.overlay_dir, text)})


def _stack_claims(ctx: Context) -> str:
    """stack-claims.toml's body for what holds now, per stack the regions nothing remains raw in."""
    from ..oracle import sglang_table

    return sglang_table.covered_claims(ctx.patches_dir, ctx.overlay_dir)


RUNS: dict[str, Callable[[Context], Found]] = {
    "routes": _routes, "audit-api": _audit_api, "cuda-audit": _cuda_audit, "cuda-docs": _cuda_docs,
    "launch-table": _launch_table, "compile-list": _compile_list, "compile-list-docs": _compile_list_docs,
    "sglang-regions": _sglang_regions, "sglang-regions-docs": _sglang_regions_docs,
}


def _documents(ctx: Context, renders: dict[str, Callable[[str], str]]) -> Found:
    """Each document of the checkout (beside the patches dir), compared with or written as its render."""
    root = ctx.patches_dir.resolve().parent
    missing = [name for name in renders if not (root / name).is_file()]
    if missing:
        msg = (f"{root / missing[0]}: no such document beside {ctx.patches_dir}; the generators write a clone's "
               f"files: run it in the clone, or name its patches with --patches-dir")
        raise ConfigError(msg, path=root / missing[0], item="--patches-dir", expected="a clone's document",
                          found="missing", fix="run it in the clone, or --patches-dir CLONE/patches")
    return {name: _compare(root / name, render((root / name).read_text(encoding="utf-8")), ctx.args.check)
            for name, render in renders.items()}


def _resolved(ctx: Context, named: list[str]) -> dict[str, object]:
    """The committed table with the named releases' matrices resolved again (torch: the probe runs them)."""
    from ..audit import sglang_launch_table
    from ..oracle import sglang_launch_runs, sglang_releases

    releases = {r.version: r for r in sglang_releases.audit_releases(ctx.patches_dir)}
    unknown = [v for v in named if v not in releases]
    if unknown:
        msg = f"{', '.join(unknown)}: no stack installs that SGLang release; name one of {', '.join(releases)}"
        raise ConfigError(msg, path=ctx.patches_dir / "stacks.toml", item=", ".join(unknown),
                          expected="an SGLang release of a stack", found="none", fix="see 'nvfp4-overlay list'")
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
        msg = f"{', '.join(unknown)}: no series under {ctx.patches_dir / FLASHINFER}; name carried releases"
        raise ConfigError(msg, path=ctx.patches_dir / FLASHINFER, item=", ".join(unknown),
                          expected="a carried release", found="no series", fix="see 'nvfp4-overlay list'")
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


def _done(ctx: Context, found: Found, what: str) -> int:
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
