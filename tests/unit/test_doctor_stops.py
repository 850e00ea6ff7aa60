"""doctor's launch answer joins the whole-layer table (patches/sglang/audit-layer.json): where SGLang's own code
stops the fullgraph compile before FlashInfer on the installed release, and the patched label that fixes it."""

from __future__ import annotations

from helpers import PATCHES

from nvfp4_overlay.operate import doctor_stops
from nvfp4_overlay.patch import Target, load_upstream

GLM5, QWEN3 = "GlmMoeDsaForCausalLM", "Qwen3MoeForCausalLM"


def label(release: str) -> str:
    return load_upstream(PATCHES, Target("sglang", release)).local_version


def test_glm5_on_upstream_0_5_9_stops_in_the_dsa_indexer_and_patch_0002_fixes_it() -> None:
    for gpu in ("sm100", "sm120", "sm121"):
        (stop,) = doctor_stops.stops(PATCHES, "0.5.9", False, gpu, GLM5)
        assert "sglang/srt/layers/attention/nsa/nsa_indexer.py" in stop.where and not stop.behind
        assert (stop.fixed_by, stop.patches) == (label("0.5.9"), ["0002-nsa-indexer-split-op.patch"])
    assert doctor_stops.stops(PATCHES, "0.5.9", True, "sm120", GLM5) == []  # the patched SGLang compiles it whole


def test_is_musa_first_then_the_mxfp8_tactic_pin_on_0_5_21() -> None:
    found = doctor_stops.stops(PATCHES, "0.5.21", False, "sm100", QWEN3)
    first = {s.patches[0] for s in found if not s.behind and "is_musa" in s.where}
    behind = [s for s in found if s.behind]
    assert first == {"0004-is-musa-constant-while-compiling.patch"}
    assert [(s.model, s.patches, s.fixed_by) for s in behind] == [
        ("qwen3-moe-mxfp8", ["0005-mxfp8-pin-tactic-inside-the-op.patch"], label("0.5.21"))]
    assert "is_musa" in doctor_stops.stops(PATCHES, "0.5.20", False, "sm120", GLM5)[0].where
    assert doctor_stops.stops(PATCHES, "0.5.21", True, "sm100", QWEN3) == []


def test_no_stop_where_upstream_sglang_compiles_the_layer_or_flashinfer_stops_it() -> None:
    assert doctor_stops.stops(PATCHES, "0.5.13", False, "sm120", GLM5) == []  # upstream compiles GLM-5 whole there
    assert doctor_stops.stops(PATCHES, "0.5.9", False, "sm120", QWEN3) == []  # FlashInfer's own stop: `calls` says it
    assert doctor_stops.stops(PATCHES, "0.4.0", False, "sm120", GLM5) == []  # a release the table has not seen
