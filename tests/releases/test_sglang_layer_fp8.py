"""FP8 block-scale decoder layers on SM90 per release, compiled as SGLang's piecewise runner compiles them: probes/sglang/layer/probe.py.

The target models' FP8 block-scale checkpoints (Qwen3-MoE's -FP8, DeepSeek-V3's own: e4m3 weights, one
float32 scale per 128x128 block; the layer probe's models.py: ``qwen3-moe-fp8``, ``deepseek-v3-fp8``) served
on Hopper with ``--fp8-gemm-backend flashinfer_deepgemm``: SGLang's fp8_utils sends every block-scale
linear layer to FlashInfer's ``fp8_blockscale_gemm_sm90``, raw inside the compiled graph, on every
release whose fp8_utils calls it (0.5.9 on; the layer probe's releases end at 0.5.21, the last with a
fullgraph prefill). Built and compiled as the NVFP4 layers are (test_sglang_layer.py), SM90 faked, the
MoE runner the server's default (``auto``): the upstream stack stops in FlashInfer's JIT loader under
the GEMM (or, on 0.5.20-0.5.21, in SGLang's own is_musa first), the patched stack compiles whole with
the GEMM one opaque op of the overlay's; SGLang as released over the patched FlashInfer compiles whole
wherever SGLang's own code does not stop it; on the default stack's release the patched FlashInfer
without the GEMM's route fails again.

``qwen3-moe-mxfp8``: a block-FP8 checkpoint of 32-wide K blocks with ue8m0 scales, which 0.5.21 serves as
MXFP8 on Blackwell (``--fp8-gemm-backend flashinfer_cutlass``): its linear
(``flashinfer_mxfp8_blockscaled_linear(pin_tactic=True)``) calls SGLang's own MXFP8 ops inside FlashInfer's
``autotune`` context, which dynamo cannot enter (a lock): upstream stops at is_musa first, the series
without its patch 0005 at the autotuner, the patched stack compiles whole on SM100 and SM120 (what the
compiled op then does: test_sglang_mxfp8_pin.py).

Each run is an entry of patches/sglang/audit-layer.json, under its model; `make test` runs the cases
EVERY_RUN names, NVFP4_OVERLAY_FULL=1 all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import FULL, PATCHES, default_sglang, without_patch, without_route
from test_sglang_layer import IS_MUSA, PINS, RELEASES, TABLE, WRITE, layer_run, not_compiled, release_trees

from nvfp4_overlay.oracle import sglang_layer
from nvfp4_overlay.probes.sglang.layer import models as layer_models

pytestmark = [pytest.mark.upstream, pytest.mark.torch]


@pytest.fixture(scope="module")
def trees(wheel_tree: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return release_trees(wheel_tree, tmp_path_factory)

SM90, SM100, SM120, AUTO = (9, 0), (10, 0), (12, 0), "auto"
MODELS = tuple(m for m, chosen in layer_models.MODELS.items() if chosen.quantization.startswith("fp8"))
GEMM = "fp8_blockscale_gemm_sm90"
OP = f"nvfp4_overlay.flashinfer_{GEMM}.default"
CONTROL = "control-no-fp8-gemm-route-sm90-auto"  # the patched FlashInfer without the GEMM's route
# Block-FP8 served as MXFP8 (0.5.21): SGLang's own ops quantize and multiply; the autotuner context that pins
# the GEMM's tactic, entered around them in the traced forward, is what 0.5.21's patch 0005 moves into the op
MXFP8_OPS = ("sglang.flashinfer_mxfp8_quantize", "sglang.flashinfer_mm_mxfp8")
PIN = "0005-mxfp8-pin-tactic-inside-the-op.patch"


def cases(release: str, name: str) -> list[Any]:
    """(SGLang side, FlashInfer side, GPU, compiled whole?) by case, for one FP8 model on one release."""
    if layer_models.MODELS[name].quantization == "fp8-mxfp8":
        found = {"upstream-sm100-auto": ("upstream", "upstream", SM100, False),
                 "patched-sm100-auto": ("patched", "patched", SM100, True),
                 "patched-sm120-auto": ("patched", "patched", SM120, True),
                 "control-without-pin-patch-sm100-auto": ("without-pin", "patched", SM100, False)}
    else:
        found = {"upstream-sm90-auto": ("upstream", "upstream", SM90, False),
                 "patched-sm90-auto": ("patched", "patched", SM90, True)}
        if RELEASES[release].carried and (release == default_sglang() or release in IS_MUSA):
            # SGLang as released over the patched FlashInfer: the overlay routes the GEMM (is_musa stops it first)
            found["upstream-sglang-patched-flashinfer-sm90-auto"] = ("upstream", "patched", SM90, release not in IS_MUSA)
        if release == default_sglang():  # without the GEMM's route, raw again
            found[CONTROL] = ("upstream", "control-fp8", SM90, False)
    return [pytest.param(release, name, *case, id=f"{release}-{name}-{cid}",
                         marks=[pytest.mark.xdist_group(f"sglang-layer-{release}")]) for cid, case in found.items()]


# `make test`: the default stack's upstream and patched runs of each model and Qwen3-MoE's route control,
# 0.5.20's patched Qwen3-MoE, 0.5.21's MXFP8 layer patched and without its patch; (release, model or "*", case)
EVERY_RUN = {*[(default_sglang(), "*", c) for c in ("upstream-sm90-auto", "patched-sm90-auto")],
             (default_sglang(), "qwen3-moe-fp8", CONTROL), ("0.5.20", "qwen3-moe-fp8", "patched-sm90-auto"),
             ("0.5.21", "qwen3-moe-mxfp8", "patched-sm100-auto"), ("0.5.21", "qwen3-moe-mxfp8", "control-without-pin-patch-sm100-auto")}
CASES = [c for v in RELEASES for m in MODELS for c in cases(v, m) if FULL
         or {(v, "*", c.id.removeprefix(f"{v}-{m}-")), (v, m, c.id.removeprefix(f"{v}-{m}-"))} & EVERY_RUN]


def never_called(sglang: Path, release: str, model: str) -> str | None:
    """Why the release's fp8_utils never reaches this model's path, read from it; None where it does: FlashInfer's
    SM90 block-scale GEMM (0.5.9 on), or the MXFP8 linear with its tactic pinned (0.5.21 on)."""
    text = (sglang / "sglang" / "srt" / "layers" / "quantization" / "fp8_utils.py").read_text(encoding="utf-8")
    wanted = "pin_tactic" if layer_models.MODELS[model].quantization == "fp8-mxfp8" else GEMM
    return None if wanted in text else f"SGLang {release}'s fp8_utils.py has no {wanted}"


@pytest.mark.parametrize(("release", "model", "sglang_side", "side", "gpu", "whole"), CASES)
def test_each_fp8_block_scale_layer_compiles_as_its_stack_says(
        trees: Any, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, request: pytest.FixtureRequest,
        release: str, model: str, sglang_side: str, side: str, gpu: tuple[int, int], whole: bool) -> None:
    tree = trees(release)
    skipped = not_compiled(tree["sglang-upstream"], release, model) or never_called(tree["sglang-upstream"], release, model)
    if skipped:
        pytest.skip(skipped)
    flashinfer = tree[side] if side != "control-fp8" else without_route(
        tree["patched"], tmp_path_factory.mktemp("control-fp8") / "flashinfer", GEMM)
    sglang = tree.get(f"sglang-{sglang_side}") or without_patch(  # without-pin: 0005 undone, the series' others kept
        tree["sglang-patched"], tree["sglang-upstream"], tmp_path_factory.mktemp("without-pin") / "sglang",
        PATCHES / "sglang" / release / PIN)
    result = layer_run(sglang, flashinfer, gpu, AUTO, tmp_path, ("--model", model))
    if "no_cuda_runtime" in result:
        pytest.skip(result["no_cuda_runtime"])
    assert "setup_error" not in result, result.get("setup_error")
    case = request.node.callspec.id.removeprefix(f"{release}-{model}-")
    if WRITE:
        sglang_layer.record(PATCHES, release, PINS[release], case, result, model)
    else:  # docs/sglang-regions.md's layer table is this table: it must say what the run found
        kept = TABLE["releases"].get(release, {}).get("models", {}).get(model, {}).get(case)
        assert kept == sglang_layer.entry(result), "run `make sglang-layer-table`, then `make sglang-regions-docs`"
    assert result["whole"] is whole, result.get("error")
    if not whole:  # FlashInfer's JIT loader under the GEMM, the autotuner's lock, or SGLang's is_musa first
        musa = "is_musa" in result["error"]  # where SGLang's own code comes first (the table says which)
        assert not musa or (release in IS_MUSA and sglang_side == "upstream"), result["error"]
        if sglang_side == "without-pin":  # the autotuner context around the op: its (class) lock
            assert "flashinfer/autotuner/autotuner.py" in result["error"] and "_lock" in result["error"], result["error"]
        else:
            assert musa or ("get_fp8_blockscale_gemm_runner_sm90" in result["error"]
                            and "flashinfer/jit/" in result["error"]), result["error"]
        return
    ops = result["ops"]
    mxfp8 = layer_models.MODELS[model].quantization == "fp8-mxfp8"
    assert (set(MXFP8_OPS) <= set(ops)) if mxfp8 else (OP in ops), ops  # every block-scale linear: one op
    assert not [op for op in ops if op.startswith("flashinfer.")], ops
    assert not [f for f in result["flashinfer_frames"] if "flashinfer/_nvfp4_overlay/" not in f], result["flashinfer_frames"]
    assert [p["ops"] for p in result["pieces"] if p["split"]] == [["sglang.unified_attention_with_output"]], result["pieces"]
    assert any(op.startswith("sglang.") and "moe" in op for op in ops), ops


def test_the_fp8_table_holds_only_cases_this_test_runs() -> None:
    for release, entry in TABLE["releases"].items():
        for model in set(entry.get("models", {})) & set(MODELS):
            runs = {c.id.removeprefix(f"{release}-{model}-") for c in cases(release, model)} if release in RELEASES else set()
            assert set(entry["models"][model]) <= runs, (release, model, set(entry["models"][model]) - runs)
