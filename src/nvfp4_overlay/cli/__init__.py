"""The command line, `nvfp4-overlay COMMAND`: the only place that prints and decides the exit status.

parser.py holds the arguments and their help, context.py checks the paths and variables they name
before any work starts; build.py, listing.py, serve.py, doctor.py, commands.py and generate.py run the commands, each module
imported only when its command runs, so the CLI starts without the build machinery. Errors are
rendered here, once: a sentence on stderr, and with --json their data on stdout (argument errors too).
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Sequence

from .. import progress
from ..errors import ConfigError, Exit, OverlayError
from .context import Context
from .parser import COMMANDS, parser

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser().parse_args(argv)
    except OverlayError as exc:  # argparse's own errors (UsageError): before any option is known, --json is read raw
        return _report(exc, "--json" in argv)
    try:
        ctx = Context(args)
        module = importlib.import_module(f"{__name__}.{COMMANDS[args.command][0]}")
        run = getattr(module, f"cmd_{args.command.replace('-', '_')}")
        with progress.activated(progress.Progress(enabled=False if ctx.quiet else None)):
            return int(run(ctx))
    except OverlayError as exc:
        return _report(exc, args.json)
    except OSError as exc:  # a path at the edge: unreadable, unwritable, a file where a directory should be
        where = exc.filename or "a file"
        msg = f"{where}: {exc.strerror or exc}; check the path and its permissions"
        return _report(ConfigError(msg, path=exc.filename, found=exc.strerror, fix="check the path and its permissions"),
                       args.json)
    except KeyboardInterrupt:
        return Exit.INTERRUPTED


def _report(exc: OverlayError, as_json: bool) -> int:
    progress.clear()
    print(f"error: {exc}", file=sys.stderr)
    if as_json:
        print(json.dumps({"error": exc.data()}, indent=2, sort_keys=True))
    return int(exc.exit_code)
