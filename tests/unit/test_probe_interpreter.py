"""The probe interpreter's bytecode rules (probes/serve.py), without torch: cached bytecode stands for its
source in the I/O audit, and a trace writes none and restores what was when it leaves; the audit hook the
trace probes install (io_audit.Watched) and the backend's stop (io_audit.Traced) told from dynamo giving
up. A real run on a real tree: tests/releases/test_probe_interpreter_releases.py."""

from __future__ import annotations

import importlib.util
import subprocess
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




def test_the_hook_hears_a_process_started_and_a_file_under_its_root_opened_while_traced(tmp_path: Path) -> None:
    """A real hook in this process (it stays, inert outside its phase): events while "trace" only."""
    root = tmp_path / "flashinfer"
    root.mkdir()
    (root / "jit.py").write_text("")
    (tmp_path / "elsewhere.py").write_text("")
    watched = io_audit.Watched(str(root) + "/")
    sys.addaudithook(watched.audit)
    subprocess.run([sys.executable, "-c", "pass"], check=True)  # before the trace: not heard
    watched.phase = "trace"
    try:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        (root / "jit.py").read_text()
        (tmp_path / "elsewhere.py").read_text()  # outside the root: not the wheel's
    finally:
        watched.phase = "after"
    (root / "jit.py").read_text()
    assert watched.events == [["subprocess.Popen", repr(sys.executable)], ["open", "jit.py"]]


def test_a_hook_without_a_root_hears_processes_only(tmp_path: Path) -> None:
    watched = io_audit.Watched()
    watched.phase = "trace"
    try:
        watched.audit("open", (str(tmp_path / "a.py"), "r", 0))
        watched.audit("os.system", (b"nvcc --version",))
    finally:
        watched.phase = "after"
    assert watched.events == [["os.system", "b'nvcc --version'"]]


def _raised_from(inner: BaseException, how: str) -> BaseException:
    """An exception that carries `inner` as dynamo's wrappers do: its cause, its context, or inner_exception."""
    outer = RuntimeError("backend compiler failed")
    if how == "cause":
        outer.__cause__ = inner
    elif how == "context":
        outer.__context__ = inner
    else:
        outer.inner_exception = inner  # type: ignore[attr-defined] - BackendCompilerFailed's attribute
    return outer


@pytest.mark.parametrize("how", ["cause", "context", "inner_exception"])
def test_the_backends_stop_is_found_however_dynamo_wraps_it(how: str) -> None:
    assert io_audit.caused_by_traced(io_audit.Traced())
    assert io_audit.caused_by_traced(_raised_from(_raised_from(io_audit.Traced(), how), "cause"))
    assert not io_audit.caused_by_traced(_raised_from(ValueError("dynamo gave up"), how))


def test_a_chain_that_loops_ends() -> None:
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__context__, second.__context__ = second, first
    assert not io_audit.caused_by_traced(first)
