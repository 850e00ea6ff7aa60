"""A whole SGLang decoder layer (an NVFP4 MoE model's, ModelOpt) compiled as SGLang's piecewise runner compiles it, on a CPU.

    python -m nvfp4_overlay.probes.sglang.layer.probe SGLANG_TREE FLASHINFER_TREE MAJOR MINOR [BACKEND]
        [--model MODEL] [--allreduce-fusion]

SGLANG_TREE and FLASHINFER_TREE are unpacked wheels (their .py files). One fresh interpreter builds
SGLang's own decoder layer of MODEL (models.py; default qwen3-moe:
`Qwen3MoeDecoderLayer`, hidden 256, 4 heads of 64, 8 experts top-2), `--quantization modelopt_fp4
--moe-runner-backend BACKEND` (default flashinfer_cutlass), from the release's model code, with the
region probe's machinery (probes/sglang/sglang_machine.py: the faked GPU, single-rank process groups,
stand-ins for absent modules; probes/sglang/sglang_drivers.py: the server arguments), every weight
ones and prepared, and compiles it with SGLang's own `install_torch_compiled(fullgraph=True)` and
`SGLangBackend` (the server's default piecewise compiler, eager), split at its registered split ops,
under SGLang's piecewise context managers and forward context (piecewise.py), with the compute
capability faked.
Prints one JSON line: whether the compile got through, the error otherwise, each piece's custom ops,
and the FlashInfer frames dynamo traced into (each graph node whose user stack runs through a file of
the flashinfer package: none where every FlashInfer call sits inside an opaque op; the overlay's
routing where it routes one).

The smallest fakes that keep SGLang's code running, where the release calls sgl-kernel (SGLang's CUDA
kernels, not installable on a CPU): rmsnorm, fused_add_rmsnorm, silu_and_mul, rotary_embedding and
topk_softmax as custom ops `sglfake::*` with fakes (their CPU bodies compute the reference or
nothing), SGLang's Triton router `moe_fused_gate` (Triton is absent: kernels.py), and a model's own
(Gemma RMSNorm, Kimi-K2's router, Qwen3.5's GatedDeltaNet Triton kernels; deep_gemm and torchada
stand-ins: fakes.py); the forward batch is an EXTEND batch whose other fields are None (8 tokens).
The compiled graph is not run (the routed op builds its JIT module then: a real nvcc job).
docs/sglang-regions.md records what this found.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nvfp4_overlay.probes import io_audit
from nvfp4_overlay.probes.sglang import sglang_drivers, sglang_imports, sglang_machine, sglang_moe, sglang_regions
from nvfp4_overlay.probes.sglang.layer import fakes, kernels, piecewise, runner, server
from nvfp4_overlay.probes.sglang.layer.models import DEFAULT, Model, model

# SGLang modules the layer runs, imported for real (an import error is the probe's, not a stand-in)
LAYER_NEEDS = ("sglang.srt.layers.communicator", "sglang.srt.layers.flashinfer_comm_fusion")
TOKENS = 8  # the prefill batch compiled


def cuda_runtime() -> bool:
    """The CUDA runtime library loaded into the process, as a CUDA torch loads it on a server: FlashInfer's
    flashinfer.comm (the all-reduce fusion SGLang imports) binds libcudart at import. From the toolkit of
    CUDA_HOME (default /usr/local/cuda); False where there is none (the probe then reports it and stops)."""
    found = sorted(Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64").glob("libcudart.so*"))
    if found:
        ctypes.CDLL(str(found[0]))
    return bool(found)


def build(sglang_tree: str, flashinfer_tree: str, cc: tuple[int, int], backend: str, allreduce_fusion: bool,
          chosen: Model) -> tuple[Any, ...]:
    """The faked server of the run (the GPU faked before SGLang imports, its launch line published) and
    MODEL's layer in it, or its whole model's runner (``chosen.whole``): (ctx, layer or runner, the
    quantization config, chosen)."""
    packages = [os.path.join(sglang_tree, "sglang"), os.path.join(flashinfer_tree, "flashinfer")]
    gpu = sglang_machine.FakeGpu(torch, cc, packages)
    gpu.setup()
    sys.path[:0] = [flashinfer_tree, sglang_tree]
    import flashinfer  # noqa: F401 - imported with the GPU faked, as SGLang's import needs it

    gpu.refresh()
    builds = sglang_machine.FlashInferBuilds()
    builds.stub()
    sglang_imported(sglang_tree, chosen)
    gpu.refresh()
    ctx = sglang_drivers.Context(sglang_tree, cc, torch, os.environ["FLASHINFER_WORKSPACE_BASE"])
    server.serve(ctx, chosen, backend, allreduce_fusion, TOKENS)
    kernels.jit_topk_fake(ctx)
    if chosen.whole:  # the whole model, through the runner's warm-up with the server's backend (runner.py)
        built = runner.made(ctx, chosen, cc, server.checkpoint_config)
        quant = built.model.quant_config
    else:
        built, quant = layer_built(ctx, chosen)
    gpu.for_tracing()
    builds.restore()
    return ctx, built, quant, chosen


def sglang_imported(sglang_tree: str, chosen: Model) -> None:
    """SGLang's modules the layer needs, imported with sgl-kernel's fakes on its stand-in (kernels.py's and
    the model's own from fakes.py), the model's absent packages stood in for and SGLang's own Triton
    kernels it needs faked."""
    kernel_module = sglang_machine.sgl_kernel_ops(torch)
    kernels.sgl_kernel_fakes(kernel_module)
    for name in chosen.fakes:
        if name in fakes.EXTRA_FAKES:
            fakes.EXTRA_FAKES[name](kernel_module)
    needs = sorted({*sglang_regions.NEEDED, *LAYER_NEEDS, *chosen.imports})
    # regex (compiled, absent here): the standard library's re for the patterns SGLang matches (the
    # quantization config's exclude_modules); a permissive stand-in would match nothing
    sys.modules.setdefault("regex", importlib.import_module("re"))
    # transformers (absent here) adds Logger.warning_once on import; SGLang's models call it
    logging.Logger.warning_once = lambda self, msg, *a, **k: self.warning(msg, *a, **k)  # type: ignore[attr-defined]
    # cuda-python, which SGLang requires: a stand-in for FlashInfer's flashinfer.comm too (0.6.7's mnnvl raises
    # ImportError without it, and SGLang then turns the all-reduce fusion off), not only for SGLang's imports
    sglang_imports.STUBBED.setdefault("cuda", "cuda-python, an SGLang requirement: a stand-in wherever imported")
    sglang_imports.install_imports(sglang_tree, needs)
    for name in chosen.stand_ins:  # the model's own stand-ins (fakes.STAND_INS), kept while tracing
        stand_in = sglang_imports.StubModule(name)
        stand_in.__path__ = []
        fakes.STAND_INS[name](stand_in)
        sys.modules[name] = stand_in
    for name in chosen.fakes:
        if name in fakes.SGLANG_FAKES:
            fakes.SGLANG_FAKES[name](lambda relative: os.path.isfile(os.path.join(sglang_tree, relative)))


def layer_built(ctx: Any, chosen: Model) -> tuple[Any, Any]:
    """MODEL's layer under the checkpoint's quantization config, every weight ones and prepared as the
    loader prepares it (process_weights_after_loading, then the model's own after-loading steps)."""
    quant = server.checkpoint_config(ctx, chosen)
    layer = chosen.build(quant)
    sglang_drivers.ones(layer, torch)
    for module in layer.modules():
        method = getattr(module, "quant_method", None)
        if method is not None and hasattr(method, "process_weights_after_loading"):
            method.process_weights_after_loading(module)
    chosen.after_loading(layer, quant)
    return layer, quant


def compile_layer(ctx: Any, layer: Any, quant: Any, chosen: Model) -> dict[str, Any]:
    """SGLang's own piecewise compile of the layer, as its runner drives it for a prefill: the release's
    CompilationConfig (the server's default compiler, eager: no inductor), install_torch_compiled
    (fullgraph=True) over the module, its trampoline entered inside the piecewise contexts, and SGLang's
    own SGLangBackend splitting the graph at its registered split ops and compiling each piece. The
    compiled graph is not run (the routed ops would build their CUDA modules then)."""
    compilation = importlib.import_module("sglang.srt.compilation.compile")
    config = importlib.import_module("sglang.srt.compilation.compilation_config").CompilationConfig([TOKENS])
    sglang_backend = importlib.import_module("sglang.srt.compilation.backend").SGLangBackend
    piecewise.one_rank_world(os.getcwd())
    piecewise.fake_gpu_inlined()  # after init_process_group, which clears dynamo's rule maps
    piecewise.decode_graphs_asked(ctx, chosen)
    piecewise.warmed_up(layer.model if chosen.whole else layer)
    os.environ["SGLANG_CACHE_DIR"] = os.path.join(os.getcwd(), "sglang-cache")
    backends: list[Any] = []
    frames: set[str] = set()

    def backend_factory(gm: Any, example_inputs: Any) -> Any:  # install_torch_compiled's own, kept to be read
        frames.update(flashinfer_frames(gm))
        backends.append(sglang_backend(config, graph_pool=object()))  # no CUDA graph pool: nothing is captured
        backends[-1](gm, example_inputs)
        raise io_audit.Traced  # the stop after SGLangBackend has split and compiled the graph

    compiled = layer.model.model if chosen.whole else layer  # the runner compiles the language model's model
    compilation.install_torch_compiled(compiled, fullgraph=True, compile_config=config, graph_pool=object(),
                                       backend_factory=backend_factory)
    out: dict[str, Any] = {"compiler": config.compiler, "split_ops": sorted(config.split_ops)}
    error = compiled_run(ctx, compilation, layer, quant, chosen)
    if error is not None:
        out["error"] = error
    out["whole"] = error is None and bool(backends)
    out["pieces"] = [{"split": item.is_splitting_graph, "ops": _custom_ops(item.graph)}
                     for item in (backends[0].piecewise_graphs if backends else [])]
    out["ops"] = sorted({op for piece in out["pieces"] for op in piece["ops"]})
    out["flashinfer_frames"] = sorted(frames)
    if chosen.stand_ins:
        out["stand_ins"] = list(chosen.stand_ins)
    return out


def compiled_run(ctx: Any, compilation: Any, layer: Any, quant: Any, chosen: Model) -> str | None:
    """The model's own call of the layer (of a whole model, the runner's own warm-up forward: its batch, the
    backend's metadata, its forward context), through the trampoline install_torch_compiled put on it:
    None where it ended at the backend's stop, else where dynamo gave up (its user stack: where in
    SGLang the trace stopped)."""
    batch = piecewise.extend_batch(TOKENS)
    compiling = getattr(compilation, "set_compiled", contextlib.nullcontext)  # 0.5.8-0.5.9: the runner's switch too
    hidden = torch.randn(TOKENS, chosen.config().hidden_size, dtype=torch.bfloat16)
    run: Callable[[], Any]
    if chosen.whole:
        contexts: Any = sglang_moe.piecewise(ctx)()
        run = lambda: runner.piecewise_runner(layer, TOKENS).warmup_torch_compile(num_tokens=TOKENS)  # noqa: E731
    else:
        contexts = piecewise.piecewise_contexts(ctx, batch, layer, quant, chosen)
        run = lambda: chosen.forward(layer, batch)(torch.arange(TOKENS), hidden)  # noqa: E731
    with contexts, compiling():
        try:
            run()
        except Exception as exc:  # noqa: BLE001 - the compile's end: ours (io_audit.Traced) or where dynamo gave up
            if not io_audit.caused_by_traced(exc):
                text = str(exc)
                where = text.find("from user code:")
                return f"{type(exc).__name__}: {text[:300]}" + (f" ... {text[where:][-2500:]}" if where > 0 else "")
    return None


def _custom_ops(graph_module: Any) -> list[str]:
    """The custom ops of a graph, in order: SGLang's, the overlay's, FlashInfer's, the sgl-kernel fakes'."""
    targets = (str(n.target) for n in graph_module.graph.nodes if n.op == "call_function")
    return list(dict.fromkeys(t for t in targets if t.startswith(OWNERS)))


OWNERS = ("sglang.", "nvfp4_overlay.", "flashinfer.", "sgl_kernel.", "sglfake.")


FRAME = re.compile(r'File "[^"]*[/\\](flashinfer[/\\][^"]*)", line \d+, in (\w+)')


def flashinfer_frames(gm: Any) -> set[str]:
    """FlashInfer's own Python that dynamo traced into: each graph node's user stack (its
    stack_trace) through a file of the flashinfer package, as "target <- file:function". A FlashInfer
    call inside an opaque op (SGLang's or the overlay's) leaves none; a raw one leaves its nodes here."""
    found = set()
    for node in gm.graph.nodes:
        for path, function in FRAME.findall(node.meta.get("stack_trace") or ""):
            found.add(f"{node.target} <- {path.replace(os.sep, '/')}:{function}")
    return found


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("sglang_tree")
    parser.add_argument("flashinfer_tree")
    parser.add_argument("major", type=int)
    parser.add_argument("minor", type=int)
    parser.add_argument("backend", nargs="?", default="flashinfer_cutlass", help="--moe-runner-backend")
    parser.add_argument("--allreduce-fusion", action="store_true", help="--enable-flashinfer-allreduce-fusion")
    parser.add_argument("--model", default=DEFAULT, help="a name of the layer probe's models.py")
    return parser.parse_args(argv)


def main() -> None:
    args = arguments(sys.argv[1:])
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", os.path.join(os.getcwd(), "flashinfer-workspace"))
    torch.compile(lambda t: t + 1, fullgraph=True, backend="eager")(torch.zeros(1))
    importlib.import_module("torch._inductor.compile_fx")
    if not cuda_runtime():
        print(json.dumps({"no_cuda_runtime": "no libcudart.so* under $CUDA_HOME/lib64 (default /usr/local/cuda): "
                          "FlashInfer's flashinfer.comm, which SGLang's layer imports, binds it at import"}))
        return
    try:
        built = build(args.sglang_tree, args.flashinfer_tree, (args.major, args.minor), args.backend,
                      args.allreduce_fusion, model(args.model))
        fused = piecewise.fusion_applies(built[0], TOKENS)
        result = {**compile_layer(*built), "allreduce_fusion": fused}
    except Exception:  # noqa: BLE001 - SGLang's own set-up failed: the probe's finding
        result = {"setup_error": traceback.format_exc()[-2500:]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
