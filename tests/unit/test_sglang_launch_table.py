"""sglang_launch: whether a launch line runs a fullgraph region, per SGLang release, from the committed table
(what stays raw by GPU, flag and routes; doctor's verdict; a malformed line refused before any probe).
The table's flags against the wheels themselves: tests/releases/test_sglang_launch.py."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from helpers import PATCHES

from nvfp4_overlay import cli
from nvfp4_overlay.audit import sglang_launch, sglang_raw
from nvfp4_overlay.errors import UsageError
from nvfp4_overlay.oracle import sglang_releases

BY_VERSION = {r.version: r for r in sglang_releases.audit_releases(PATCHES)}
RELEASES = list(BY_VERSION)

CASES = [
    # (id, release, launch arguments, GPU, architecture, runs?)
    ("0.5.8-default-off", "0.5.8", "--model m", None, None, False),
    ("0.5.8-enabled", "0.5.8", "--enable-piecewise-cuda-graph", None, None, True),
    ("0.5.11-default-on", "0.5.11", "--quantization modelopt_fp4", "12.0", "DeepseekV3ForCausalLM", True),
    ("0.5.11-disabled", "0.5.11", "--disable-piecewise-cuda-graph", "12.0", "DeepseekV3ForCausalLM", False),
    ("0.5.11-torch-compile", "0.5.11", "--enable-torch-compile", "12.0", "Qwen3MoeForCausalLM", False),
    ("0.5.11-trtllm", "0.5.11", "--moe-runner-backend flashinfer_trtllm", "10.0", "DeepseekV3ForCausalLM", False),
    ("0.5.11-trtllm-enforced", "0.5.11", "--moe-runner-backend flashinfer_trtllm --enforce-piecewise-cuda-graph",
     "10.0", "DeepseekV3ForCausalLM", True),
    ("0.5.11-b200-auto-deepseek", "0.5.11", "", "10.0", "DeepseekV3ForCausalLM", False),
    ("0.5.11-b200-auto-qwen", "0.5.11", "", "10.0", "Qwen3MoeForCausalLM", True),
    ("0.5.11-glm5", "0.5.11", "", "12.0", "GlmMoeDsaForCausalLM", False),
    ("0.5.11-gpt-oss-trtllm", "0.5.11", "--moe-runner-backend=flashinfer_mxfp4", "10.0", "GptOssForCausalLM", True),
    ("0.5.14-default-tc-piecewise", "0.5.14", "", "12.0", "Qwen3MoeForCausalLM", True),
    ("0.5.14-breakable", "0.5.14", "--cuda-graph-backend-prefill breakable", "12.0", "Qwen3MoeForCausalLM", False),
    ("0.5.16-default-breakable", "0.5.16", "", "12.0", "Qwen3MoeForCausalLM", False),
    ("0.5.16-tc-piecewise", "0.5.16", "--cuda-graph-backend-prefill tc_piecewise", "12.0", "Qwen3MoeForCausalLM", True),
    ("0.5.19-enforce", "0.5.19", "--enforce-piecewise-cuda-graph", "12.0", "Qwen3MoeForCausalLM", True),
    ("0.5.20-enforce-gone", "0.5.20", "--enforce-piecewise-cuda-graph", "12.0", "Qwen3MoeForCausalLM", False),
    ("0.5.20-minimax", "0.5.20", "", "12.0", "MiniMaxM3SparseForConditionalGeneration", True),
    ("0.5.20-tc-piecewise-dp", "0.5.20", "--cuda-graph-backend-prefill=tc_piecewise --enable-dp-attention", "12.0",
     "Qwen3MoeForCausalLM", False),
    ("0.5.22-refused", "0.5.22", "--cuda-graph-backend-prefill tc_piecewise", "12.0", "Qwen3MoeForCausalLM", False),
    ("0.5.23-torch-compile", "0.5.23", "--enable-torch-compile", "12.0", "Qwen3MoeForCausalLM", False),
]


@pytest.mark.parametrize(("release", "args", "gpu", "arch", "runs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_whether_the_launch_line_runs_a_fullgraph_region(release: str, args: str, gpu: str | None,
                                                          arch: str | None, runs: bool) -> None:
    region = sglang_launch.fullgraph_region(release, args, gpu=gpu, arch=arch)
    assert region["runs"] is runs, region["why"]
    assert region["why"][0].startswith(f"SGLang {release}: by default ")


def test_every_audited_release_has_one_row() -> None:
    for release in RELEASES:
        assert sglang_launch.mode_of(release) is not None, release
    assert sglang_launch.fullgraph_region("0.4.0", "")["runs"] is None


def test_what_stays_raw_follows_the_gpu_the_flag_and_the_routes() -> None:
    upstream = sglang_raw.conditional_calls(None)  # a FlashInfer without the overlay
    line = "--fp8-gemm-backend flashinfer_deepgemm"
    region = sglang_launch.fullgraph_region("0.5.11", line, gpu="9.0", arch="DeepseekV3ForCausalLM")
    assert [r.split(" (")[0] for r in sglang_launch.raw_left(region, upstream, line, "9.0")] == [
        "fp8_blockscale_gemm_sm90", "tinygemm_bf16"]
    assert [r.split(" (")[0] for r in sglang_launch.raw_left(region, upstream, "", "9.0")] == ["tinygemm_bf16"]
    assert [r.split(" (")[0] for r in sglang_launch.raw_left(region, upstream, line, "12.0")] == ["tinygemm_bf16"]
    routed = [dict(c, routed=True) for c in upstream]
    assert sglang_launch.raw_left(region, routed, line, "9.0") == []
    off = sglang_launch.fullgraph_region("0.5.16", line, gpu="9.0", arch="DeepseekV3ForCausalLM")
    assert sglang_launch.raw_left(off, upstream, line, "9.0") == []


def test_doctor_judges_the_installed_release_on_its_gpu() -> None:
    from nvfp4_overlay.operate import doctor_launch

    document: dict[str, object] = {"notes": [], "gpu": {"devices": [{"capability": [9, 0]}]}, "distributions": {
        "sglang": {"installed": True, "version": "0.5.11+nvfp4.3"}, "flashinfer-python": {"installed": False}}}
    answer = doctor_launch.judge(document, "--fp8-gemm-backend flashinfer_deepgemm", "DeepseekV3ForCausalLM")
    assert answer is not None and answer["runs"] is True and answer["gpu"] == "9.0"
    assert [r.split(" (")[0] for r in answer["raw_left"]] == ["fp8_blockscale_gemm_sm90", "tinygemm_bf16"]
    missing = {"notes": [], "distributions": {"sglang": {"installed": False}}}
    assert doctor_launch.judge(missing, "", None) is None and "not installed" in missing["notes"][0]  # type: ignore[index]


def test_a_malformed_launch_line_is_a_usage_error_before_any_probe() -> None:
    with pytest.raises(UsageError, match="--sglang-args: No closing quotation"):
        sglang_launch.flags('--model "unclosed')
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = cli.main(["doctor", "--json", "--no-trace", "--sglang-args", '--x "y'])
    assert code == 2 and json.loads(out.getvalue())["error"]["item"] == "--sglang-args"
