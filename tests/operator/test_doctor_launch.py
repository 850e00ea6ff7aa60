"""doctor --sglang-args as an operator runs it: SGLang's own code asked in a child of the examined interpreter.

The examined interpreter is this one (torch, no SGLang installed), so doctor asks the default stack's
pinned SGLang, unpacked from the cache. Each answer doctor gives is held to the committed resolution of
the same line (patches/sglang/audit-launch.json, itself held to SGLang's code by
tests/releases/test_sglang_launch.py); a flag or an architecture the release lacks is exit 2 in SGLang's
words. What the probe stands in for (transformers' config reading, the GPU and its memory) is listed
in the answer's ``stubbed``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from doctor_facts import check_document
from helpers import FULL, PATCHES, ROOT, cache_dir, default_sglang, fetch_upstream

from nvfp4_overlay.audit import sglang_launch_table, sglang_models

pytestmark = [pytest.mark.upstream, pytest.mark.torch, pytest.mark.xdist_group("doctor-launch")]

TABLE = sglang_launch_table.load(PATCHES)


def doctor(*args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "nvfp4_overlay.cli", "doctor", "--json", "--no-trace",
                           "--python", sys.executable, *args], check=False, capture_output=True, text=True, timeout=900)
    try:
        document = json.loads(done.stdout)
    except ValueError:
        pytest.fail(f"doctor printed no JSON (exit {done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    check_document(document)
    return done.returncode, document


def committed(key: str) -> dict[str, Any]:
    entry = sglang_launch_table.answer(TABLE, default_sglang(), key)
    assert entry is not None, key
    return entry


def held(launch: dict[str, Any], key: str) -> None:
    """doctor's answer is the release's own resolution of the same line."""
    entry = committed(key)
    assert {k: launch[k] for k in entry} == entry, (launch, entry)


def model_dir(tmp_path: Path, model: str) -> Path:
    directory = tmp_path / model
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(sglang_models.config_for(model)))
    return directory


def test_a_one_flag_line_as_the_readme_writes_it() -> None:
    _, document = doctor("--sglang-args", "--enable-torch-compile", "--model-arch", "Qwen3MoeForCausalLM")
    launch = document["sglang_launch"]
    assert launch["release"] == default_sglang() and not launch["installed"] and launch["gpu"] == "sm120"
    assert launch["fullgraph"] is False and launch["torch_compile"] is True
    held(launch, "qwen3-moe/sm120/torch-compile")
    assert "transformers" in launch["stubbed"]


def test_the_architecture_is_read_from_model_path(tmp_path: Path) -> None:
    """GLM-5 NVFP4 named by its local directory: 0.5.11 excludes NSA/DSA models (its rule, file and line)."""
    _, document = doctor("--sglang-args", f"--model-path {model_dir(tmp_path, 'glm-5')} --tp 8")
    launch = document["sglang_launch"]
    assert launch["architecture"] == "GlmMoeDsaForCausalLM"
    held(launch, "glm-5/sm120/plain")
    assert launch["fullgraph"] is False and "server_args.py:" in launch["rule"]


def test_an_h200_fp8_line_gets_the_hopper_answer(tmp_path: Path) -> None:
    """--gpu sm90, DeepSeek-V3 FP8 with the DeepGEMM backend: the region's FlashInfer call is the SM90 GEMM,
    raw under this FlashInfer (none installed), and none of the Blackwell FP4 calls."""
    line = f"--model-path {model_dir(tmp_path, 'deepseek-v3-fp8')} --fp8-gemm-backend flashinfer_deepgemm"
    _, document = doctor("--sglang-args", line, "--gpu", "sm90")
    launch = document["sglang_launch"]
    assert launch["gpu"] == "sm90" and launch["gpu_from"] == "--gpu"
    held(launch, "deepseek-v3-fp8/sm90/deepgemm")
    assert [c["function"] for c in launch["calls"]] == ["fp8_blockscale_gemm_sm90"], launch["calls"]
    assert not launch["calls"][0]["routed"]


def test_a_flag_the_release_does_not_define_is_refused() -> None:
    code, document = doctor("--sglang-args", "--enable-piecewise-cuda-graphs", "--model-arch", "Qwen3MoeForCausalLM")
    assert code == 2, document
    message = document["error"]["message"]
    assert f"SGLang {default_sglang()} refuses" in message and "--enable-piecewise-cuda-graphs" in message


def test_an_architecture_the_release_lacks_is_refused() -> None:
    code, document = doctor("--sglang-args", "--tp 2", "--model-arch", "MiniMaxM3SparseForConditionalGeneration")
    assert code == 2, document
    assert document["error"]["item"] == "MiniMaxM3SparseForConditionalGeneration"
    assert f"SGLang {default_sglang()} has no model class" in document["error"]["message"]


@pytest.mark.skipif(not FULL, reason="an installed SGLang 0.5.9 (its launch probe, about a minute): NVFP4_OVERLAY_FULL=1; "
                    "tests/unit/test_doctor_stops.py holds the join in make test")
def test_glm5_on_an_installed_upstream_0_5_9_names_sglang_s_own_stop_and_its_fix(tmp_path: Path) -> None:
    """GLM-5 with --enable-piecewise-cuda-graph on SGLang 0.5.9 as upstream ships it: SGLang's DSA indexer stops the
    compile before any FlashInfer call (the whole-layer table's runs), which the 0.5.9 series' patch 0002 fixes."""
    import site

    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    purelib = next((env / "lib").glob("python*")) / "site-packages"
    (purelib / "_tests.pth").write_text(f"import site; list(map(site.addsitedir, {[str(ROOT / 'src'), *site.getsitepackages()]!r}))\n")
    wheel = fetch_upstream("sglang", "0.5.9", patches_dir=PATCHES, cache_dir=cache_dir())
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "-q", "--no-index",
                    "--no-deps", "--disable-pip-version-check", str(wheel)], check=True)
    _, document = doctor("--python", str(env / "bin" / "python"), "--sglang-args", "--enable-piecewise-cuda-graph",
                         "--model-arch", "GlmMoeDsaForCausalLM", "--gpu", "sm120")
    launch = document["sglang_launch"]
    assert (launch["release"], launch["installed"], launch["fullgraph"]) == ("0.5.9", True, True)
    (stop,) = launch["stops"]
    assert "nsa/nsa_indexer.py" in stop["where"] and stop["patches"] == ["0002-nsa-indexer-split-op.patch"]
    assert stop["fixed_by"].startswith("0.5.9+nvfp4.")
    assert any("SGLang's own code stops it before FlashInfer" in n and stop["fixed_by"] in n for n in document["notes"])
