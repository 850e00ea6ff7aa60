"""A pytest plugin: FlashInfer's own tests under compile_harness, each test a case with its counts.

``NVFP4_COMPILE_TARGETS="flashinfer.norm.rmsnorm,flashinfer.rope.apply_rope" pytest -p
nvfp4_overlay.probes.flashinfer.compile_plugin tests/...``: before any test runs, every name each
target is reachable by is replaced (compile_harness.Harness.install, backend NVFP4_COMPILE_BACKEND,
inductor by default, as FlashInfer's own compile mode); each test's outcome and counts (calls, the
calls that ran a compiled graph, those that ran none, the opaque ops) are appended to the JSON lines
file NVFP4_COMPILE_REPORT. A test that called no target is reported with calls 0: it is not a case.
FlashInfer's own compile mode (FLASHINFER_TEST_TORCH_COMPILE) stays off: this replaces it.

NVFP4_COMPILE_ONLY (comma-separated ``file::test_function``) keeps those test functions alone, so
that one pytest run covers the tests of the list's functions in many files (pytest's -k matches the
module's name too). NVFP4_COMPILE_PER_TEST=N keeps N parametrizations of each test function, spread evenly over its
collected items (the first, the last and N - 2 between, in collection order): a representative
subset where every JIT module a parametrization needs is built on the GPU, and the same subset on
every wheel run with the same tests.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from dataclasses import asdict
from typing import Any

import pytest
import torch

from nvfp4_overlay.probes.flashinfer.compile_harness import Counts, Harness

_harness: Harness | None = None


def pytest_configure(config: Any) -> None:
    global _harness
    targets = [t for t in os.environ.get("NVFP4_COMPILE_TARGETS", "").split(",") if t]
    if not targets:
        return
    torch._dynamo.config.cache_size_limit = 128  # as FlashInfer's own compile mode sets it
    _harness = Harness(os.environ.get("NVFP4_COMPILE_BACKEND", "inductor"))
    _write({"replaced": _harness.install(targets)})


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    only = {t for t in os.environ.get("NVFP4_COMPILE_ONLY", "").split(",") if t}
    keep = int(os.environ.get("NVFP4_COMPILE_PER_TEST", "0"))
    if not only and keep <= 0:
        return
    by_function: dict[str, list[Any]] = {}
    for item in items:
        function = item.nodeid.split("[", 1)[0]
        if not only or function in only:
            by_function.setdefault(function, []).append(item)
    chosen = {id(item) for group in by_function.values() for item in (spread(group, keep) if keep > 0 else group)}
    deselected = [item for item in items if id(item) not in chosen]
    items[:] = [item for item in items if id(item) in chosen]
    config.hook.pytest_deselected(items=deselected)


def spread(items: list[Any], keep: int) -> list[Any]:
    """keep items of the list, evenly spaced, the first and the last among them."""
    if len(items) <= keep:
        return items
    if keep == 1:
        return items[:1]
    step = (len(items) - 1) / (keep - 1)
    return [items[round(i * step)] for i in range(keep)]


def _runtest_call(item: Any) -> Generator[None, Any, Any]:
    if _harness is None:
        return (yield)
    with _harness.case() as counts:
        try:
            return (yield)
        finally:
            item.nvfp4_counts = Counts(**asdict(counts))


def _runtest_makereport(item: Any, call: Any) -> Generator[None, Any, Any]:
    report = yield
    counts = getattr(item, "nvfp4_counts", None)
    if report.when == "call" or (report.when == "setup" and report.skipped):
        _write({"test": item.nodeid, "outcome": report.outcome,
                "counts": asdict(counts) if counts is not None else None,
                "failure": str(report.longrepr).strip().splitlines()[-1][:300] if report.failed else None})
    return report


# pytest's hook wrappers, marked by a call rather than a decorator: pytest is not in the lint extra, so
# mypy sees hookimpl as untyped, and a decorator would untype the function it wraps.
pytest_runtest_call = pytest.hookimpl(wrapper=True)(_runtest_call)
pytest_runtest_makereport = pytest.hookimpl(wrapper=True)(_runtest_makereport)


def _write(line: dict[str, Any]) -> None:
    path = os.environ.get("NVFP4_COMPILE_REPORT")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(line) + "\n")
