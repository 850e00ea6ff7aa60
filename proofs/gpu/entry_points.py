"""GPU proof of the routed entry points (patch 0002) and the opt-in op (0003), in one device call.

    python3 proofs/gpu/entry_points.py --wheels .whl --out "$OUT"

`--wheels` holds `entry/` (patched flashinfer-python wheels, one per release), optionally
`upstream/` (upstream wheels of some of those releases, the control), and `deps/` (apache-tvm-ffi
for this interpreter). On the real GPU (an H200, SM90), for each release and each entry point it
has, one call per entry point with CUDA tensors:

- eager, twice (the second run says whether the kernel is deterministic, so that a byte comparison
  means something), and whether it wrote anything (outputs not all zero);
- torch.compile(fullgraph=True) of the same call: the graph's call targets (one opaque op) and the
  op's fake outputs as dynamo saw them, against the real outputs (shape, stride, dtype);
- the compiled call captured in a CUDA graph and replayed: its outputs against the eager ones, byte
  for byte;
- the upstream wheel (where given): the same eager call (its outputs' sha256 against the patched
  wheel's) and the compiled one (which fails, in the JIT loader);
- nvfp4_quantize_paged_kv_cache (0.6.7+) returns nested tuples and two host floats: its results are
  flattened in order, each float as a 0-dim float64 tensor (compared as its bytes);
- 0.6.12+: torch.ops.flashinfer.fp4_quantize(x, s, enable_pdl=True) against the public
  fp4_quantize(x, s, enable_pdl=True), byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import driver

MARK = "@@PROOF@@"


def install(wheel: Path, deps: list[Path], target: Path) -> Path:
    return driver.install(wheel, deps, target)


def run_child(site: Path, workspace: Path, timeout: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(site), FLASHINFER_WORKSPACE_BASE=str(workspace), MAX_JOBS="8")
    return driver.run_child(__file__, ["--child"], env, timeout, MARK).or_crash()


def calls(torch: Any) -> dict[str, tuple[tuple[Any, ...], dict[str, Any]]]:
    """One call per entry point (the paged KV cache two): CUDA tensors, shapes the kernels take (M 128, K 512)."""
    g = torch.Generator(device="cuda").manual_seed(0)

    def x(*shape: int) -> Any:
        return torch.randn(*shape, dtype=torch.bfloat16, device="cuda", generator=g)

    def scale(t: Any) -> Any:
        return (448.0 * 6.0 / t.abs().amax().float()).reshape(1)

    a = x(128, 512)
    groups = x(2, 128, 512)
    mask = torch.tensor([128, 64], dtype=torch.int32, device="cuda")
    per_group = torch.stack([scale(groups[0]), scale(groups[1])]).reshape(2)
    gate_up = x(2, 128, 1024)
    return {
        "fp4_quantize": ((a, scale(a)), {}),
        "nvfp4_quantize": ((a, scale(a)), {}),
        "nvfp4_batched_quantize": ((groups, scale(groups)), {}),
        "scaled_fp4_grouped_quantize": ((groups, mask, per_group), {}),
        "silu_and_mul_scaled_nvfp4_experts_quantize": ((gate_up, mask, per_group), {}),
        "nvfp4_kv_quantize": ((a, scale(a)), {}),
        "mxfp8_quantize": ((a,), {}),
        "mxfp4_quantize": ((a,), {}),
        # 0.6.7 on: ((k, v), (k_sf, v_sf), float, float); the amax read on the host (no global
        # scale), then given scales, NHD
        "nvfp4_quantize_paged_kv_cache": ((x(4, 8, 16, 128), x(4, 8, 16, 128)), {}),
        "nvfp4_quantize_paged_kv_cache[nhd-given]": ((x(4, 16, 8, 128), x(4, 16, 8, 128)), {
            "kv_layout": "NHD", "k_global_sf": torch.tensor([3.5], device="cuda"),
            "v_global_sf": torch.tensor([1.75], device="cuda")}),
    }


def child() -> dict[str, Any]:
    import flashinfer
    import torch

    out: dict[str, Any] = {"flashinfer": flashinfer.__version__, "gpu": torch.cuda.get_device_name(0),
                           "capability": list(torch.cuda.get_device_capability(0)), "torch": torch.__version__,
                           "patched": hasattr(flashinfer, "_nvfp4_overlay") or _has_overlay(), "entries": {}}

    def meta(t: Any) -> list[Any]:
        return [list(t.shape), list(t.stride()), str(t.dtype)]

    def raw(t: Any) -> bytes:
        return bytes(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())

    def err(exc: BaseException) -> str:
        return f"{type(exc).__name__}: {str(exc)[:600]}"

    def flat(result: Any) -> list[Any]:
        # nested results in order; a host float (the paged KV cache's scales) as a 0-dim float64 tensor
        if isinstance(result, (list, tuple)):
            return [t for r in result for t in flat(r)]
        return [torch.tensor(result, dtype=torch.float64) if isinstance(result, float) else result]

    # first: a capture that fails (the paged KV cache's host reads) leaves the context unusable after
    out["opt_in_op"] = opt_in_op(flashinfer, torch, raw, err)
    for name, (args, kwargs) in calls(torch).items():
        fn = getattr(flashinfer, name.split("[")[0], None)
        if fn is None:
            continue
        rec: dict[str, Any] = {}
        out["entries"][name] = rec
        start = time.monotonic()
        try:
            eager = flat(fn(*args, **kwargs))
            torch.cuda.synchronize()
            again = flat(fn(*args, **kwargs))
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - a kernel this GPU refuses is a finding too
            rec["eager"] = {"error": err(exc)}
            eager = None
        else:
            rec["eager"] = {"outputs": [meta(t) for t in eager],
                            "floats": [t.item() for t in eager if t.dim() == 0 and t.dtype == torch.float64],
                            "sha256": [hashlib.sha256(raw(t)).hexdigest() for t in eager],
                            "deterministic": all(raw(a) == raw(b) for a, b in zip(eager, again)),
                            "nonzero": [int(t.view(torch.uint8).count_nonzero()) if t.element_size() == 1
                                        else int(t.count_nonzero()) for t in eager]}
        rec["eager_s"] = round(time.monotonic() - start, 1)
        graphs: list[dict[str, Any]] = []

        def backend(gm: Any, example_inputs: Any) -> Any:
            targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
            (output,) = [n for n in gm.graph.nodes if n.op == "output"]
            fakes = [meta(v) if isinstance(v, torch.Tensor) else [type(v).__name__]
                     for v in (n.meta["example_value"] for n in output.args[0] if "example_value" in n.meta)]
            graphs.append({"targets": targets, "fakes": fakes})
            return gm.forward

        torch._dynamo.reset()
        compiled = torch.compile(lambda *a, **k: fn(*a, **k), fullgraph=True, backend=backend)
        try:
            first = flat(compiled(*args, **kwargs))
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - upstream: dynamo gives up in the JIT loader
            rec["compiled"] = {"error": err(exc)}
            continue
        rec["compiled"] = {"graphs": graphs, "outputs": [meta(t) for t in first]}
        if eager is not None:
            rec["compiled"]["equal_eager"] = [raw(a) == raw(b) for a, b in zip(first, eager)]
            rec["compiled"]["fake_equals_real"] = bool(graphs) and graphs[0]["fakes"] == [meta(t) for t in eager]
        try:
            static = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            compiled(*static, **kwargs)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = flat(compiled(*static, **kwargs))
            for _ in range(3):
                graph.replay()
            torch.cuda.synchronize()
            rec["cuda_graph"] = {"replayed": 3, "outputs": [meta(t) for t in captured]}
            if eager is not None:
                rec["cuda_graph"]["equal_eager"] = [raw(a) == raw(b) for a, b in zip(captured, eager)]
        except Exception as exc:  # noqa: BLE001
            rec["cuda_graph"] = {"error": err(exc)}
    return out


def opt_in_op(flashinfer: Any, torch: Any, raw: Any, err: Any) -> dict[str, Any]:
    if not hasattr(torch.ops.flashinfer, "fp4_quantize"):
        return {"present": False}
    x = torch.randn(128, 512, dtype=torch.bfloat16, device="cuda")
    s = (448.0 * 6.0 / x.abs().amax().float()).reshape(1)
    try:
        public = flashinfer.fp4_quantize(x, s, enable_pdl=True)
        op = torch.ops.flashinfer.fp4_quantize(x, s, enable_pdl=True)
        inverted = flashinfer.fp4_quantize(x, s, is_global_scale_inversed=True)
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        return {"present": True, "error": err(exc)}
    return {"present": True, "op_equals_public": [raw(a) == raw(b) for a, b in zip(op, public)],
            "op_equals_inverted_scale": [raw(a) == raw(b) for a, b in zip(op, inverted)]}


def _has_overlay() -> bool:
    import importlib.util

    return importlib.util.find_spec("flashinfer._nvfp4_overlay") is not None


def parent(args: argparse.Namespace, deps: list[Path]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="entry-proof-"))
    patched = sorted((args.wheels / "entry").glob("flashinfer_python-*.whl"))
    upstream = sorted((args.wheels / "upstream").glob("flashinfer_python-*.whl"))

    def release(wheel: Path) -> str:
        return wheel.name.split("-")[1].split("+")[0]

    start = time.monotonic()
    # Patched releases in parallel, each with its own JIT workspace; then each upstream wheel in the
    # workspace of its release (the same C++ sources: the JIT modules are not built twice).
    with ThreadPoolExecutor(len(patched) or 1) as pool:
        found = dict(zip([f"{release(w)}/patched" for w in patched], pool.map(
            lambda w: run_child(install(w, deps, root / f"site-{w.name}"), root / f"ws-{release(w)}", 420), patched)))
    (args.out / "gpu_entry_proof.json").write_text(json.dumps({"runs": found}, indent=1))  # in case of a timeout
    for w in upstream:
        found[f"{release(w)}/upstream"] = run_child(install(w, deps, root / f"site-{w.name}"), root / f"ws-{release(w)}",
                                                    120)
    facts = {"wall_s": round(time.monotonic() - start, 1),
             "nvcc": subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-2:]}
    result = {"facts": facts, "runs": found}
    (args.out / "gpu_entry_proof.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1)[:11000])


if __name__ == "__main__":
    driver.main(argparse.ArgumentParser(), MARK, lambda args: child(), parent)
