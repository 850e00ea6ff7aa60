"""SGLang's own piecewise compile of a whole decoder layer (Qwen3-MoE, ModelOpt NVFP4) on a CPU: probes/sglang/layer/probe.py.

The release builds its own Qwen3MoeDecoderLayer and compiles it as its piecewise CUDA graph runner does
for a prefill: install_torch_compiled(fullgraph=True), its SGLangBackend (the server's default compiler,
eager) splitting the graph at SGLang's registered split ops, the GPU faked. The default stack (SGLang
0.5.11): the upstream stack fails on SM120 (FlashInfer's JIT loader, through fp4_quantize); the patched
stack compiles whole on SM120, SM121 and SM100 with each MoE runner backend a user picks, and with
--enable-flashinfer-allreduce-fusion (its fused all-reduce + RMSNorm branch taken on SM100, at one rank);
a control that removes fp4_quantize's route from the patched FlashInfer fails again. SGLang 0.5.20: the
upstream layer fails in SGLang's own is_musa (an import of torchada, absent on CUDA servers) on every
GPU; its patched series (0004) takes that as a constant. Each run is kept in the result cache under the
digest of its inputs (the probe's module and every module of the package it imports, both trees' files, the GPU, backend and
options, torch's version), as the region probes are. The other target architectures
(probes/sglang/layer/models.py: DeepSeek-V3 and Kimi-K2 (MLA), GLM-4.5, Qwen3.5 MoE, GLM-5) are
built from each release's own model code, on every release whose tree has the model and compiles it
piecewise (not_compiled reads why not from the tree: the model absent, its architecture in the
release's piecewise_cuda_graph_disabled_model_archs, or for GLM-5 no split op around the DSA indexer),
and compiled the same way: upstream and patched on SM120 (cutlass), patched on SM100 (trtllm), the
SGLang series' control where fp4_quantize is raw (the fuller matrix on the default stack's release and
0.5.20); the graph must hold no node of FlashInfer's own Python outside the overlay's routing. Every run
is an entry of patches/sglang/audit-layer.json (the other models' under ``models``). `make test` runs
the default stack's cases on SM120 and a few of 0.5.20's, the rest with NVFP4_OVERLAY_FULL=1.
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
from helpers import (
    FULL,
    PATCHES,
    ROOT,
    cache_dir,
    default_sglang,
    probe_sources_digest,
    sglang_flashinfer_pins,
    without_route,
)
from packaging.version import Version

from nvfp4_overlay.oracle import probe_runner, sglang_layer, sglang_releases
from nvfp4_overlay.probes.sglang.layer import models as layer_models
from nvfp4_overlay.wheel import fetch

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

PROBE = "probes.sglang.layer.probe"  # run as a module; it and every module it imports: a run's inputs
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


def layer_run(sglang: Path, flashinfer: Path, gpu: tuple[int, int], backend: str, scratch: Path,
              options: tuple[str, ...] = ()) -> dict[str, Any]:
    import torch

    key = probe_sources_digest(PROBE, sglang, flashinfer)
    key = hashlib.sha256(f"{key}\0{gpu}\0{backend}\0{options}\0{torch.__version__}".encode()).hexdigest()[:32]
    kept = cache_dir() / "sglang-layer" / f"{key}.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    done = subprocess.run([sys.executable, "-m", f"nvfp4_overlay.{PROBE}", str(sglang), str(flashinfer), *map(str, gpu),
                           backend, *options],
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
    return release_trees(wheel_tree, tmp_path_factory)


def release_trees(wheel_tree: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """trees(release) -> the SGLang trees (upstream; patched where a series carries the release) and the
    FlashInfer trees of its pin (upstream, patched, and the control without fp4_quantize's route); the
    fixture of each whole-layer test module."""
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
        for model, kept in entry.get("models", {}).items():  # each other target architecture's
            if model not in TARGETS:  # a whole model's (test_sglang_seed.py) or an FP8 one's (test_sglang_layer_fp8.py)
                continue
            runs = {c.id.removeprefix(f"{release}-{model}-") for c in model_cases(release, model)}
            assert set(kept) <= runs, (release, model, set(kept) - runs)


def test_the_document_renders_the_committed_layer_table() -> None:
    document = ROOT / "docs" / "sglang-regions.md"
    text = document.read_text(encoding="utf-8")
    assert sglang_layer.render_into(text, sglang_layer.markdown(TABLE)) == text, "run `make sglang-regions-docs`"


# The other target architectures (probes/sglang/layer/models.py), each built tiny from the
# release's own model code, on every release whose tree has the model and compiles it piecewise
# (not_compiled reads why not). Why the upstream stack fails on SM120, per model, held to the runs: an
# NVFP4 linear outside SGLang's MoE op (the dense MLP, Kimi-K2's unfused shared expert, GLM-4.5's and
# Qwen3.5's quantized attention and shared expert) quantizes its input with fp4_quantize raw where
# RAW_FP4. DeepSeek-V3's and GLM-5's MoE layers have none: attention BF16 as NVIDIA's NVFP4 checkpoints
# leave it, the one shared expert fused into the 256 routed ones. And SGLang's is_musa where IS_MUSA,
# unless torchada is importable (glm-5+torchada, run only there: before, it is glm-5's run).
TARGETS = tuple(m for m, chosen in layer_models.MODELS.items()  # NVFP4 layers; FP8 and whole models have tests of their own
                if m != layer_models.DEFAULT and not chosen.whole and chosen.quantization == "modelopt_fp4")
FP4_LINEAR = {"deepseek-v3": False, "deepseek-v3-dense": True, "kimi-k2": True, "glm4-moe": True, "qwen3.5-moe": True,
              "qwen3.5-moe-linear": True, "glm-5": False, "glm-5+torchada": False}
CUTLASS, TRTLLM = "flashinfer_cutlass", "flashinfer_trtllm"


def model_cases(release: str, name: str) -> list[Any]:
    """(SGLang side, FlashInfer side, GPU, MoE runner backend, compiled whole?) by case, for one target
    architecture on one release: upstream and patched on SM120 (cutlass), patched on SM100 (trtllm, B200's
    pick); the SGLang series' control where fp4_quantize is raw; on the releases `make test` always runs, the
    fuller matrix (upstream on SM100, each backend on each GPU; Kimi-K2's fp4_quantize route control)."""
    torchada = "torchada" in layer_models.MODELS[name].stand_ins
    if torchada and release not in IS_MUSA:
        return []
    musa = release in IS_MUSA and not torchada
    raw = release in RAW_FP4 and FP4_LINEAR[name]
    found = {"upstream-sm120-flashinfer_cutlass": ("upstream", "upstream", SM120, CUTLASS, not raw and not musa),
             "patched-sm120-flashinfer_cutlass": ("patched", "patched", SM120, CUTLASS, True),
             "patched-sm100-flashinfer_trtllm": ("patched", "patched", SM100, TRTLLM, True)}
    if raw and RELEASES[release].carried:  # SGLang as released over the patched FlashInfer: the overlay's op
        found["upstream-sglang-patched-flashinfer-sm120-flashinfer_cutlass"] = ("upstream", "patched", SM120, CUTLASS, True)
    if release in ALWAYS:
        found |= {f"upstream-sm100-{b}": ("upstream", "upstream", SM100, b, not musa) for b in (CUTLASS, TRTLLM)}
        found |= {"patched-sm120-flashinfer_trtllm": ("patched", "patched", SM120, TRTLLM, True),
                  "patched-sm100-flashinfer_cutlass": ("patched", "patched", SM100, CUTLASS, True)}
    if raw and release == default_sglang() and name == "kimi-k2":  # without the route, raw again
        found["control-no-fp4-quantize-route-sm120-flashinfer_cutlass"] = ("upstream", "control", SM120, CUTLASS, False)
    return [pytest.param(release, name, *case, id=f"{release}-{name}-{cid}",
                         marks=[pytest.mark.xdist_group(f"sglang-layer-{release}")]) for cid, case in found.items()]


# `make test`: on the default stack's release each model's upstream run, patched on SM120 cutlass and
# SM100 trtllm, and Kimi-K2's controls; on 0.5.20 each model's patched SM120 run, Kimi-K2's upstream one
# (is_musa) and GLM-5's on SM100 without torchada (upstream stops at is_musa's import, the series does not).
# (release, model or "*" for every one, case)
MODELS_EVERY_RUN = {
    *[(default_sglang(), "*", c) for c in ("upstream-sm120-flashinfer_cutlass", "patched-sm120-flashinfer_cutlass",
                                           "patched-sm100-flashinfer_trtllm")],
    *[(default_sglang(), "kimi-k2", c) for c in ("upstream-sglang-patched-flashinfer-sm120-flashinfer_cutlass",
                                                 "control-no-fp4-quantize-route-sm120-flashinfer_cutlass")],
    ("0.5.20", "*", "patched-sm120-flashinfer_cutlass"), ("0.5.20", "kimi-k2", "upstream-sm120-flashinfer_cutlass"),
    ("0.5.20", "glm-5", "upstream-sm100-flashinfer_cutlass"), ("0.5.20", "glm-5", "patched-sm100-flashinfer_cutlass")}


def _every_run(release: str, name: str, case_id: str) -> bool:
    case = case_id.removeprefix(f"{release}-{name}-")
    return (release, "*", case) in MODELS_EVERY_RUN or (release, name, case) in MODELS_EVERY_RUN


MODEL_CASES = [c for v in RELEASES for m in TARGETS for c in model_cases(v, m)
               if FULL or _every_run(v, m, c.id)]


def _module_classes(sglang: Path, module: str) -> set[str]:
    path = sglang.joinpath(*module.split(".")).with_suffix(".py")
    return {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef)} if path.is_file() else set()


# SGLang's split op around the DSA indexer's cache store and top-k: 0.5.13-0.5.14's, then 0.5.15's
DSA_SPLITS = ("k_cache_and_topk_result", "pcg_dsa_indexer_prefill_split")


def not_compiled(sglang: Path, release: str, name: str) -> str | None:
    """Why the release does not compile this model's layer piecewise (or the probe cannot), read from its
    tree; None where it does: the model's module and classes absent, piecewise turned off for its
    architecture, or (the DSA models) no split op around the indexer, which the graph would then trace
    with the DSA attention backend's metadata (a backend the probe does not build)."""
    chosen = layer_models.MODELS[name]
    for module, klass in [(chosen.module, chosen.layer), tuple(chosen.causal_lm.rsplit(".", 1))][:1 + bool(chosen.causal_lm)]:
        if klass not in _module_classes(sglang, module):
            return f"SGLang {release} has no {klass} in {module}"
    if chosen.architecture in _piecewise_disabled_archs(sglang):
        return (f"SGLang {release} turns piecewise off for {chosen.architecture} "
                "(configs/model_config.py: piecewise_cuda_graph_disabled_model_archs)")
    indexers = [p.read_text() for p in (sglang / "sglang" / "srt" / "layers" / "attention").rglob("*.py")]
    if chosen.attention_backend == "dsa" and not any(f"def {op}(" in t for t in indexers for op in DSA_SPLITS):
        return (f"SGLang {release} has no split op around the DSA indexer: its piecewise graph traces the indexer "
                "into the DSA attention backend, which a one-layer run does not build (test_sglang_seed.py "
                "compiles GLM-5's whole model there)")
    return None


def _no_raw_flashinfer(result: dict[str, Any]) -> None:
    """Every FlashInfer call in the graph sits in an opaque op (SGLang's or the overlay's): no graph node
    comes from FlashInfer's own Python outside the overlay's routing (the probe's flashinfer_frames)."""
    assert not [op for op in result["ops"] if op.startswith("flashinfer.")], result["ops"]
    raw = [f for f in result["flashinfer_frames"] if "flashinfer/_nvfp4_overlay/" not in f]
    assert not raw, raw


@pytest.mark.parametrize(("release", "model", "sglang_side", "side", "gpu", "backend", "whole"), MODEL_CASES)
def test_each_target_architecture_compiles_as_its_stack_says(
        trees: Any, tmp_path: Path, request: pytest.FixtureRequest, release: str, model: str, sglang_side: str,
        side: str, gpu: tuple[int, int], backend: str, whole: bool) -> None:
    tree = trees(release)
    skipped = not_compiled(tree["sglang-upstream"], release, model)
    if skipped:
        pytest.skip(skipped)
    result = layer_run(tree[f"sglang-{sglang_side}"], tree[side], gpu, backend, tmp_path, ("--model", model))
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
    if not whole:  # FlashInfer's own code under fp4_quantize (its JIT loader; routeless, more), or is_musa's import
        assert "Unsupported" in result["error"], result["error"]
        musa = release in IS_MUSA and "torchada" not in layer_models.MODELS[model].stand_ins
        assert (("is_musa" in result["error"] or "torchada" in result["error"]) == musa), result["error"]
        return
    ops = result["ops"]
    _no_raw_flashinfer(result)
    split = [op for p in result["pieces"] if p["split"] for op in p["ops"]]  # SGLang's split ops, each alone
    assert split and set(split) <= set(result["split_ops"]), (split, result["split_ops"])
    assert any("attention" in op or "gdn" in op or "mla" in op for op in split), split
    moe = any(op.startswith("sglang.") and "moe" in op for op in ops)
    assert moe is (model != "deepseek-v3-dense"), ops
    if (sglang_side, side) == ("upstream", "patched"):  # the linear's fp4_quantize: the overlay's op, routed
        assert "nvfp4_overlay.flashinfer_fp4_quantize.default" in ops, ops
    if layer_models.MODELS[model].attention_backend == "dsa":  # the DSA indexer (FlashInfer's top-k) split out
        assert {f"sglang.{op}" for op in DSA_SPLITS} & set(split), split


def _piecewise_disabled_archs(sglang: Path) -> list[str]:
    """The release's piecewise_cuda_graph_disabled_model_archs, read from its configs/model_config.py
    (none before 0.5.10, where piecewise is opt-in: --enable-piecewise-cuda-graph)."""
    tree = ast.parse((sglang / "sglang" / "srt" / "configs" / "model_config.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "piecewise_cuda_graph_disabled_model_archs":
            return list(ast.literal_eval(node.value))
    return []


@pytest.mark.xdist_group(f"sglang-layer-{default_sglang()}")
def test_glm5_is_not_compiled_on_the_default_stack(trees: Any) -> None:
    """0.5.11 turns piecewise off for GlmMoeDsa (and any DSA/NSA config: is_deepseek_nsa), so GLM-5's
    layers never meet dynamo there (its cases skip, saying so)."""
    upstream = trees(default_sglang())["sglang-upstream"]
    source = (upstream / "sglang" / "srt" / "configs" / "model_config.py").read_text()
    assert "GlmMoeDsaForCausalLM" in _piecewise_disabled_archs(upstream)
    assert "is_piecewise_cuda_graph_disabled_model(self.hf_config.architectures)\n            or is_deepseek_nsa(" in source
    assert "piecewise_cuda_graph_disabled_model_archs" in str(not_compiled(upstream, default_sglang(), "glm-5"))


@pytest.mark.xdist_group("sglang-layer-0.5.20")
def test_glm5_is_compiled_on_0_5_20(trees: Any) -> None:
    """0.5.20 keeps piecewise on for GLM-5, its DSA indexer SGLang's split op: its cases run (`make test`
    runs three), not skip."""
    assert not_compiled(trees("0.5.20")["sglang-upstream"], "0.5.20", "glm-5") is None
