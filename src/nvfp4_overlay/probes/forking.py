"""Forked children for the probes: one per wheel tree (a few at a time), one per cell inside it.

The parent has imported torch; a child imports one FlashInfer tree, and a grandchild per cell sees
that import as it was left. Each child writes its JSON result to a pipe, read whole before the
child is reaped (a full pipe would block it).
"""

from __future__ import annotations

import json
import os
import selectors
import traceback
from collections.abc import Callable, Sequence
from typing import Any


def each_tree(trees: Sequence[dict[str, Any]], work: Callable[[dict[str, Any]], Any], jobs: int) -> dict[str, Any]:
    """{tree["key"]: work(tree)}, each in its own child, `jobs` children at a time."""
    results: dict[str, Any] = {}
    waiting = list(trees)
    running: dict[int, tuple[str, int, list[bytes]]] = {}  # pipe -> (tree, child, what it wrote)
    select = selectors.DefaultSelector()
    while waiting or running:
        while waiting and len(running) < max(jobs, 1):
            tree = waiting.pop(0)
            read, pid = _fork(lambda tree=tree: work(tree))
            running[read] = (tree["key"], pid, [])
            select.register(read, selectors.EVENT_READ)
        for ready, _ in select.select():
            key, pid, chunks = running[ready.fd]
            chunk = os.read(ready.fd, 1 << 16)
            if chunk:
                chunks.append(chunk)
                continue
            select.unregister(ready.fd)
            os.close(ready.fd)
            os.waitpid(pid, 0)
            del running[ready.fd]
            results[key] = json.loads(b"".join(chunks) or b'{"crash": "no output"}')
    return results


def in_child(work: Callable[[], Any]) -> Any:
    """work() in a forked child; its JSON result."""
    read, pid = _fork(work)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b'{"crash": "no output"}')


def _fork(work: Any) -> tuple[int, int]:
    """A child that runs work() and writes its JSON to the pipe whose read end is returned."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _run_child(write, work)
    os.close(write)
    return read, pid


def _run_child(write: int, work: Any) -> None:
    try:
        try:
            result = work()
        except BaseException:  # noqa: BLE001 - reported to the parent, which fails the test with it
            result = {"crash": traceback.format_exc()[-4000:]}
        data = json.dumps(result).encode()
        while data:
            data = data[os.write(write, data):]
    finally:
        os._exit(0)


