"""The server a layer probe run stands for: its arguments as the release resolves them for the launch line, and the checkpoint's quantization config.

- ``serve``: SGLang's ServerArgs published for the run's launch line (sglang_drivers.serve: the
  release's defaults, ``--quantization``, ``--moe-runner-backend``, the options below), the FP8 GEMM
  runner chosen from them as the scheduler chooses it, the CUDA graph settings a layer reads (0.5.14
  on), DP attention's globals for one GPU;
- ``checkpoint_config``: the checkpoint's quantization config (ModelOpt NVFP4 with the model's BF16
  modules, or an FP8 block-scale one: ``CHECKPOINTS``).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from nvfp4_overlay.probes.sglang import sglang_drivers
from nvfp4_overlay.probes.sglang.layer.models import Model

# --enable-flashinfer-allreduce-fusion, as the releases set it: the flag, and from 0.5.14 the backend the
# flag stands for (its server_args maps the deprecated flag to --flashinfer-allreduce-fusion-backend auto)
ALLREDUCE_FUSION = {"enable_flashinfer_allreduce_fusion": True, "flashinfer_allreduce_fusion_backend": "auto"}
BOUNDARY_REDUCTION = "sglang.srt.arg_groups.boundary_reduction"  # 0.5.21 on: resolved before the model is built


def serve(ctx: Any, chosen: Model, backend: str, allreduce_fusion: bool, tokens: int) -> None:
    """The run's server arguments published, as the launch line and the release resolve them (see above);
    a whole model (``chosen.whole``) is compiled because ``--enable-piecewise-cuda-graph`` asks, at the
    probe's one size."""
    launch = {"enable_piecewise_cuda_graph": True, "piecewise_cuda_graph_tokens": [tokens]} if chosen.whole else {}
    fp8 = CHECKPOINTS[chosen.quantization][1] if chosen.quantization in CHECKPOINTS else {}
    sglang_drivers.serve(ctx, backend, {**(ALLREDUCE_FUSION if allreduce_fusion else {}), **resolved(ctx, chosen),
                                        **launch, **fp8})
    if fp8:  # the FP8 GEMM runner, chosen from the flags as the scheduler does at start
        fp8_gemm_config(ctx)
    prefill_graph_config(ctx)
    single_rank_dp_attention()


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


# An FP8 block-scale checkpoint's quantization_config (DeepSeek-V3's, Qwen3's -FP8: e4m3 weights, one float32
# scale per 128x128 block, activations quantized per token group at run time), and the server flags that
# send its linear layers to FlashInfer's SM90 GEMM (fp8_utils: flashinfer_deepgemm)
FP8_BLOCK = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
FP8_SERVER = {"quantization": "fp8", "fp8_gemm_runner_backend": "flashinfer_deepgemm"}
# A block-FP8 checkpoint of 32-wide K blocks and power-of-two (ue8m0) scales, which SGLang 0.5.21 serves as
# MXFP8 on Blackwell with --fp8-gemm-backend flashinfer_cutlass (fp8_utils.can_serve_block_fp8_as_mxfp8)
CHECKPOINTS = {"fp8": (FP8_BLOCK, FP8_SERVER),
               "fp8-mxfp8": ({**FP8_BLOCK, "weight_block_size": [128, 32], "scale_fmt": "ue8m0"},
                             {**FP8_SERVER, "fp8_gemm_runner_backend": "flashinfer_cutlass"})}


def checkpoint_config(ctx: Any, chosen: Model) -> Any:
    """The checkpoint's quantization config: ModelOpt NVFP4 with the model's excluded (BF16) modules, or
    (``chosen.quantization`` fp8) the FP8 block-scale one."""
    if chosen.quantization in CHECKPOINTS:
        return ctx.module("sglang.srt.layers.quantization.fp8").Fp8Config.from_config(CHECKPOINTS[chosen.quantization][0])
    if not chosen.exclude:
        return sglang_drivers.modelopt_fp4_config(ctx)
    hf = {"quantization": {**sglang_drivers.HF_NVFP4["quantization"], "exclude_modules": list(chosen.exclude)}}
    config = ctx.module(sglang_drivers.MODELOPT).ModelOptFp4Config.from_config(hf)
    if getattr(config, "packed_modules_mapping", None) is None:
        config.packed_modules_mapping = {}
    return config


def fp8_gemm_config(ctx: Any) -> None:
    """fp8_utils.initialize_fp8_gemm_config, as the scheduler calls it (with the server arguments up to
    0.5.20, reading the published ones from 0.5.21)."""
    initialize = ctx.module("sglang.srt.layers.quantization.fp8_utils").initialize_fp8_gemm_config
    args = ctx.module(sglang_drivers.SERVER_ARGS).get_global_server_args
    initialize(*([args()] if inspect.signature(initialize).parameters else []))


def resolved(ctx: Any, chosen: Model) -> dict[str, Any]:
    """The server arguments a release resolves from the model's HF config before the model is built, as
    its own resolution computes them: from 0.5.21 the FFN boundary reduction (`boundary_reduction` auto:
    its model_boundary_reduction of the config, which its layer_boundary factories require resolved)."""
    if not ctx.has(BOUNDARY_REDUCTION.replace(".", "/") + ".py"):
        return {}
    return {"boundary_reduction": ctx.module(BOUNDARY_REDUCTION).model_boundary_reduction(chosen.config())}
