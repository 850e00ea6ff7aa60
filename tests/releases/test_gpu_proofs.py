"""The GPU proofs (proofs/gpu/) run on an H200 only; here, on the CPU: each imports and answers --help,
takes the probes' tables and the shared driver rather than a copy, the driver's child protocol works, and
a committed result's verdict is what the proof computes from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

PROOFS = ROOT / "proofs" / "gpu"
SCRIPTS = ["fp4_quantize.py", "entry_points.py", "serving.py", "cuda_versions.py", "fp8_blockscale.py"]
# What proofs/gpu/driver.py does, as a proof would write it again: starting itself as a child, reading the
# child's marked line, answering as the child, choosing the dependency wheels.
COPIES = ["[sys.executable, __file__", ".startswith(MARK)", "print(MARK + json.dumps(result), flush=True)",
          '(args.wheels / "deps").glob(']
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

    from nvfp4_overlay.probes.flashinfer.tables.cases import FP4_LAYOUTS

    assert fp4_quantize.LAYOUTS == [row for row in FP4_LAYOUTS if row[0] != "pdl-inverted"]
    assert len(fp4_quantize.LAYOUTS) == 9


def test_no_proof_copies_the_driver_or_the_ninja_reader() -> None:
    for script in SCRIPTS:
        text = (PROOFS / script).read_text()
        assert [copy for copy in COPIES if copy in text] == [], script
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


def test_a_child_past_its_time_gives_what_it_marked_so_far(tmp_path: Path) -> None:
    """fp8_blockscale's children mark their result after each call: past the time, that much, with a note
    (or_crash, the other proofs', takes none of it); a line cut short is passed over."""
    script = tmp_path / "child.py"
    script.write_text("import time\nprint('@@M@@{\"calls\": 1}', flush=True)\nprint('@@M@@{\"ca', flush=True)\n"
                      "time.sleep(30)\n")
    child = driver.run_child(str(script), [], {}, 2, "@@M@@")
    assert child.so_far() == {"calls": 1, "note": "timed out after 2 s"}
    assert child.or_crash()["crash"].startswith("timed out after 2 s: @@M@@")
    script.write_text("import time\ntime.sleep(30)\n")
    assert driver.run_child(str(script), [], {}, 1, "@@M@@").so_far() == {"crash": "timed out after 1 s"}


def test_a_child_answers_its_result_or_its_crash_on_one_marked_line(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(PROOFS)!r})\nimport driver\n"
                      "driver.answer_as_child(lambda: {'n': int(sys.argv[1])}, '@@M@@')\n")
    assert driver.run_child(str(script), ["3"], {}, 60, "@@M@@").or_crash() == {"n": 3}
    crashed = driver.run_child(str(script), ["x"], {}, 60, "@@M@@")
    assert crashed.returncode == 0 and "ValueError: invalid literal for int()" in crashed.or_crash()["crash"]


def test_the_fp8_proof_s_committed_verdict_is_its_result_s(tmp_path: Path) -> None:
    """proofs/gpu/results/gpu_fp8_blockscale_proof.json read as the proof reads it (--verdict, on a copy):
    the verdict recomputed from its calls is the committed one."""
    committed = PROOFS / "results" / "gpu_fp8_blockscale_proof.json"
    copy = tmp_path / committed.name
    copy.write_text(committed.read_text())
    done = subprocess.run([sys.executable, str(PROOFS / "fp8_blockscale.py"), "--verdict", str(copy)],
                          capture_output=True, text=True, check=False, cwd="/")
    assert done.returncode == 0, done.stderr
    result = json.loads(copy.read_text())
    assert result["verdict"] == json.loads(committed.read_text())["verdict"]
    assert result["verdict"]["calls"] == 12 and result["verdict"]["compiled_one_op"] is True


@pytest.mark.torch
def test_the_whole_layer_proof_answers_help_on_the_cpu() -> None:
    """whole_layer.py (torch at import; its trace is tests/releases/test_gpu_whole_layer.py)."""
    done = subprocess.run([sys.executable, str(PROOFS / "whole_layer.py"), "--help"], capture_output=True, text=True,
                          check=False, cwd="/")
    assert done.returncode == 0, done.stderr
    assert "--wheels" in done.stdout and "--trace" in done.stdout


@pytest.mark.torch
def test_the_whole_layer_proof_takes_the_layer_probe_from_the_package() -> None:
    """whole_layer.py and whole_layer_build.py import the layer probe's modules from src/ (driver.py puts it on
    the path), as the other proofs take the probes: no folder of tests/ on their path."""
    code = ("import json, sys\nsys.path.insert(0, sys.argv[1])\nimport whole_layer, whole_layer_build\n"
            "print(json.dumps({'path': sys.path, 'files': {name: getattr(module, '__file__', None) "
            "for name, module in sys.modules.items() if 'sglang_layer' in name or '.layer.' in name}}))\n")
    done = subprocess.run([sys.executable, "-c", code, str(PROOFS)], capture_output=True, text=True, check=False,
                          cwd="/")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert [p for p in found["path"] if p.startswith(str(ROOT / "tests"))] == []
    package = ROOT / "src" / "nvfp4_overlay" / "probes" / "sglang" / "layer"
    assert found["files"]["nvfp4_overlay.probes.sglang.layer.models"] == str(package / "models.py")
    assert sorted(name for name in found["files"] if not name.startswith("nvfp4_overlay.")) == []  # sglang_layer_*
