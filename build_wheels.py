#!/usr/bin/env python3
"""The door from a clone: `python build_wheels.py COMMAND`, from any Python 3.10+ (see --help).

The commands import their dependencies only when they run, so they are checked here, before any:
an interpreter that lacks one hands over to the clone's .venv (`make wheels` makes it), or says so.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from importlib.util import find_spec
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_PYTHON = HERE / ".venv" / "bin" / "python"
# pyproject.toml's [project] dependencies by import name (tests/unit/test_build_wheels.py holds the two together).
REQUIRES = ("packaging", "unidiff", "merge3", *(("tomli",) if sys.version_info < (3, 11) else ()))
PROG = "NVFP4_OVERLAY_PROG"  # how the user ran this door, kept across the hand-over to .venv


def missing() -> list[str]:
    old = sys.version_info < (3, 10)
    return [f"Python 3.10+ (this is {sys.version.split()[0]})"] if old else [m for m in REQUIRES if find_spec(m) is None]


def invoked_as() -> str:
    """The command the user typed, to paste again: `python3 build_wheels.py`, `.venv/bin/python build_wheels.py`
    (an absolute interpreter by its name when PATH has that name: a version manager's shim runs it so)."""
    python = getattr(sys, "orig_argv", [sys.executable])[0]
    name = os.path.basename(python)
    return shlex.join([name if os.path.isabs(python) and shutil.which(name) else python, sys.argv[0]])


def refuse(lacking: list[str], *, in_venv: bool) -> int:
    """Exit 2, as the CLI reports a bad environment: a sentence on stderr, and under --json a document on stdout."""
    if in_venv:
        fix = f"{shlex.quote(str(VENV_PYTHON))} -m pip install -e {shlex.quote(str(HERE))}"
        msg = f"{VENV_PYTHON} lacks {', '.join(lacking)}; repair that environment: '{fix}'"
    elif sys.version_info < (3, 10):  # noqa: UP036 - the door runs there to say so; make wheels would use it too
        fix = f"make -C {shlex.quote(str(HERE))} wheels PYTHON=python3.12"
        msg = (f"{sys.executable} is Python {sys.version.split()[0]}; the tool needs 3.10 or newer: run it with one, or "
               f"make the clone's .venv with one once ('{fix}'), which this command then uses by itself")
    else:
        fix = f"make -C {shlex.quote(str(HERE))} wheels"
        msg = (f"{sys.executable} lacks {', '.join(lacking)} and the clone has no {HERE / '.venv'}; run 'make wheels' "
               f"in {HERE} once (it makes .venv, which this command then uses by itself), or run it from an "
               f"environment where 'pip install -e {shlex.quote(str(HERE))}' installed it")
    print(f"error: {msg}", file=sys.stderr)
    if "--json" in sys.argv[1:]:
        error = {"kind": "ConfigError", "exit_code": 2, "message": msg, "path": sys.executable,
                 "expected": "packaging, unidiff, merge3 (pyproject.toml)", "found": "missing: " + ", ".join(lacking),
                 "fix": fix}
        print(json.dumps({"error": error}, indent=2, sort_keys=True))
    return 2


if __name__ == "__main__":
    handed_over = PROG in os.environ  # this is .venv's interpreter, started by the door: never hand over twice
    prog = os.environ.pop(PROG, None) or invoked_as()
    in_venv = handed_over or Path(sys.executable) == VENV_PYTHON
    lacking = missing()
    if lacking and VENV_PYTHON.is_file() and not in_venv:
        os.environ[PROG] = prog
        try:
            os.execv(VENV_PYTHON, [str(VENV_PYTHON), str(Path(__file__).resolve()), *sys.argv[1:]])
        except OSError:  # .venv's python does not run (moved, another machine's): say what to do, below
            os.environ.pop(PROG)
    if lacking:
        sys.exit(refuse(lacking, in_venv=in_venv))
    sys.path.insert(0, str(HERE / "src"))
    from nvfp4_overlay.cli import main

    sys.exit(main(prog=prog))
