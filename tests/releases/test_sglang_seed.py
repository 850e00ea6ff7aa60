"""The field report's own configuration compiled whole: GLM-5 (GlmMoeDsaForCausalLM, ModelOpt NVFP4) on SGLang 0.5.9 with --enable-piecewise-cuda-graph.

0.5.9 is the first release with GlmMoeDsaForCausalLM; there ``--enable-piecewise-cuda-graph`` is the
opt-in to the fullgraph piecewise runner and nothing turns it off for DSA models (0.5.10-0.5.12 do),
and no split op surrounds the DSA indexer, so the graph traces into the NSA attention backend. The probe
builds GLM-5's whole model tiny (its dense layer 0, ``first_k_dense_replace``, and its MoE layer 1;
attention BF16, the MLPs NVFP4, as NVIDIA's NVFP4 checkpoints leave them), the NSA backend and the
pools the server builds for that launch line, and compiles it through 0.5.9's own runner warm-up
(probes/sglang/layer/runner.py). What it found, held here:

- the upstream stack stops in SGLang's own DSA indexer (``nsa_indexer.py`` ``forward_cuda``: the
  prefill's ``seq_lens_cpu.max().item()`` compared with the index top-k), before any FlashInfer call,
  on every GPU; SGLang as released over the patched FlashInfer stops there too;
- the patched SGLang (patch 0002: the indexer one split op, and the attention split op taking the
  top-k indices) with the patched FlashInfer compiles the whole model on SM120, SM121 and SM100;
- the field report's crash, in this configuration: SGLang with patch 0002 alone (not 0001's opaque
  fp4_quantize) over the upstream FlashInfer stops where the report did, in FlashInfer's JIT loader
  (``subprocess``, nvcc) under the dense layer's ``fp4_quantize`` on SM120; over the patched FlashInfer it
  compiles whole, the overlay's op in its place.

Each run is an entry of patches/sglang/audit-layer.json under the model ``glm-5-model``; `make test`
runs the three that tell the stacks apart, NVFP4_OVERLAY_FULL=1 all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import FULL, PATCHES, without_patch
from test_sglang_layer import PINS, SM100, SM120, SM121, TABLE, WRITE, layer_run, release_trees

from nvfp4_overlay.oracle import sglang_layer
from nvfp4_overlay.probes.sglang.layer import models as layer_models

pytestmark = [pytest.mark.upstream, pytest.mark.torch]


@pytest.fixture(scope="module")
def trees(wheel_tree: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return release_trees(wheel_tree, tmp_path_factory)

SEED, MODEL = "0.5.9", "glm-5-model"
SERIES = PATCHES / "sglang" / SEED
CUTLASS, AUTO = "flashinfer_cutlass", "auto"
INDEXER = "sglang/srt/layers/attention/nsa/nsa_indexer.py forward_cuda"  # where SGLang's own code stops dynamo
JIT_LOADER = "flashinfer/jit/cpp_ext.py"  # where FlashInfer's stops it: the report's nvcc subprocess
# case -> (SGLang side, FlashInfer side, GPU, MoE runner backend, where it stops or None: compiled whole)
CASES = {
    "upstream-sm120-flashinfer_cutlass": ("upstream", "upstream", SM120, CUTLASS, INDEXER),
    "upstream-sm100-auto": ("upstream", "upstream", SM100, AUTO, INDEXER),
    "patched-sm120-flashinfer_cutlass": ("patched", "patched", SM120, CUTLASS, None),
    "patched-sm120-auto": ("patched", "patched", SM120, AUTO, None),
    "patched-sm121-flashinfer_cutlass": ("patched", "patched", SM121, CUTLASS, None),
    "patched-sm100-auto": ("patched", "patched", SM100, AUTO, None),
    "patched-sm100-flashinfer_cutlass": ("patched", "patched", SM100, CUTLASS, None),
    "upstream-sglang-patched-flashinfer-sm120-flashinfer_cutlass": ("upstream", "patched", SM120, CUTLASS, INDEXER),
    "indexer-split-only-sm120-flashinfer_cutlass": ("split-only", "upstream", SM120, CUTLASS, JIT_LOADER),
    "indexer-split-only-patched-flashinfer-sm120-flashinfer_cutlass": ("split-only", "patched", SM120, CUTLASS, None),
}
EVERY_RUN = ("upstream-sm120-flashinfer_cutlass", "patched-sm120-flashinfer_cutlass",
             "indexer-split-only-sm120-flashinfer_cutlass")
PARAMS = [pytest.param(case, *spec, id=f"{SEED}-{MODEL}-{case}", marks=pytest.mark.xdist_group(f"sglang-layer-{SEED}"))
          for case, spec in CASES.items() if FULL or case in EVERY_RUN]


@pytest.mark.parametrize(("case", "sglang_side", "side", "gpu", "backend", "stops"), PARAMS)
def test_the_seeds_configuration_compiles_as_its_stack_says(
        trees: Any, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, case: str, sglang_side: str,
        side: str, gpu: tuple[int, int], backend: str, stops: str | None) -> None:
    tree = trees(SEED)
    # split-only, the control of the report's crash: patch 0001 (the opaque fp4_quantize) undone, 0002 kept
    sglang = {"upstream": tree["sglang-upstream"], "patched": tree["sglang-patched"]}.get(sglang_side) or without_patch(
        tree["sglang-patched"], tree["sglang-upstream"], tmp_path_factory.mktemp("split-only") / "sglang",
        SERIES / "0001-opaque-fp4-quantize.patch")
    result = layer_run(sglang, tree[side], gpu, backend, tmp_path, ("--model", MODEL))
    if "no_cuda_runtime" in result:
        pytest.skip(result["no_cuda_runtime"])
    assert "setup_error" not in result, result.get("setup_error")
    if WRITE:
        sglang_layer.record(PATCHES, SEED, PINS[SEED], case, result, MODEL)
    else:  # docs/sglang-regions.md's layer table is this table: it must say what the run found
        kept = TABLE["releases"].get(SEED, {}).get("models", {}).get(MODEL, {}).get(case)
        assert kept == sglang_layer.entry(result), "run `make sglang-layer-table`, then `make sglang-regions-docs`"
    assert result["whole"] is (stops is None), result.get("error")
    if stops is not None:
        assert stops in sglang_layer.where(result["error"]) or stops in result["error"], result["error"]
        if stops == JIT_LOADER:  # the report's crash: the FP4 quantize module's JIT build, its nvcc subprocess
            assert "flashinfer/fp4_quantization.py" in result["error"] and "subprocess" in result["error"], result["error"]
        return
    ops = result["ops"]
    assert not [op for op in ops if op.startswith("flashinfer.")], ops
    assert not [f for f in result["flashinfer_frames"] if "flashinfer/_nvfp4_overlay/" not in f], result["flashinfer_frames"]
    split = [p["ops"] for p in result["pieces"] if p["split"]]  # both layers: the indexer, then attention
    assert split == [["sglang.nsa_indexer_split"], ["sglang.unified_attention_with_output"]] * 2, split
    assert any("moe" in op for op in ops) and "sglang.fp4_gemm" in ops, ops  # the MoE layer and the dense MLP
    quantize = {"patched": "sglang.flashinfer_fp4_quantize.default", "split-only": "nvfp4_overlay.flashinfer_fp4_quantize.default"}
    assert (quantize[sglang_side] if gpu[0] == 12 else "sgl_kernel.scaled_fp4_quant.default") in ops, ops


def test_the_seed_table_holds_only_the_cases_this_test_runs() -> None:
    kept = TABLE["releases"].get(SEED, {}).get("models", {}).get(MODEL, {})
    assert set(kept) <= set(CASES), set(kept) - set(CASES)
    assert layer_models.MODELS[MODEL].whole
