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
options, torch's version), as the region probes are. The other target architectures
(tests/releases/sglang_layer_models.py: DeepSeek-V3 and Kimi-K2 (MLA), GLM-4.5, Qwen3.5 MoE, GLM-5) are
built from the default stack's model code (GLM-5 from 0.5.20's, where piecewise stays on for it) and
compiled the same way; the graph must hold no node of FlashInfer's own Python outside the overlay's
routing. `make test` runs the default stack's cases on SM120, the rest with NVFP4_OVERLAY_FULL=1.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import FULL, PATCHES, ROOT, cache_dir, default_sglang, sglang_flashinfer_pins, without_route
from packaging.version import Version

from nvfp4_overlay.oracle import probe_runner, sglang_layer, sglang_releases
from nvfp4_overlay.wheel import fetch

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

PROBE = Path(__file__).resolve().parent / "sglang_layer_probe.py"
MODELS = Path(__file__).resolve().parent / "sglang_layer_models.py"
FAKES = Path(__file__).resolve().parent / "sglang_layer_fakes.py"
PROBE_MODULES = ("sglang/sglang_drivers", "sglang/sglang_imports", "sglang/sglang_machine", "sglang/sglang_regions",
                 "sglang/sglang_moe", "forking", "io_audit")
# Every release with a fullgraph prefill path (tc_piecewise is gone from 0.5.22); `make test` runs the
# default stack's and 0.5.20, `make test-releases` (NVFP4_OVERLAY_FULL=1) every one.
RELEASES = {r.version: r for r in sglang_releases.audit_releases(PATCHES) if Version(r.version) <= Version("0.5.21")}
ALWAYS = (default_sglang(), "0.5.20")
PINS = sglang_flashinfer_pins()
SM120, SM121, SM100 = (12, 0), (12, 1), (10, 0)
BACKENDS = ("flashinfer_cutlass", "flashinfer_trtllm", "auto")
FUSION = "--allreduce-fusion"  # --enable-flashinfer-allreduce-fusion
# Why the upstream stack's layer fails, by release (read from the releases' code, held to the runs):
# SGLang calls flashinfer.fp4_quantize raw in its ModelOpt linear on SM12x (FlashInfer's JIT loader then);
# SGLang's own is_musa imports torchada under dynamo (patch 0004 of their series).
RAW_FP4 = {v for v in RELEASES if Version(v) < Version("0.5.12")}
IS_MUSA = {v for v in RELEASES if Version(v) >= Version("0.5.20")}
TABLE = sglang_layer.load_table(PATCHES)
WRITE = os.environ.get("NVFP4_OVERLAY_WRITE_LAYER") == "1"  # make sglang-layer-table: the runs become the table


def cases(release: str) -> list[Any]:
    """(case id, SGLang tree, FlashInfer tree, GPU, MoE runner backend, probe options, compiled whole?)"""
    upstream_whole = release not in RAW_FP4 and release not in IS_MUSA
    found = [("upstream-sm120-flashinfer_cutlass", "upstream", "upstream", SM120, "flashinfer_cutlass", (),
              upstream_whole),
             ("upstream-sm100-flashinfer_cutlass", "upstream", "upstream", SM100, "flashinfer_cutlass", (),
              release not in IS_MUSA)]
    found += [(f"patched-{sglang_layer.gpu_name(gpu)}-{backend}", "patched", "patched", gpu, backend, (), True)
              for gpu in (SM120, SM121, SM100) for backend in BACKENDS]
    found += [(f"patched-{sglang_layer.gpu_name(gpu)}-flashinfer_cutlass-allreduce-fusion", "patched", "patched", gpu,
               "flashinfer_cutlass", (FUSION,), True) for gpu in (SM100, SM120)]
    if RELEASES[release].carried:  # the control of the SGLang series: its upstream SGLang over the patched FlashInfer
        found.append(("upstream-sglang-patched-flashinfer-sm120-flashinfer_cutlass", "upstream", "patched", SM120,
                      "flashinfer_cutlass", (), release not in IS_MUSA))
    if release in RAW_FP4:  # the control of the FlashInfer series: fp4_quantize's route removed
        found.append(("control-no-fp4-quantize-route-sm120-flashinfer_cutlass", "upstream", "control", SM120,
                      "flashinfer_cutlass", (), False))
    marks = [pytest.mark.xdist_group(f"sglang-layer-{release}")]
    return [pytest.param(release, *case[1:], id=f"{release}-{case[0]}", marks=marks) for case in found]


# `make test`: the default stack's whole matrix, and of the other release it always runs the cases that
# tell the stacks apart (upstream fails, patched compiles, the fused all-reduce, the SGLang series' control)
EVERY_RUN = ("upstream-sm120-flashinfer_cutlass", "patched-sm120-flashinfer_cutlass",
             "patched-sm100-flashinfer_cutlass-allreduce-fusion", "upstream-sglang-patched-flashinfer-sm120-flashinfer_cutlass")
CASES = [c for v in RELEASES if v in ALWAYS or FULL for c in cases(v)
         if FULL or v == default_sglang() or c.id.removeprefix(f"{v}-") in EVERY_RUN]


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
    key = _digest(PROBE, MODELS, FAKES, *(probes / f"{m}.py" for m in PROBE_MODULES), sglang, flashinfer)
    key = hashlib.sha256(f"{key}\0{gpu}\0{backend}\0{options}\0{torch.__version__}".encode()).hexdigest()[:32]
    kept = cache_dir() / "sglang-layer" / f"{key}.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    done = subprocess.run([sys.executable, str(PROBE), str(sglang), str(flashinfer), *map(str, gpu), backend, *options],
                          capture_output=True, text=True, cwd=scratch, timeout=900, check=False,
                          env={**os.environ, "TVM_FFI_CACHE_DIR": str(scratch / "tvm-ffi")})  # JIT builds: its own
    lines = done.stdout.strip().splitlines()
    if not lines:  # the child died before its JSON line (exit status, stderr): news, not kept
        return {"setup_error": f"the probe exited {done.returncode} without a result: {done.stderr[-2000:]}"}
    result = dict(json.loads(lines[-1]))
    if "setup_error" not in result and "no_cuda_runtime" not in result:  # news, not facts to keep
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(result))
    return result


@pytest.fixture(scope="module")
def trees(wheel_tree: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """trees(release) -> the SGLang trees (upstream; patched where a series carries the release) and the
    FlashInfer trees of its pin (upstream, patched, and the control without fp4_quantize's route)."""
    made: dict[str, dict[str, Path]] = {}

    def get(release: str) -> dict[str, Path]:
        if release not in made:
            pin = PINS[release]
            patched = wheel_tree("flashinfer-python", pin)
            control = without_route(patched, tmp_path_factory.mktemp("control") / "flashinfer", "fp4_quantize")
            wheel = sglang_releases.upstream_wheel(PATCHES, RELEASES[release], fetch.Source(cache_dir()))
            upstream = probe_runner.unpack(wheel, tmp_path_factory.mktemp(f"sglang-{release}"))
            made[release] = {"sglang-upstream": upstream, "patched": patched, "control": control,
                             "sglang-patched": wheel_tree("sglang", release) if RELEASES[release].carried else upstream,
                             "upstream": wheel_tree("flashinfer-python", pin, patched=False)}
        return made[release]

    return get


@pytest.mark.parametrize(("release", "sglang", "side", "gpu", "backend", "options", "whole"), CASES)
def test_sglang_compiles_a_whole_decoder_layer_as_its_stack_says(
        trees: Any, tmp_path: Path, request: pytest.FixtureRequest, release: str, sglang: str, side: str,
        gpu: tuple[int, int], backend: str, options: tuple[str, ...], whole: bool) -> None:
    tree = trees(release)
    result = layer_run(tree[f"sglang-{sglang}"], tree[side], gpu, backend, tmp_path, options)
    if "no_cuda_runtime" in result:  # a CUDA toolkit's runtime library is what this machine lacks
        pytest.skip(result["no_cuda_runtime"])
    assert "setup_error" not in result, result.get("setup_error")
    case = request.node.callspec.id.removeprefix(f"{release}-")
    if WRITE:
        sglang_layer.record(PATCHES, release, PINS[release], case, result)
    else:  # docs/sglang-regions.md's layer table is this table: it must say what the run found
        kept = TABLE["releases"].get(release, {}).get("cases", {}).get(case)
        assert kept == sglang_layer.entry(result), "run `make sglang-layer-table`, then `make sglang-regions-docs`"
    assert result["compiler"] == "eager", result  # the server's default piecewise compiler: no inductor
    assert result["whole"] is whole, result.get("error")
    if not whole:
        assert "Unsupported" in result["error"], result["error"]
        # where: FlashInfer's JIT loader under fp4_quantize, or SGLang's own is_musa
        assert ("is_musa" in result["error"]) == (release in IS_MUSA and side != "control"), result["error"]
        return
    pieces, ops = result["pieces"], result["ops"]
    # SGLang's backend split the graph at its split ops: each split piece is one of them, alone
    assert [p["ops"] for p in pieces if p["split"]] == [["sglang.unified_attention_with_output"]], pieces
    assert "sglang.fp4_gemm" in ops and any(op.startswith("sglang.") and "moe" in op for op in ops), ops
    assert not [op for op in ops if op.startswith("flashinfer.")], ops  # nothing of FlashInfer's own traced
    # the activation quantize is one opaque op: up to 0.5.11 on SM12x fp4_quantize (the patched series' op or
    # the overlay's) and on SM100 SGLang's or sgl-kernel's scaled_fp4_quant; from 0.5.12 SGLang's own op
    assert any("fp4_quantize" in op for op in ops) == (gpu[0] == 12 or release not in RAW_FP4), ops
    assert any("fp4_quantize" in op or "scaled_fp4_quant" in op for op in ops), ops
    if FUSION in options:  # the communicator takes its fused all-reduce + RMSNorm branch on SM90/SM100 only
        assert result["allreduce_fusion"] is (gpu == SM100), result["allreduce_fusion"]


def test_the_layer_table_holds_only_cases_the_test_runs() -> None:
    every = {v: {c.id.removeprefix(f"{v}-") for c in cases(v)} for v in RELEASES}
    for release, entry in TABLE["releases"].items():
        assert release in RELEASES, release
        assert entry["flashinfer"] == PINS[release], release
        assert set(entry["cases"]) <= every[release], set(entry["cases"]) - every[release]


def test_the_document_renders_the_committed_layer_table() -> None:
    document = ROOT / "docs" / "sglang-regions.md"
    text = document.read_text(encoding="utf-8")
    assert sglang_layer.render_into(text, sglang_layer.markdown(TABLE)) == text, "run `make sglang-regions-docs`"


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
# `make test`: each model's upstream run and two patched ones (both GPUs, both backends between them)
MODEL_CASES = [c for c in MODEL_CASES if FULL or not c[0].endswith(("-sm120-trtllm", "-sm100-cutlass"))]


def _no_raw_flashinfer(result: dict[str, Any]) -> None:
    """Every FlashInfer call in the graph sits in an opaque op (SGLang's or the overlay's): no graph node
    comes from FlashInfer's own Python outside the overlay's routing (the probe's flashinfer_frames)."""
    assert not [op for op in result["ops"] if op.startswith("flashinfer.")], result["ops"]
    raw = [f for f in result["flashinfer_frames"] if "flashinfer/_nvfp4_overlay/" not in f]
    assert not raw, raw


@pytest.mark.parametrize(("model", "sglang_side", "side", "gpu", "backend", "whole"), [c[1:] for c in MODEL_CASES],
                         ids=[c[0] for c in MODEL_CASES])
def test_each_target_architecture_compiles_as_its_stack_says(trees: Any, tmp_path: Path, model: str,
                                                            sglang_side: str, side: str, gpu: tuple[int, int],
                                                            backend: str, whole: bool) -> None:
    tree = trees(default_sglang())
    result = layer_run(tree[f"sglang-{sglang_side}"], tree[side], gpu, backend, tmp_path, ("--model", model))
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


def test_glm5_is_not_compiled_on_the_default_stack(trees: Any) -> None:
    """0.5.11 turns piecewise off for GlmMoeDsa (and any DSA/NSA config: is_deepseek_nsa), so GLM-5's
    layers never meet dynamo there; 0.5.20 (below) keeps it on."""
    upstream = trees(default_sglang())["sglang-upstream"]
    source = (upstream / "sglang" / "srt" / "configs" / "model_config.py").read_text()
    assert "GlmMoeDsaForCausalLM" in _piecewise_disabled_archs(upstream)
    assert "is_piecewise_cuda_graph_disabled_model(self.hf_config.architectures)\n            or is_deepseek_nsa(" in source


GLM5_SGLANG = "0.5.20"
GLM5_CASES = [
    # (id, model, stack side, GPU, backend, compiled whole?)
    ("upstream-sm100-trtllm", "glm-5+torchada", "upstream", (10, 0), "flashinfer_trtllm", True),
    ("upstream-sm100-cutlass", "glm-5+torchada", "upstream", (10, 0), "flashinfer_cutlass", True),
    ("patched-sm100-trtllm", "glm-5+torchada", "patched", (10, 0), "flashinfer_trtllm", True),
    ("patched-sm100-cutlass", "glm-5+torchada", "patched", (10, 0), "flashinfer_cutlass", True),
    ("patched-sm120-cutlass", "glm-5+torchada", "patched", (12, 0), "flashinfer_cutlass", True),
    # a CUDA server has no torchada: upstream stops at is_musa's import, the SGLang series (0004) does not
    ("upstream-sm100-cutlass-no-torchada", "glm-5", "upstream", (10, 0), "flashinfer_cutlass", False),
    ("patched-sm100-cutlass-no-torchada", "glm-5", "patched", (10, 0), "flashinfer_cutlass", True),
]
GLM5_CASES = [c for c in GLM5_CASES if FULL or c[0] in ("patched-sm120-cutlass", "upstream-sm100-cutlass-no-torchada",
                                                        "patched-sm100-cutlass-no-torchada")]


@pytest.mark.parametrize(("model", "side", "gpu", "backend", "whole"), [c[1:] for c in GLM5_CASES],
                         ids=[c[0] for c in GLM5_CASES])
def test_glm5_compiles_whole_on_0_5_20(trees: Any, tmp_path: Path, model: str, side: str,
                                      gpu: tuple[int, int], backend: str, whole: bool) -> None:
    """GLM-5's MoE layer (MLA + the DSA indexer, 256 experts with the shared one fused) on 0.5.20, where
    piecewise stays on for it: the indexer sits in SGLang's split op, FlashInfer only in SGLang's ops.
    Without a torchada module the trace stops at is_musa's import (dynamo traces past its lru_cache)."""
    tree = trees(GLM5_SGLANG)
    assert "GlmMoeDsaForCausalLM" not in _piecewise_disabled_archs(tree["sglang-upstream"])
    result = layer_run(tree[f"sglang-{side}"], tree[side], gpu, backend, tmp_path, ("--model", model))
    assert "setup_error" not in result, result.get("setup_error")
    assert result["whole"] is whole, result.get("error")
    if not whole:
        assert "torchada" in result["error"], result["error"]
        return
    ops = result["ops"]
    _no_raw_flashinfer(result)
    assert {"sglang.mla_bmm_then_unified_attention", "sglang.pcg_dsa_indexer_prefill_split"} <= set(ops), ops
    assert any(op.startswith("sglang.") and "moe" in op for op in ops), ops
