"""SGLang 0.5.21's MXFP8 linear with its tactic pinned, when its compiled graph runs, hands FlashInfer's GEMM what its eager path does: probes/sglang/layer/pin_probe.py.

``flashinfer_mxfp8_blockscaled_linear(pin_tactic=True)`` enters FlashInfer's
``autotune(False, skip_ops={"mxfp8_gemm"})`` around SGLang's own GEMM op. Upstream, the context sits in
the traced forward: ``torch.compile(fullgraph=True)`` stops on the autotuner's lock. Patch 0005 of the
0.5.21 series moves the context into the op. Held here, with FlashInfer's raw GEMM a recorder of what
the autotuner holds when it is called: the patched linear compiles, and its compiled graph, run (and
run under a warm-up's ``autotune(True)``), calls the GEMM with the same arguments under the same
skipped ops and tuning mode as upstream's eager path does, and as its own eager path does.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import cache_dir, probe_sources_digest
from test_sglang_layer import release_trees

pytestmark = [pytest.mark.upstream, pytest.mark.torch, pytest.mark.xdist_group("sglang-layer-0.5.21")]


@pytest.fixture(scope="module")
def trees(wheel_tree: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return release_trees(wheel_tree, tmp_path_factory)

RELEASE = "0.5.21"
PROBE = "probes.sglang.layer.pin_probe"  # run as a module; it and every module it imports: a run's inputs
RUNS = ("eager", "eager-under-autotune", "compiled", "compiled-under-autotune")


def pin_run(sglang: Path, flashinfer: Path, scratch: Path) -> dict[str, Any]:
    """The probe's records, kept in the result cache under the digest of its inputs."""
    import torch

    key = probe_sources_digest(PROBE, sglang, flashinfer)
    key = hashlib.sha256(f"{key}\0{torch.__version__}".encode()).hexdigest()[:32]
    kept = cache_dir() / "sglang-pin" / f"{key}.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    done = subprocess.run([sys.executable, "-m", f"nvfp4_overlay.{PROBE}", str(sglang), str(flashinfer)],
                          capture_output=True, text=True, cwd=scratch, timeout=900, check=False,
                          env={**os.environ, "TVM_FFI_CACHE_DIR": str(scratch / "tvm-ffi")})
    lines = done.stdout.strip().splitlines()
    if not lines:
        return {"setup_error": f"the probe exited {done.returncode} without a result: {done.stderr[-2000:]}"}
    result = dict(json.loads(lines[-1]))
    if "setup_error" not in result and "no_cuda_runtime" not in result:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(result))
    return result


@pytest.fixture(scope="module")
def runs(trees: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tree = trees(RELEASE)
    found = {side: pin_run(tree[f"sglang-{side}"], tree["patched"], tmp_path_factory.mktemp(f"pin-{side}"))
             for side in ("upstream", "patched")}
    for result in found.values():
        if "no_cuda_runtime" in result:
            pytest.skip(result["no_cuda_runtime"])
        assert "setup_error" not in result, result.get("setup_error")
    return found


def test_upstream_pins_the_tactic_eagerly_and_cannot_compile(runs: dict[str, dict[str, Any]]) -> None:
    upstream = runs["upstream"]
    for run in ("eager", "eager-under-autotune"):
        (call,) = upstream[run]
        assert call["skip_ops"] == ["mxfp8_gemm"] and call["tuning"] is (run != "eager"), call
    for run in ("compiled", "compiled-under-autotune"):  # the autotuner's context, traced: its lock
        assert "Unsupported" in upstream[run]["error"], upstream[run]
        assert "flashinfer/autotuner/autotuner.py" in upstream[run]["where"] and "_lock" in upstream[run]["where"], upstream[run]


def test_the_patched_linear_compiles_and_runs_the_gemm_as_upstream_eager_does(runs: dict[str, dict[str, Any]]) -> None:
    upstream, patched = runs["upstream"], runs["patched"]
    assert all(isinstance(patched[run], list) for run in RUNS), patched  # every run made its calls, none stopped
    assert patched["eager"] == upstream["eager"] and patched["eager-under-autotune"] == upstream["eager-under-autotune"]
    assert patched["compiled"] == upstream["eager"], (patched["compiled"], upstream["eager"])
    assert patched["compiled-under-autotune"] == upstream["eager-under-autotune"]
