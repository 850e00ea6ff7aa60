"""A whole SGLang decoder layer (Qwen3-MoE, ModelOpt NVFP4) under fullgraph on a CPU: tests/releases/sglang_layer_probe.py.

The default stack's SGLang (0.5.11) builds its own Qwen3MoeDecoderLayer and dynamo traces its forward
under SGLang's piecewise context managers, the GPU faked: the upstream stack fails on SM120 (in
FlashInfer's JIT loader, through fp4_quantize), the patched stack traces whole on SM120 and SM100
with both MoE runner backends, and a control that removes fp4_quantize's route from the patched
FlashInfer fails again. Each run is kept in the result cache under the digest of its inputs (the
probe's and its modules' sources, both trees' files, torch's version), as the region probes are.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, cache_dir

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

PROBE = Path(__file__).resolve().parent / "sglang_layer_probe.py"
PROBE_MODULES = ("sglang/sglang_drivers", "sglang/sglang_imports", "sglang/sglang_machine", "sglang/sglang_regions",
                 "sglang/sglang_moe", "forking", "io_audit")
SGLANG, FLASHINFER = "0.5.11", "0.6.8.post1"  # the default stack
CASES = [
    # (id, SGLang patched?, FlashInfer side, GPU, MoE runner backend, traced whole?)
    ("upstream-sm120", False, "upstream", (12, 0), "flashinfer_cutlass", False),
    ("patched-sm120-cutlass", True, "patched", (12, 0), "flashinfer_cutlass", True),
    ("patched-sm120-trtllm", True, "patched", (12, 0), "flashinfer_trtllm", True),
    ("patched-sm100-cutlass", True, "patched", (10, 0), "flashinfer_cutlass", True),
    ("upstream-sglang-patched-flashinfer-sm120", False, "patched", (12, 0), "flashinfer_cutlass", True),
    ("control-no-fp4-quantize-route-sm120", False, "control", (12, 0), "flashinfer_cutlass", False),
]


def _digest(*paths: Path) -> str:
    digest = hashlib.sha256()
    for root in paths:
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            digest.update(str(path.relative_to(root) if root.is_dir() else path.name).encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def layer_run(sglang: Path, flashinfer: Path, gpu: tuple[int, int], backend: str, scratch: Path) -> dict[str, Any]:
    import torch

    probes = ROOT / "src" / "nvfp4_overlay" / "probes"
    key = _digest(PROBE, *(probes / f"{m}.py" for m in PROBE_MODULES), sglang, flashinfer)
    key = hashlib.sha256(f"{key}\0{gpu}\0{backend}\0{torch.__version__}".encode()).hexdigest()[:32]
    kept = cache_dir() / "sglang-layer" / f"{key}.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    done = subprocess.run([sys.executable, str(PROBE), str(sglang), str(flashinfer), *map(str, gpu), backend],
                          capture_output=True, text=True, cwd=scratch, timeout=900, check=False)
    result = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    if "setup_error" not in result:  # a crash is news, not a fact to keep
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(result))
    return result


@pytest.fixture(scope="module")
def trees(wheel_tree: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    patched = wheel_tree("flashinfer-python", FLASHINFER)
    control = tmp_path_factory.mktemp("control") / "flashinfer"
    shutil.copytree(patched, control)
    entries = control / "flashinfer" / "_nvfp4_overlay" / "entries.py"
    entries.write_text(entries.read_text() + '\n\ndel ENTRIES["fp4_quantize"]  # the control: one route removed\n')
    return {"sglang-patched": wheel_tree("sglang", SGLANG), "sglang-upstream": wheel_tree("sglang", SGLANG, patched=False),
            "patched": patched, "upstream": wheel_tree("flashinfer-python", FLASHINFER, patched=False),
            "control": control}


@pytest.mark.parametrize(("sglang_patched", "side", "gpu", "backend", "whole"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_whole_decoder_layer_traces_as_its_stack_says(trees: dict[str, Path], tmp_path: Path, sglang_patched: bool,
                                                       side: str, gpu: tuple[int, int], backend: str, whole: bool) -> None:
    sglang = trees["sglang-patched" if sglang_patched else "sglang-upstream"]
    result = layer_run(sglang, trees[side], gpu, backend, tmp_path)
    assert "setup_error" not in result, result.get("setup_error")
    assert result["whole"] is whole, result.get("error")
    ops = result["ops"]
    if whole:  # the split ops SGLang's piecewise runner cuts at, and its MoE op, in the one graph
        assert "sglang.unified_attention_with_output" in ops and "sglang.fp4_gemm" in ops, ops
        assert any(op.startswith("sglang.") and "moe" in op for op in ops), ops
        # on SM120 fp4_quantize is one opaque op: SGLang's own (the patched series) or the overlay's
        fp4 = {"sglang.flashinfer_fp4_quantize.default", "nvfp4_overlay.flashinfer_fp4_quantize.default"}
        assert bool(fp4 & set(ops)) == (gpu == (12, 0)), ops
    else:
        assert "Unsupported" in result["error"], result["error"]
