"""sglang_calls: the FlashInfer functions SGLang's runtime calls, found in its code as SGLang writes its calls."""

from __future__ import annotations

import pytest

from nvfp4_overlay.audit.sglang_calls import calls_in, region_sites

RUNNER = "sglang/srt/layers/moe/moe_runner/flashinfer_trtllm.py"


@pytest.mark.parametrize(("text", "expected"), [
    ("from flashinfer import fp4_quantize\n\ndef apply(x):\n    return fp4_quantize(x)\n",
     {"fp4_quantize": [f"{RUNNER}:4 apply"]}),
    ("def run(x):\n    from flashinfer.fused_moe import trtllm_fp4_block_scale_moe as moe\n    return moe(x)\n",
     {"trtllm_fp4_block_scale_moe": [f"{RUNNER}:3 run"]}),  # lazy, aliased
    ("import flashinfer\n\nclass M:\n    def forward(self, x):\n        return flashinfer.fused_moe.cutlass_fused_moe(x)\n",
     {"cutlass_fused_moe": [f"{RUNNER}:5 forward"]}),  # an attribute of the module
    ("from flashinfer import fused_moe\nfused_moe.cutlass_fused_moe(1)\n",
     {"cutlass_fused_moe": [f"{RUNNER}:2"]}),  # a submodule bound by from-import, called at module level
    ("from sglang.srt.utils import fp4_quantize\nfp4_quantize(1)\n# flashinfer\n", {}),  # same name, not FlashInfer's
    ("from .flashinfer import fp4_quantize\nfp4_quantize(1)\n", {}),  # a relative module named flashinfer
    ("import flashinfer\nx = flashinfer.fp4_quantize\n", {}),  # referenced, not called
], ids=["top-import", "lazy-alias", "module-attribute", "submodule", "other-module", "relative", "no-call"])
def test_a_call_counts_when_its_callee_is_flashinfer_s(text: str, expected: dict[str, list[str]]) -> None:
    assert calls_in({RUNNER: text}) == expected


def test_only_the_runtime_is_read_and_sites_are_in_line_order() -> None:
    text = "from flashinfer import mm_fp4\n" + "\n" * 8 + "mm_fp4(1)\nmm_fp4(2)\n"
    found = calls_in({RUNNER: text, "sglang/test/test_mm.py": text, "sglang/multimodal_gen/x.py": text,
                      "sglang/srt/a.py": text})
    assert found == {"mm_fp4": ["sglang/srt/a.py:10", "sglang/srt/a.py:11", f"{RUNNER}:10", f"{RUNNER}:11"]}


def test_region_sites_name_the_region_and_the_gpu() -> None:
    call = {"function": "fp4_quantize", "module": "flashinfer", "args": {}, "site": "sglang/srt/m.py:9 apply",
            "upstream": "fails"}
    empty = {"calls": [], "sglang_break": None, "frontier": None}
    table = {"releases": {"0.5.11": {"sglang": {"upstream": {
        "linear": {"sm120": {**empty, "calls": [call]}, "sm100": empty},
        "everywhere": {**empty, "calls": [call]},  # one cell for every GPU
        "gone": {"absent": "not in this release"}}}}}}
    assert region_sites(table, "0.5.11", "fp4_quantize") == ["everywhere (every GPU): sglang/srt/m.py:9 apply",
                                                            "linear (sm120): sglang/srt/m.py:9 apply"]
    assert region_sites(table, "0.5.11", "mm_fp4") == [] and region_sites(table, "0.5.99", "fp4_quantize") == []
