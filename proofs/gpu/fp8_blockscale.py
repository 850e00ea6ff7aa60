"""GPU proof of the routed fp8_blockscale_gemm_sm90 (patch 0002), on SM90, in one device call.

    python3 proofs/gpu/fp8_blockscale.py --wheels DIR --out "$OUT"

DIR holds `patched/` (one patched flashinfer-python wheel), `upstream/` (its upstream wheel) and
`deps/` (apache-tvm-ffi for this interpreter). The calls are the ones SGLang's FP8 block-scale
linear layer makes (layers/quantization/fp8_utils.py, `--fp8-gemm-backend flashinfer_deepgemm`): a
BF16 input (M, K), an FP8 weight (N, K) with 128x128 block scales (N/128, K/128), out_dtype
bfloat16, for DeepSeek-V3's dense projections (q_a, kv_a, q_b, o, the shared expert's gate_up and
down) and for a decode (M 4, the swapAB kernel) and a prefill (M 256) batch. For each, on the
patched wheel:

- eager, twice (deterministic?), and its distance from a BF16 reference (x @ dequant(w).T);
- torch.compile(fullgraph=True): the graph's call targets (one opaque op), the op's fake outputs as
  dynamo saw them (shape, stride, dtype) against the real ones, and the compiled outputs against
  eager, byte for byte;
- the compiled call captured in a CUDA graph and replayed: its outputs against eager, byte for byte.

Then the upstream wheel, in the same JIT workspace (the same sources: the module is not built
twice): the same eager calls (their sha256 against the patched wheel's) and one compiled call (it
fails, in the JIT loader).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import driver

MARK = "@@PROOF@@"
# (name, N, K) of DeepSeek-V3's dense FP8 projections (hidden 7168, q_lora 1536, kv_lora 512 + rope 64,
# 128 heads of 192 / 128 values, shared expert 2048)
WEIGHTS = [("q_a_proj", 1536, 7168), ("kv_a_proj_with_mqa", 576, 7168), ("q_b_proj", 24576, 1536),
           ("o_proj", 7168, 16384), ("shared_gate_up", 4096, 7168), ("shared_down", 7168, 2048)]
TOKENS = (4, 256)


def child(compile_all: bool) -> dict[str, Any]:
    import flashinfer
    import torch
    from flashinfer.gemm import fp8_blockscale_gemm_sm90 as gemm

    out: dict[str, Any] = {"flashinfer": flashinfer.__version__, "gpu": torch.cuda.get_device_name(0),
                           "capability": list(torch.cuda.get_device_capability(0)), "torch": torch.__version__,
                           "calls": {}}

    def meta(t: Any) -> list[Any]:
        return [list(t.shape), list(t.stride()), str(t.dtype)]

    def raw(t: Any) -> bytes:
        return bytes(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())

    g = torch.Generator(device="cuda").manual_seed(0)
    for name, n, k in WEIGHTS:
        w_fp8, blocks, dequant = block_quantize(torch, torch.randn(n, k, dtype=torch.bfloat16, device="cuda",
                                                                   generator=g))
        for m in TOKENS:
            x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda", generator=g)
            args, kwargs = (x, w_fp8), {"input_scale": None, "weight_scale": blocks,
                                        "out_dtype": torch.bfloat16}
            out["calls"][f"{name}-m{m}"] = one_call(torch, gemm, args, kwargs, dequant, meta, raw,
                                                    compile_all or not out["calls"])
            print(MARK + json.dumps(out), flush=True)  # so far: a child past its time still says what it did
    return out


def block_quantize(torch: Any, w: Any) -> tuple[Any, Any, Any]:
    """DeepSeek FP8's weights: float8_e4m3fn with one float32 scale per 128x128 block, (ceil(N/128),
    K/128) (kv_a_proj_with_mqa's N of 576 has a partial last block); and the dequantized weight."""
    n, k = w.shape
    rows = (n + 127) // 128 * 128
    padded = torch.zeros(rows, k, dtype=torch.float32, device=w.device)
    padded[:n] = w.float()
    tiles = padded.reshape(rows // 128, 128, k // 128, 128)
    blocks = (tiles.abs().amax(dim=(1, 3)).clamp(min=1e-4) / 448.0).contiguous()
    quantized = (tiles / blocks[:, None, :, None]).to(torch.float8_e4m3fn)
    dequant = (quantized.float() * blocks[:, None, :, None]).reshape(rows, k)[:n]
    return quantized.reshape(rows, k)[:n].contiguous(), blocks, dequant


def one_call(torch: Any, gemm: Any, args: tuple[Any, ...], kwargs: dict[str, Any], dequant: Any,
             meta: Any, raw: Any, compile_it: bool) -> dict[str, Any]:
    rec: dict[str, Any] = {}
    start = time.monotonic()
    try:
        eager = gemm(*args, **kwargs)
        torch.cuda.synchronize()
        again = gemm(*args, **kwargs)
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - a refusal is a finding too
        return {"eager": {"error": f"{type(exc).__name__}: {str(exc)[:600]}"}}
    reference = args[0].float() @ dequant.T
    rec["eager"] = {"output": meta(eager), "sha256": hashlib.sha256(raw(eager)).hexdigest(),
                    "deterministic": raw(eager) == raw(again),
                    "rel_err_vs_bf16": float((eager.float() - reference).norm() / reference.norm()),
                    "s": round(time.monotonic() - start, 1)}
    if not compile_it:
        return rec
    graphs: list[dict[str, Any]] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        (output,) = [nd for nd in gm.graph.nodes if nd.op == "output"]
        fakes = [meta(nd.meta["example_value"]) for nd in output.args[0] if "example_value" in nd.meta]
        graphs.append({"targets": [str(nd.target) for nd in gm.graph.nodes if nd.op == "call_function"],
                       "fakes": fakes})
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(lambda *a, **k: gemm(*a, **k), fullgraph=True, backend=backend)
    try:
        first = compiled(*args, **kwargs)
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - upstream: dynamo gives up in the JIT loader
        rec["compiled"] = {"error": f"{type(exc).__name__}: {str(exc)[:600]}"}
        return rec
    rec["compiled"] = {"graphs": graphs, "output": meta(first), "equal_eager": raw(first) == raw(eager),
                       "fake_equals_real": bool(graphs) and graphs[0]["fakes"] == [meta(eager)]}
    try:
        static = [a.clone() for a in args]
        compiled(*static, **kwargs)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = compiled(*static, **kwargs)
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
        rec["cuda_graph"] = {"replayed": 3, "output": meta(captured), "equal_eager": raw(captured) == raw(eager)}
    except Exception as exc:  # noqa: BLE001
        rec["cuda_graph"] = {"error": f"{type(exc).__name__}: {str(exc)[:600]}"}
    return rec


def run_child(wheel: Path, deps: list[Path], root: Path, compile_all: bool, timeout: float) -> dict[str, Any]:
    """One wheel's calls in a child of its own; past its time, what it marked so far, with a note."""
    site = driver.install(wheel, deps, root / f"site-{wheel.name}")
    env = dict(os.environ, PYTHONPATH=str(site), FLASHINFER_WORKSPACE_BASE=str(root / "ws"), MAX_JOBS="16")
    args = ["--child", *(["--compile-all"] if compile_all else [])]
    return driver.run_child(__file__, args, env, timeout, MARK).so_far()


def one_op(graphs: list[dict[str, Any]]) -> bool:
    (graph,) = graphs
    op = "nvfp4_overlay.flashinfer_fp8_blockscale_gemm_sm90.default"
    return graph["targets"].count(op) == 1 and all(t in (op, "<built-in function getitem>") for t in graph["targets"])


def verdict(patched: dict[str, Any], upstream: dict[str, Any]) -> dict[str, Any]:
    calls = patched.get("calls", {})
    theirs = upstream.get("calls", {})
    first = next(iter(theirs.values()), {})
    return {
        "calls": len(calls),
        # one opaque op per graph, and the getitem that takes its one fresh tensor
        "compiled_one_op": all(one_op(r["compiled"]["graphs"]) for r in calls.values() if "graphs" in r.get("compiled", {})),
        "fake_equals_real": all(r.get("compiled", {}).get("fake_equals_real") for r in calls.values()),
        "compiled_equals_eager": all(r.get("compiled", {}).get("equal_eager") for r in calls.values()),
        "cuda_graph_equals_eager": all(r.get("cuda_graph", {}).get("equal_eager") for r in calls.values()),
        "deterministic": all(r["eager"].get("deterministic") for r in calls.values()),
        "eager_equals_upstream": all(r["eager"].get("sha256") == theirs.get(c, {}).get("eager", {}).get("sha256")
                                     for c, r in calls.items()),
        "upstream_compiled": first.get("compiled"),
        "max_rel_err_vs_bf16": max((r["eager"].get("rel_err_vs_bf16", 0.0) for r in calls.values()), default=None),
    }


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--compile-all", action="store_true")
    parser.add_argument("--verdict", type=Path, help="recompute the verdict of a result JSON, in place")
    return parser


def parent(args: argparse.Namespace, deps: list[Path]) -> None:
    if args.verdict:
        result = json.loads(args.verdict.read_text())
        result["verdict"] = verdict(result["patched"], result["upstream"])
        args.verdict.write_text(json.dumps(result, indent=1))
        print(json.dumps(result["verdict"], indent=1))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="fp8-proof-"))
    (patched_wheel,) = sorted((args.wheels / "patched").glob("flashinfer_python-*.whl"))
    (upstream_wheel,) = sorted((args.wheels / "upstream").glob("flashinfer_python-*.whl"))
    start = time.monotonic()
    patched = run_child(patched_wheel, deps, root, True, 330)
    (args.out / "gpu_fp8_blockscale_proof.json").write_text(json.dumps({"patched": patched}, indent=1))
    upstream = run_child(upstream_wheel, deps, root, False, 110)
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-2:]
    result = {"facts": {"wall_s": round(time.monotonic() - start, 1), "nvcc": nvcc, "patched_wheel": patched_wheel.name,
                        "upstream_wheel": upstream_wheel.name},
              "verdict": verdict(patched, upstream), "patched": patched, "upstream": upstream}
    (args.out / "gpu_fp8_blockscale_proof.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result["verdict"], indent=1))
    print(json.dumps(result, indent=1)[:8000])


if __name__ == "__main__":
    driver.main(arguments(), MARK, lambda args: child(args.compile_all), parent)
