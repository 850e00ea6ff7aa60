"""The SGLang regions the region probe traces: how each is built from a release's own classes.

A region builds the objects SGLang would have at that point of a forward pass (a layer made by its
own constructor from its own quantization config, weights allocated by its own create_weights and
prepared by its own process_weights_after_loading, all of it on the CPU with the GPU faked) and
returns the call SGLang makes inside its torch.compile(fullgraph=True) region. A region the
release does not have says so from the files (``Absent``: the file, class or method is not there).
Weights hold ones: tracing reads shapes and dtypes, never values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

LINEAR = "sglang.srt.layers.linear"
MODELOPT = "sglang.srt.layers.quantization.modelopt_quant"
W4A4 = "sglang.srt.layers.quantization.compressed_tensors.schemes.compressed_tensors_w4a4_nvfp4"
FP8 = "sglang.srt.layers.quantization.fp8"
LAYERNORM = "sglang.srt.layers.layernorm"
KVFP4 = "sglang.srt.layers.quantization.kvfp4_tensor"
QWEN2_MOE = "sglang.srt.models.qwen2_moe"
QWEN3_5 = "sglang.srt.models.qwen3_5"
MOE_UTILS = "sglang.srt.layers.moe.utils"
SERVER_ARGS = "sglang.srt.server_args"
RUNTIME_CONTEXT = "sglang.srt.runtime_context"
HF_NVFP4 = {"quantization": {"quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": None,
                             "exclude_modules": []}}


@dataclass(frozen=True)
class Absent:
    why: str


@dataclass(frozen=True)
class Built:
    call: Callable[..., Any]
    args: tuple[Any, ...]
    variant: str = ""
    context: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext


@dataclass(frozen=True)
class Context:
    tree: str
    gpu: tuple[int, ...]
    torch: Any
    scratch: str

    def has(self, relative: str) -> bool:
        return os.path.isfile(os.path.join(self.tree, relative))

    def module(self, name: str) -> Any:
        return importlib.import_module(name)

    def text(self, name: str) -> str:
        """The source of a module (dotted) or a file (a path under the tree); empty if absent."""
        relative = name if name.endswith(".py") else name.replace(".", "/") + ".py"
        path = os.path.join(self.tree, relative)
        return open(path, encoding="utf-8").read() if os.path.isfile(path) else ""

    def missing(self, name: str) -> Absent | None:
        """Absent when the release has no file for the module."""
        relative = name.replace(".", "/") + ".py"
        return None if self.has(relative) else Absent(f"{relative} is not in this release")


@dataclass(frozen=True)
class Region:
    name: str
    build: Callable[[Context], Built | Absent]
    needs: tuple[str, ...] = field(default=())


def serve(ctx: Context, moe_runner_backend: str = "auto", options: Mapping[str, Any] | None = None) -> None:
    """A server's configuration: SGLang's own ServerArgs at its defaults for an NVFP4 checkpoint
    (``--quantization modelopt_fp4 --moe-runner-backend X``), published with SGLang's own
    ``set_global_server_args_for_scheduler`` (from 0.5.21 ``runtime_context.publish`` with the ranks of
    a one-GPU server's rank 0, as its launcher does), then ``initialize_moe_config`` as the scheduler
    does; validation and resolution do not run (they read the model's HF config and the GPUs). `options`:
    more server arguments, each set where the release's ServerArgs has that field."""
    module = ctx.module(SERVER_ARGS)
    args = object.__new__(module.ServerArgs)
    for spec in dataclasses.fields(module.ServerArgs):
        default = spec.default_factory() if spec.default_factory is not dataclasses.MISSING else (
            None if spec.default is dataclasses.MISSING else spec.default)
        object.__setattr__(args, spec.name, default)
    wanted = {"model_path": "nvfp4-region-probe", "quantization": "modelopt_fp4",
              "moe_runner_backend": moe_runner_backend}
    names = {spec.name for spec in dataclasses.fields(module.ServerArgs)}
    wanted.update({name: value for name, value in (options or {}).items() if name in names})
    for name, value in wanted.items():
        object.__setattr__(args, name, value)
    object.__setattr__(args, "_resolution_finished", True)  # resolve_once (0.5.19 on): nothing to resolve
    context = ctx.module(RUNTIME_CONTEXT) if ctx.has(RUNTIME_CONTEXT.replace(".", "/") + ".py") else None
    if context is not None and "ranks" in inspect.signature(getattr(context, "publish", len)).parameters:
        # 0.5.21 on: the launcher publishes this process's place too (rank 0 of one GPU)
        context.publish(args, role="scheduler", ranks=context.SpawnRanks(world_rank=0, gpu_id=0))
    else:
        module.set_global_server_args_for_scheduler(args)
    initialize = ctx.module(MOE_UTILS).initialize_moe_config
    initialize(*([args] if inspect.signature(initialize).parameters else []))
    single_process_parallel(ctx)


def single_process_parallel(ctx: Context) -> None:
    """SGLang's process groups, each of one rank (sglang_machine.SingleRankGroup): its layers ask them,
    from parallel_state and (0.5.21 on) from the runtime context, where building the groups records
    every ``*_group`` field (``get_parallel().override_permanently``, as initialize_model_parallel does)."""
    from nvfp4_overlay.probes.sglang.sglang_machine import SingleRankGroup, single_rank_groups

    single_rank_groups(ctx.module("sglang.srt.distributed.parallel_state"))
    if not ctx.has(RUNTIME_CONTEXT.replace(".", "/") + ".py"):
        return
    context = ctx.module(RUNTIME_CONTEXT)
    fields = getattr(context, "_parallel_fields", None)
    if fields is None or not hasattr(context.get_parallel(), "override_permanently"):
        return
    groups = {name: SingleRankGroup(name) for name in sorted(fields()) if name.endswith("_group")}
    context.get_parallel().override_permanently(**groups)


def ones(layer: Any, torch: Any) -> None:
    """Every parameter of the layer filled with ones (a checkpoint's values do not matter to tracing)."""
    with torch.no_grad():
        for param in layer.parameters():
            if param.dtype.is_floating_point or param.dtype in (torch.uint8, torch.int32):
                param.data = torch.ones_like(param.data) if param.dtype != torch.float8_e4m3fn else param.data


def modelopt_fp4_config(ctx: Context) -> Any:
    config = ctx.module(MODELOPT).ModelOptFp4Config.from_config(HF_NVFP4)
    if getattr(config, "packed_modules_mapping", None) is None:
        config.packed_modules_mapping = {}  # a model sets it; a linear layer of no fused module needs none
    return config


def modelopt_fp4_linear(ctx: Context) -> Built | Absent:
    """ModelOptFp4LinearMethod.apply, through the layer's forward (an NVFP4 checkpoint's linear layer)."""
    torch = ctx.torch
    method = getattr(ctx.module(MODELOPT), "ModelOptFp4LinearMethod", None)
    if method is None:
        return Absent(f"{MODELOPT.replace('.', '/')}.py has no ModelOptFp4LinearMethod")
    layer = ctx.module(LINEAR).ReplicatedLinear(256, 512, bias=False, params_dtype=torch.bfloat16,
                                                quant_config=modelopt_fp4_config(ctx),
                                                prefix="model.layers.0.mlp.down_proj")
    ones(layer, torch)
    layer.quant_method.process_weights_after_loading(layer)
    x = torch.randn(8, 256, dtype=torch.bfloat16)
    return Built(lambda x: layer(x), (x,), variant=type(layer.quant_method).__name__)


def w4a4_nvfp4_scheme(ctx: Context) -> Built | Absent:
    """CompressedTensorsW4A4Fp4.apply_weights, as CompressedTensorsLinearMethod.apply calls it."""
    if absent := ctx.missing(W4A4):
        return absent
    torch = ctx.torch
    scheme = ctx.module(W4A4).CompressedTensorsW4A4Fp4()
    layer = torch.nn.Module()
    scheme.create_weights(layer, output_partition_sizes=[512], input_size_per_partition=256,
                          params_dtype=torch.bfloat16, weight_loader=lambda *a, **k: None,
                          input_size=256, output_size=512)
    ones(layer, torch)
    scheme.process_weights_after_loading(layer)
    x = torch.randn(8, 256, dtype=torch.bfloat16)
    return Built(lambda x: scheme.apply_weights(layer, x, None), (x,))


def _static_fp8_linear(ctx: Context) -> Any:
    """A linear layer of a static per-tensor FP8 checkpoint, the quant_linear RMSNorm fuses with."""
    torch = ctx.torch
    config = ctx.module(FP8).Fp8Config.from_config({"quant_method": "fp8", "activation_scheme": "static"})
    layer = ctx.module(LINEAR).ReplicatedLinear(256, 256, bias=False, params_dtype=torch.bfloat16,
                                                quant_config=config, prefix="model.layers.0.mlp.gate_up_proj")
    ones(layer, torch)
    layer.quant_method.process_weights_after_loading(layer)
    return layer


def _rmsnorm_quant(ctx: Context, residual: bool) -> Built | Absent:
    norm_class = ctx.module(LAYERNORM).RMSNorm
    if "quant_linear" not in inspect.signature(norm_class.forward_cuda).parameters:
        return Absent(f"{LAYERNORM.replace('.', '/')}.py: RMSNorm.forward_cuda takes no quant_linear")
    torch = ctx.torch
    norm = norm_class(256)
    linear = _static_fp8_linear(ctx)
    x = torch.randn(8, 256, dtype=torch.bfloat16)
    if residual:
        return Built(lambda x, r: norm(x, r, quant_linear=linear), (x, torch.randn_like(x)))
    return Built(lambda x: norm(x, quant_linear=linear), (x,))


def rmsnorm_fp8_quant(ctx: Context) -> Built | Absent:
    """RMSNorm.forward_cuda fused with a static FP8 linear's input quantization, no residual."""
    return _rmsnorm_quant(ctx, residual=False)


def fused_add_rmsnorm_fp8_quant(ctx: Context) -> Built | Absent:
    """The same with a residual (the fused add)."""
    return _rmsnorm_quant(ctx, residual=True)


def kv_fp4_quantize(ctx: Context) -> Built | Absent:
    """NVFP4KVQuantizeUtil.quantize: the NVFP4 KV cache's quantize (nvfp4_kv_quantize on SM100/SM120)."""
    if absent := ctx.missing(KVFP4):
        return absent
    util = getattr(ctx.module(KVFP4), "NVFP4KVQuantizeUtil", None)
    if util is None:
        return Absent(f"{KVFP4.replace('.', '/')}.py has no NVFP4KVQuantizeUtil")
    torch = ctx.torch
    x = torch.randn(2, 16, 256, dtype=torch.bfloat16)
    return Built(lambda x, s: util.quantize(x, s), (x, torch.tensor([1.0], dtype=torch.float32)))


def qwen2_moe_silu_fp4(ctx: Context) -> Built | Absent:
    """Qwen2MoeMLP with SGLang's fused SiLU+mul+FP4 quantize (Qwen3.5 dense NVFP4 MLPs)."""
    mlp_class = ctx.module(QWEN2_MOE).Qwen2MoeMLP
    if not hasattr(mlp_class, "_silu_fp4_quant_fused"):
        return Absent(f"{QWEN2_MOE.replace('.', '/')}.py: Qwen2MoeMLP has no _silu_fp4_quant_fused")
    torch = ctx.torch
    serve(ctx)  # from 0.5.22 its linear layers read the published parallel configuration
    parallel = {k: v for k, v in {"tp_rank": 0, "tp_size": 1}.items()
                if k in inspect.signature(mlp_class.__init__).parameters}  # up to 0.5.21
    mlp = mlp_class(256, 256, "silu", quant_config=modelopt_fp4_config(ctx), prefix="model.layers.0.mlp", **parallel)
    for linear in (mlp.gate_up_proj, mlp.down_proj):
        ones(linear, torch)
        linear.quant_method.process_weights_after_loading(linear)
    ctx.module(QWEN3_5)._maybe_enable_silu_fp4_quant_fusion(mlp)  # as Qwen3.5's decoder layer does
    x = torch.randn(8, 256, dtype=torch.bfloat16)
    return Built(lambda x: mlp(x), (x,), variant="fused" if mlp._enable_silu_fp4_quant_fusion else "not fused")


def _contexts(*managers: Callable[[], Any]) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    @contextlib.contextmanager
    def entered() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for manager in managers:
                stack.enter_context(manager())
            yield

    return entered


DENSE_REGIONS: tuple[Region, ...] = (
    Region("modelopt_fp4_linear", modelopt_fp4_linear, (LINEAR, MODELOPT)),
    Region("w4a4_nvfp4_scheme", w4a4_nvfp4_scheme, (W4A4,)),
    Region("qwen2_moe_silu_fp4", qwen2_moe_silu_fp4, (QWEN2_MOE, QWEN3_5, SERVER_ARGS, MOE_UTILS)),
    Region("rmsnorm_fp8_quant", rmsnorm_fp8_quant, (LAYERNORM, FP8)),
    Region("fused_add_rmsnorm_fp8_quant", fused_add_rmsnorm_fp8_quant, (LAYERNORM, FP8)),
    Region("kv_fp4_quantize", kv_fp4_quantize, (KVFP4,)),
)
