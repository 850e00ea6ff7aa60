"""The GPU proofs (proofs/gpu/) run on an H200 only; here, on the CPU: each imports and answers --help,
takes the probes' tables rather than a copy, and the shared driver's child protocol works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

PROOFS = ROOT / "proofs" / "gpu"
SCRIPTS = ["fp4_quantize.py", "entry_points.py", "serving.py", "cuda_versions.py"]
sys.path.insert(0, str(PROOFS))

import driver  # noqa: E402


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_proof_answers_help_on_the_cpu(script: str) -> None:
    done = subprocess.run([sys.executable, str(PROOFS / script), "--help"], capture_output=True, text=True,
                          check=False, cwd="/")
    assert done.returncode == 0, done.stderr
    assert "--wheels" in done.stdout


def test_the_fp4_proof_runs_the_probes_layouts() -> None:
    import fp4_quantize

    from nvfp4_overlay.probes.flashinfer.cases import FP4_LAYOUTS

    assert fp4_quantize.LAYOUTS == [row for row in FP4_LAYOUTS if row[0] != "pdl-inverted"]
    assert len(fp4_quantize.LAYOUTS) == 9


def test_no_proof_copies_the_driver_or_the_ninja_reader() -> None:
    for script in SCRIPTS:
        text = (PROOFS / script).read_text()
        assert "subprocess.run([sys.executable, __file__" not in text, script
        assert "def _ninja_variable" not in text and "LAYOUTS = [\n" not in text, script


def test_the_driver_reads_the_childs_last_marked_line(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text("import sys\nprint('@@M@@{\"n\": 1}')\nprint('@@M@@{\"n\": ' + sys.argv[1] + '}')\n")
    assert driver.run_child(str(script), ["2"], {}, 60, "@@M@@").or_crash() == {"n": 2}
    script.write_text("import sys\nsys.exit('no result')\n")
    child = driver.run_child(str(script), [], {}, 60, "@@M@@")
    assert child.result is None and child.or_crash() == {"crash": "no result\n"}
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(30)\n")
    crashed = driver.run_child(str(script), [], {}, 1, "@@M@@").or_crash(" (a note)")
    assert crashed["crash"].startswith("timed out after 1 s (a note): started")


@pytest.mark.torch
def test_the_whole_layer_proof_answers_help_on_the_cpu() -> None:
    """whole_layer.py (torch at import; its trace is tests/releases/test_gpu_whole_layer.py)."""
    done = subprocess.run([sys.executable, str(PROOFS / "whole_layer.py"), "--help"], capture_output=True, text=True,
                          check=False, cwd="/")
    assert done.returncode == 0, done.stderr
    assert "--wheels" in done.stdout and "--trace" in done.stdout
