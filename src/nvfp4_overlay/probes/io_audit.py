"""What the probes watch while dynamo traces: a wheel's own I/O, from Python's audit events, and the backend's stop.

A process started (any of SPAWN, or an exec) is the wheel's. A file opened is the wheel's unless
the tracer opened it to read the source it traces: linecache (its messages and stack traces) and
dynamo's funcname cache (the header of each node it creates, read once per file and process, so
whichever trace first creates a node in a file pays for that file; the probe interpreter turns it
off, probes/serve.py, and a probe run outside it still has it). A module's
cached bytecode stands for its source: an import reads one or the other, and counts the same.

The probe interpreters write bytecode (probes/serve.py), except while a trace is recorded
(``Phased``): a module a trace imports is then read, never written, whichever run came first.
``Watched`` is the trace probes' audit hook. A probe's backend raises ``Traced`` once
dynamo hands it the graph (running it would launch kernels, or build them); ``caused_by_traced``
tells that stop from dynamo giving up.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import FrameType
from typing import Any

SPAWN = ("subprocess.Popen", "os.posix_spawn", "os.spawn", "os.system", "os.fork", "os.forkpty")
_TRACER_READERS = ("linecache.py", "funcname_cache.py")


def is_spawn(event: str) -> bool:
    return event in SPAWN or event.startswith("os.exec")


def by_tracer(depth: int = 2) -> bool:
    """Whether the open being audited is the tracer reading source (called from an audit hook, or
    depth - 2 calls below one)."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None:
        if os.path.basename(frame.f_code.co_filename) in _TRACER_READERS:
            return True
        frame = frame.f_back
    return False


def add_open(events: list[list[str]], path: str, root: str) -> None:
    """An open of `path` as the event of a file under `root` (which ends in a separator), unless the
    tracer made it. A module's cached bytecode counts as its source, and an open of the file the
    event before names is that event again: an import looks for the bytecode and then reads the
    source, and that is one read, as it is when the bytecode is there."""
    file = source_of(os.path.abspath(path))
    if not file.startswith(root) or by_tracer(3):
        return
    event = ["open", file[len(root):]]
    if not events or events[-1] != event:
        events.append(event)


def source_of(path: str) -> str:
    """The file an open stands for: a module's source for its cached bytecode, else the path itself."""
    if path.endswith(".pyc") and f"{os.sep}__pycache__{os.sep}" in path:
        try:
            return importlib.util.source_from_cache(path)
        except ValueError:
            pass
    return path


class Phased:
    """A recorder's phase ("setup", "trace", "after", ...); while "trace", no bytecode is written, so
    that what a trace records of an import is the read alone, as it would be with bytecode off."""

    def __init__(self) -> None:
        self._phase = "setup"
        self._writes = not sys.dont_write_bytecode  # what the interpreter did before the trace

    @property
    def phase(self) -> str:
        return self._phase

    @phase.setter
    def phase(self, value: str) -> None:
        if value == "trace" and self._phase != "trace":
            self._writes, sys.dont_write_bytecode = not sys.dont_write_bytecode, True
        elif value != "trace" and self._phase == "trace":
            sys.dont_write_bytecode = not self._writes
        self._phase = value


class Watched(Phased):
    """A trace's own I/O, heard by ``audit`` (installed with sys.addaudithook): each process started, as
    [event, its first argument], and each file under `root` (which ends in a separator; "": none) opened,
    as add_open counts it; nothing outside the "trace" phase."""

    def __init__(self, root: str = "") -> None:
        super().__init__()
        self.root = root
        self.events: list[list[str]] = []

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.phase != "trace":
            return
        if is_spawn(event):
            self.events.append([event, repr(args[0])[:160]])
        elif self.root and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            add_open(self.events, os.fsdecode(args[0]), self.root)


class Traced(Exception):
    """Raised by a probe's backend once dynamo hands it the graph: the trace got through."""


def caused_by_traced(exc: BaseException) -> bool:
    """Whether `exc` is a Traced or was raised from one: dynamo wraps what a backend raises (its
    BackendCompilerFailed keeps it as inner_exception, and as its cause); a chain that loops ends."""
    seen: list[BaseException] = []
    chain: BaseException | None = exc
    while chain is not None and chain not in seen:
        if isinstance(chain, Traced):
            return True
        seen.append(chain)
        chain = getattr(chain, "inner_exception", None) or chain.__cause__ or chain.__context__
    return False
