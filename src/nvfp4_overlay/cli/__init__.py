"""The command line, `nvfp4-overlay COMMAND`: the only place that prints and decides the exit status.

parser.py holds the arguments and their help (generators.py names the generators `generate` runs), context.py checks
the paths and variables they name before any work starts; build.py, listing.py, operate.py, doctor.py, commands.py and
generate.py run the commands, each module
imported only when its command runs, so the CLI starts without the build machinery. Errors are
rendered here, once: a sentence on stderr, and with --json their data on stdout (argument errors too,
a full disk, Ctrl-C, SIGTERM); output.py writes it all, so that a closed pipe ends the output, not the
command. SIGTERM is raised in the main thread as Ctrl-C's KeyboardInterrupt is, so that every `with`
and `finally` on the way out runs (a build's temporaries removed, a child pip stopped) before the
report (exit 143, where Python's default would end the process at once and leave them).
"""

from __future__ import annotations

import errno
import importlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .. import progress
from ..errors import ConfigError, Exit, Interrupted, OverlayError
from . import output
from .context import Context
from .parser import COMMANDS, PROG, parser

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Run one command; `prog` is how the user ran the tool, for the commands its messages suggest."""
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv  # until the arguments are parsed
    ctx: Context | None = None
    try:
        with _sigterm_raised():
            args = parser(prog).parse_args(argv)  # argparse's own errors raise UsageError
            as_json = bool(getattr(args, "json", False))
            ctx = Context(args, prog)
            module = importlib.import_module(f"{__name__}.{COMMANDS[args.command][0]}")
            run = getattr(module, f"cmd_{args.command.replace('-', '_')}")
            with progress.activated(progress.Progress(enabled=False if ctx.quiet else None)):
                return int(run(ctx))
    except OverlayError as exc:
        return _report(exc, as_json, prog)
    except (KeyboardInterrupt, _Terminated) as exc:
        term = isinstance(exc, _Terminated)
        how = "terminated (SIGTERM)" if term else "interrupted (Ctrl-C)"
        msg = (f"{how}: the command stopped where it was (a build leaves the dist dir and the cache as they were); "
               f"run it again")
        return _report(Interrupted(msg, terminated=term, found="SIGTERM" if term else "SIGINT",
                                   fix="run the command again"), as_json, prog)
    except BrokenPipeError:  # a write outside output.say: the verdict is unknown, so it is not "done"
        output.discard(sys.stdout)
        output.discard(sys.stderr)
        return Exit.NEEDS_PERSON
    except ModuleNotFoundError as exc:  # a dependency this interpreter lacks (build_wheels.py checks the usual ones)
        if (exc.name or "").startswith("nvfp4_overlay"):  # not a dependency: a fault of this package
            raise
        return _report(_missing_module(exc), as_json, prog)
    except OSError as exc:  # a path at the edge: unreadable, unwritable, full, a file where a directory should be
        return _report(_os_error(exc, ctx), as_json, prog)


class _Terminated(BaseException):
    """SIGTERM, raised where the main thread is (a BaseException, as KeyboardInterrupt, so that no `except
    Exception` on the way takes it for an error of its own)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated


@contextmanager
def _sigterm_raised() -> Iterator[None]:
    """SIGTERM raises _Terminated while a command runs; the handler before it is put back after (main() also
    runs inside tests and other programs). Only the main thread may set a handler: elsewhere it is left be."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _report(exc: OverlayError, as_json: bool, prog: str) -> int:
    progress.clear()
    output.say(f"error: {output.as_invoked(str(exc), prog)}", sys.stderr)
    if as_json:
        output.say(output.document_text({"error": exc.data()}, prog))
    return int(exc.exit_code)


def _missing_module(exc: ModuleNotFoundError) -> ConfigError:
    msg = (f"{sys.executable} lacks the module {exc.name}, which this command needs; install the project into "
           f"this interpreter ('pip install -e .' in the clone, or 'make wheels', which makes .venv)")
    return ConfigError(msg, path=sys.executable, item=exc.name, expected="the project's dependencies",
                       found="missing", fix="make wheels")


def _os_error(exc: OSError, ctx: Context | None) -> ConfigError:
    """An OSError as the sentence a person acts on: the path, what happened, and the fix for that errno."""
    places = ctx.writes() if ctx is not None else {}
    path = exc.filename
    option = next((name for name, where in places.items() if path and _within(Path(path), where)), None)
    elsewhere = f"point {option} at" if option else "use"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free space on that file system, or {elsewhere} another disk"
    elif exc.errno == errno.EROFS:
        fix = f"{elsewhere} a writable directory"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        fix = f"fix its permissions, or {elsewhere} a directory this user may write"
    else:
        fix = "check the path and its permissions"
    if path is None:  # nothing names the file: say where the command writes
        where = ", ".join(f"{name} {place}" for name, place in places.items()) or "the current directory"
        msg = f"{exc.strerror or exc} while writing to one of: {where}; {fix}"
    else:
        msg = f"{path}: {exc.strerror or exc}; {fix}"
    return ConfigError(msg, path=path, item=option, found=exc.strerror or str(exc), fix=fix)


def _within(path: Path, directory: Path) -> bool:
    path, directory = path.absolute(), directory.absolute()
    return path == directory or directory in path.parents
