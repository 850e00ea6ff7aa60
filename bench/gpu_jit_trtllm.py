"""GPU bench of the trtllm-gen MoE module in the JIT cache, in one device call (an H200: 16 cores, the real nvcc).

    python3 bench/gpu_jit_trtllm.py --out "$OUT" --artifacts DIR

SGLang's `flashinfer_trtllm` MoE backend on SM100 loads `fused_moe_trtllm_sm100`, which compiles
against the trtllm-gen headers flashinfer-cubin ships. DIR holds that wheel's artifacts but the cubins,
as `jit-cache` unpacks them from the pinned wheel (wheel/cubin_pins.py; the 295 MB wheel does not
travel): they are put where jit-cache looks for them, under the cache dir by the pinned digest. Steps:

1. `nvfp4-overlay jit-cache --gpu sm100 --all-routes --module fused_moe_trtllm_sm100` (MAX_JOBS = the cores);
2. its first call on a node without nvcc (no CUDA_HOME, no nvcc on PATH), the GPU faked as SM100
   (the call stops once the module loaded: the H200 runs no SM100 kernel), with the cache wheel on the
   path and FLASHINFER_CUBIN_DIR at a copy of DIR standing in for the installed flashinfer-cubin:
   whether FlashInfer took the module from the cache (`is_aot`) and every process started;
3. the SASS cuobjdump lists in the module.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_jit_cache import ROOT, _machine, jit_cache, sass  # noqa: E402

MODULE = "fused_moe_trtllm_sm100"
CALL = ["trtllm_fp4_block_scale_moe", "finalize"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--artifacts", required=True, help="flashinfer-cubin's artifacts but the cubins, stamped")
    args = parser.parse_args()
    out, artifacts = Path(args.out), Path(args.artifacts)
    summary: dict[str, Any] = {"machine": _machine()}
    dist, cache = Path(tempfile.mkdtemp(prefix="dist-")), Path(tempfile.mkdtemp(prefix="cache-"))
    for wheel in (ROOT / "dist").glob("flashinfer_python-*.whl"):
        shutil.copy(wheel, dist)
    shutil.copytree(artifacts, cache / "cubin-artifacts" / artifacts.name)
    save = lambda: (out / "summary.json").write_text(json.dumps(summary, indent=1))  # noqa: E731
    # --all-routes: the module is named, so the serving path's scan (which needs the stack's SGLang wheel
    # for the device's Python, not carried) has nothing to choose
    summary["sm100_build"] = jit_cache("sm100", [MODULE], dist, cache, out / "sm100-build.log", ("--all-routes",))
    save()
    if summary["sm100_build"].get("wheel"):
        summary["first_call_without_nvcc"] = first_call(Path(summary["sm100_build"]["wheel"]), cache, artifacts)
        save()
        summary["sm100_sass"] = sass(Path(summary["sm100_build"]["wheel"]), out / "sm100-sass.txt")
        save()
    print(json.dumps(summary, indent=1))


def first_call(wheel: Path, cache: Path, artifacts: Path) -> dict[str, Any]:
    (tree,) = cache.glob("jit-cache/*-sm100-*/tree")
    unpacked = Path(tempfile.mkdtemp(prefix="jit-cache-"))
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacked)
    cubin_dir = Path(tempfile.mkdtemp(prefix="cubins-")) / "cubins"
    shutil.copytree(artifacts, cubin_dir)
    site = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    no_toolkit = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nvcc").exists())
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env.update(PATH=no_toolkit, PYTHONPATH=os.pathsep.join([str(unpacked), str(tree), *site, str(ROOT / "src")]),
               FLASHINFER_WORKSPACE_BASE=tempfile.mkdtemp(prefix="ws-"), FLASHINFER_CUBIN_DIR=str(cubin_dir))
    plan = {"gpu": [10, 0], "torch_cuda": "13.0", "calls": [CALL]}
    done = subprocess.run([sys.executable, "-m", "nvfp4_overlay.probes.flashinfer.jit_load"], input=json.dumps(plan),
                          capture_output=True, text=True, env=env, check=False)
    try:
        return {**json.loads(done.stdout), "which_nvcc": shutil.which("nvcc", path=no_toolkit)}
    except ValueError:
        return {"exit": done.returncode, "stderr": done.stderr[-3000:]}


if __name__ == "__main__":
    main()
