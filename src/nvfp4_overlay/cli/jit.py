"""The command that prebuilds a stack's FlashInfer JIT modules for a GPU family: jit-cache."""

from __future__ import annotations

from pathlib import Path

from ..errors import Exit
from ..wheel import Request, build_cache, default_cache_dir
from .context import Context, source_date_epoch


def cmd_jit_cache(ctx: Context) -> int:
    args = ctx.args
    request = Request(args.stack, args.gpu, tuple(args.module) if args.module else None, args.torch_cuda)
    cache = Path(args.build_cache) if args.build_cache else default_cache_dir()
    done = build_cache(request, ctx.patches_dir, ctx.dist_dir, cache, source_date_epoch(), ctx.log)
    modules = done.provenance["modules"]
    included = sorted(n for n, m in modules.items() if m["included"])
    left = sorted(set(modules) - set(included))
    lines = [f"built {done.wheel} ({len(included)} of {len(modules)} modules of the plan)"]
    lines += [f"  {n}: {modules[n]['build_seconds']} s" for n in included]
    for name in left:
        why = modules[name].get("not_prebuilt") or "not asked for (--module)"
        lines.append(f"  not in it, builds at first call: {name}: {why}")
    lines.append(f"install beside the patched wheels with: pip install --no-deps {done.wheel}")
    document = {"wheel": str(done.wheel), "sha256": done.sha256, "version": done.version, "provenance": done.provenance}
    ctx.emit(document, "\n".join(lines))
    return Exit.OK
