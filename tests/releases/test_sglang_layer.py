"""SGLang's own piecewise compile of a whole decoder layer (Qwen3-MoE, ModelOpt NVFP4) on a CPU: tests/releases/sglang_layer_probe.py.

The release builds its own Qwen3MoeDecoderLayer and compiles it as its piecewise CUDA graph runner does
for a prefill: install_torch_compiled(fullgraph=True), its SGLangBackend (the server's default compiler,
eager) splitting the graph at SGLang's registered split ops, the GPU faked. The default stack (SGLang
0.5.11): the upstream stack fails on SM120 (FlashInfer's JIT loader, through fp4_quantize); the patched
stack compiles whole on SM120, SM121 and SM100 with each MoE runner backend a user picks, and with
--enable-flashinfer-allreduce-fusion (its fused all-reduce + RMSNorm branch taken on SM100, at one rank);
a control that removes fp4_quantize's route from the patched FlashInfer fails again. SGLang 0.5.20: the
upstream layer fails in SGLang's own is_musa (an import of torchada, absent on CUDA servers) on every
GPU; its patched series (0004) takes that as a constant. Each run is kept in the result cache under the
digest of its inputs (the probe's and its modules' sources, both trees' files, the GPU, backend and
options, torch's version), as the region probes are.
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
SM120, SM121, SM100 = (12, 0), (12, 1), (10, 0)
BACKENDS = ("flashinfer_cutlass", "flashinfer_trtllm", "auto")
FUSION = "--allreduce-fusion"  # --enable-flashinfer-allreduce-fusion


def _case(release: str, name: str, sglang: str, side: str, gpu: tuple[int, int], backend: str,
          whole: bool, *extra: str, marks: Any = ()) -> Any:
    """(release, SGLang tree, FlashInfer tree, GPU, MoE runner backend, probe options, compiled whole?)"""
    return pytest.param(release, sglang, side, gpu, backend, extra, whole, id=f"{release}-{name}", marks=marks)


CASES = [
    # The default stack (SGLang 0.5.11, flashinfer-python 0.6.8.post1): the report's crash on SM120
    _case("0.5.11", "upstream-sm120", "upstream", "upstream", SM120, "flashinfer_cutlass", False),
    *(_case("0.5.11", f"patched-sm{gpu[0]}{gpu[1]}-{backend}", "patched", "patched", gpu, backend, True)
      for gpu in (SM120, SM121, SM100) for backend in BACKENDS),
    _case("0.5.11", "patched-sm100-cutlass-allreduce-fusion", "patched", "patched", SM100, "flashinfer_cutlass", True,
          FUSION),
    _case("0.5.11", "patched-sm120-cutlass-allreduce-fusion", "patched", "patched", SM120, "flashinfer_cutlass", True,
          FUSION),
    _case("0.5.11", "upstream-sglang-patched-flashinfer-sm120", "upstream", "patched", SM120, "flashinfer_cutlass",
          True),
    _case("0.5.11", "control-no-fp4-quantize-route-sm120", "upstream", "control", SM120, "flashinfer_cutlass", False),
    # 0.5.20 (flashinfer-python 0.6.18): SGLang's own is_musa breaks the upstream layer on every GPU
    _case("0.5.20", "upstream-sm120", "upstream", "upstream", SM120, "flashinfer_cutlass", False),
    _case("0.5.20", "upstream-sm100", "upstream", "upstream", SM100, "flashinfer_cutlass", False),
    _case("0.5.20", "patched-sm120-cutlass", "patched", "patched", SM120, "flashinfer_cutlass", True,
          marks=pytest.mark.xfail(strict=True, reason="past is_musa, the top-k's triton kernel (moe_fused_gate) "
                                  "meets the triton stand-in: triton is not installed here")),
]
PINS = {"0.5.11": "0.6.8.post1", "0.5.20": "0.6.18"}


def _digest(*paths: Path) -> str:
    digest = hashlib.sha256()
    for root in paths:
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            digest.update(str(path.relative_to(root) if root.is_dir() else path.name).encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def layer_run(sglang: Path, flashinfer: Path, gpu: tuple[int, int], backend: str, scratch: Path,
              options: tuple[str, ...] = ()) -> dict[str, Any]:
    import torch

    probes = ROOT / "src" / "nvfp4_overlay" / "probes"
    key = _digest(PROBE, *(probes / f"{m}.py" for m in PROBE_MODULES), sglang, flashinfer)
    key = hashlib.sha256(f"{key}\0{gpu}\0{backend}\0{options}\0{torch.__version__}".encode()).hexdigest()[:32]
    kept = cache_dir() / "sglang-layer" / f"{key}.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    done = subprocess.run([sys.executable, str(PROBE), str(sglang), str(flashinfer), *map(str, gpu), backend, *options],
                          capture_output=True, text=True, cwd=scratch, timeout=900, check=False)
    result = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    if "setup_error" not in result:  # a crash is news, not a fact to keep
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(result))
    return result


@pytest.fixture(scope="module")
def trees(wheel_tree: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """trees(release) -> the SGLang and FlashInfer trees of the release's stack, and the control."""
    made: dict[str, dict[str, Path]] = {}

    def get(release: str) -> dict[str, Path]:
        if release not in made:
            pin = PINS[release]
            patched = wheel_tree("flashinfer-python", pin)
            control = tmp_path_factory.mktemp("control") / "flashinfer"
            shutil.copytree(patched, control)
            entries = control / "flashinfer" / "_nvfp4_overlay" / "entries.py"
            entries.write_text(entries.read_text() + '\n\ndel ENTRIES["fp4_quantize"]  # the control: one route removed\n')
            made[release] = {"sglang-patched": wheel_tree("sglang", release),
                             "sglang-upstream": wheel_tree("sglang", release, patched=False), "patched": patched,
                             "upstream": wheel_tree("flashinfer-python", pin, patched=False), "control": control}
        return made[release]

    return get


@pytest.mark.parametrize(("release", "sglang", "side", "gpu", "backend", "options", "whole"), CASES)
def test_sglang_compiles_a_whole_decoder_layer_as_its_stack_says(
        trees: Any, tmp_path: Path, release: str, sglang: str, side: str, gpu: tuple[int, int], backend: str,
        options: tuple[str, ...], whole: bool) -> None:
    tree = trees(release)
    result = layer_run(tree[f"sglang-{sglang}"], tree[side], gpu, backend, tmp_path, options)
    assert "setup_error" not in result, result.get("setup_error")
    assert result["compiler"] == "eager", result  # the server's default piecewise compiler: no inductor
    assert result["whole"] is whole, result.get("error")
    if not whole:
        assert "Unsupported" in result["error"], result["error"]
        # where it fails: FlashInfer's JIT loader under fp4_quantize (0.5.11), SGLang's own is_musa (0.5.20)
        assert ("is_musa" in result["error"]) == (release == "0.5.20"), result["error"]
        return
    pieces, ops = result["pieces"], result["ops"]
    # SGLang's backend split the graph at its split ops: each split piece is one of them, alone
    assert [p["ops"] for p in pieces if p["split"]] == [["sglang.unified_attention_with_output"]], pieces
    assert "sglang.fp4_gemm" in ops and any(op.startswith("sglang.") and "moe" in op for op in ops), ops
    assert not [op for op in ops if op.startswith("flashinfer.")], ops  # nothing of FlashInfer's own traced
    # on SM12x fp4_quantize is one opaque op: SGLang's own (the patched series) or the overlay's
    fp4 = {f"{owner}.flashinfer_fp4_quantize.default" for owner in ("sglang", "nvfp4_overlay")}
    assert bool(fp4 & set(ops)) == (gpu[0] == 12), ops
    if FUSION in options:  # the communicator takes its fused all-reduce + RMSNorm branch on SM90/SM100 only
        assert result["allreduce_fusion"] is (gpu == SM100), result["allreduce_fusion"]
