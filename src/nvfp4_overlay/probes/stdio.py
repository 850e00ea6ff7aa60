"""A probe's standard streams: its plan from stdin, one JSON document on stdout, and whatever upstream
prints while the probe runs (0.6.8.post1's cuDNN handle, a JIT build's lines) on stderr, where it is no result."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def prints_to_stderr() -> Iterator[None]:
    """sys.stdout is stderr inside: stdout carries the answer alone."""
    out, sys.stdout = sys.stdout, sys.stderr
    try:
        yield
    finally:
        sys.stdout = out


def answer(run: Callable[[dict[str, Any]], Any]) -> None:
    """A probe run on its own (``python -m nvfp4_overlay.probes.<what>.<probe> < plan.json``): run(plan), printed."""
    plan = json.load(sys.stdin)
    with prints_to_stderr():
        result = run(plan)
    json.dump(result, sys.stdout)
