"""What the probes count as a wheel's own I/O while dynamo traces, from Python's audit events.

A process started (any of SPAWN, or an exec) is the wheel's. A file opened is the wheel's unless
the tracer opened it to read the source it traces: linecache (its messages and stack traces) and
dynamo's funcname cache (the "# File: ..., code: ..." header of each node it creates, read once per
file and process, so whichever trace first creates a node in a file pays for that file).
"""

from __future__ import annotations

import os
import sys
from types import FrameType

SPAWN = ("subprocess.Popen", "os.posix_spawn", "os.spawn", "os.system", "os.fork", "os.forkpty")
_TRACER_READERS = ("linecache.py", "funcname_cache.py")


def is_spawn(event: str) -> bool:
    return event in SPAWN or event.startswith("os.exec")


def by_tracer() -> bool:
    """Whether the open being audited is the tracer reading source (called from an audit hook)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if os.path.basename(frame.f_code.co_filename) in _TRACER_READERS:
            return True
        frame = frame.f_back
    return False
