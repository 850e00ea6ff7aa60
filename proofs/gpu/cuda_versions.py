"""GPU proof of the CUDA-version patch (0001, revision 2) with the real nvcc, in one device call.

    python3 proofs/gpu/cuda_versions.py --wheels .whl --out "$OUT"

`--wheels` holds `upstream/`, `patched/` (revision 2) and `rev1/` (the turn-1 patch, the control)
flashinfer-python wheels of one release, and `deps/` (apache-tvm-ffi for this interpreter).

1. nvcc: the GPU reported as SM120, `torch.version.cuda` set to 12.8 (a cu128 torch beside the
   machine's CUDA 13.0 toolkit) and left at its own 13.0. In a fresh interpreter per (wheel, torch
   CUDA): TARGET_CUDA_ARCHS, then the SM120, SM120f and SM100 FP4-quantize JIT modules and
   fp4_kv_quant (its flags come from the architecture list) really built with the real nvcc, each
   module's nvcc flags, and the SASS `cuobjdump --list-elf` finds in it.
2. SM90, the real GPU: rmsnorm, silu_and_mul and fp4_quantize built and run eagerly; fp4_quantize
   under torch.compile(fullgraph=True) with a CUDA graph captured and replayed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import driver

MARK = "@@PROOF@@"
SPECS = [  # (module, function): built in the nvcc part
    ("fq", "gen_fp4_quantization_sm120_module"),
    ("fq", "gen_fp4_quantization_sm120f_module"),
    ("fq", "gen_fp4_quantization_sm100_module"),
    ("flashinfer.jit.fp4_kv_quantization", "gen_fp4_kv_quantization_module"),
]


def install(wheels: Path, flavor: str, root: Path) -> Path:
    (wheel,) = sorted((wheels / flavor).glob("flashinfer_python-*.whl"))
    deps = driver.dependency_wheels(wheels)
    return driver.install(wheel, deps, root / flavor)


def run_child(site: Path, mode: str, torch_cuda: str | None, workspace: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(site), FLASHINFER_WORKSPACE_BASE=str(workspace),
               PROOF_TORCH_CUDA=torch_cuda or "", MAX_JOBS="4")
    return driver.run_child(__file__, ["--child", mode], env, 540, MARK).or_crash()


def child_nvcc() -> dict:
    import torch

    if os.environ["PROOF_TORCH_CUDA"]:
        torch.version.cuda = os.environ["PROOF_TORCH_CUDA"]
    torch.cuda.get_device_capability = lambda device=None: (12, 0)
    torch.cuda.device_count = lambda: 1
    import flashinfer
    from flashinfer.jit import core as jit_core
    from flashinfer.jit import cpp_ext

    from nvfp4_overlay.probes.flashinfer.cuda_grid import _ninja_variable  # the probes' reader of build.ninja

    try:
        import flashinfer.quantization.fp4_quantization as fq
    except ImportError:
        import flashinfer.fp4_quantization as fq
    out = {"flashinfer": flashinfer.__version__, "torch_cuda": torch.version.cuda,
           "archs": sorted([m, str(s)] for m, s in jit_core.current_compilation_context.TARGET_CUDA_ARCHS),
           "runtime_version": str(cpp_ext.get_cuda_version()), "modules": {}}

    def build(spec_name: tuple[str, str]) -> tuple[str, dict]:
        module_name, fn_name = spec_name
        module = fq if module_name == "fq" else __import__(module_name, fromlist=["_"])
        result: dict = {}
        try:
            spec = getattr(module, fn_name)()
            spec.write_ninja()
            flags = _ninja_variable(spec.ninja_path.read_text(), "cuda_cflags")
            result["gencode"] = sorted({f for f in flags if f.startswith("-gencode=")})
            result["enable_fp4"] = "-DENABLE_FP4" in flags
            result["static_global_template_stub"] = "-static-global-template-stub=false" in flags
            start = time.monotonic()
            spec.build(verbose=False)
            result["build_s"] = round(time.monotonic() - start, 1)
            so = spec.get_library_path()
            listed = subprocess.run(["cuobjdump", "--list-elf", str(so)], capture_output=True, text=True).stdout
            result["sass"] = sorted(set(re.findall(r"sm_\d+[af]?", listed)))
        except Exception as exc:  # noqa: BLE001 - upstream refuses some configurations; that is the finding
            result["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else ''}"
        return f"{module_name}.{fn_name}", result

    with ThreadPoolExecutor(len(SPECS)) as pool:
        for name, result in pool.map(build, SPECS):
            out["modules"][name] = result
    return out


def child_sm90() -> dict:
    import flashinfer
    import torch

    out: dict = {"flashinfer": flashinfer.__version__, "gpu": torch.cuda.get_device_name(0),
                 "capability": list(torch.cuda.get_device_capability(0))}
    x = torch.randn(64, 4096, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(4096, dtype=torch.bfloat16, device="cuda")
    gs = torch.tensor([448.0 * 6.0 / x.abs().max().float().item()], device="cuda")
    checks = {}
    try:
        y = flashinfer.rmsnorm(x, w, 1e-6)
        ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
        checks["rmsnorm"] = {"ran": True, "max_abs_err": float((y.float() - ref.float()).abs().max())}
    except Exception as exc:  # noqa: BLE001
        checks["rmsnorm"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    try:
        z = flashinfer.silu_and_mul(torch.cat([x, x], dim=-1))
        ref = torch.nn.functional.silu(x.float()) * x.float()
        checks["silu_and_mul"] = {"ran": True, "max_abs_err": float((z.float() - ref).abs().max())}
    except Exception as exc:  # noqa: BLE001
        checks["silu_and_mul"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    try:
        q, sf = flashinfer.fp4_quantize(x, gs)
        checks["fp4_quantize_eager"] = {"ran": True, "shapes": [list(q.shape), list(sf.shape)]}
    except Exception as exc:  # noqa: BLE001
        checks["fp4_quantize_eager"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    try:
        compiled = torch.compile(lambda t, g: flashinfer.fp4_quantize(t, g), fullgraph=True)
        q2, sf2 = compiled(x, gs)
        static_x = x.clone()
        graph = torch.cuda.CUDAGraph()
        compiled(static_x, gs)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            outs = compiled(static_x, gs)
        for _ in range(10):
            graph.replay()
        torch.cuda.synchronize()
        checks["fp4_quantize_fullgraph_cuda_graph"] = {"ran": True, "shapes": [list(t.shape) for t in outs]}
    except Exception as exc:  # noqa: BLE001
        checks["fp4_quantize_fullgraph_cuda_graph"] = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
    out["checks"] = checks
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--wheels", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        driver.answer_as_child(child_nvcc if args.child == "nvcc" else child_sm90, MARK)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    nvcc = shutil.which("nvcc")
    homes = [os.environ.get("CUDA_HOME"), "/usr/local/cuda", str(Path(nvcc).parent.parent) if nvcc else None]
    os.environ["CUDA_HOME"] = next(h for h in homes if h and (Path(h) / "bin" / "nvcc").is_file())
    facts = {"nvcc": subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-2:],
             "cuda_home": os.environ["CUDA_HOME"]}
    root = Path(tempfile.mkdtemp(prefix="proof-"))
    sites = {flavor: install(args.wheels, flavor, root) for flavor in ("upstream", "patched", "rev1")
             if (args.wheels / flavor).is_dir()}
    runs = [(flavor, cuda) for flavor in ("upstream", "patched") for cuda in ("12.8", None)] + [("rev1", "12.8")]
    runs = [r for r in runs if r[0] in sites]
    start = time.monotonic()
    with ThreadPoolExecutor(len(runs)) as pool:
        nvcc_results = dict(zip([f"{f}/{c or 'real'}" for f, c in runs], pool.map(
            lambda r: run_child(sites[r[0]], "nvcc", r[1], root / f"ws-{r[0]}-{r[1]}"), runs)))
    facts["nvcc_part_s"] = round(time.monotonic() - start, 1)
    sm90 = {flavor: run_child(sites[flavor], "sm90", None, root / f"ws90-{flavor}") for flavor in ("upstream", "patched")}
    result = {"facts": facts, "nvcc": nvcc_results, "sm90": sm90}
    (args.out / "gpu_cuda_proof.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1)[:11000])


if __name__ == "__main__":
    main()
