"""Progress on long work: one status line on stderr, redrawn in place, only when stderr is a terminal.

The library reports through `report(...)`, which does nothing until the CLI activates a `Progress`
(as logging does nothing without a handler); `--quiet`, `--json` and a redirected stderr keep it off,
so logs and the JSON document on stdout are never interleaved with terminal control codes.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

_CLEAR = "\r\x1b[K"  # carriage return, then erase to the end of the line (ECMA-48 EL)


class Progress:
    """A one-line status display; disabled, every method is a no-op."""

    def __init__(self, stream: TextIO | None = None, *, enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self._shown = False
        self._started = time.monotonic()

    def update(self, text: str) -> None:
        if not self.enabled:
            return
        width = _columns() - 1
        elapsed = f"{time.monotonic() - self._started:6.1f}s "
        self.stream.write(_CLEAR + (elapsed + text)[:width])
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        """Erase the status line, so that a log line can be printed in its place."""
        if self._shown:
            self.stream.write(_CLEAR)
            self.stream.flush()
            self._shown = False


_active = Progress(enabled=False)


def report(text: str) -> None:
    """Show what the tool is doing now, if a terminal is watching (see `activated`)."""
    _active.update(text)


def clear() -> None:
    _active.clear()


@contextmanager
def activated(progress: Progress) -> Iterator[Progress]:
    """Route `report` to `progress` for the duration, and erase its line at the end."""
    global _active
    previous, _active = _active, progress
    try:
        yield progress
    finally:
        progress.clear()
        _active = previous


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real file
        return False


def _columns() -> int:
    return shutil.get_terminal_size((100, 20)).columns
