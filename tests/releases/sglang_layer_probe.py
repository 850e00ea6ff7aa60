"""A whole SGLang decoder layer (an NVFP4 MoE model's, ModelOpt) compiled as SGLang's piecewise runner compiles it, on a CPU.

    python tests/releases/sglang_layer_probe.py SGLANG_TREE FLASHINFER_TREE MAJOR MINOR [BACKEND]
        [--model MODEL] [--allreduce-fusion]

SGLANG_TREE and FLASHINFER_TREE are unpacked wheels (their .py files). One fresh interpreter builds
SGLang's own decoder layer of MODEL (tests/releases/sglang_layer_models.py; default qwen3-moe:
`Qwen3MoeDecoderLayer`, hidden 256, 4 heads of 64, 8 experts top-2), `--quantization modelopt_fp4
--moe-runner-backend BACKEND` (default flashinfer_cutlass), from the release's model code, with the
region probe's machinery (probes/sglang/sglang_machine.py: the faked GPU, single-rank process groups,
stand-ins for absent modules; probes/sglang/sglang_drivers.py: the server arguments), every weight
ones and prepared, and compiles it with SGLang's own `install_torch_compiled(fullgraph=True)` and
`SGLangBackend` (the server's default piecewise compiler, eager), split at its registered split ops,
under SGLang's piecewise context managers and forward context, with the compute capability faked.
Prints one JSON line: whether the compile got through, the error otherwise, each piece's custom ops,
and the FlashInfer frames dynamo traced into (each graph node whose user stack runs through a file of
the flashinfer package: none where every FlashInfer call sits inside an opaque op; the overlay's
routing where it routes one).

The smallest fakes that keep SGLang's code running, where the release calls sgl-kernel (SGLang's CUDA
kernels, not installable on a CPU): rmsnorm, fused_add_rmsnorm, silu_and_mul, rotary_embedding and
topk_softmax as custom ops `sglfake::*` with fakes (their CPU bodies compute the reference or
nothing), SGLang's Triton router `moe_fused_gate` (Triton is absent), and a model's own (Gemma
RMSNorm, Kimi-K2's router, Qwen3.5's GatedDeltaNet Triton kernels; deep_gemm and torchada stand-ins:
sglang_layer_fakes); the forward batch is an EXTEND batch whose other fields are None (8 tokens).
The compiled graph is not run (the routed op builds its JIT module then: a real nvcc job).
docs/sglang-regions.md records what this found.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import importlib
import inspect
import json
import logging
import os
import re
import sys
import traceback
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

import sglang_layer_runner  # noqa: E402
import torch  # noqa: E402
from sglang_layer_fakes import EXTRA_FAKES, SGLANG_FAKES, STAND_INS  # noqa: E402
from sglang_layer_kernels import jit_topk_fake, sgl_kernel_fakes  # noqa: E402
from sglang_layer_models import DEFAULT, Model, model  # noqa: E402
from sglang_layer_server import (  # noqa: E402, F401 - CHECKPOINTS, fp8_gemm_config, prefill_graph_config, single_rank_dp_attention: the GPU proofs' and the pin probe's
    CHECKPOINTS,
    checkpoint_config,
    fp8_gemm_config,
    prefill_graph_config,
    serve,
    single_rank_dp_attention,
)

from nvfp4_overlay.probes.sglang import sglang_drivers, sglang_imports, sglang_machine, sglang_moe, sglang_regions  # noqa: E402

Tensor = torch.Tensor
# SGLang modules the layer runs, imported for real (an import error is the probe's, not a stand-in)
LAYER_NEEDS = ("sglang.srt.layers.communicator", "sglang.srt.layers.flashinfer_comm_fusion")
# Where the communicator's gate of the fused all-reduce + RMSNorm lives: 0.5.8-0.5.20, then 0.5.21's
FUSION_GATES = ("sglang.srt.layers.communicator", "sglang.srt.layers.layer_boundary.residual.add_norm")
TOKENS = 8  # the prefill batch compiled
# Where SGLang's JIT QK-norm kernel and its cache_once check live: 0.5.8-0.5.16, then 0.5.17's
QK_NORM_CHECKS = ("sglang.jit_kernel.norm", "sglang.kernels.ops.layernorm.norm")


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
    packages = [os.path.join(sglang_tree, "sglang"), os.path.join(flashinfer_tree, "flashinfer")]
    gpu = sglang_machine.FakeGpu(torch, cc, packages)
    gpu.setup()
    sys.path[:0] = [flashinfer_tree, sglang_tree]
    import flashinfer  # noqa: F401 - imported with the GPU faked, as SGLang's import needs it

    gpu.refresh()
    builds = sglang_machine.FlashInferBuilds()
    builds.stub()
    kernels = sglang_machine.sgl_kernel_ops(torch)
    sgl_kernel_fakes(kernels)
    for name in chosen.fakes:
        if name in EXTRA_FAKES:
            EXTRA_FAKES[name](kernels)
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
    for name in chosen.stand_ins:  # the model's own stand-ins (sglang_layer_fakes.STAND_INS), kept while tracing
        stand_in = sglang_imports.StubModule(name)
        stand_in.__path__ = []
        STAND_INS[name](stand_in)
        sys.modules[name] = stand_in
    for name in chosen.fakes:
        if name in SGLANG_FAKES:
            SGLANG_FAKES[name](lambda relative: os.path.isfile(os.path.join(sglang_tree, relative)))
    gpu.refresh()
    ctx = sglang_drivers.Context(sglang_tree, cc, torch, os.environ["FLASHINFER_WORKSPACE_BASE"])
    serve(ctx, chosen, backend, allreduce_fusion, TOKENS)
    jit_topk_fake(ctx)
    if chosen.whole:  # the whole model, through the runner's warm-up with the server's backend (sglang_layer_runner)
        runner = sglang_layer_runner.made(ctx, chosen, cc, checkpoint_config)
        gpu.for_tracing()
        builds.restore()
        return ctx, runner, runner.model.quant_config, chosen
    quant = checkpoint_config(ctx, chosen)
    layer = chosen.build(quant)
    sglang_drivers.ones(layer, torch)
    for module in layer.modules():
        method = getattr(module, "quant_method", None)
        if method is not None and hasattr(method, "process_weights_after_loading"):
            method.process_weights_after_loading(module)
    chosen.after_loading(layer, quant)
    gpu.for_tracing()
    builds.restore()
    return ctx, layer, quant, chosen


# Where each release keeps its piecewise graph's forward context: 0.5.8-0.5.14, then tc_piecewise's.
FORWARD_CONTEXTS = (
    ("sglang.srt.model_executor.runner_backend_utils.tc_piecewise_cuda_graph.context_manager",
     "set_tc_piecewise_forward_context"),
    ("sglang.srt.compilation.piecewise_context_manager", "set_forward_context"),
)


def piecewise_contexts(ctx: Any, batch: Any, layer: Any, quant: Any, chosen: Model) -> contextlib.ExitStack:
    """SGLang's own context managers of its piecewise graph (sglang_moe.piecewise), then the forward
    context its attention and MoE ops read, as the runner sets them for one layer."""
    stack = contextlib.ExitStack()
    stack.enter_context(sglang_moe.piecewise(ctx)())
    published = "sglang.srt.model_executor.forward_context"
    if ctx.has(published.replace(".", "/") + ".py"):  # 0.5.20 on: the per-forward context, its attention backend
        module = importlib.import_module(published)  # a stand-in without pools (the KV cache is the split op's)
        pool = types.SimpleNamespace(dtype=torch.float8_e4m3fn)  # an FP8 KV cache: no fused KV write in rope
        backend = types.SimpleNamespace(token_to_kv_pool=pool, req_to_token_pool=None, use_mha=False,
                                        prefill_attention_backend_str=chosen.attention_backend,
                                        decode_attention_backend_str=chosen.attention_backend)
        previous = module.set_forward_context(module.ForwardContext(attn_backend=backend))
        stack.callback(module.set_forward_context, previous)
    for name, setter in FORWARD_CONTEXTS:
        if ctx.has(name.replace(".", "/") + ".py"):
            setter_fn = getattr(importlib.import_module(name), setter)
            given = (batch, chosen.attention(layer), quant, chosen.moe_layers(layer), [])  # 0.5.8-0.5.9: no MoE fusions
            stack.enter_context(setter_fn(*given[:len(inspect.signature(setter_fn).parameters)]))
            return stack
    msg = "no piecewise forward context in this release"
    raise LookupError(msg)


def fake_gpu_inlined() -> None:
    """Dynamo inlines the faked torch.cuda functions (is_available, device_count, current_device, the device
    properties and name, which answer the faked GPU while
    traced) instead of taking them, by name, for torch functions run in the graph; SGLang's is_cuda()
    is traced from 0.5.20 on."""
    rules = importlib.import_module("torch._dynamo.trace_rules").get_torch_obj_rule_map()  # built lazily
    for fake in (torch.cuda.is_available, torch.cuda.device_count, torch.cuda.current_device,
                 torch.cuda.get_device_properties, torch.cuda.get_device_name):
        rules.pop(fake, None)


def decode_graphs_asked(ctx: Any, chosen: Model) -> None:
    """What the server's decode CUDA graphs (captured before the piecewise prefill graphs: init_device_graphs
    runs first) have asked eagerly: SGLang's cache_once check of its JIT QK-norm kernel, which dynamo then
    reads from the cache (0.5.8-0.5.9 trace into it otherwise; from 0.5.17, an assume_constant_result,
    dynamo would run it, and its nvcc build, while tracing). The kernel is not built here (its C++
    sources are not unpacked), so the check answers False and the layer takes the unfused QK norm."""
    for module in QK_NORM_CHECKS:
        if ctx.has(module.replace(".", "/") + ".py"):
            check = getattr(importlib.import_module(module), "can_use_fused_inplace_qknorm", None)
            head_dim = getattr(chosen.config(), "head_dim", None)  # MLA has none: no QK norm
            if check is not None and head_dim is not None:
                check(head_dim, torch.bfloat16)


def warmed_up(layer: Any) -> None:
    """What the runner's eager warm-up forward (its "dummy warmup for jit kernel", run before
    install_torch_compiled in every release) leaves in the layer that the trace then reads, made here
    without running a kernel: 0.5.21's stage plans compute their `output` on first use, a
    functools.cached_property whose lock dynamo cannot enter (Python 3.11), filled by that forward."""
    for module in layer.modules():
        for stage in list(vars(module).values()):
            plan = getattr(stage, "plan", None)
            for name, attribute in vars(type(plan)).items() if plan is not None else ():
                if isinstance(attribute, functools.cached_property):
                    getattr(plan, name)


def extend_batch(tokens: int) -> Any:
    """An EXTEND batch of `tokens` tokens, as the runner's warmup_compile makes for a prefill; every other
    field None."""
    forward_mode = importlib.import_module("sglang.srt.model_executor.forward_batch_info").ForwardMode

    class Batch:
        def __getattr__(self, name: str) -> Any:
            return None

    batch = Batch()
    batch.forward_mode = forward_mode.EXTEND  # type: ignore[attr-defined]
    batch.input_ids = torch.zeros(tokens, dtype=torch.int64)  # type: ignore[attr-defined]
    return batch


def one_rank_world(scratch: str) -> None:
    """torch.distributed of one rank (gloo, a file store): SGLangBackend asks its rank when it writes the graph."""
    import torch.distributed as dist

    if not dist.is_initialized():
        store = dist.FileStore(os.path.join(scratch, "dist-store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)


def compile_layer(ctx: Any, layer: Any, quant: Any, chosen: Model) -> dict[str, Any]:
    """SGLang's own piecewise compile of the layer, as its runner drives it for a prefill: the release's
    CompilationConfig (the server's default compiler, eager: no inductor), install_torch_compiled
    (fullgraph=True) over the module, its trampoline entered inside the piecewise contexts, and SGLang's
    own SGLangBackend splitting the graph at its registered split ops and compiling each piece. The
    compiled graph is not run (the routed ops would build their CUDA modules then)."""
    compilation = importlib.import_module("sglang.srt.compilation.compile")
    config = importlib.import_module("sglang.srt.compilation.compilation_config").CompilationConfig([TOKENS])
    sglang_backend = importlib.import_module("sglang.srt.compilation.backend").SGLangBackend
    one_rank_world(os.getcwd())
    fake_gpu_inlined()  # after init_process_group, which clears dynamo's rule maps
    decode_graphs_asked(ctx, chosen)
    warmed_up(layer.model if chosen.whole else layer)
    os.environ["SGLANG_CACHE_DIR"] = os.path.join(os.getcwd(), "sglang-cache")
    backends: list[Any] = []
    frames: set[str] = set()

    def backend_factory(gm: Any, example_inputs: Any) -> Any:  # install_torch_compiled's own, kept to be read
        frames.update(flashinfer_frames(gm))
        backends.append(sglang_backend(config, graph_pool=object()))  # no CUDA graph pool: nothing is captured
        backends[-1](gm, example_inputs)
        raise _Traced

    compiled = layer.model.model if chosen.whole else layer  # the runner compiles the language model's model
    compilation.install_torch_compiled(compiled, fullgraph=True, compile_config=config, graph_pool=object(),
                                       backend_factory=backend_factory)
    batch = extend_batch(TOKENS)
    out: dict[str, Any] = {"compiler": config.compiler, "split_ops": sorted(config.split_ops)}
    compiling = getattr(compilation, "set_compiled", contextlib.nullcontext)  # 0.5.8-0.5.9: the runner's switch too
    hidden = torch.randn(TOKENS, chosen.config().hidden_size, dtype=torch.bfloat16)
    if chosen.whole:  # the runner's own warm-up forward: its batch, the backend's metadata, its forward context
        contexts: Any = sglang_moe.piecewise(ctx)()
        run = lambda: sglang_layer_runner.piecewise_runner(layer, TOKENS).warmup_torch_compile(num_tokens=TOKENS)  # noqa: E731
    else:
        contexts = piecewise_contexts(ctx, batch, layer, quant, chosen)
        run = lambda: chosen.forward(layer, batch)(torch.arange(TOKENS), hidden)  # noqa: E731
    with contexts, compiling():
        try:  # the model's own call of the layer, through the trampoline install_torch_compiled put on it
            run()
        except Exception as exc:  # noqa: BLE001 - the compile's end: ours (_Traced) or where dynamo gave up
            if not _caused_by(exc, _Traced):
                text = str(exc)
                where = text.find("from user code:")  # dynamo's user stack: where in SGLang the trace gave up
                out["error"] = f"{type(exc).__name__}: {text[:300]}" + (f" ... {text[where:][-2500:]}" if where > 0 else "")
    out["whole"] = "error" not in out and bool(backends)
    out["pieces"] = [{"split": item.is_splitting_graph, "ops": _custom_ops(item.graph)}
                     for item in (backends[0].piecewise_graphs if backends else [])]
    out["ops"] = sorted({op for piece in out["pieces"] for op in piece["ops"]})
    out["flashinfer_frames"] = sorted(frames)
    if chosen.stand_ins:
        out["stand_ins"] = list(chosen.stand_ins)
    return out


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


class _Traced(Exception):
    """The stop after SGLangBackend has split and compiled the graph: the compiled run (the JIT build of a real
    kernel) is not made."""


def _caused_by(exc: BaseException | None, kind: type) -> bool:
    while exc is not None:
        if isinstance(exc, kind):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def fusion_applies(ctx: Any) -> bool | None:
    """Whether the layer's communicator takes its fused all-reduce + RMSNorm branch for this batch (the
    release's own gate, SM90/SM100 only); None where the release has no such gate."""
    for name in FUSION_GATES:
        if ctx.has(name.replace(".", "/") + ".py"):
            gate = getattr(importlib.import_module(name), "apply_flashinfer_allreduce_fusion", None)
            if gate is not None:
                return bool(gate(TOKENS))
    return None


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sglang_tree")
    parser.add_argument("flashinfer_tree")
    parser.add_argument("major", type=int)
    parser.add_argument("minor", type=int)
    parser.add_argument("backend", nargs="?", default="flashinfer_cutlass", help="--moe-runner-backend")
    parser.add_argument("--allreduce-fusion", action="store_true", help="--enable-flashinfer-allreduce-fusion")
    parser.add_argument("--model", default=DEFAULT, help="tests/releases/sglang_layer_models.py's name")
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
        fused = fusion_applies(built[0])
        result = {**compile_layer(*built), "allreduce_fusion": fused}
    except Exception:  # noqa: BLE001 - SGLang's own set-up failed: the probe's finding
        result = {"setup_error": traceback.format_exc()[-2500:]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
