"""The probe interpreter (probes/serve.py) on a real tree: what a run leaves behind, and how bytecode counts in its I/O audit.

The interpreter writes bytecode whatever PYTHONDONTWRITEBYTECODE says (each fork would otherwise
compile the trees it imports anew), writes none while a trace is recorded, and counts a module read
from its cached bytecode as a read of its source: so a trace records the same I/O with or without
bytecode, and the committed upstream halves (tests/oracle/) hold either way."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import by_release, flashinfer_releases

LAZY_IMPORT = """
import json, os, py_compile, sys
sys.dont_write_bytecode = False
from nvfp4_overlay.probes.flashinfer.flashinfer_trace import Box
package = sys.argv[1]
box = Box(package)
sys.addaudithook(box.audit)
sys.path.insert(0, os.path.dirname(package))
import pkg
seen = []
for compiled in (False, True):
    if compiled:
        py_compile.compile(os.path.join(package, "lazy.py"), doraise=True)
    sys.modules.pop("pkg.lazy", None)
    del box.events[:]
    box.phase = "trace"
    import pkg.lazy
    box.phase = "after"
    seen.append({"events": list(box.events), "cache": sorted(os.listdir(os.path.join(package, "__pycache__")))
                 if os.path.isdir(os.path.join(package, "__pycache__")) else []})
print(json.dumps(seen))
"""


@pytest.mark.torch
def test_a_lazy_import_while_tracing_counts_the_same_with_or_without_its_bytecode(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "lazy.py").write_text("VALUE = 1\n")
    done = subprocess.run([sys.executable, "-c", LAZY_IMPORT, str(package)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    without, cached = json.loads(done.stdout.splitlines()[-1])
    assert without["events"] == [["open", "lazy.py"]]
    lazy = Path(importlib.util.cache_from_source("lazy.py")).name
    assert lazy not in without["cache"]  # the trace imported it and wrote no bytecode
    assert lazy in cached["cache"]
    assert cached["events"] == without["events"]  # read from the .pyc, counted as the source


@pytest.mark.upstream
@pytest.mark.torch
@pytest.mark.parametrize("release", by_release(flashinfer_releases()[:1]))
def test_a_run_leaves_no_temporary_file_and_writes_the_trees_bytecode(wheel_tree: Any, tmp_path: Path,
                                                                     release: str) -> None:
    """The grid probe makes a FlashInfer workspace under the temporary directory: gone after the run,
    and the tree it imported holds FlashInfer's bytecode, though the environment asked for none."""
    tree: Path = wheel_tree("flashinfer-python", release, patched=False)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    request = {"probe": "cuda_grid", "plan": {"trees": [{"key": "tree", "path": str(tree)}], "cells": []}}
    done = subprocess.run([sys.executable, "-m", "nvfp4_overlay.probes.serve"], input=json.dumps(request) + "\n",
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["tree"]["cells"] == [], answer
    assert [p.name for p in scratch.iterdir() if not p.name.startswith("torchinductor_")] == []  # torch's own cache stays
    assert list((tree / "flashinfer" / "__pycache__").glob("__init__.*.pyc"))

