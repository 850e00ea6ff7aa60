"""The probe interpreter's bytecode rules (probes/serve.py), without torch: cached bytecode stands for its
source in the I/O audit, and a trace writes none and restores what was when it leaves. A real run on a
real tree: tests/releases/test_probe_interpreter_releases.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from nvfp4_overlay.probes import io_audit


def test_cached_bytecode_stands_for_its_source(tmp_path: Path) -> None:
    source = str(tmp_path / "pkg" / "mod.py")
    assert io_audit.source_of(importlib.util.cache_from_source(source)) == source
    assert io_audit.source_of(importlib.util.cache_from_source(source, optimization=2)) == source
    assert io_audit.source_of(source) == source
    odd = str(tmp_path / "__pycache__" / "notes.pyc")  # no interpreter tag: not a cache file, itself
    assert io_audit.source_of(odd) == odd


@pytest.mark.parametrize("before", [True, False])
def test_a_trace_writes_no_bytecode_and_leaving_it_restores_what_was(before: bool) -> None:
    saved = sys.dont_write_bytecode
    try:
        sys.dont_write_bytecode = before
        phased = io_audit.Phased()
        phased.phase = "run"
        assert sys.dont_write_bytecode is before
        phased.phase = "trace"
        assert sys.dont_write_bytecode is True
        phased.phase = "trace"
        phased.phase = "after"
        assert sys.dont_write_bytecode is before
    finally:
        sys.dont_write_bytecode = saved


