"""GPU proof of the routed serving APIs (the MoE pair, cutlass_fused_moe, mm_fp4, the norm-quant pair) on an H200 (SM90).

    python3 proofs/gpu/serving.py --wheels .whl --out "$OUT" [--workspace .gpu-ws] [--only NAME,...]

`--wheels` holds `serving/` (patched flashinfer-python wheels, one per release), optionally
`upstream/` (upstream wheels of some of those releases, the control), and `deps/` (apache-tvm-ffi
for this interpreter); each is installed with `pip install --no-deps --target`, nothing else is
needed. For each release, each routed API it has and each of its calls below (CUDA tensors):

- eager, twice: the outputs (shape, stride, dtype), whether the kernel is deterministic (so that a
  byte comparison means something) and whether it wrote anything; or the error the GPU's kernel
  path raises (trtllm-gen and the FP4 GEMMs have no SM90 kernel);
- torch.compile(fullgraph=True) of the same call: the graph's call targets (one opaque op) and the
  op's fake outputs as dynamo saw them, against the real ones (a tensor the caller passed in and
  gets back is the caller's); the compiled run against eager, byte for byte; where eager raised,
  the compiled call must trace (the op is in the graph) and raise the same error when it runs;
- the compiled call captured in a CUDA graph and replayed three times: its outputs against eager.

What runs on SM90: cutlass_fused_moe's BF16, FP8 per-tensor and MXFP4-weight x BF16 (W4A16,
group scaling) paths compute there, and so do rmsnorm_quant and fused_add_rmsnorm_quant (FP8 out,
FlashInfer's CUDA norm module; in place: what they write is compared, each replay from the same
inputs); SM90 proves compiled + CUDA graph == eager for them. NVFP4
x NVFP4 (SGLang's flashinfer_cutlass "fp4"), trtllm-gen's FP4 MoE and mm_fp4 have no SM90 kernel:
for them SM90 proves that the compiled call traces to the op and refuses as eager does, at run
time; their values wait for Blackwell. The cutlass fused-MoE module is a large JIT build (minutes):
`--workspace` keeps it between two device calls (a directory git ignores, kept on the machine).
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
E, TOP_K, H, INTER, T = 8, 2, 1024, 512, 64  # experts, top-k, hidden, intermediate, tokens


def install(wheel: Path, deps: list[Path], target: Path) -> Path:
    return driver.install(wheel, deps, target, reuse=True)


def run_child(site: Path, workspace: Path, only: str, timeout: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(site), FLASHINFER_WORKSPACE_BASE=str(workspace), MAX_JOBS="16",
               PROOF_ONLY=only, FLASHINFER_USE_CUDA_NORM="1")  # the norm pair: the CUDA module, not CuTe DSL
    return driver.run_child(__file__, ["--child"], env, timeout, MARK).or_crash(
        " (the JIT build: run again with the same --workspace)")


# --- the calls --------------------------------------------------------------------------------------


def cutlass_calls(torch: Any, core: Any, params: set[str]) -> dict[str, tuple[dict[str, Any], bool]]:
    """cutlass_fused_moe: name -> (keyword arguments, computes on SM90)."""
    g = torch.Generator(device="cuda").manual_seed(0)

    def bf16(*shape: int, scale: float = 1.0) -> Any:
        return (torch.randn(*shape, device="cuda", generator=g) * scale).to(torch.bfloat16)

    def u8(*shape: int, value: int | None = None) -> Any:
        if value is not None:
            return torch.full(shape, value, dtype=torch.uint8, device="cuda")
        return torch.randint(0, 256, shape, dtype=torch.uint8, device="cuda", generator=g)

    routing = {"token_selected_experts": torch.stack([torch.randperm(E, device="cuda", generator=g)[:TOP_K]
                                                      for _ in range(T)]).to(torch.int32),
               "token_final_scales": torch.rand(T, TOP_K, device="cuda", generator=g)}
    # a deterministic finalize where the release lets the caller ask for one (0.6.15 on)
    det = {"use_fused_finalize": False} if "use_fused_finalize" in params else {}
    swiglu = core.ActivationType.Swiglu
    calls: dict[str, tuple[dict[str, Any], bool]] = {
        "bf16": ({**routing, "input": bf16(T, H), "fc1_expert_weights": bf16(E, 2 * INTER, H, scale=0.05),
                  "fc2_expert_weights": bf16(E, H, INTER, scale=0.05), "output_dtype": torch.bfloat16,
                  "quant_scales": None, "activation_type": swiglu, **det}, True),  # SGLang's bf16: no scales
        "fp8-per-tensor": ({**routing, "input": bf16(T, H).to(torch.float8_e4m3fn),
                            "fc1_expert_weights": bf16(E, 2 * INTER, H, scale=0.05).to(torch.float8_e4m3fn),
                            "fc2_expert_weights": bf16(E, H, INTER, scale=0.05).to(torch.float8_e4m3fn),
                            "output_dtype": torch.bfloat16, "activation_type": swiglu, **det,
                            "quant_scales": [torch.full((E,), 0.5, device="cuda"), torch.ones(1, device="cuda"),
                                             torch.full((E,), 0.5, device="cuda"), torch.ones(1, device="cuda")]}, True),
        # SGLang's flashinfer_mxfp4 SM90 runner: packed MXFP4 weights, e8m0 scales of 1.0 seen as int32
        "mxfp4-w4a16": ({**routing, "input": bf16(T, H), "fc1_expert_weights": u8(E, 2 * INTER, H // 2),
                         "fc2_expert_weights": u8(E, H, INTER // 2), "output_dtype": torch.bfloat16,
                         "quant_scales": [u8(E, 2 * INTER, H // 32, value=127).view(torch.int32),
                                          u8(E, H, INTER // 32, value=127).view(torch.int32)],
                         "use_w4_group_scaling": True, "activation_type": swiglu, **det}, True),
        # SGLang's flashinfer_cutlass "fp4": NVFP4 weights (int64-packed) and scales: SM100 and later
        "nvfp4": ({**routing, "input": bf16(T, H), "fc1_expert_weights": u8(E, 2 * INTER, H // 2).view(torch.int64),
                   "fc2_expert_weights": u8(E, H, INTER // 2).view(torch.int64), "output_dtype": torch.bfloat16,
                   "quant_scales": [torch.ones(1, device="cuda"), u8(E, 2 * INTER, H // 16).view(torch.int32),
                                    torch.ones(E, device="cuda"), torch.ones(1, device="cuda"),
                                    u8(E, H, INTER // 16).view(torch.int32), torch.ones(E, device="cuda")],
                   "activation_type": swiglu}, False),
    }
    for name, (kwargs, computes) in list(calls.items()):  # the caller's output, as SGLang passes it
        calls[f"{name}-output"] = ({**kwargs, "output": torch.empty(T, H, dtype=torch.bfloat16, device="cuda")},
                                   computes)
    return calls


def trtllm_calls(torch: Any, routed: bool) -> dict[str, tuple[dict[str, Any], bool]]:
    """The trtllm-gen FP4 MoE (finalized): no SM90 kernel (its module asks for SM10x/SM12x)."""
    f8 = torch.float8_e4m3fn
    kwargs: dict[str, Any] = {
        "routing_bias": None, "hidden_states": torch.zeros(T, H // 2, dtype=torch.uint8, device="cuda"),
        "hidden_states_scale": torch.ones(T, H // 16, device="cuda").to(f8),
        "gemm1_weights": torch.zeros(E, 2 * INTER, H // 2, dtype=torch.uint8, device="cuda"),
        "gemm1_weights_scale": torch.ones(E, 2 * INTER, H // 16, device="cuda").to(f8),
        "gemm1_bias": None, "gemm1_alpha": None, "gemm1_beta": None, "gemm1_clamp_limit": None,
        "gemm2_weights": torch.zeros(E, H, INTER // 2, dtype=torch.uint8, device="cuda"),
        "gemm2_weights_scale": torch.ones(E, H, INTER // 16, device="cuda").to(f8), "gemm2_bias": None,
        "output1_scale_scalar": torch.ones(E, device="cuda"), "output1_scale_gate_scalar": torch.ones(E, device="cuda"),
        "output2_scale_scalar": torch.ones(E, device="cuda"), "num_experts": E, "top_k": TOP_K, "n_group": None,
        "topk_group": None, "intermediate_size": INTER, "local_expert_offset": 0, "local_num_experts": E,
        "routed_scaling_factor": None, "routing_method_type": 1,
    }
    if routed:
        ids = torch.stack([torch.randperm(E, device="cuda")[:TOP_K] for _ in range(T)]).to(torch.int32)
        kwargs["topk_ids"] = (torch.ones(T, TOP_K, dtype=torch.int32, device="cuda") << 16) | ids
    else:
        kwargs["routing_logits"] = torch.randn(T, E, dtype=torch.bfloat16, device="cuda")
    output = {"output": torch.empty(T, H, dtype=torch.bfloat16, device="cuda")}
    return {"finalize": (kwargs, False), "finalize-output": ({**kwargs, **output}, False)}


def mm_fp4_calls(torch: Any) -> dict[str, tuple[dict[str, Any], bool]]:
    """mm_fp4 (where the wheel routes it): the FP4 GEMMs have no SM90 kernel."""
    a = torch.zeros(T, H // 2, dtype=torch.uint8, device="cuda")
    b = torch.zeros(INTER, H // 2, dtype=torch.uint8, device="cuda").t()
    sf_a = torch.ones(128, H // 16, device="cuda").to(torch.float8_e4m3fn)
    sf_b = torch.ones(INTER, H // 16, device="cuda").to(torch.float8_e4m3fn).t()
    kwargs = {"a": a, "b": b, "a_descale": sf_a, "b_descale": sf_b, "alpha": torch.ones(1, device="cuda"),
              "out_dtype": torch.bfloat16}
    return {backend: ({**kwargs, "backend": backend}, False) for backend in ("cutlass", "cudnn", "trtllm")}


def norm_calls(torch: Any, fused: bool) -> dict[str, tuple[Any, tuple[str, ...]]]:
    """rmsnorm_quant / fused_add_rmsnorm_quant (SGLang's RMSNorm with a static FP8 quant linear): in
    place, into `out` (and `residual`); FlashInfer's CUDA norm module has SM90 kernels. name ->
    (a maker of fresh keyword arguments, the parameters the call writes)."""
    g = torch.Generator(device="cuda").manual_seed(1)
    base = {"input": torch.randn(T, H, device="cuda", generator=g).to(torch.bfloat16),
            "weight": torch.rand(H, device="cuda", generator=g).to(torch.bfloat16) + 0.5,
            "residual": torch.randn(T, H, device="cuda", generator=g).to(torch.bfloat16)}

    def make(scale: Any) -> Any:
        def fresh() -> dict[str, Any]:
            kwargs = {"out": torch.empty(T, H, dtype=torch.float8_e4m3fn, device="cuda"),
                      "input": base["input"].clone(), "weight": base["weight"], "scale": scale, "eps": 1e-6}
            return {**kwargs, "residual": base["residual"].clone()} if fused else kwargs
        return fresh

    written = ("out", "residual") if fused else ("out",)
    return {"scale-tensor": (make(torch.full((1,), 0.5, device="cuda")), written),
            "scale-float": (make(0.5), written)}


def prove_in_place(torch: Any, fn: Any, fresh: Any, written: tuple[str, ...]) -> dict[str, Any]:
    """An in-place call: eager twice on fresh inputs, compiled with fullgraph, the compiled call in a
    CUDA graph; what each wrote (the `written` parameters), byte for byte against eager."""
    rec: dict[str, Any] = {"computes_on_sm90": True}

    def wrote(kwargs: dict[str, Any]) -> list[bytes]:
        torch.cuda.synchronize()
        return [_raw(torch, kwargs[k]) for k in written]

    try:
        first = fresh()
        fn(**first)
        eager = wrote(first)
        again = fresh()
        fn(**again)
    except Exception as exc:  # noqa: BLE001
        rec["eager"] = {"error": _err(exc)}
        rec["compiled"] = {"graphs": [], "error": "not run: eager raised", "same_error_as_eager": False}
        return rec
    rec["eager"] = {"written": list(written), "sha256": [hashlib.sha256(b).hexdigest() for b in eager],
                    "deterministic": eager == wrote(again), "nonzero": [any(b) for b in eager]}
    graphs: list[dict[str, Any]] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        graphs.append({"targets": [str(n.target) for n in gm.graph.nodes if n.op == "call_function"], "fakes": []})
        return gm.forward

    kwargs = fresh()
    tensors = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    rest = {k: v for k, v in kwargs.items() if k not in tensors}
    torch._dynamo.reset()
    compiled = torch.compile(lambda **t: fn(**t, **rest), fullgraph=True, backend=backend)
    try:
        compiled(**tensors)
    except Exception as exc:  # noqa: BLE001 - upstream: in the loader
        rec["compiled"] = {"graphs": graphs, "error": _err(exc), "same_error_as_eager": False}
        return rec
    rec["compiled"] = {"graphs": graphs, "equal_eager": [a == b for a, b in zip(wrote(tensors), eager)],
                       "fake_equals_real": True}  # nothing returned: the fake allocates nothing
    try:
        static = fresh()
        static_tensors = {k: v for k, v in static.items() if isinstance(v, torch.Tensor)}
        graph = torch.cuda.CUDAGraph()
        inputs = {k: v.clone() for k, v in static_tensors.items()}  # each replay starts from the same inputs
        compiled(**{k: v.clone() for k, v in static_tensors.items()})  # warm, outside the capture
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            compiled(**static_tensors)
        replays = []
        for _ in range(3):
            for k, v in static_tensors.items():
                v.copy_(inputs[k])
            graph.replay()
            replays.append(wrote(static_tensors) == eager)
        rec["cuda_graph"] = {"replayed": 3, "equal_eager": replays}
    except Exception as exc:  # noqa: BLE001
        rec["cuda_graph"] = {"error": _err(exc)}
    rec["eager_cuda_graph"] = _capture_eager(torch, fn, fresh, written, eager)
    return rec


def _capture_eager(torch: Any, fn: Any, fresh: Any, written: tuple[str, ...], eager: list[bytes]) -> dict[str, Any]:
    """The control for a capture that fails: the eager call (upstream's own code) in a CUDA graph."""
    try:
        kwargs = fresh()
        fn(**fresh())  # warm
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn(**kwargs)
        graph.replay()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        return {"error": _err(exc)}
    return {"replayed": 1, "equal_eager": [_raw(torch, kwargs[k]) for k in written] == eager}


# --- one release -------------------------------------------------------------------------------------


def child() -> dict[str, Any]:
    import inspect

    import flashinfer
    import flashinfer.fused_moe as fused_moe
    import torch
    from flashinfer.fused_moe import core

    out: dict[str, Any] = {"flashinfer": flashinfer.__version__, "gpu": torch.cuda.get_device_name(0),
                           "capability": list(torch.cuda.get_device_capability(0)), "torch": torch.__version__,
                           "apis": {}}
    only = set(filter(None, os.environ.get("PROOF_ONLY", "").split(",")))
    apis = {"cutlass_fused_moe": fused_moe.cutlass_fused_moe,
            "trtllm_fp4_block_scale_moe": fused_moe.trtllm_fp4_block_scale_moe,
            "trtllm_fp4_block_scale_routed_moe": fused_moe.trtllm_fp4_block_scale_routed_moe,
            "mm_fp4": getattr(flashinfer, "mm_fp4", None),
            "rmsnorm_quant": getattr(flashinfer, "rmsnorm_quant", None),
            "fused_add_rmsnorm_quant": getattr(flashinfer, "fused_add_rmsnorm_quant", None)}
    for name, fn in apis.items():
        if fn is None or (only and name not in only):
            continue
        params = set(inspect.signature(fn).parameters)
        if name.endswith("rmsnorm_quant"):
            made = norm_calls(torch, fused=name.startswith("fused"))
            out["apis"][name] = {"routed": getattr(fn, "__nvfp4_overlay_op__", None) is not None,
                                 "calls": {case: prove_in_place(torch, fn, fresh, written)
                                           for case, (fresh, written) in made.items()}}
            continue
        if name == "cutlass_fused_moe":
            calls = cutlass_calls(torch, core, params)
        elif name == "mm_fp4":
            calls = mm_fp4_calls(torch)
        else:
            calls = trtllm_calls(torch, routed=name.endswith("routed_moe"))
        out["apis"][name] = {"routed": getattr(fn, "__nvfp4_overlay_op__", None) is not None,
                             "calls": {case: prove(torch, fn, kwargs, computes) for case, (kwargs, computes) in calls.items()}}
    return out


def _meta(t: Any) -> list[Any]:
    return [list(t.shape), list(t.stride()), str(t.dtype)]


def _raw(torch: Any, t: Any) -> bytes:
    return bytes(t.detach().cpu().contiguous().view(torch.uint8).reshape(-1).numpy())


def _tensors(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:400] if str(exc) else ''}"


def prove(torch: Any, fn: Any, kwargs: dict[str, Any], computes: bool) -> dict[str, Any]:
    """One call: eager twice, compiled with fullgraph, the compiled call in a CUDA graph."""
    rec: dict[str, Any] = {"computes_on_sm90": computes}
    start = time.monotonic()
    try:
        eager = _tensors(fn(**kwargs))
        torch.cuda.synchronize()
        first = [_raw(torch, t) for t in eager]
        again = [_raw(torch, t) for t in _tensors(fn(**kwargs))]
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - no kernel for this GPU: a finding, and the compiled call's oracle
        rec["eager"] = {"error": _err(exc)}
        eager, first = None, []
    else:
        rec["eager"] = {"outputs": [_meta(t) for t in eager], "sha256": [hashlib.sha256(b).hexdigest() for b in first],
                        "deterministic": first == again, "nonzero": [any(b) for b in first]}
    rec["eager_s"] = round(time.monotonic() - start, 1)
    graphs: list[dict[str, Any]] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        (output,) = [n for n in gm.graph.nodes if n.op == "output"]
        fakes = [_meta(n.meta["example_value"]) for n in _tensors(output.args[0])
                 if hasattr(n, "meta") and "example_value" in n.meta]
        graphs.append({"targets": [str(n.target) for n in gm.graph.nodes if n.op == "call_function"], "fakes": fakes})
        return gm.forward

    tensors = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    rest = {k: v for k, v in kwargs.items() if k not in tensors}
    torch._dynamo.reset()
    compiled = torch.compile(lambda **t: fn(**t, **rest), fullgraph=True, backend=backend)
    try:
        result = _tensors(compiled(**tensors))
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - upstream: in the loader; patched: the kernel's own refusal
        rec["compiled"] = {"graphs": graphs, "error": _err(exc),
                           "same_error_as_eager": eager is None and _err(exc) == rec["eager"]["error"]}
        return rec
    given = [t for t in tensors.values()]
    fresh = [t for t in result if not any(t is g for g in given)]  # not the caller's output handed back
    rec["compiled"] = {"graphs": graphs, "outputs": [_meta(t) for t in result]}
    if eager is not None:
        rec["compiled"]["equal_eager"] = [_raw(torch, t) == b for t, b in zip(result, first)]
        fresh_eager = [t for t in eager if not any(t is g for g in given)]
        rec["compiled"]["fake_equals_real"] = bool(graphs) and graphs[0]["fakes"] == [_meta(t) for t in fresh_eager]
        rec["compiled"]["fresh_outputs"] = len(fresh)
    rec["cuda_graph"] = capture(torch, compiled, tensors, first)
    return rec


def capture(torch: Any, compiled: Any, tensors: dict[str, Any], eager: list[bytes]) -> dict[str, Any]:
    try:
        static = {k: v.clone() for k, v in tensors.items()}
        compiled(**static)  # warm: the JIT module, the tactic and the allocator, outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = _tensors(compiled(**static))
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        return {"error": _err(exc)}
    out: dict[str, Any] = {"replayed": 3, "outputs": [_meta(t) for t in captured]}
    if eager:
        out["equal_eager"] = [_raw(torch, t) == b for t, b in zip(captured, eager)]
    return out


# --- the driver --------------------------------------------------------------------------------------


def verdicts(found: dict[str, Any]) -> dict[str, str]:
    """Per release/API/call of a patched wheel: "proven" or what fell short. A call that computes on
    SM90: one op in the graph, fake == real, compiled and the CUDA graph's replay == eager (a kernel
    that is not deterministic is said so). One that does not: the op in the graph and the compiled
    call refusing as eager does. With the upstream wheel of the release: its eager outputs == ours."""
    out: dict[str, str] = {}
    for key, run in found.items():
        release, kind = key.split("/")
        if kind != "patched":
            continue
        if "crash" in run:
            out[key] = f"crashed: {run['crash'][-300:]}"
            continue
        theirs = found.get(f"{release}/upstream", {}).get("apis", {})
        for api, info in run.get("apis", {}).items():
            for case, rec in info["calls"].items():
                note = ""
                op = f"nvfp4_overlay.flashinfer_{api}.default"
                graphs = rec.get("compiled", {}).get("graphs", [])
                short = [] if graphs and op in graphs[0]["targets"] else ["no op in the graph"]
                if "error" in rec["eager"]:
                    short += [] if rec["compiled"].get("same_error_as_eager") else ["compiled does not refuse as eager"]
                elif "error" in rec["compiled"]:
                    short.append(f"compiled raised where eager did not: {rec['compiled']['error']}")
                else:
                    compiled, graph = rec["compiled"], rec.get("cuda_graph", {})
                    short += [] if compiled.get("fake_equals_real") else ["fake != real"]
                    control = rec.get("eager_cuda_graph", {})
                    if not rec["eager"]["deterministic"]:
                        short.append("the kernel is not deterministic: no byte comparison")
                    else:
                        short += [] if all(compiled["equal_eager"]) else ["compiled != eager"]
                    if "error" in graph and graph["error"] == control.get("error"):
                        # the eager call refuses capture alike: upstream's own code does, not the op
                        note = f" (a CUDA graph refuses the compiled call as it refuses the eager one: {graph['error'][:120]})"
                    elif "error" in graph or not graph:
                        short.append(f"CUDA graph: {graph.get('error', 'not run')}")
                    elif rec["eager"]["deterministic"]:
                        short += [] if all(graph["equal_eager"]) else ["replay != eager"]
                    upstream = theirs.get(api, {}).get("calls", {}).get(case, {}).get("eager", {})
                    # an in-place call (the norm-quant pair): its writes, byte for byte, against upstream's
                    if upstream.get("sha256") and rec["eager"]["deterministic"]:
                        short += [] if upstream["sha256"] == rec["eager"]["sha256"] else ["eager != upstream's eager"]
                out[f"{key}/{api}/{case}"] = ("proven" + note) if not short else "; ".join(short)
    return out



def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", type=Path, help="JIT workspaces kept between calls (default: a temporary one)")
    parser.add_argument("--only", default="", help="comma-separated APIs (default: every routed one)")
    parser.add_argument("--timeout", type=float, default=540)
    return parser


def parent(args: argparse.Namespace, deps: list[Path]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    root = args.workspace.resolve() if args.workspace else Path(tempfile.mkdtemp(prefix="serving-proof-"))
    root.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {}
    start = time.monotonic()
    # One release at a time: the cutlass fused-MoE build takes every core. An upstream wheel shares
    # its release's workspace (the same sources: the module is not built twice).
    for kind in ("serving", "upstream"):
        for wheel in sorted((args.wheels / kind).glob("flashinfer_python-*.whl")):
            release = wheel.name.split("-")[1].split("+")[0]
            site = install(wheel, deps, root / f"site-{wheel.name}")
            found[f"{release}/{'patched' if kind == 'serving' else 'upstream'}"] = run_child(
                site, root / f"ws-{release}", args.only, args.timeout)
            (args.out / "gpu_serving_proof.json").write_text(json.dumps({"runs": found}, indent=1))
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-2:]
    result = {"facts": {"wall_s": round(time.monotonic() - start, 1), "nvcc": nvcc}, "verdicts": verdicts(found),
              "runs": found}
    (args.out / "gpu_serving_proof.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1)[:11000])


if __name__ == "__main__":
    driver.main(arguments(), MARK, lambda args: child(), parent)
