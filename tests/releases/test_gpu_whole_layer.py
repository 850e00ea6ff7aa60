"""The whole-layer GPU proof (proofs/gpu/whole_layer.py), its CPU side: the layer it runs on the H200 traced here.

SGLang 0.5.11's own Qwen3-MoE FP8 block-scale decoder layer (`--fp8-gemm-backend flashinfer_deepgemm`,
Triton MoE, torch_native attention), built by the proof's own code with SM90 faked, under SGLang's own
install_torch_compiled(fullgraph=True) and piecewise context managers: the patched stack traces whole
(FlashInfer's fp8_blockscale_gemm_sm90 one opaque op of the overlay's, beside SGLang's split and MoE
ops and the proof's kernel bodies) and SGLang's own backend splits and compiles it with its default
`eager` piecewise compiler and with `inductor` (whose AOT functionalization takes the overlay's op: a
mutating op returns a fixed form, not Tensor[]); the upstream stack fails in FlashInfer's JIT loader, and a control that removes that one
route from the patched FlashInfer fails again. The torch bodies the proof gives
sgl-kernel's ops compute what the kernels do (moe_align_block_size against a loop over its contract).
"""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, cache_dir, without_route

from nvfp4_overlay.oracle import oracle

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

PROOFS = ROOT / "proofs" / "gpu"
PROOF_FILES = [PROOFS / n for n in ("whole_layer.py", "whole_layer_build.py", "sglang_bodies.py")]
SGLANG, FLASHINFER = "0.5.11", "0.6.8.post1"
OP = "nvfp4_overlay.flashinfer_fp8_blockscale_gemm_sm90.default"


def _digest(*roots: Path) -> str:
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _package_modules(*files: Path) -> list[str]:
    """The package's modules that files outside it import (`from nvfp4_overlay.X import Y`: X.Y, or X where Y
    is no module), dotted under it: with every module they import (oracle.modules_digest), the probes' part
    of a proof's inputs."""
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nvfp4_overlay."):
                base = (node.module or "").removeprefix("nvfp4_overlay.")
                found += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return sorted(set(found))


def traced(sglang: Path, flashinfer: Path, scratch: Path, compiler: str = "") -> dict[str, Any]:
    """whole_layer.py --trace [--compiler C], kept in the result cache under the digest of its inputs."""
    import torch

    key = _digest(*PROOF_FILES, sglang, flashinfer) + oracle.modules_digest(_package_modules(*PROOF_FILES))
    kept = cache_dir() / "gpu-whole-layer" / f"{hashlib.sha256(f'{key}{torch.__version__}{compiler}'.encode()).hexdigest()[:32]}.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    done = subprocess.run([sys.executable, str(PROOFS / "whole_layer.py"), "--trace", str(sglang), str(flashinfer),
                           "--compiler", compiler],
                          capture_output=True, text=True, cwd=scratch, timeout=900, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("@@LAYER@@")]
    assert lines, done.stderr[-3000:]
    result = dict(json.loads(lines[-1][len("@@LAYER@@"):]))
    if "crash" not in result:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(result))
    return result


@pytest.fixture(scope="module")
def trees(wheel_tree: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    patched = wheel_tree("flashinfer-python", FLASHINFER)
    control = without_route(patched, tmp_path_factory.mktemp("control") / "flashinfer", "fp8_blockscale_gemm_sm90")
    return {"sglang-patched": wheel_tree("sglang", SGLANG), "sglang-upstream": wheel_tree("sglang", SGLANG, patched=False),
            "patched": patched, "upstream": wheel_tree("flashinfer-python", FLASHINFER, patched=False),
            "control": control}


def test_the_patched_stack_traces_the_fp8_layer_whole(trees: dict[str, Path], tmp_path: Path) -> None:
    result = traced(trees["sglang-patched"], trees["patched"], tmp_path)
    assert "crash" not in result, result.get("crash")
    assert result["whole"], result.get("error")
    ops = result["ops"]
    assert OP in ops, ops  # the linear layers' GEMM, opaque
    # SGLang's own split op (attention) and MoE op, and the bodies standing in for sgl-kernel
    assert {"sglang.unified_attention_with_output", "sglang.moe_forward_piecewise_cuda_graph_impl"} <= set(ops), ops
    assert {"sglbody.fused_add_rmsnorm", "sglbody.rope", "sglbody.topk_softmax"} <= set(ops), ops


def test_sglangs_eager_piecewise_compiler_splits_and_compiles_it(trees: dict[str, Path], tmp_path: Path) -> None:
    """SGLang's own backend (SGLangBackend, --piecewise-cuda-graph-compiler eager, the default) over the graph."""
    result = traced(trees["sglang-patched"], trees["patched"], tmp_path, "eager")
    assert result["whole"] and result.get("compiled") == "eager", result.get("error")


def test_sglangs_inductor_piecewise_compiler_compiles_it(trees: dict[str, Path], tmp_path: Path) -> None:
    """--piecewise-cuda-graph-compiler inductor: AOT functionalization and inductor's lowering of the
    graph, the overlay's fp8_blockscale_gemm_sm90 op (it writes into `out`) among its nodes (SGLang
    0.5.11's dummy shape env given what 0.5.16 gives it: whole_layer.inductor_shape_env)."""
    result = traced(trees["sglang-patched"], trees["patched"], tmp_path, "inductor")
    assert result["whole"] and result.get("compiled") == "inductor", result.get("error")


@pytest.mark.parametrize(("sglang", "flashinfer"), [("sglang-upstream", "upstream"), ("sglang-patched", "control")],
                         ids=["upstream", "control-no-fp8-blockscale-route"])
def test_without_the_route_the_layer_does_not_compile(trees: dict[str, Path], tmp_path: Path, sglang: str,
                                                       flashinfer: str) -> None:
    result = traced(trees[sglang], trees[flashinfer], tmp_path)
    assert "crash" not in result, result.get("crash")
    assert result["whole"] is False
    assert "Unsupported" in result["error"] and "fp8_blockscale_gemm_sm90" in result["error"], result["error"]


@pytest.mark.parametrize(("tokens", "block"), [(16, 16), (128, 64), (3, 16)])
def test_the_moe_align_body_keeps_the_kernels_contract(tokens: int, block: int) -> None:
    import torch

    sys.path.insert(0, str(PROOFS))
    import sglang_bodies

    experts, generator = 8, torch.Generator().manual_seed(tokens)
    ids = torch.stack([torch.randperm(experts, generator=generator)[:2] for _ in range(tokens)]).int()
    n = ids.numel()
    size = n * block if n < experts + 1 else n + (experts + 1) * (block - 1)
    sorted_ids, blocks = torch.empty(size, dtype=torch.int32), torch.empty(-(-size // block), dtype=torch.int32)
    total, cumsum = torch.empty(1, dtype=torch.int32), torch.empty(experts + 2, dtype=torch.int32)
    sglang_bodies.moe_align_block_size(ids, experts + 1, block, sorted_ids, blocks, total, cumsum)
    assert int(total) % block == 0 and int(total) <= size
    flat, seen = ids.flatten().tolist(), []
    for b in range(int(total) // block):
        for slot in sorted_ids[b * block:(b + 1) * block].tolist():
            if slot < n:  # a slot of the block's expert; padding is the slot count
                assert flat[slot] == int(blocks[b])
                seen.append(slot)
    assert sorted(seen) == list(range(n))


# SGLang 0.5.20 (its stack's FlashInfer 0.6.18): the same layer, compiled by its tc_piecewise prefill path
SGLANG_0520, FLASHINFER_0618 = "0.5.20", "0.6.18"


@pytest.fixture(scope="module")
def trees_0520(wheel_tree: Any) -> dict[str, Path]:
    return {"sglang-patched": wheel_tree("sglang", SGLANG_0520),
            "sglang-upstream": wheel_tree("sglang", SGLANG_0520, patched=False),
            "patched": wheel_tree("flashinfer-python", FLASHINFER_0618),
            "upstream": wheel_tree("flashinfer-python", FLASHINFER_0618, patched=False)}


def test_0520_the_patched_stack_traces_the_fp8_layer_whole(trees_0520: dict[str, Path], tmp_path: Path) -> None:
    """0.5.20's kernels (sglang.kernels.ops) given the proof's bodies, its tc_piecewise contexts: whole."""
    result = traced(trees_0520["sglang-patched"], trees_0520["patched"], tmp_path)
    assert "crash" not in result, result.get("crash")
    assert result["whole"], result.get("error")
    assert OP in result["ops"], result["ops"]
    assert {"sglang.unified_attention_with_output", "sglang.moe_forward_piecewise_cuda_graph_impl"} <= set(result["ops"])


@pytest.mark.parametrize(("flashinfer", "stops_at"),
                         [("upstream", "fp8_blockscale_gemm_sm90"), ("patched", "import torchada")],
                         ids=["upstream-stack", "upstream-sglang-over-patched-flashinfer"])
def test_0520_upstream_does_not_compile(trees_0520: dict[str, Path], tmp_path: Path, flashinfer: str,
                                        stops_at: str) -> None:
    """The upstream stack stops first in FlashInfer's JIT loader (the qkv_proj GEMM comes before the
    communicator); upstream SGLang over the patched FlashInfer stops in SGLang's own is_musa (patch 0004)."""
    result = traced(trees_0520["sglang-upstream"], trees_0520[flashinfer], tmp_path)
    assert "crash" not in result, result.get("crash")
    assert result["whole"] is False
    assert "Unsupported" in result["error"] and stops_at in result["error"], result["error"]
