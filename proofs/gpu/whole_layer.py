"""GPU proof of a whole SGLang decoder layer on SM90: SGLang 0.5.11's own Qwen3-MoE FP8 block-scale layer,
eager, compiled by SGLang's own piecewise compile, and replayed from SGLang's own piecewise CUDA graphs.

    python3 proofs/gpu/whole_layer.py --wheels DIR --out "$OUT" [--release 0.5.20]  # on the H200, one device call
    python3 proofs/gpu/whole_layer.py --trace SGLANG_TREE FLASHINFER_TREE  # on a CPU, SM90 faked: the trace

DIR holds `patched/` and `upstream/` (each one flashinfer-python wheel and one sglang wheel of the release's
stack: 0.6.8.post1 and 0.5.11 by default, 0.6.18 and 0.5.20 with `--release 0.5.20`) and `deps/`
(apache-tvm-ffi for this interpreter). 0.5.20 compiles the layer as its tc_piecewise prefill runner does
(whole_layer_build.tc_piecewise) and adds a child of upstream SGLang over the patched FlashInfer. The layer and its server are
whole_layer_build.py's; the kernels it runs: FlashInfer's fp8_blockscale_gemm_sm90 (qkv_proj, o_proj),
SGLang's Triton fused MoE (FP8 block-scale experts), SGLang's torch_native attention, and torch bodies
for sgl-kernel and SGLang's JIT kernels (sglang_bodies.py). One child per side and compiler:

- eager: the layer's forward as a server without piecewise graphs runs it, for 16 and 128 tokens, on
  two inputs each (a and b), twice (deterministic?);
- compiled: SGLang's `install_torch_compiled(fullgraph=True)` with its SGLangBackend (the graph split at
  SGLang's split ops, each piece compiled by the compiler named: `eager` or `inductor`) under SGLang's
  `enable_piecewise_cuda_graph` / `enable_piecewise_cuda_graph_compile` and forward context, as
  PiecewiseCudaGraphRunner runs it: compile each size, then per size one warm-up, one capture (SGLang's
  CUDAPiecewiseBackend captures each piece in a CUDA graph) and replays on input b then input a, copied
  into the captured inputs; each output (hidden states and residual) against eager, byte for byte;
- the upstream side: the same eager calls (their bytes against the patched side's), then the compile,
  which fails where it does.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import driver  # noqa: E402 - src/ on sys.path: the probes, the one copy of each

from nvfp4_overlay.probes import io_audit  # noqa: E402 - the backend's stop
from nvfp4_overlay.probes.sglang.layer import piecewise as layer_piecewise  # noqa: E402 - its faked GPU, inlined

MARK = "@@LAYER@@"
SIZES = (16, 128)
PATCHED_OP = "nvfp4_overlay.flashinfer_fp8_blockscale_gemm_sm90"
RUNS = {"patched-eager": 280, "patched-inductor": 140, "upstream-eager": 100}  # child: seconds given
# Per release: the children (seconds given each) and the result's name. 0.5.20 adds `upstream_sglang`: upstream
# SGLang over the patched FlashInfer (where SGLang's own code stops the compile, past FlashInfer's GEMM).
RELEASES: dict[str, dict[str, Any]] = {
    "0.5.11": {"runs": RUNS, "result": "gpu_whole_layer_proof.json"},
    "0.5.20": {"runs": {"patched-eager": 230, "upstream-eager": 200, "upstream_sglang-eager": 70,
                        "patched-inductor": 120}, "result": "gpu_whole_layer_proof_0.5.20.json"},
}


def inputs(tokens: int, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    hidden, residual = (torch.randn(tokens, 256, generator=g).to(torch.bfloat16) for _ in range(2))
    return torch.arange(tokens).to(device), hidden.to(device), residual.to(device)


def ops(graph: Any) -> list[str]:
    return sorted({str(n.target) for n in graph.graph.nodes if n.op == "call_function"
                   and str(n.target).startswith(("sglang.", "nvfp4_overlay.", "flashinfer.", "sglbody.", "sglfake."))})


def compare(got: tuple[torch.Tensor, ...], want: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    diff = [(g.float() - w.float()) for g, w in zip(got, want)]
    return {"equal": all(torch.equal(g, w) for g, w in zip(got, want)),
            "max_abs": max(float(d.abs().max()) for d in diff),
            "rel": max(float(d.norm() / w.float().norm()) for d, w in zip(diff, want))}


def digest(out: tuple[torch.Tensor, ...]) -> str:
    return hashlib.sha256(b"".join(bytes(t.detach().cpu().contiguous().view(torch.uint8).reshape(-1).numpy())
                                   for t in out)).hexdigest()


class Runner:
    """Calls of the built layer: eager ones on fresh copies, compiled ones through each size's captured
    inputs (the piecewise CUDA graphs read them where they were captured)."""

    def __init__(self, built: Any) -> None:
        self.built = built
        self.batches = {n: built.batch(n) for n in SIZES}
        self.data = {(n, w): inputs(n, 1000 * n + i, built.device) for n in SIZES for i, w in enumerate("ab")}
        self.static = {n: tuple(t.clone() for t in self.data[(n, "a")]) for n in SIZES}

    def eager(self, n: int, which: str) -> tuple[torch.Tensor, ...]:
        pos, hidden, residual = (t.clone() for t in self.data[(n, which)])
        with self.built.forward():
            out = self.built.layer(pos, hidden, self.batches[n], residual)
        torch.cuda.synchronize()
        return tuple(t.clone() for t in out)

    def compiled(self, n: int, which: str) -> tuple[torch.Tensor, ...]:
        for mine, fresh in zip(self.static[n], self.data[(n, which)]):
            mine.copy_(fresh)
        with self.built.piecewise_forward(self.batches[n]):
            out = self.built.layer(*self.static[n][:2], self.batches[n], self.static[n][2])
        torch.cuda.synchronize()
        return tuple(t.clone() for t in out)


def child(side: str, site: str, compiler: str) -> dict[str, Any]:
    import whole_layer_build

    start = time.monotonic()
    built = whole_layer_build.build(site, site, compiler=compiler)
    import flashinfer

    out: dict[str, Any] = {"side": side, "compiler": compiler, "flashinfer": flashinfer.__version__,
                           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                           "bodies": built.bodies, "stand_ins": sorted(built.stubbed), "sizes": {}}
    runner = Runner(built)
    eager = {}
    for n in SIZES:
        for which in "ab":
            eager[(n, which)] = runner.eager(n, which)
        again = runner.eager(n, "a")
        out["sizes"][n] = {"eager_sha256": {w: digest(eager[(n, w)]) for w in "ab"},
                           "deterministic": digest(again) == digest(eager[(n, "a")])}
    out["eager_s"] = round(time.monotonic() - start, 1)
    print(MARK + json.dumps(out), flush=True)
    try:
        piecewise(runner, eager, compiler, out)
    except Exception as exc:  # noqa: BLE001 - upstream: dynamo gives up inside FlashInfer's JIT loader
        text = str(exc)
        where = text.find("from user code:")
        out["compile_error"] = f"{type(exc).__name__}: {text[:400]}" + (f" ... {text[where:][-1500:]}" if where > 0 else "")
    out["total_s"] = round(time.monotonic() - start, 1)
    return out


def inductor_shape_env() -> None:
    """SGLang 0.5.16's own fix, where 0.5.11 lacks it: its InductorAdaptor hands inductor a dummy shape
    env (AlwaysHitShapeEnv) that a newer torch's FX-graph cache reads `var_to_hint_override` from
    (torch 2.13: AttributeError). 0.5.16 gives the dummy an empty one; a torch that never reads it is
    unaffected."""
    from sglang.srt.compilation import compiler_interface

    shape_env = getattr(compiler_interface, "AlwaysHitShapeEnv", None)
    if shape_env is not None and not hasattr(shape_env, "var_to_hint_override"):
        shape_env.var_to_hint_override = {}


def fused_ops(layer: Any, compiler: str, enter: bool) -> None:
    """0.5.20's tc_piecewise runner turns the layer's fused ops (BaseFusedOp) to their compile form around
    the compile with a compiler other than eager, and back after (_toggle_fused_ops); 0.5.11 has none."""
    import whole_layer_build as wb

    if wb.tc_piecewise() and (compiler != "eager" or not enter):
        backend = importlib.import_module("sglang.srt.model_executor.runner_backend.tc_piecewise_cuda_graph_backend")
        backend._toggle_fused_ops(layer, reverse=not enter, num_tokens=SIZES[0])


def piecewise(runner: Runner, eager: dict[Any, Any], compiler: str, out: dict[str, Any]) -> None:
    import whole_layer_build as wb
    from sglang.srt.compilation.backend import SGLangBackend
    from sglang.srt.compilation.compilation_config import CompilationConfig
    from sglang.srt.compilation.compilation_counter import compilation_counter
    from sglang.srt.compilation.compile import install_torch_compiled

    inductor_shape_env()

    config, pool = CompilationConfig(list(SIZES), compiler), torch.cuda.graph_pool_handle()
    graphs: list[list[str]] = []

    def backend(graph: Any, example_inputs: Any) -> Any:
        graphs.append(ops(graph))
        return SGLangBackend(config, pool)(graph, example_inputs)

    fused_ops(runner.built.layer, compiler, enter=True)
    install_torch_compiled(runner.built.layer, compile_config=config, graph_pool=pool, backend_factory=backend)
    start = time.monotonic()
    with wb.piecewise_graph(), wb.capture_stream(torch.cuda.Stream()):
        with wb.compiling():
            for n in reversed(SIZES):
                # The call that compiles runs the forward twice (install_torch_compiled runs the compiled
                # callable once to trace, then the trampoline calls it), the second time over inputs the
                # first changed in place (fused_add_rmsnorm writes the hidden states and the residual):
                # recorded, and compared on the next call, from the captured inputs refilled.
                out["sizes"][n]["first_call"] = compare(runner.compiled(n, "a"), eager[(n, "a")])
                out["sizes"][n]["compiled"] = compare(runner.compiled(n, "a"), eager[(n, "a")])
        out["compile_s"] = round(time.monotonic() - start, 1)
        out["graph_ops"] = graphs  # kept should the capture fail
        fused_ops(runner.built.layer, compiler, enter=False)
        for n in reversed(SIZES):
            record = out["sizes"][n]
            record["warmup"] = compare(runner.compiled(n, "a"), eager[(n, "a")])
            runner.compiled(n, "a")  # the capture: its kernels are recorded, not run
            record["replay_b"] = compare(runner.compiled(n, "b"), eager[(n, "b")])
            record["replay_a"] = compare(runner.compiled(n, "a"), eager[(n, "a")])
    out["graph_ops"] = graphs
    out["counters"] = {k: v for k, v in vars(compilation_counter).items() if isinstance(v, int)}


def trace(sglang_tree: str, flashinfer_tree: str, compiler: str = "") -> dict[str, Any]:
    """On a CPU: the layer built with SM90 faked, traced by SGLang's install_torch_compiled (fullgraph)
    under its piecewise context managers; the backend records the graph's ops, with a compiler named
    has SGLang's own backend split and compile it (`compiled`), and stops there (the run would build
    FlashInfer's JIT module)."""
    import whole_layer_build

    os.environ.setdefault("SGLANG_CACHE_DIR", tempfile.mkdtemp(prefix="whole-layer-sglang-"))
    built = whole_layer_build.build(sglang_tree, flashinfer_tree, fake_cc=(9, 0), compiler=compiler or "eager")
    from sglang.srt.compilation.compile import install_torch_compiled

    graphs: list[list[str]] = []
    result: dict[str, Any] = {"bodies": built.bodies, "stand_ins": sorted(built.stubbed)}
    if compiler:
        if not whole_layer_build.tc_piecewise():
            importlib.import_module("sglang.srt.server_args").get_global_server_args().piecewise_cuda_graph_compiler = compiler
        inductor_shape_env()

    def backend(graph: Any, example_inputs: Any) -> Any:
        graphs.append(ops(graph))
        if compiler:
            from sglang.srt.compilation.backend import SGLangBackend
            from sglang.srt.compilation.compilation_config import CompilationConfig

            SGLangBackend(CompilationConfig([SIZES[0]], compiler), object())(graph, example_inputs)
            result["compiled"] = compiler
        raise io_audit.Traced

    layer_piecewise.fake_gpu_inlined()  # the faked torch.cuda answers, inlined (0.5.20 traces is_cuda())
    fused_ops(built.layer, compiler or "eager", enter=True)
    install_torch_compiled(built.layer, backend_factory=backend)
    batch, layer = built.batch(SIZES[0]), built.layer
    with whole_layer_build.piecewise_graph(), whole_layer_build.compiling(), built.piecewise_forward(batch):
        try:
            layer(*inputs(SIZES[0], 0, "cpu")[:2], batch, inputs(SIZES[0], 0, "cpu")[2])
        except Exception as exc:  # noqa: BLE001 - ours (io_audit.Traced) or where dynamo gave up
            if not io_audit.caused_by_traced(exc):
                text = str(exc)
                where = text.find("from user code:")
                result["error"] = f"{type(exc).__name__}: {text[:300]}" + (f" ... {text[where:][-2500:]}" if where > 0 else "")
    result["whole"] = "error" not in result and bool(graphs)
    result["ops"] = graphs[0] if graphs else []
    return result


def verdict(patched: list[dict[str, Any]], upstream: dict[str, Any]) -> dict[str, Any]:
    """Per patched child (by compiler): each comparison held byte for byte at every size; then what holds
    across them and against the upstream side."""
    def every(run: dict[str, Any], key: str) -> bool:
        sizes = run.get("sizes", {})
        return bool(sizes) and all(sizes[n].get(key, {}).get("equal") for n in sizes)

    per = {run.get("compiler", "?"): {
        "compiled_equals_eager": every(run, "compiled"), "warmup_equals_eager": every(run, "warmup"),
        "replay_equals_eager": every(run, "replay_a") and every(run, "replay_b"),
        "graphs": len(run.get("graph_ops", [])),  # dynamo's graphs (one per size it recompiled for)
        "fp8_gemm_opaque": bool(run.get("graph_ops")) and all(any(o.startswith(PATCHED_OP) for o in ops)
                                                                for ops in run["graph_ops"]),
        "compile_error": run.get("compile_error", run.get("crash", ""))[:400] or None} for run in patched}
    first = patched[0].get("sizes", {}) if patched else {}
    return {
        "per_compiler": per,
        "deterministic": all(s.get("deterministic") for run in patched for s in run.get("sizes", {}).values()),
        "eager_equals_upstream": bool(first) and all(
            first[n]["eager_sha256"] == upstream.get("sizes", {}).get(n, {}).get("eager_sha256") for n in first),
        "upstream_compile": upstream.get("compile_error", "compiled" if "graph_ops" in upstream else upstream.get("crash")),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--wheels", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "SITE", "COMPILER"))
    parser.add_argument("--trace", nargs=2, metavar=("SGLANG_TREE", "FLASHINFER_TREE"))
    parser.add_argument("--compiler", default="", help="with --trace: SGLang's piecewise compiler (eager, inductor)")
    parser.add_argument("--release", default="0.5.11", choices=sorted(RELEASES),
                        help="the SGLang release of the wheels (default 0.5.11)")
    parser.add_argument("--runs", default="", help="which children (default: every one of the release's)")
    args = parser.parse_args()
    if args.child or args.trace:
        try:
            result = child(*args.child) if args.child else trace(*args.trace, args.compiler)
        except Exception:  # noqa: BLE001
            result = {"crash": traceback.format_exc()[-4000:]}
        print(MARK + json.dumps(result), flush=True)
        return
    release = RELEASES[args.release]
    drive(args.wheels, args.out, args.runs.split(",") if args.runs else list(release["runs"]), release)


def side_wheels(wheels: Path, side: str) -> list[Path]:
    """A child's wheels: its side's folder; `upstream_sglang`: upstream's SGLang over the patched FlashInfer."""
    if side == "upstream_sglang":
        return [*sorted((wheels / "patched").glob("flashinfer*.whl")), *sorted((wheels / "upstream").glob("sglang*.whl"))]
    return sorted((wheels / side).glob("*.whl"))


def drive(wheels: Path, out: Path, wanted: list[str], release: dict[str, Any] | None = None) -> None:
    release = release or RELEASES["0.5.11"]
    result = out / str(release["result"])
    out.mkdir(parents=True, exist_ok=True)
    tag = f"-cp{sys.version_info[0]}{sys.version_info[1]}-"
    deps = [w for w in sorted((wheels / "deps").glob("*.whl")) if tag in w.name]
    root = Path(tempfile.mkdtemp(prefix="whole-layer-"))
    env = dict(os.environ, FLASHINFER_WORKSPACE_BASE=str(root / "fi"), TRITON_CACHE_DIR=str(root / "triton"),
               MAX_JOBS="16", PYTHONUNBUFFERED="1")
    runs: dict[str, Any] = {"facts": {"wheels": {side: sorted(w.name for w in (wheels / side).glob("*.whl"))
                                                 for side in ("patched", "upstream")}}}
    start = time.monotonic()
    for name in wanted:
        side, compiler, timeout = *name.split("-"), release["runs"][name]
        chosen = side_wheels(wheels, side)
        site = driver.install(chosen[0], [*chosen[1:], *deps], root / f"site-{side}", reuse=True)
        env_run = dict(env, PYTHONPATH=str(site), SGLANG_CACHE_DIR=str(root / f"sglang-{side}-{compiler}"))
        runs[f"{side}-{compiler}"] = driver.run_child(__file__, ["--child", side, str(site), compiler], env_run,
                                                      timeout, MARK).or_crash()
        result.write_text(json.dumps(runs, indent=1))
    runs["facts"]["wall_s"] = round(time.monotonic() - start, 1)
    runs["verdict"] = verdict([runs[n] for n in wanted if n.startswith("patched")], runs.get("upstream-eager", {}))
    if "upstream_sglang-eager" in runs:
        mixed = runs["upstream_sglang-eager"]
        runs["verdict"]["upstream_sglang_compile"] = mixed.get("compile_error", "compiled" if "graph_ops" in mixed
                                                               else mixed.get("crash"))
    result.write_text(json.dumps(runs, indent=1))
    print(json.dumps(runs["verdict"], indent=1))
    print(json.dumps(runs, indent=1)[:9000])


if __name__ == "__main__":
    main()
