"""A whole SGLang decoder layer (Qwen3-MoE, ModelOpt NVFP4) under fullgraph on a CPU: tests/releases/sglang_layer_probe.py.

The default stack's SGLang (0.5.11) builds its own Qwen3MoeDecoderLayer and dynamo traces its forward
under SGLang's piecewise context managers, the GPU faked: the upstream stack fails on SM120 (in
FlashInfer's JIT loader, through fp4_quantize), the patched stack traces whole on SM120 and SM100
with both MoE runner backends, and a control that removes fp4_quantize's route from the patched
FlashInfer fails again. Each run is kept in the result cache under the digest of its inputs (the
probe's and its modules' sources, both trees' files, torch's version), as the region probes are.
"""

from __future__ import annotations

import ast
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
MODELS = Path(__file__).resolve().parent / "sglang_layer_models.py"
FAKES = Path(__file__).resolve().parent / "sglang_layer_fakes.py"
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


def layer_run(sglang: Path, flashinfer: Path, gpu: tuple[int, int], backend: str, scratch: Path,
              model: str = "qwen3-moe") -> dict[str, Any]:
    import torch

    probes = ROOT / "src" / "nvfp4_overlay" / "probes"
    key = _digest(PROBE, MODELS, FAKES, *(probes / f"{m}.py" for m in PROBE_MODULES), sglang, flashinfer)
    key = hashlib.sha256(f"{key}\0{gpu}\0{backend}\0{model}\0{torch.__version__}".encode()).hexdigest()[:32]
    kept = cache_dir() / "sglang-layer" / f"{key}.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    done = subprocess.run([sys.executable, str(PROBE), str(sglang), str(flashinfer), *map(str, gpu), backend, model],
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


# The other target architectures (tests/releases/sglang_layer_models.py), each built tiny from the
# release's own model code. DeepSeek-V3's MoE layer (attention BF16 as NVIDIA's NVFP4 checkpoints
# leave it, the shared expert fused into the routed ones for 256 experts) has no FP4 linear outside
# SGLang's MoE op: upstream traces it whole; its dense layer (first_k_dense_replace) and Kimi-K2's
# unfused shared expert meet fp4_quantize raw.
PAIRS = [((12, 0), "flashinfer_cutlass"), ((12, 0), "flashinfer_trtllm"), ((10, 0), "flashinfer_cutlass"),
         ((10, 0), "flashinfer_trtllm")]
UPSTREAM_SM120 = {"deepseek-v3": True, "deepseek-v3-dense": False, "kimi-k2": False, "glm4-moe": False,
                  "qwen3.5-moe": False, "qwen3.5-moe-linear": False}  # model -> upstream traces it whole on SM120
MODEL_CASES = [  # (id, model, SGLang side, FlashInfer side, GPU, MoE runner backend, traced whole?)
    *[(f"{m}-upstream-sm120", m, "upstream", "upstream", (12, 0), "flashinfer_cutlass", whole)
      for m, whole in UPSTREAM_SM120.items()],
    *[(f"{m}-patched-sm{gpu[0]}{gpu[1]}-{backend.split('_')[1]}", m, "patched", "patched", gpu, backend, True)
      for m in UPSTREAM_SM120 for gpu, backend in PAIRS],
    # SGLang as released, FlashInfer patched: fp4_quantize is the overlay's op; without its route, raw again
    ("kimi-k2-upstream-sglang-patched-flashinfer-sm120", "kimi-k2", "upstream", "patched", (12, 0),
     "flashinfer_cutlass", True),
    ("kimi-k2-control-no-fp4-quantize-route-sm120", "kimi-k2", "upstream", "control", (12, 0),
     "flashinfer_cutlass", False),
]


def _no_raw_flashinfer(result: dict[str, Any]) -> None:
    """Every FlashInfer call in the graph sits in an opaque op (SGLang's or the overlay's): no graph node
    comes from FlashInfer's own Python outside the overlay's routing (the probe's flashinfer_frames)."""
    assert not [op for op in result["ops"] if op.startswith("flashinfer.")], result["ops"]
    raw = [f for f in result["flashinfer_frames"] if "flashinfer/_nvfp4_overlay/" not in f]
    assert not raw, raw


@pytest.mark.parametrize(("model", "sglang_side", "side", "gpu", "backend", "whole"), [c[1:] for c in MODEL_CASES],
                         ids=[c[0] for c in MODEL_CASES])
def test_each_target_architecture_traces_as_its_stack_says(trees: dict[str, Path], tmp_path: Path, model: str,
                                                          sglang_side: str, side: str, gpu: tuple[int, int],
                                                          backend: str, whole: bool) -> None:
    result = layer_run(trees[f"sglang-{sglang_side}"], trees[side], gpu, backend, tmp_path, model)
    assert "setup_error" not in result, result.get("setup_error")
    assert result["whole"] is whole, result.get("error")
    if not whole:  # FlashInfer's own code traced under fp4_quantize: its JIT loader (nvcc) or, routeless, more
        assert "Unsupported" in result["error"], result["error"]
        return
    ops = result["ops"]
    _no_raw_flashinfer(result)
    attention = "linear_attention" if model == "qwen3.5-moe-linear" else "attention"  # SGLang's split op
    assert f"sglang.unified_{attention}_with_output" in ops, ops
    moe = any(op.startswith("sglang.") and "moe" in op for op in ops)
    assert moe is (model != "deepseek-v3-dense"), ops
    if (sglang_side, side) == ("upstream", "patched"):  # the linear's fp4_quantize: the overlay's op, routed
        assert "nvfp4_overlay.flashinfer_fp4_quantize.default" in ops, ops


def _piecewise_disabled_archs(sglang: Path) -> list[str]:
    """The release's piecewise_cuda_graph_disabled_model_archs, read from its configs/model_config.py."""
    tree = ast.parse((sglang / "sglang" / "srt" / "configs" / "model_config.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "piecewise_cuda_graph_disabled_model_archs":
            return list(ast.literal_eval(node.value))
    raise AssertionError("no piecewise_cuda_graph_disabled_model_archs")


def test_glm5_is_not_compiled_on_the_default_stack(trees: dict[str, Path]) -> None:
    """0.5.11 turns piecewise off for GlmMoeDsa (and any DSA/NSA config: is_deepseek_nsa), so GLM-5's
    layers never meet dynamo there; 0.5.20 (below) keeps it on."""
    source = (trees["sglang-upstream"] / "sglang" / "srt" / "configs" / "model_config.py").read_text()
    assert "GlmMoeDsaForCausalLM" in _piecewise_disabled_archs(trees["sglang-upstream"])
    assert "is_piecewise_cuda_graph_disabled_model(self.hf_config.architectures)\n            or is_deepseek_nsa(" in source


GLM5_SGLANG, GLM5_FLASHINFER = "0.5.20", "0.6.18"
GLM5_CASES = [
    # (id, model, stack side, GPU, backend, traced whole?)
    ("upstream-sm100-trtllm", "glm-5+torchada", "upstream", (10, 0), "flashinfer_trtllm", True),
    ("upstream-sm100-cutlass", "glm-5+torchada", "upstream", (10, 0), "flashinfer_cutlass", True),
    ("patched-sm100-trtllm", "glm-5+torchada", "patched", (10, 0), "flashinfer_trtllm", True),
    ("patched-sm100-cutlass", "glm-5+torchada", "patched", (10, 0), "flashinfer_cutlass", True),
    ("patched-sm120-cutlass", "glm-5+torchada", "patched", (12, 0), "flashinfer_cutlass", True),
    ("patched-sm100-cutlass-no-torchada", "glm-5", "patched", (10, 0), "flashinfer_cutlass", False),
]


@pytest.fixture(scope="module")
def glm5_trees(wheel_tree: Any) -> dict[str, Path]:
    return {"sglang-patched": wheel_tree("sglang", GLM5_SGLANG),
            "sglang-upstream": wheel_tree("sglang", GLM5_SGLANG, patched=False),
            "patched": wheel_tree("flashinfer-python", GLM5_FLASHINFER),
            "upstream": wheel_tree("flashinfer-python", GLM5_FLASHINFER, patched=False)}


@pytest.mark.parametrize(("model", "side", "gpu", "backend", "whole"), [c[1:] for c in GLM5_CASES],
                         ids=[c[0] for c in GLM5_CASES])
def test_glm5_traces_whole_on_0_5_20(glm5_trees: dict[str, Path], tmp_path: Path, model: str, side: str,
                                    gpu: tuple[int, int], backend: str, whole: bool) -> None:
    """GLM-5's MoE layer (MLA + the DSA indexer, 256 experts with the shared one fused) on 0.5.20, where
    piecewise stays on for it: the indexer sits in SGLang's split op, FlashInfer only in SGLang's ops.
    Without a torchada module the trace stops at is_musa's import (dynamo traces past its lru_cache)."""
    assert "GlmMoeDsaForCausalLM" not in _piecewise_disabled_archs(glm5_trees["sglang-upstream"])
    result = layer_run(glm5_trees[f"sglang-{side}"], glm5_trees[side], gpu, backend, tmp_path, model)
    assert "setup_error" not in result, result.get("setup_error")
    assert result["whole"] is whole, result.get("error")
    if not whole:
        assert "torchada" in result["error"], result["error"]
        return
    ops = result["ops"]
    _no_raw_flashinfer(result)
    assert {"sglang.mla_bmm_then_unified_attention", "sglang.pcg_dsa_indexer_prefill_split"} <= set(ops), ops
    assert any(op.startswith("sglang.") and "moe" in op for op in ops), ops
