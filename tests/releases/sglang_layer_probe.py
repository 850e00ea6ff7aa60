"""A whole SGLang decoder layer (an NVFP4 MoE model's, ModelOpt) under torch.compile(fullgraph=True), on a CPU.

    python tests/releases/sglang_layer_probe.py SGLANG_TREE FLASHINFER_TREE MAJOR MINOR [BACKEND [MODEL]]

SGLANG_TREE and FLASHINFER_TREE are unpacked wheels (their .py files). One fresh interpreter builds
SGLang's own decoder layer of MODEL (tests/releases/sglang_layer_models.py; default qwen3-moe:
`Qwen3MoeDecoderLayer`, hidden 256, 4 heads of 64, 8 experts top-2), `--quantization modelopt_fp4
--moe-runner-backend BACKEND` (default flashinfer_cutlass), from the release's model code,
with the region probe's machinery (probes/sglang/sglang_machine.py: the faked GPU, single-rank process groups,
stand-ins for absent modules; probes/sglang/sglang_drivers.py: the server arguments), every weight ones and
prepared, and traces its forward under SGLang's own piecewise context managers and forward context,
fullgraph, with the compute capability faked. Prints one JSON line: whether the trace got through,
the error otherwise, the graph's custom ops, and the FlashInfer frames dynamo traced into (each graph
node whose user stack runs through a file of the flashinfer package: none where every FlashInfer
call sits inside an opaque op; the overlay's routing where it routes one).

The smallest fakes that keep SGLang's code running, where the release calls sgl-kernel (SGLang's CUDA
kernels, not installable on a CPU): rmsnorm, fused_add_rmsnorm, silu_and_mul, rotary_embedding and
topk_softmax as custom ops `sglfake::*` with fakes (their CPU bodies compute the reference or
nothing), and a model's own (Gemma RMSNorm, Kimi-K2's router, 0.5.20's Triton
router, Qwen3.5's GatedDeltaNet Triton kernels; deep_gemm and torchada stand-ins: sglang_layer_fakes);
the forward batch is an EXTEND batch whose other fields are None (input_ids 8 tokens).
What this is not yet: SGLang's `install_torch_compiled` with its split backend (the trace here is
dynamo's own over the layer; the attention and MoE split ops appear as the opaque SGLang ops they
are), the releases other than 0.5.11 and (GLM-5) 0.5.20; the run of the compiled graph (the routed op builds
its JIT module then: a real nvcc job). docs/sglang-regions.md records what this found.
"""

from __future__ import annotations

import contextlib
import importlib
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

import torch  # noqa: E402
from sglang_layer_fakes import EXTRA_FAKES, SGLANG_FAKES, STAND_INS  # noqa: E402
from sglang_layer_models import DEFAULT, Model, model  # noqa: E402

from nvfp4_overlay.probes.sglang import sglang_drivers, sglang_imports, sglang_machine, sglang_moe, sglang_regions  # noqa: E402

Tensor = torch.Tensor


def sgl_kernel_fakes(module: Any) -> None:
    """sgl-kernel's functions the layer calls, as opaque custom ops with fakes, on the stand-in module."""
    @torch.library.custom_op("sglfake::rmsnorm", mutates_args=())
    def _rms(x: Tensor, w: Tensor, eps: float) -> Tensor:
        return torch.nn.functional.rms_norm(x.float(), (x.shape[-1],), w.float(), eps).to(x.dtype)

    @torch.library.custom_op("sglfake::fused_add_rmsnorm", mutates_args=("x", "residual"))
    def _add_rms(x: Tensor, residual: Tensor, w: Tensor, eps: float) -> None:
        residual.add_(x)
        x.copy_(torch.nn.functional.rms_norm(residual.float(), (x.shape[-1],), w.float(), eps).to(x.dtype))

    @torch.library.custom_op("sglfake::silu_and_mul", mutates_args=())
    def _silu_and_mul(x: Tensor) -> Tensor:
        half = x.shape[-1] // 2
        return torch.nn.functional.silu(x[..., :half]) * x[..., half:]

    @torch.library.custom_op("sglfake::rotary_embedding", mutates_args=("query", "key"))
    def _rope(positions: Tensor, query: Tensor, key: Tensor, head_size: int, cos_sin_cache: Tensor,
              is_neox: bool) -> None:
        return None

    @torch.library.custom_op("sglfake::topk_softmax", mutates_args=("topk_weights", "topk_ids"))
    def _topk_softmax(topk_weights: Tensor, topk_ids: Tensor, gating_output: Tensor, renormalize: bool) -> None:
        weights, ids = torch.topk(gating_output.float().softmax(-1), topk_weights.shape[-1], dim=-1)
        topk_weights.copy_(weights)
        topk_ids.copy_(ids)

    _rms.register_fake(lambda x, w, eps: torch.empty_like(x))
    _add_rms.register_fake(lambda x, residual, w, eps: None)
    _silu_and_mul.register_fake(lambda x: x.new_empty((*x.shape[:-1], x.shape[-1] // 2)))
    _rope.register_fake(lambda positions, query, key, head_size, cos_sin_cache, is_neox: None)
    _topk_softmax.register_fake(lambda topk_weights, topk_ids, gating_output, renormalize: None)
    ops = torch.ops.sglfake

    def rmsnorm(input: Tensor, weight: Tensor, eps: float = 1e-6, out: Any = None, enable_pdl: Any = None) -> Tensor:
        result = ops.rmsnorm(input, weight, eps)
        return out.copy_(result) if out is not None else result

    def fused_add_rmsnorm(input: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6,
                          enable_pdl: Any = None) -> None:
        ops.fused_add_rmsnorm(input, residual, weight, eps)

    def silu_and_mul(input: Tensor, out: Any = None, *args: Any, **kwargs: Any) -> Tensor:
        result = ops.silu_and_mul(input)
        return out.copy_(result) if out is not None else result

    def rotary_embedding(positions: Tensor, query: Tensor, key: Tensor, head_size: int, cos_sin_cache: Tensor,
                         is_neox: bool) -> None:
        ops.rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)

    def topk_softmax(topk_weights: Tensor, topk_ids: Tensor, gating_output: Tensor, renormalize: bool = False,
                     *args: Any, **kwargs: Any) -> None:
        ops.topk_softmax(topk_weights, topk_ids, gating_output, renormalize)

    for fn in (rmsnorm, fused_add_rmsnorm, silu_and_mul, rotary_embedding, topk_softmax):
        setattr(module, fn.__name__, fn)


def prefill_graph_config(ctx: Any) -> None:
    """0.5.14 on: the server's CUDA graph settings at the release's defaults, prefill on tc_piecewise (the
    layers read them; sglang_drivers.serve leaves resolution out, which fills them)."""
    config = "sglang.srt.model_executor.cuda_graph_config"
    if not ctx.has(config.replace(".", "/") + ".py"):
        return
    module = importlib.import_module(config)
    settings = module.default_cuda_graph_config()
    settings.prefill.backend = module.Backend.TC_PIECEWISE
    context = importlib.import_module("sglang.srt.runtime_context") if ctx.has("sglang/srt/runtime_context.py") else None
    args = getattr(getattr(context, "_CONTEXT", None), "_server_args", None)
    if args is None:
        args = importlib.import_module("sglang.srt.server_args").get_global_server_args()
    object.__setattr__(args, "cuda_graph_config", settings)
    if context is not None and hasattr(context, "SpawnRanks"):  # 0.5.21 on: the bags are snapshots taken at publish
        context.publish(args, role="scheduler", ranks=context.SpawnRanks(world_rank=0, gpu_id=0))
    elif context is not None and hasattr(context, "publish"):
        context.publish(args, role="scheduler")


def single_rank_dp_attention() -> None:
    """dp_attention's globals as initialize_dp_attention sets them for one GPU, no DP attention."""
    module = importlib.import_module("sglang.srt.layers.dp_attention")
    for name, value in {"_ATTN_DP_RANK": 0, "_ATTN_DP_SIZE": 1, "_LOCAL_ATTN_DP_SIZE": 1, "_LOCAL_ATTN_DP_RANK": 0,
                        "_ENABLE_DP_ATTENTION_FLAG": False, "_ATTN_TP_RANK": 0, "_ATTN_TP_SIZE": 1}.items():
        setattr(module, name, value)


def nvfp4_config(ctx: Any, chosen: Model) -> Any:
    """The checkpoint's ModelOpt NVFP4 config, with the model's excluded (BF16) modules."""
    if not chosen.exclude:
        return sglang_drivers.modelopt_fp4_config(ctx)
    hf = {"quantization": {**sglang_drivers.HF_NVFP4["quantization"], "exclude_modules": list(chosen.exclude)}}
    config = ctx.module(sglang_drivers.MODELOPT).ModelOptFp4Config.from_config(hf)
    if getattr(config, "packed_modules_mapping", None) is None:
        config.packed_modules_mapping = {}
    return config


def build(sglang_tree: str, flashinfer_tree: str, cc: tuple[int, int], backend: str, chosen: Model) -> tuple[Any, ...]:
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
    needs = sorted({*sglang_regions.NEEDED, *chosen.imports})
    # regex (compiled, absent here): the standard library's re for the patterns SGLang matches (the
    # quantization config's exclude_modules); a permissive stand-in would match nothing
    sys.modules.setdefault("regex", importlib.import_module("re"))
    # transformers (absent here) adds Logger.warning_once on import; SGLang's models call it
    logging.Logger.warning_once = lambda self, msg, *a, **k: self.warning(msg, *a, **k)  # type: ignore[attr-defined]
    sglang_imports.install_imports(sglang_tree, needs)
    for name in chosen.stand_ins:  # the model's own stand-ins (sglang_layer_models.STAND_INS), kept while tracing
        stand_in = sglang_imports.StubModule(name)
        stand_in.__path__ = []
        STAND_INS[name](stand_in)
        sys.modules[name] = stand_in
    for name in chosen.fakes:
        if name in SGLANG_FAKES:
            SGLANG_FAKES[name](lambda relative: os.path.isfile(os.path.join(sglang_tree, relative)))
    gpu.refresh()
    ctx = sglang_drivers.Context(sglang_tree, cc, torch, os.environ["FLASHINFER_WORKSPACE_BASE"])
    sglang_drivers.serve(ctx, backend)
    prefill_graph_config(ctx)
    single_rank_dp_attention()
    quant = nvfp4_config(ctx, chosen)
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
            stack.enter_context(getattr(importlib.import_module(name), setter)(
                batch, chosen.attention(layer), quant, chosen.moe_layers(layer), []))
            return stack
    msg = "no piecewise forward context in this release"
    raise LookupError(msg)


def trace(ctx: Any, layer: Any, quant: Any, chosen: Model) -> dict[str, Any]:
    forward_mode = importlib.import_module("sglang.srt.model_executor.forward_batch_info").ForwardMode

    class Batch:  # an EXTEND batch of 8 tokens; every other field None
        def __getattr__(self, name: str) -> Any:
            return None

    batch = Batch()
    batch.forward_mode = forward_mode.EXTEND  # type: ignore[attr-defined]
    batch.input_ids = torch.zeros(8, dtype=torch.int64)  # type: ignore[attr-defined]
    targets: list[str] = []

    frames: set[str] = set()

    def backend(gm: Any, example_inputs: Any) -> Any:
        targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        frames.update(flashinfer_frames(gm))
        raise _Traced

    out: dict[str, Any] = {}
    with piecewise_contexts(ctx, batch, layer, quant, chosen):
        compiled = torch.compile(chosen.forward(layer, batch), fullgraph=True, backend=backend)
        try:
            compiled(torch.arange(8), torch.randn(8, getattr(layer, "hidden_size", None) or layer.config.hidden_size, dtype=torch.bfloat16))
        except Exception as exc:  # noqa: BLE001 - the trace's end: ours (_Traced) or where dynamo gave up
            if not _caused_by(exc, _Traced):
                text = str(exc)
                where = text.find("from user code:")  # dynamo's user stack: where in SGLang the trace gave up
                out["error"] = f"{type(exc).__name__}: {text[:300]}" + (f" ... {text[where:][-2500:]}" if where > 0 else "")
    out["whole"] = "error" not in out
    out["flashinfer_frames"] = sorted(frames)
    if chosen.stand_ins:
        out["stand_ins"] = list(chosen.stand_ins)
    out["ops"] = sorted({t for t in targets if t.startswith(("sglang.", "nvfp4_overlay.", "flashinfer.", "sglfake."))})
    return out


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
    """The backend's stop: the graph is recorded, the compiled run (the JIT build of a real kernel) is not made."""


def _caused_by(exc: BaseException | None, kind: type) -> bool:
    while exc is not None:
        if isinstance(exc, kind):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def main() -> None:
    sglang_tree, flashinfer_tree, major, minor = sys.argv[1:5]
    backend = sys.argv[5] if len(sys.argv) > 5 else "flashinfer_cutlass"
    chosen = model(sys.argv[6] if len(sys.argv) > 6 else DEFAULT)
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", os.path.join(os.getcwd(), "flashinfer-workspace"))
    torch.compile(lambda t: t + 1, fullgraph=True, backend="eager")(torch.zeros(1))
    importlib.import_module("torch._inductor.compile_fx")
    try:
        result = trace(*build(sglang_tree, flashinfer_tree, (int(major), int(minor)), backend, chosen))
    except Exception:  # noqa: BLE001 - SGLang's own set-up failed: the probe's finding
        result = {"setup_error": traceback.format_exc()[-2500:]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
