"""FlashInfer's own tests of its compile list, from the release tag, under the counting harness: upstream wheel against patched.

    python3 proofs/gpu/flashinfer_tests.py --wheels DIR --tests DIR --out "$OUT" [--per-test N] [--jobs N]

`--tests` holds one folder per release (`0.6.8.post1/tests/...`): FlashInfer's own tests, taken from
its release tag (never part of this project); `--groups` names the function groups run, per release
(`0.6.17=norm,rope`; every group where a release is not named). `--wheels` holds `patched/`, `upstream/` and `deps/`
as proofs/gpu/compile_list.py's does. For each release, each wheel (the patched one first, so that
it builds the JIT modules both load: one workspace a release), one pytest run over the test
functions of SELECTION (NVFP4_COMPILE_ONLY) with the compile plugin (probes/flashinfer/compile_plugin.py): every binding of every function of
the list the overlay routes replaced by its torch.compile(fullgraph=True) through inductor,
NVFP4_COMPILE_PER_TEST parametrizations of each test function (spread over its grid), on `--jobs`
pytest-xdist workers. Each test is a case when it called a replaced function; the summary counts,
per function group, the cases, those whose every call ran a compiled graph with one opaque op per
call, and those that passed and failed (FlashInfer's own assertions: compiled against its reference).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import driver

# The test functions of each group: FlashInfer's tests of the list's functions (not the quantizing
# norms, the cos/sin-cache and quantizing rope, the NVFP4 KV cache, the frequency tests).
SELECTION: dict[str, dict[str, tuple[str, ...]]] = {
    "norm": {"tests/utils/test_norm.py": ("test_norm", "test_fused_add_rmsnorm", "test_gemma_norm",
                                          "test_gemma_fused_add_rmsnorm")},
    "activation": {"tests/utils/test_activation.py": ("test_fused_silu_mul", "test_fused_gelu_tanh_mul",
                                                      "test_fused_gelu_mul")},
    "rope": {"tests/attention/test_rope.py": ("test_rope", "test_rope_pos_ids")},
    "cascade": {"tests/utils/test_triton_cascade.py": ("test_merge_state", "test_merge_state_in_place",
                                                       "test_merge_states")},
    "page": {"tests/attention/test_page.py": ("test_append_paged_kv_cache",)},
    "quantization": {"tests/utils/test_quantization.py": ("test_packbits",)},
    "gemm": {"tests/gemm/test_bmm_fp8.py": ("test_bmm_fp8",)},
    "decode": {"tests/attention/test_batch_decode_kernels.py": ("test_single_decode_torch_compile_cuda_graph",)},
    "prefill": {"tests/attention/test_single_prefill.py": ("test_sinqle_prefill_with_paged_kv_cache",)},
    "sampling": {"tests/utils/test_sampling.py": ("test_sampling", "test_sampling_from_logits", "test_top_p_sampling",
                                                  "test_top_k_sampling", "test_min_p_sampling", "test_top_p_renorm_probs",
                                                  "test_top_k_renorm_probs", "test_top_k_mask_logits",
                                                  "test_chain_speculative_sampling")},
}


def targets() -> str:
    """Every function of the list the overlay routes, as the plugin names them (upstream's wheel gets the same)."""
    from nvfp4_overlay.probes.flashinfer.tables import compile_cases

    return ",".join(f"flashinfer.{q}" for q in compile_cases.every_name() if q not in compile_cases.EAGER_ONLY)


def run_tests(site: Path, tests: Path, report: Path, args: argparse.Namespace, workspace: Path) -> dict[str, Any]:
    """One pytest run over SELECTION's test functions of the groups asked, in the files the release has."""
    files = {f: fns for group, by_file in SELECTION.items() if group in args.groups for f, fns in by_file.items()
             if (tests / f).is_file()}
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{driver.ROOT / 'src'}", NVFP4_COMPILE_TARGETS=targets(),
               NVFP4_COMPILE_REPORT=str(report), NVFP4_COMPILE_PER_TEST=str(args.per_test),
               NVFP4_COMPILE_ONLY=",".join(f"{f}::{fn}" for f, fns in files.items() for fn in fns),
               NVFP4_COMPILE_BACKEND="inductor", FLASHINFER_WORKSPACE_BASE=str(workspace),
               MAX_JOBS=str(max(1, 16 // max(args.jobs, 1))))
    env.pop("FLASHINFER_TEST_TORCH_COMPILE", None)
    command = [sys.executable, "-m", "pytest", "-p", "nvfp4_overlay.probes.flashinfer.compile_plugin",
               "-p", "no:cacheprovider", "-q", "-rN", "-n", str(args.jobs), *files]
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=tests, env=env, capture_output=True, text=True, timeout=args.timeout)
        tail = f"exit {done.returncode}: {done.stdout.strip().splitlines()[-1:]} {done.stderr.strip()[-300:]}"
    except subprocess.TimeoutExpired:
        tail = f"timed out after {args.timeout} s"
    return {"seconds": round(time.monotonic() - start, 1), "run": tail}


def summary(report: Path) -> dict[str, Any]:
    """Per group (the test file's), the cases and what became of them."""
    from nvfp4_overlay.probes.flashinfer.compile_harness import Counts

    groups: dict[str, dict[str, int]] = {}
    by_file = {f: g for g, by in SELECTION.items() for f in by}
    lines = [json.loads(line) for line in report.read_text().splitlines()] if report.is_file() else []
    for line in lines:
        if "test" not in line or not line.get("counts") or not line["counts"]["calls"]:
            continue
        group = by_file.get(line["test"].split("::", 1)[0], "other")
        cell = groups.setdefault(group, {"cases": 0, "compiled": 0, "passed": 0, "failed": 0, "skipped": 0})
        cell["cases"] += 1
        cell["compiled"] += Counts(**line["counts"]).passed()
        cell[line["outcome"] if line["outcome"] in ("passed", "failed", "skipped") else "failed"] += 1
    failures: dict[str, int] = {}
    for line in lines:
        if line.get("failure") and line.get("counts") and line["counts"]["calls"]:
            failures[line["failure"][:160]] = failures.get(line["failure"][:160], 0) + 1
    return {"groups": groups, "failures": dict(sorted(failures.items(), key=lambda kv: -kv[1])[:12])}


def parent(args: argparse.Namespace, deps: list[Path]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="flashinfer-tests-"))
    found: dict[str, Any] = {}
    for release in args.releases:
        release_dir = args.tests / release
        args.groups = args.groups_of.get(release, list(SELECTION))
        for kind in ("patched", "upstream"):
            wheel = next((w for w in sorted((args.wheels / kind).glob("flashinfer_python-*.whl"))
                          if w.name.split("-")[1].split("+")[0] == release), None)
            if wheel is None:
                continue
            site = driver.install(wheel, deps, root / f"site-{wheel.name}")
            report = args.out / f"tests-{release}-{kind}.jsonl"
            run = run_tests(site, release_dir, report, args, args.workspace / release)
            found[f"{release}/{kind}"] = {**run, **summary(report)}
            (args.out / "gpu_flashinfer_tests.json").write_text(json.dumps(found, indent=1))
    print(json.dumps(found)[:6000])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=Path, required=False)
    parser.add_argument("--per-test", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--workspace", type=Path, default=Path("/tmp/flashinfer-ws"))
    parser.add_argument("--releases", default="0.6.8.post1,0.6.17", type=lambda s: s.split(","))
    parser.add_argument("--groups", dest="groups_of", default={}, type=lambda s: {
        part.split("=")[0]: part.split("=")[1].split(",") for part in s.split(";") if part})
    driver.main(parser, "@@TESTS@@", lambda args: {}, parent)
