"""The command that prebuilds a stack's FlashInfer JIT modules for a GPU family: jit-cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..audit import sglang_audit, sglang_calls
from ..errors import Exit
from ..oracle import SGLANG, sglang_releases
from ..patch import Stack, load_stacks
from ..wheel import Request, build_cache, default_cache_dir, fetch
from .context import Context, source_date_epoch


def cmd_jit_cache(ctx: Context) -> int:
    args = ctx.args
    cache = Path(args.build_cache) if args.build_cache else default_cache_dir()
    stacks = load_stacks(ctx.patches_dir)
    stack = stacks.get(args.stack or stacks.default, ctx.patches_dir / "stacks.toml")
    release, serving = (None, None) if args.all_routes else _serving_path(ctx, stack, cache)
    request = Request(stack.name, args.gpu, tuple(args.module) if args.module else None, args.torch_cuda,
                      serving=serving, sglang=release, plan_only=args.plan)
    done = build_cache(request, ctx.patches_dir, ctx.dist_dir, cache, source_date_epoch(), ctx.log)
    modules = done.provenance["modules"]
    if done.wheel is None:
        ctx.emit({"plan": done.provenance, "calls": dict(done.calls)}, "\n".join(_plan_lines(done.provenance)))
        return Exit.OK
    included = sorted(n for n, m in modules.items() if m["included"])
    left = sorted(set(modules) - set(included))
    lines = [f"built {done.wheel} ({len(included)} of {len(modules)} modules of the plan)"]
    lines += [f"  {n}: {done.seconds.get(n)} s" for n in included]
    for name in left:
        why = modules[name].get("not_prebuilt") or "not asked for (--module)"
        lines.append(f"  not in it, builds at first call: {name}: {why}")
    lines.append(f"install beside the patched wheels with: pip install --no-deps {done.wheel}")
    document = {"wheel": str(done.wheel), "sha256": done.sha256, "version": done.version, "provenance": done.provenance,
                "build_seconds": dict(done.seconds)}
    ctx.emit(document, "\n".join(lines))
    return Exit.OK


def _serving_path(ctx: Context, stack: Stack, cache: Path) -> tuple[str | None, dict[str, list[str]] | None]:
    """(the stack's SGLang release, FlashInfer function -> its call sites there): from the pinned SGLang wheel's
    code (audit/sglang_calls.py), each site where the region table saw it run with its region and GPU.
    A stack with no SGLang has no serving path to narrow to: every route (None)."""
    carried = {t.version for t in stack.targets if t.dist == SGLANG}
    version = next(iter(carried), None) or next((t.version for t in stack.upstream if t.dist == SGLANG), None)
    if version is None:
        return None, None
    source = fetch.Source(cache_dir=cache, wheelhouse=None, offline=False, all_platforms=False,
                          python_version=None, platforms=())
    wheel = sglang_releases.upstream_wheel(ctx.patches_dir, sglang_releases.Release(version, bool(carried)), source)
    calls = sglang_calls.flashinfer_calls(wheel)
    table = sglang_audit.load_table(ctx.patches_dir)
    for function, sites in calls.items():
        sites += [f"compiled region {s}" for s in sglang_calls.region_sites(table, version, function)]
    ctx.log(f"the serving path of SGLang {version}: {len(calls)} FlashInfer functions called in sglang/srt "
            f"(--all-routes: every routed entry point instead)")
    return version, calls


def _plan_lines(provenance: dict[str, Any]) -> list[str]:
    path = provenance["serving_path"]
    scope = "every routed entry point (--all-routes)" if path["all_routes"] else \
        f"the routed entry points SGLang {path['sglang']} calls: {', '.join(path['entries'] or {}) or 'none'}"
    lines = [f"{provenance['stack']} on {provenance['gpu']} ({', '.join(provenance['archs'])}): the modules of {scope}"]
    homes = provenance.get("entry_points", {})
    for name, module in provenance["modules"].items():
        lines.append(f"  {name}: loaded by {', '.join(f'{homes[e]}.{e}' if e in homes else e for e in module['loaded_by'])}")
        for entry, sites in (module.get("sglang_sites") or {}).items():
            lines += [f"    {entry} at {site}" for site in sites]
    lines.append("nothing built (--plan); without it, nvcc builds these into the cache wheel")
    return lines
