"""GPU bench of the JIT cache, in one device call (an H200: SM90, 16 cores, the real nvcc).

    python3 bench/gpu_jit_cache.py --out "$OUT" --sm90 MOD... --sm120 MOD... [--all-routes] [--reproduce MOD --budget S]

The patched flashinfer-python wheel comes from dist/ (carried), apache-tvm-ffi for this interpreter
from /tmp/site (PYTHONPATH). Steps, each writing what it found under --out as it ends:

1. `nvfp4-overlay jit-cache --gpu sm90` for the named modules of the default stack's plan (16 cores:
   MAX_JOBS=16), each module's build seconds from the provenance;
2. the routed entry points' first calls (the case that first loaded each module), each in a fresh
   interpreter: with the cache on the path, no nvcc on PATH and no CUDA_HOME (probes/flashinfer/jit_load.py:
   whether FlashInfer took the module from the cache, and every process started), then without it
   (upstream's JIT building it); each call's outputs digested (inputs from a fixed seed), so the cached
   module's outputs are compared with the JIT-built one's;
3. `jit-cache --gpu sm120` for the named modules, cross-built, and the SASS cuobjdump lists in each;
4. with --reproduce: the SM90 build of that module again, from another cache directory (another tree path,
   workspace and process), and the two modules and wheels compared byte for byte (skipped once --budget
   seconds have gone).

--all-routes plans every routed entry point (the device lacks the stack's SGLang wheel for its Python,
which the serving path's scan reads; the module is the same).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CUOBJDUMP = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--sm90", nargs="*", default=[], help="modules to build (none: the step is skipped)")
    parser.add_argument("--sm120", nargs="*", default=[], help="modules to build (none: the step is skipped)")
    parser.add_argument("--all-routes", action="store_true", help="plan every routed entry point")
    parser.add_argument("--reproduce", help="an SM90 module to build again elsewhere and compare")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds after which --reproduce is skipped")
    args = parser.parse_args()
    started = time.perf_counter()
    options = ("--all-routes",) if args.all_routes else ()
    out = Path(args.out)
    summary: dict[str, Any] = {"machine": _machine()}
    dist, cache = Path(tempfile.mkdtemp(prefix="dist-")), Path(tempfile.mkdtemp(prefix="cache-"))
    for wheel in (ROOT / "dist").glob("flashinfer_python-*.whl"):
        shutil.copy(wheel, dist)
    save = lambda: (out / "summary.json").write_text(json.dumps(summary, indent=1))  # noqa: E731
    summary["sm90_build"] = jit_cache("sm90", args.sm90, dist, cache, out / "sm90-build.log", options) if args.sm90 else {}
    save()
    if summary["sm90_build"].get("wheel"):
        summary["first_calls"] = first_calls(summary["sm90_build"], cache)
        save()
    summary["sm120_build"] = jit_cache("sm120", args.sm120, dist, cache, out / "sm120-build.log", options) if args.sm120 else {}
    save()
    if summary["sm120_build"].get("wheel"):
        summary["sm120_sass"] = sass(Path(summary["sm120_build"]["wheel"]), out / "sm120-sass.txt")
    save()
    if args.reproduce and summary["sm90_build"].get("wheel"):
        left = args.budget - (time.perf_counter() - started)
        summary["reproduce"] = (reproduce(args.reproduce, summary["sm90_build"], dist, cache, out, options)
                                if left > 0 else {"skipped": f"--budget spent ({-left:.0f} s over)"})
    save()
    print(json.dumps(summary, indent=1))


def reproduce(module: str, first: dict[str, Any], dist: Path, cache: Path, out: Path,
              options: tuple[str, ...]) -> dict[str, Any]:
    """The module built again from another directory by another process, both modules and wheels compared."""
    other_dist = Path(tempfile.mkdtemp(prefix="dist-again-"))
    other_cache = Path(tempfile.mkdtemp(prefix="another-cache-")) / "a" / "longer" / "path"
    for wheel in dist.glob("flashinfer_python-*.whl"):
        shutil.copy(wheel, other_dist)
    again = jit_cache("sm90", [module], other_dist, other_cache, out / "sm90-again.log", options)
    if not again.get("wheel"):
        return {"again": again}
    found = {}
    for label, root in (("first", cache), ("again", other_cache)):
        (so,) = root.glob(f"jit-cache/*-sm90-*/modules/{module}/{module}.so")
        found[label] = hashlib.sha256(so.read_bytes()).hexdigest()
    wheels = {label: hashlib.sha256(Path(b["wheel"]).read_bytes()).hexdigest() for label, b in
              (("first", first), ("again", again))}
    return {"module": module, "seconds": again["seconds"], "module_sha256": found,
            "module_equal": found["first"] == found["again"], "wheel_sha256": wheels,
            "wheel_equal": wheels["first"] == wheels["again"], "paths": [str(cache), str(other_cache)]}


def _machine() -> dict[str, Any]:
    import torch

    smi = (subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True, check=False).stdout.strip() if shutil.which("nvidia-smi") else None)
    return {"gpu": smi, "torch": torch.__version__, "torch_cuda": torch.version.cuda, "cores": os.cpu_count(),
            "python": sys.version.split()[0]}


def jit_cache(gpu: str, modules: list[str], dist: Path, cache: Path, log: Path,
              options: tuple[str, ...] = ()) -> dict[str, Any]:
    argv = [sys.executable, "-m", "nvfp4_overlay.cli", "jit-cache", "--gpu", gpu, "--dist-dir", str(dist),
            "--cache-dir", str(cache), "--patches-dir", str(ROOT / "patches"), "--json", *options,
            *[x for m in modules for x in ("--module", m)]]
    env = dict(os.environ, MAX_JOBS=str(os.cpu_count() or 16))
    started = time.perf_counter()
    with log.open("w") as err:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=env, check=False)
    seconds = round(time.perf_counter() - started, 1)
    if done.returncode != 0:
        return {"exit": done.returncode, "seconds": seconds}
    document = json.loads(done.stdout)
    modules_built = {n: {"seconds": document.get("build_seconds", {}).get(n), "sources": len(m["sources"]),
                         "first_loaded_by": m["first_loaded_by"], "sha256": m.get("sha256"),
                         "reproducible": m.get("reproducible")}
                     for n, m in document["provenance"]["modules"].items() if m["included"]}
    left = sorted(n for n, m in document["provenance"]["modules"].items() if not m["included"])
    return {"wheel": document["wheel"], "version": document["version"], "seconds": seconds, "archs":
            document["provenance"]["archs"], "modules": modules_built, "not_built": left,
            "nvcc": document["provenance"]["cuda"]["nvcc"]}


def first_calls(build: dict[str, Any], cache: Path) -> dict[str, Any]:
    (tree,) = cache.glob("jit-cache/*-sm90-*/tree")
    unpacked = Path(tempfile.mkdtemp(prefix="jit-cache-"))
    with zipfile.ZipFile(build["wheel"]) as zf:
        zf.extractall(unpacked)
    calls = sorted({tuple(m["first_loaded_by"]) for m in build["modules"].values()})
    site = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    no_toolkit = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                 if not (Path(p) / "nvcc").exists())
    out = {}
    # with_cache_nvcc: the cache, and nvcc on PATH (the FP8 block-scale GEMM's module compiles its DeepGEMM
    # kernels with nvcc at run time, per shape, tensorrt_llm/deep_gemm/compiler.cuh: 2026-12-06 on the H100
    # its first call without nvcc printed "sh: 1: nvcc: not found" and the process ended with no result)
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    for label, path, env_path in (("with_cache", [unpacked, tree], no_toolkit),
                                  ("with_cache_nvcc", [unpacked, tree], os.environ["PATH"]),
                                  ("without_cache", [tree], os.environ["PATH"])):
        runs = {}
        for call in calls:  # each in a fresh interpreter and workspace: a node's first call
            env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
            if label != "with_cache":
                env["CUDA_HOME"] = home
            env.update(PATH=env_path, PYTHONPATH=os.pathsep.join([*map(str, path), *site, str(ROOT / "src")]),
                       FLASHINFER_WORKSPACE_BASE=tempfile.mkdtemp(prefix="ws-"), MAX_JOBS=str(os.cpu_count() or 16),
                       TRTLLM_DG_CACHE_DIR=tempfile.mkdtemp(prefix="dg-"))  # DeepGEMM's kernel cache: empty each time
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "nvfp4_overlay.probes.flashinfer.jit_load"],
                                  input=json.dumps({"calls": [list(call)]}), capture_output=True, text=True,
                                  env=env, check=False)
            wall = round(time.perf_counter() - started, 2)
            try:
                runs[f"{call[0]}[{call[1]}]"] = {**json.loads(done.stdout), "process_wall_s": wall}
            except ValueError:
                runs[f"{call[0]}[{call[1]}]"] = {"exit": done.returncode, "stderr": done.stderr[-1500:], "process_wall_s": wall}
        out[label] = runs
    # the cached module's outputs against the JIT-built one's, call by call (the same seeded inputs)
    out["outputs_equal"] = {f"{label}: {key}": _digest(out[label], key) is not None and _digest(out[label], key) == _digest(out["without_cache"], key)
                            for label in ("with_cache", "with_cache_nvcc") for key in out[label]}
    return out


def _digest(runs: dict[str, Any], key: str) -> str | None:
    digest: str | None = runs.get(key, {}).get("calls", {}).get(key, {}).get("outputs_sha256")
    return digest


def sass(wheel: Path, text: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    lines = []
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as zf:
        zf.extractall(tmp)
        for so in sorted(Path(tmp).rglob("*.so")):
            elf = subprocess.run([CUOBJDUMP, "--list-elf", str(so)], capture_output=True, text=True, check=False)
            dump = subprocess.run([CUOBJDUMP, "--dump-sass", str(so)], capture_output=True, text=True, check=False)
            archs = sorted({w for w in elf.stdout.split() if "sm_" in w})
            found[so.stem] = {"elf": elf.stdout.strip().splitlines(), "sass_lines": len(dump.stdout.splitlines())}
            lines += [f"== {so.name}", elf.stdout.strip(), *dump.stdout.splitlines()[:40], ""]
            found[so.stem]["archs"] = archs
    text.write_text("\n".join(lines))
    return found


if __name__ == "__main__":
    main()
