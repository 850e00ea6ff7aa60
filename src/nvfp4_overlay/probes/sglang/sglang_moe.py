"""The MoE regions of the SGLang region probe: an NVFP4 FusedMoE built by SGLang itself, and its forward.

The server's configuration is sglang_drivers.serve's, with the MoE runner backend of the region
(``--moe-runner-backend X``). The layer is SGLang's FusedMoE and TopK, made by their own
constructors from ModelOptFp4Config, weights prepared by the quant method's own
process_weights_after_loading; the traced call is what a model's sparse MoE block makes inside
SGLang's piecewise CUDA graph context (``moe(x, topk(x, router_logits))``), entered with SGLang's
own context managers. Inkling's routed experts: InklingMoE._forward_routed of an InklingMoE whose
constructor did not run (it needs Inkling's HF config): only the attributes that method reads are
set, and its experts are a FusedMoE made as InklingMoE.__init__ makes it.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Iterator
from typing import Any

from nvfp4_overlay.probes.sglang.sglang_drivers import (
    MODELOPT,
    MOE_UTILS,
    SERVER_ARGS,
    Absent,
    Built,
    Context,
    Region,
    modelopt_fp4_config,
    ones,
    serve,
)

LAYER = "sglang.srt.layers.moe.fused_moe_triton.layer"
EP_LAYER = "sglang.srt.layers.moe.ep_moe.layer"
TOPK = "sglang.srt.layers.moe.topk"
INKLING = "sglang.srt.models.inkling_common.moe"
TRTLLM_RUNNER = "sglang/srt/layers/moe/moe_runner/flashinfer_trtllm.py"
PER_TOKEN = "SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION"
# SGLang's piecewise CUDA graph context, by release: (module, context managers entered in order)
PIECEWISE = (
    ("sglang.srt.model_executor.runner_backend_utils.tc_piecewise_cuda_graph.context_manager",
     ("enable_tc_piecewise_cuda_graph",)),
    ("sglang.srt.compilation.piecewise_context_manager",
     ("enable_piecewise_cuda_graph_compile", "enable_piecewise_cuda_graph")),
)
NEEDS = (LAYER, EP_LAYER, TOPK, MOE_UTILS, SERVER_ARGS, MODELOPT)


def backend_known(ctx: Context, name: str) -> bool:
    backend = ctx.module(MOE_UTILS).MoeRunnerBackend
    return any(member.value == name for member in backend)


def fused_moe(ctx: Context, *, by_factory: bool = True, **extra: Any) -> Any:
    """An NVFP4 MoE layer of 8 experts, hidden 256, intermediate 256, top-2, weights prepared: the class
    SGLang's get_moe_impl_class picks for the backend (as its MoE models make theirs), or FusedMoE."""
    torch = ctx.torch
    config = modelopt_fp4_config(ctx)
    layer_class = ctx.module(EP_LAYER).get_moe_impl_class(config) if by_factory else ctx.module(LAYER).FusedMoE
    layer = layer_class(num_experts=8, hidden_size=256, intermediate_size=256, layer_id=0, top_k=2,
                        params_dtype=torch.bfloat16, quant_config=config, prefix="model.layers.0.mlp.experts", **extra)
    ones(layer, torch)
    layer.quant_method.process_weights_after_loading(layer)
    return layer


def piecewise(ctx: Context) -> Any:
    """SGLang's own context managers of its piecewise CUDA graph (compile, then capture/replay)."""
    for name, managers in PIECEWISE:
        if ctx.has(name.replace(".", "/") + ".py"):
            module = ctx.module(name)
            found = [getattr(module, m) for m in managers if hasattr(module, m)]

            @contextlib.contextmanager
            def entered(found: list[Any] = found) -> Iterator[None]:
                with contextlib.ExitStack() as stack:
                    for manager in found:
                        stack.enter_context(manager())
                    yield

            return entered
    msg = "no piecewise CUDA graph context manager in this release"
    raise LookupError(msg)


def _sparse_block(ctx: Context, backend: str) -> Built | Absent:
    if not backend_known(ctx, backend):
        return Absent(f"{MOE_UTILS.replace('.', '/')}.py: MoeRunnerBackend has no {backend!r}")
    torch = ctx.torch
    serve(ctx, backend)
    # as Qwen3-MoE's sparse block makes its experts (every release)
    layer = fused_moe(ctx, routing_method_type=ctx.module(MOE_UTILS).RoutingMethodType.Renormalize)
    x, logits = torch.randn(8, 256, dtype=torch.bfloat16), torch.randn(8, 8, dtype=torch.bfloat16)
    if backend == "flashinfer_cutlass":
        # TopK computes the standard top-k with SGLang's triton kernel, which needs triton (absent
        # here): the block hands FusedMoE what TopK would, made directly.
        weights, ids = torch.rand(8, 2, dtype=torch.float32), torch.zeros(8, 2, dtype=torch.int32)
        standard = ctx.module(TOPK).StandardTopKOutput(topk_weights=weights, topk_ids=ids, router_logits=logits)
        return Built(lambda x, topk: layer(x, topk), (x, standard), variant=f"{type(layer).__name__}, StandardTopKOutput",
                     context=piecewise(ctx))
    topk_class = ctx.module(TOPK).TopK
    options: dict[str, Any] = {"layer_id": 0, "renormalize": True, "quant_config": layer.quant_config}
    if "is_fp4_experts" in inspect.signature(topk_class.__init__).parameters:
        options["is_fp4_experts"] = True
    topk = topk_class(2, **options)
    if hasattr(topk, "bind_runner_backend"):  # 0.5.23: a MoE model binds its TopK to the experts' runner
        topk.bind_runner_backend(layer.runner_backend, routing_method_type=layer.routing_method_type)
    return Built(lambda x, logits: layer(x, topk(x, logits)), (x, logits), variant=f"{type(layer).__name__}, TopK",
                 context=piecewise(ctx))


def fused_moe_flashinfer_trtllm(ctx: Context) -> Built | Absent:
    """A Qwen3-MoE-like sparse block (TopK, then the experts) under --moe-runner-backend flashinfer_trtllm."""
    return _sparse_block(ctx, "flashinfer_trtllm")


def fused_moe_flashinfer_cutlass(ctx: Context) -> Built | Absent:
    """The same under --moe-runner-backend flashinfer_cutlass."""
    return _sparse_block(ctx, "flashinfer_cutlass")


def _inkling(ctx: Context, per_token: bool) -> Built | Absent:
    if absent := ctx.missing(INKLING):
        return absent
    if per_token and not (PER_TOKEN in ctx.text(MODELOPT) and "per_token_activation=True" in ctx.text(TRTLLM_RUNNER)):
        return Absent(f"{MODELOPT.replace('.', '/')}.py and {TRTLLM_RUNNER} have no {PER_TOKEN} path")
    if not backend_known(ctx, "flashinfer_trtllm_routed"):
        return Absent(f"{MOE_UTILS.replace('.', '/')}.py: MoeRunnerBackend has no 'flashinfer_trtllm_routed'")
    torch = ctx.torch
    if per_token:
        os.environ[PER_TOKEN] = "1"  # read when ModelOptFp4Config is made
    serve(ctx, "flashinfer_trtllm_routed")
    inkling = ctx.module(INKLING)
    routing = ctx.module(MOE_UTILS).RoutingMethodType.TopK
    experts = fused_moe(ctx, by_factory=False, num_fused_shared_experts=0, reduce_results=False, activation="silu",
                        routing_method_type=routing, is_gated=True, use_weight_loader_fused=True, with_bias=False,
                        inplace=False)
    moe = inkling.InklingMoE.__new__(inkling.InklingMoE)
    torch.nn.Module.__init__(moe)
    moe.experts, moe.quant_config, moe.moe_ep_size, moe.n_routed_experts = experts, experts.quant_config, 1, 8
    moe.inference_moe_w13_interleaved = False
    x = torch.randn(8, 256, dtype=torch.bfloat16)
    weights, ids = torch.rand(8, 2, dtype=torch.float32), torch.zeros(8, 2, dtype=torch.int32)
    packed = torch.zeros(8, 2, dtype=torch.int32)  # the Inkling gate's packed (id, weight) words
    return Built(lambda x, w, i, p: moe._forward_routed(x, w, i, p), (x, weights, ids, packed),
                 variant="per-token activation" if per_token else "", context=piecewise(ctx))


def inkling_packed_topk(ctx: Context) -> Built | Absent:
    """Inkling NVFP4's routed experts with the gate's packed top-k (flashinfer_trtllm_routed)."""
    return _inkling(ctx, per_token=False)


def inkling_packed_topk_per_token(ctx: Context) -> Built | Absent:
    """The same with SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION=1."""
    return _inkling(ctx, per_token=True)


MOE_REGIONS: tuple[Region, ...] = (
    Region("fused_moe_flashinfer_trtllm", fused_moe_flashinfer_trtllm, NEEDS),
    Region("fused_moe_flashinfer_cutlass", fused_moe_flashinfer_cutlass, NEEDS),
    Region("inkling_packed_topk", inkling_packed_topk, (*NEEDS, INKLING)),
    Region("inkling_packed_topk_per_token", inkling_packed_topk_per_token, (*NEEDS, INKLING)),
)
