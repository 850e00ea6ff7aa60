"""What the CLI writes: lines that a reader gone away cannot turn into a traceback, in the user's own words.

`nvfp4-overlay list | head -1` closes the pipe while the command still writes; the command then
finishes and exits with its own verdict, its remaining output discarded (a deploy gate reads the
verdict, not a BrokenPipeError). The library names the tool `nvfp4-overlay` in the commands it
suggests; the CLI prints them as the user ran it (`python build_wheels.py ...` from a clone), so
that each can be pasted as it is.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, TextIO

from .parser import COMMANDS, PROG

# `nvfp4-overlay COMMAND` as a suggestion, not inside a path (~/.cache/nvfp4-overlay) or a name (nvfp4-overlay[test]).
_SUGGESTED = re.compile(r"(?<![\w./~\[-])" + re.escape(PROG) + r"(?= (?:" + "|".join(COMMANDS) + r"|--help)\b)")


def as_invoked(text: str, prog: str) -> str:
    """text, its suggested commands spelled as the user runs the tool."""
    return text if prog == PROG else _SUGGESTED.sub(lambda _: prog, text)


def document_text(document: Any, prog: str) -> str:
    """One JSON document, its suggested commands spelled as the user runs the tool."""
    text = json.dumps(document, indent=2, sort_keys=True)
    return text if prog == PROG else _SUGGESTED.sub(lambda _: json.dumps(prog)[1:-1], text)


def say(text: str, stream: TextIO | None = None) -> None:
    """print, flushed, so that a closed reader shows here; then the rest of that stream's output is dropped."""
    stream = sys.stdout if stream is None else stream
    try:
        print(text, file=stream, flush=True)
    except BrokenPipeError:  # `| head -2`: the reader took what it wanted; the command goes on to its verdict
        discard(stream)


def discard(stream: TextIO) -> None:
    """Point the stream's descriptor at /dev/null: what is still buffered, and the interpreter's flush at exit,
    go nowhere instead of raising again."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stream never breaks
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
