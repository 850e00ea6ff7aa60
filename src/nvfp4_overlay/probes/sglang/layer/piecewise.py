"""What SGLang's piecewise runner sets around a layer's compile, as the layer probe makes it on a CPU.

The runner's context managers and the forward context its attention and MoE ops read, the EXTEND batch
of its warmup_compile, a torch.distributed of one rank, the faked torch.cuda answers inlined by dynamo,
what the decode graphs and the eager warm-up leave behind before the prefill compile, and whether the
communicator takes its fused all-reduce + RMSNorm branch.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import os
import types
from typing import Any

import torch

from nvfp4_overlay.probes.sglang import sglang_moe
from nvfp4_overlay.probes.sglang.layer.models import Model

# Where each release keeps its piecewise graph's forward context: 0.5.8-0.5.14, then tc_piecewise's.
FORWARD_CONTEXTS = (
    ("sglang.srt.model_executor.runner_backend_utils.tc_piecewise_cuda_graph.context_manager",
     "set_tc_piecewise_forward_context"),
    ("sglang.srt.compilation.piecewise_context_manager", "set_forward_context"),
)
# Where the communicator's gate of the fused all-reduce + RMSNorm lives: 0.5.8-0.5.20, then 0.5.21's
FUSION_GATES = ("sglang.srt.layers.communicator", "sglang.srt.layers.layer_boundary.residual.add_norm")
# Where SGLang's JIT QK-norm kernel and its cache_once check live: 0.5.8-0.5.16, then 0.5.17's
QK_NORM_CHECKS = ("sglang.jit_kernel.norm", "sglang.kernels.ops.layernorm.norm")


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
            given: tuple[Any, ...] = (batch, chosen.attention(layer), quant, chosen.moe_layers(layer), [])  # 0.5.8-0.5.9: no MoE fusions
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


def fusion_applies(ctx: Any, tokens: int) -> bool | None:
    """Whether the layer's communicator takes its fused all-reduce + RMSNorm branch for a batch of `tokens`
    (the release's own gate, SM90/SM100 only); None where the release has no such gate."""
    for name in FUSION_GATES:
        if ctx.has(name.replace(".", "/") + ".py"):
            gate = getattr(importlib.import_module(name), "apply_flashinfer_allreduce_fusion", None)
            if gate is not None:
                return bool(gate(tokens))
    return None
