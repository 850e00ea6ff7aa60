"""sglang_raw: the calls outside the audited regions, routed or raw by the FlashInfer's routes."""

from __future__ import annotations

from helpers import OVERLAY

from nvfp4_overlay.audit import sglang_audit, sglang_raw


def test_the_overlay_routes_both_conditional_calls_and_an_upstream_flashinfer_neither() -> None:
    routes = sglang_audit.read_routes(OVERLAY / "flashinfer-python")
    patched = sglang_raw.conditional_calls(routes)
    assert [(c["function"], c["routed"]) for c in patched] == [("fp8_blockscale_gemm_sm90", True),
                                                               ("tinygemm_bf16", True)]
    assert not any(c["routed"] for c in sglang_raw.conditional_calls(None))  # an upstream FlashInfer


def test_none_is_said_with_its_scope_and_each_condition() -> None:
    line = sglang_raw.qualified("none", sglang_raw.conditional_calls(None))
    assert line.startswith("none in the audited regions; outside them: ")
    assert "fp8_blockscale_gemm_sm90 (SM90 with --fp8-gemm-backend flashinfer_deepgemm" in line
    assert "): raw" in line and "tinygemm_bf16 (GPT-OSS" in line and "not traced" in line
