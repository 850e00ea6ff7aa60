"""jit-cache --plan of every stack on every GPU family: each routed entry point the stack's SGLang calls is planned.

For a stack and a GPU family the test holds `jit-cache --stack S --gpu G --plan` (run as an operator
runs it, in a child) to two readings made apart from it:

- where the route decorator sits, read from the committed route patch (0002) of the stack's FlashInfer
  release: every routed entry point and the module that defines it (``flashinfer.gemm.gemm_base``'s
  ``fp8_blockscale_gemm_sm90`` as much as ``fp4_quantize``);
- which FlashInfer functions the stack's SGLang calls (audit/sglang_calls.py over its pinned wheel).

Each routed entry point SGLang calls must have been called by the planner (where the route patch puts
it), and each module one of its calls loaded on that GPU must be in the plan, naming it among the entry
points that load it. The run must start no download: no "Fetching ... from https://" line on stderr
(FlashInfer's cubin loader logs one before each download) and no connection attempt (the planner's
audit hook refuses and reports one; jit-cache then exits 1).

Each run is kept under the cache dir by the digest of everything that makes it (the probes, the
planner's host modules, the stack's series, the overlay, torch's version), as the whole-layer tests
keep theirs. `make test` runs the default stack on every family; NVFP4_OVERLAY_FULL=1 every stack.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import FULL, OVERLAY, PATCHES, ROOT, cache_dir, run_python, sources_digest
from unidiff import PatchSet

from nvfp4_overlay.audit import sglang_calls
from nvfp4_overlay.audit.routes import PATCH
from nvfp4_overlay.oracle import sglang_releases
from nvfp4_overlay.patch import load_stacks
from nvfp4_overlay.wheel import fetch

pytestmark = [pytest.mark.upstream, pytest.mark.torch]
GPUS = ("sm90", "sm100", "sm120", "sm121")
STACKS = load_stacks(PATCHES)
SRC = ROOT / "src" / "nvfp4_overlay"
# What a plan is made by, besides the stack's series: the probes, the host's planner and the CLI's door to it.
PLANNER = (SRC / "probes", SRC / "wheel" / "jit_cache.py", SRC / "wheel" / "jit_toolkit.py", SRC / "cli" / "jit.py",
           SRC / "audit" / "sglang_calls.py", OVERLAY / "flashinfer-python")
ROUTE_LINE = '@__import__("flashinfer._nvfp4_overlay.opaque", fromlist=["route"]).route'
FETCHING = re.compile(r"Fetching .* from https?://")


def _pins(stack: str) -> tuple[str, str | None]:
    """(the stack's flashinfer-python release, its SGLang release)."""
    found = STACKS.get(stack, PATCHES / "stacks.toml")
    every = (*found.targets, *found.upstream)
    return (next(t.version for t in found.targets if t.dist == "flashinfer-python"),
            next((t.version for t in every if t.dist == "sglang"), None))


def _cases() -> list[Any]:
    stacks = [s.name for s in STACKS.stacks] if FULL else [STACKS.default]
    return [pytest.param(s, g, id=f"{s}-{g}", marks=pytest.mark.xdist_group(f"jit-plan-{_pins(s)[0]}"))
            for s in stacks for g in GPUS]


def routed_where(release: str, tree: Path) -> dict[str, str]:
    """Entry point -> the dotted module where the committed route patch (0002) puts its decorator: in each file
    the patch touches, the def below each route line of the patched tree's text (upstream's own decorators may
    stand between them)."""
    found: dict[str, str] = {}
    for patched in PatchSet((PATCHES / "flashinfer-python" / release / PATCH).read_text()):
        module = patched.path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        lines = (tree / patched.path).read_text().splitlines()
        for at, text in enumerate(lines):
            if text.strip() == ROUTE_LINE:
                name = next(m.group(1) for t in lines[at + 1:] if (m := re.match(r"\s*def (\w+)\(", t)))
                found[name] = module
    return dict(sorted(found.items()))


@pytest.fixture(scope="session")
def patched_dist(wheel_tree: Any) -> Any:
    """dist(release) -> (the patched flashinfer-python tree, the dist dir holding its wheel), built once a session
    (helpers.wheel_trees builds the wheel into a dist dir beside the tree)."""
    def get(release: str) -> tuple[Path, Path]:
        tree = wheel_tree("flashinfer-python", release)
        return tree, tree.parent / f"flashinfer-python-{release}-dist"
    return get


def planned(stack: str, gpu: str, patched_dist: Any) -> dict[str, Any]:
    """`jit-cache --stack S --gpu G --plan --json`'s exit, document and stderr, kept by its inputs' digest."""
    import torch

    release, _ = _pins(stack)
    key = sources_digest(*PLANNER, PATCHES / "flashinfer-python" / release, PATCHES / "stacks.toml")
    key = hashlib.sha256(f"{key}\0{stack}\0{gpu}\0{torch.__version__}\0{sys.version_info[:2]}".encode()).hexdigest()[:32]
    kept = cache_dir() / "jit-plan" / f"{key}.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    argv = [sys.executable, "-m", "nvfp4_overlay.cli", "jit-cache", "--stack", stack, "--gpu", gpu, "--plan", "--json",
            "--dist-dir", str(patched_dist(release)[1]), "--cache-dir", str(cache_dir()), "--patches-dir", str(PATCHES)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=900,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    result = {"exit": done.returncode, "document": json.loads(done.stdout) if done.returncode == 0 else None,
              "stderr": done.stderr.splitlines()}
    if done.returncode == 0:  # a failure is news, not a fact to keep
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(result))
    return result


@pytest.mark.parametrize(("stack", "gpu"), _cases())
def test_every_routed_entry_point_sglang_calls_has_its_module_in_the_plan(stack: str, gpu: str, patched_dist: Any) -> None:
    release, sglang = _pins(stack)
    result = planned(stack, gpu, patched_dist)
    assert result["exit"] == 0, result["stderr"][-20:]
    plan = result["document"]["plan"]
    where = routed_where(release, patched_dist(release)[0])
    wanted = sorted(where)
    if sglang is not None:
        carried = any(t.dist == "sglang" for t in STACKS.get(stack, PATCHES / "stacks.toml").targets)
        wheel = sglang_releases.upstream_wheel(PATCHES, sglang_releases.Release(sglang, carried), fetch.Source(cache_dir()))
        wanted = sorted(set(where) & set(sglang_calls.flashinfer_calls(wheel)))
    # the serving path's entry points are those the planner called: every routed one SGLang calls
    assert sorted(plan["serving_path"]["entries"] or where) == wanted
    # no download: nothing fetched, nothing connected (the planner's audit hook would have stopped jit-cache)
    assert not [line for line in result["stderr"] if FETCHING.search(line)], "planning logged a download"
    assert plan["entry_points"] == where  # each found where the route patch put its decorator
    calls = result["document"]["calls"]
    assert sorted(calls) == wanted
    for entry in wanted:
        for case, outcome in calls[entry].items():
            for module in outcome["loaded"]:
                assert module in plan["modules"], f"{entry}[{case}] loads {module} on {gpu}: not planned"
                assert entry in plan["modules"][module]["loaded_by"]


def test_the_fp8_block_scale_gemm_is_planned_on_hopper(patched_dist: Any) -> None:
    """The default stack's SGLang calls flashinfer.gemm.fp8_blockscale_gemm_sm90 on Hopper (--fp8-gemm-backend
    flashinfer_deepgemm): its module is in the SM90 plan, and in no other family's (upstream refuses there)."""
    plans = {gpu: planned(STACKS.default, gpu, patched_dist)["document"] for gpu in GPUS}
    sm90 = plans["sm90"]["plan"]["modules"]
    (module,) = [n for n, m in sm90.items() if "fp8_blockscale_gemm_sm90" in m["loaded_by"]]
    assert plans["sm90"]["plan"]["entry_points"]["fp8_blockscale_gemm_sm90"] == "flashinfer.gemm.gemm_base"
    assert sm90[module]["sglang_sites"]["fp8_blockscale_gemm_sm90"]  # where SGLang calls it
    for gpu in ("sm100", "sm120", "sm121"):
        cases = plans[gpu]["calls"]["fp8_blockscale_gemm_sm90"]
        assert all(not c["loaded"] for c in cases.values()), gpu
        assert module not in plans[gpu]["plan"]["modules"]


def test_doctor_s_trace_and_the_jit_load_probe_call_flashinfer_gemm_s_entry_points(patched_dist: Any) -> None:
    """The same resolution in doctor's trace (routed_entries, in the examined interpreter) and in the JIT-load probe:
    flashinfer.gemm's fp8_blockscale_gemm_sm90 and tinygemm_bf16 are found where they are defined, not skipped
    because the top-level package does not bind them."""
    tree, _ = patched_dist(_pins(STACKS.default)[0])
    code = ("import json, flashinfer\nfrom nvfp4_overlay.probes.doctor.doctor_trace import routed_entries\n"
            "print(json.dumps({n: f.__module__ for n, f in routed_entries(flashinfer).items()}))")
    done = run_python(code, [tree, SRC.parent])
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["fp8_blockscale_gemm_sm90"] == "flashinfer.gemm.gemm_base"
    assert found["tinygemm_bf16"] == "flashinfer.gemm.routergemm"
    assert found == routed_where(_pins(STACKS.default)[0], tree)
    # the JIT-load probe calls it on a faked Hopper: it reaches FlashInfer's loader (which, with JIT disabled,
    # refuses to build the module it does not hold) instead of failing to find the function
    plan = {"gpu": [9, 0], "calls": [["fp8_blockscale_gemm_sm90", "w8a8-m40"]]}
    done = subprocess.run([sys.executable, "-m", "nvfp4_overlay.probes.flashinfer.jit_load"], input=json.dumps(plan),
                          capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(SRC.parent)]),
                               "FLASHINFER_DISABLE_JIT": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    call = json.loads(done.stdout)["calls"]["fp8_blockscale_gemm_sm90[w8a8-m40]"]
    assert call["outcome"].startswith("MissingJITCacheError"), call
