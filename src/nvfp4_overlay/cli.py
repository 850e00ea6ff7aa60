"""The command line: parses arguments, calls the library, prints, and turns errors into exit codes."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from . import __version__, api, fetch, progress
from .errors import OverlayError
from .manifest import Stack, all_targets, load_stacks, load_upstream
from .patching import read_series
from .verify import verify_wheel

PACKAGE_DATA = Path(__file__).resolve().parent


class Context:
    """What every command gets: the resolved directories, the wheel source, and where to log."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.patches_dir = _data_dir(args.patches_dir, "patches")
        self.overlay_dir = _data_dir(args.overlay_dir, "overlay")
        self.dist_dir = Path(args.dist_dir)
        self.json = bool(args.json)
        self.quiet = bool(getattr(args, "quiet", False)) or self.json
        self.source = fetch.Source(
            cache_dir=Path(args.cache_dir) if args.cache_dir else fetch.default_cache_dir(),
            wheelhouse=Path(args.wheelhouse) if args.wheelhouse else None,
            offline=bool(args.offline),
            all_platforms=bool(args.all_platforms),
            python_version=args.python_version,
            platforms=tuple(args.platform or ()),
        )

    def log(self, message: str) -> None:
        """Human progress and warnings: always stderr, so --json keeps stdout to one document."""
        if not self.quiet or message.startswith("warning:"):
            progress.clear()  # the status line, if one is drawn, gives way to the log line
            print(message, file=sys.stderr)

    def options(self) -> api.Options:
        epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
        return api.Options(self.patches_dir, self.overlay_dir, self.dist_dir, self.source,
                           fuzz=getattr(self.args, "fuzz", 0), epoch=epoch)

    def emit(self, document: Any, human: str) -> None:
        print(json.dumps(document, indent=2, sort_keys=True) if self.json else human)


def _data_dir(given: str | None, name: str) -> Path:
    """The project's patches/ or overlay/: as given, else ./NAME, else the copy the package carries."""
    if given:
        return Path(given)
    here = Path(name)
    return here if here.is_dir() else PACKAGE_DATA / name


def _common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("inputs and outputs")
    group.add_argument("--patches-dir", help="the series (default: ./patches, else the installed copy)")
    group.add_argument("--overlay-dir", help="whole files to add (default: ./overlay, else the installed copy)")
    group.add_argument("--dist-dir", default="dist", help="where patched wheels go (default: dist)")
    group.add_argument("--cache-dir", help="upstream wheel cache (default: $NVFP4_OVERLAY_CACHE or ~/.cache/nvfp4-overlay)")
    group.add_argument("--wheelhouse", help="take upstream wheels from this folder first")
    group.add_argument("--offline", action="store_true", help="never run pip; use the wheelhouse and cache only")
    group.add_argument("--json", action="store_true", help="one JSON document on stdout; logs on stderr")
    group.add_argument("--quiet", action="store_true", help="no progress on stderr")
    group.add_argument("--all-platforms", action="store_true", help="every pinned wheel, not only this platform's")
    group.add_argument("--python-version", help="build the wheel for this Python (X.Y), as pip takes it")
    group.add_argument("--platform", action="append", help="build the wheel for this platform tag (repeatable)")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="nvfp4-overlay", description=__doc__)
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("build", help="patched wheels of a stack, or of targets DIST==VERSION")
    p.add_argument("--stack", help="a stack name from stacks.toml, or 'all' (default: the default stack)")
    p.add_argument("--fuzz", type=int, default=0, help="allow up to N lines of fuzz (default 0: exact context)")
    p.add_argument("targets", nargs="*", metavar="TARGET")
    _common(p)

    p = sub.add_parser("verify", help="check RECORD hashes and the provenance of built wheels")
    p.add_argument("wheels", nargs="+", metavar="WHEEL")
    _common(p)

    p = sub.add_parser("list", help="stacks, targets, series, and which are built")
    _common(p)

    p = sub.add_parser("drift", help="apply every series to other upstream releases and classify each hunk")
    p.add_argument("--against", nargs="+", default=["latest"], metavar="pinned|latest|all|VERSION")
    p.add_argument("--dist", help="only this distribution's series")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown")
    _common(p)

    p = sub.add_parser("refresh", help="port a series to a new release where every hunk applies exactly or at an offset")
    p.add_argument("dist")
    p.add_argument("from_version", metavar="FROM_VERSION")
    p.add_argument("to_version", metavar="TO_VERSION")
    p.add_argument("--drop-upstream", action="store_true", help="drop hunks upstream already has, and say so")
    _common(p)

    p = sub.add_parser("doctor", help="what this Python environment has installed, and whether FP4 traces",
                       description="exit 0: patched and intact; 1: unpatched, or the trace check failed; "
                                   "3: an installed file differs from its RECORD")
    p.add_argument("--no-trace", action="store_true", help="skip the live torch.compile(fullgraph=True) check")
    p.add_argument("--trace-timeout", type=float, default=300, metavar="SECONDS",
                   help="give the trace check this long before calling it hung (default 300)")
    _common(p)

    p = sub.add_parser("index", help="a static PEP 503 index of the dist dir")
    p.add_argument("--output", metavar="DIR", help="where the index goes (default: DIST_DIR/simple)")
    _common(p)
    return top


def cmd_build(ctx: Context) -> int:
    stacks = load_stacks(ctx.patches_dir)
    targets = api.resolve_targets(stacks, ctx.args.stack, ctx.args.targets, ctx.patches_dir / "stacks.toml")
    built = api.build_targets(targets, ctx.options(), ctx.log)
    shipped = [] if ctx.args.targets or ctx.args.stack == "all" else list(
        stacks.get(ctx.args.stack or stacks.default, ctx.patches_dir / "stacks.toml").upstream)
    install = api.install_commands(built, shipped, ctx.dist_dir)
    document = {"built": [_built_json(b) for b in built], "dist_dir": str(ctx.dist_dir), "install": install}
    ctx.emit(document, "\n".join([*(f"built {b.wheel}" for b in built), "install with:", *(f"  {c}" for c in install)]))
    return 0


def _built_json(b: api.Built) -> dict[str, Any]:
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
    return 0 if all(v.ok for v in verdicts) else 3


def cmd_list(ctx: Context) -> int:
    stacks = load_stacks(ctx.patches_dir)
    series = []
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


COMMANDS = {"build": cmd_build, "verify": cmd_verify, "list": cmd_list}
# Commands whose code lives in a module of its own: module name -> function run(ctx) -> exit code.
MODULE_COMMANDS = {"drift": "drift", "refresh": "drift", "doctor": "doctor", "index": "index"}


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        ctx = Context(args)
        with progress.activated(progress.Progress(enabled=False if ctx.quiet else None)):
            if args.command in COMMANDS:
                return COMMANDS[args.command](ctx)
            module = importlib.import_module(f".{MODULE_COMMANDS[args.command]}", __package__)
            return int(getattr(module, f"cmd_{args.command}")(ctx))
    except OverlayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
