"""SGLang 0.5.11's own Qwen3-MoE decoder layer, FP8 block-scale, built from its wheel's files: on an H200,
or on a CPU with an SM90 faked (to trace it).

The server: `--quantization fp8` (a DeepSeek-style checkpoint: float8_e4m3fn weights, one float32
scale per 128x128 block), `--fp8-gemm-backend flashinfer_deepgemm` (the linear layers call FlashInfer's
`fp8_blockscale_gemm_sm90` through SGLang's fp8_utils), `--moe-runner-backend triton` (SGLang's Triton
fused MoE), `--attention-backend torch_native`, one GPU. The layer is the region probe's tiny Qwen3-MoE
(probes/sglang/layer/models.py: hidden 256, 4 heads of 64, 2 KV heads, 8 experts top-2), built
under `torch.device` as SGLang's model loader does, every weight random from a fixed seed (FP8 values
of a unit normal, block scales 1/sqrt(K) * U(0.75, 1.25), norms 1 + 0.1 N(0, 1)), then prepared by its
own process_weights_after_loading. Its attention runs on SGLang's own KV pools (ReqToTokenPool,
MHATokenToKVPool, bfloat16) and TorchNativeAttnBackend; one request of N new tokens, no prefix.
sgl-kernel and SGLang's JIT kernels are torch bodies (sglang_bodies.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.abc
import importlib.util
import inspect
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import driver  # noqa: E402, F401 - src/ on sys.path: the probes, the one copy of each
import sglang_bodies  # noqa: E402

from nvfp4_overlay.probes.sglang import sglang_drivers, sglang_imports, sglang_machine, sglang_regions  # noqa: E402
from nvfp4_overlay.probes.sglang.layer import kernels, models  # noqa: E402 - the layer probe's router fake, tiny config
from nvfp4_overlay.probes.sglang.layer import server as layer_server  # noqa: E402 - its graph settings, DP-attention

MODEL = "sglang.srt.models.qwen3_moe"
FP8_CHECKPOINT = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
SERVER = {"quantization": "fp8", "fp8_gemm_runner_backend": "flashinfer_deepgemm", "moe_runner_backend": "triton",
          "attention_backend": "torch_native"}
# Installed on the H200's image, absent on the CPU where the trace runs: hidden, so that SGLang imports as
# it did there (its model code here takes a plain config object; SGLang 0.5.11 pins an older transformers).
HIDDEN = ("transformers", "huggingface_hub", "torchvision")
NEEDS = (MODEL, "sglang.srt.layers.attention.torch_native_backend", "sglang.srt.mem_cache.memory_pool",
         "sglang.srt.compilation.compile", "sglang.srt.compilation.backend",
         "sglang.srt.layers.quantization.fp8", "sglang.srt.layers.quantization.fp8_utils")


# SGLang 0.5.20's piecewise prefill (tc_piecewise): its context managers and forward contexts, where 0.5.11's
# are sglang.srt.compilation.piecewise_context_manager's
TC_PIECEWISE = "sglang.srt.model_executor.runner_backend_utils.tc_piecewise_cuda_graph.context_manager"
COMPILE_PHASE = "sglang.srt.compilation.compile_phase"
FORWARD_CONTEXT = "sglang.srt.model_executor.forward_context"
PIECEWISE_0511 = "sglang.srt.compilation.piecewise_context_manager"


def tc_piecewise() -> bool:
    """The release compiles its prefill with tc_piecewise (0.5.20), not the piecewise runner (0.5.11)."""
    try:
        return importlib.util.find_spec(TC_PIECEWISE) is not None
    except ModuleNotFoundError:  # a parent package the release lacks (0.5.11)
        return False


@dataclasses.dataclass
class Built:
    layer: Any
    quant: Any
    device: str
    bodies: dict[str, list[str]]
    stubbed: dict[str, str]
    pools: tuple[Any, Any, Any]  # ReqToTokenPool, MHATokenToKVPool, the attention backend

    def batch(self, tokens: int) -> Any:
        """SGLang's ForwardBatch of one EXTEND request of `tokens` new tokens (as the piecewise runner's
        warmup builds it), its KV slots 1..tokens."""
        module = importlib.import_module("sglang.srt.model_executor.forward_batch_info")
        req_pool, kv_pool, backend = self.pools
        dev, n = self.device, tokens
        req_pool.req_to_token[1, :n] = torch.arange(1, n + 1, dtype=torch.int32, device=dev)
        wanted = dict(
            forward_mode=module.ForwardMode.EXTEND, batch_size=1, input_ids=torch.zeros(n, dtype=torch.int64, device=dev),
            req_pool_indices=torch.tensor([1], device=dev), seq_lens=torch.tensor([n], device=dev),
            orig_seq_lens=torch.tensor([n], device=dev), seq_lens_cpu=torch.tensor([n]),
            out_cache_loc=torch.arange(1, n + 1, device=dev), seq_lens_sum=n, extend_num_tokens=n,
            extend_seq_lens=torch.tensor([n], device=dev), extend_prefix_lens=torch.tensor([0], device=dev),
            extend_start_loc=torch.tensor([0], device=dev), extend_prefix_lens_cpu=torch.tensor([0]),
            extend_seq_lens_cpu=torch.tensor([n]), positions=torch.arange(n, device=dev),
            req_to_token_pool=req_pool, token_to_kv_pool=kv_pool, attn_backend=backend, return_logprob=False,
            num_token_non_padded_cpu=n, global_forward_mode=module.ForwardMode.EXTEND)
        names = {f.name for f in dataclasses.fields(module.ForwardBatch)}
        return module.ForwardBatch(**{k: v for k, v in wanted.items() if k in names})

    def forward(self) -> contextlib.AbstractContextManager[Any]:
        """What a forward of the server runs in: from 0.5.20 the per-forward context holding the attention
        backend (its ForwardBatch no longer carries it); 0.5.11 none."""
        if not tc_piecewise():
            return contextlib.nullcontext()
        module = importlib.import_module(FORWARD_CONTEXT)
        return module.forward_context(module.ForwardContext(attn_backend=self.pools[2]))

    def piecewise_forward(self, batch: Any) -> contextlib.ExitStack:
        """The forward of the piecewise graph: the release's forward context of it (the batch, the
        attention and MoE layers its split ops look up), as its runner sets it for one layer."""
        stack = contextlib.ExitStack()
        stack.enter_context(self.forward())
        layer = self.layer
        setter = importlib.import_module(TC_PIECEWISE).set_tc_piecewise_forward_context if tc_piecewise() else \
            importlib.import_module(PIECEWISE_0511).set_forward_context
        stack.enter_context(setter(batch, [layer.self_attn.attn], self.quant, [layer.mlp.experts], []))
        return stack


def piecewise_graph() -> contextlib.AbstractContextManager[Any]:
    """The release's switch of its piecewise CUDA graph (compile, capture, replay)."""
    if tc_piecewise():
        return importlib.import_module(TC_PIECEWISE).enable_tc_piecewise_cuda_graph()
    return importlib.import_module(PIECEWISE_0511).enable_piecewise_cuda_graph()


def compiling() -> contextlib.AbstractContextManager[Any]:
    """The release's compile phase (0.5.20: the runner's warm-up forwards that compile each size)."""
    if tc_piecewise():
        return importlib.import_module(COMPILE_PHASE).enable_torch_compile_warmup()
    return importlib.import_module(PIECEWISE_0511).enable_piecewise_cuda_graph_compile()


def capture_stream(stream: Any) -> contextlib.AbstractContextManager[Any]:
    return importlib.import_module(COMPILE_PHASE if tc_piecewise() else PIECEWISE_0511).set_pcg_capture_stream(stream)


def server(ctx: Any, compiler: str) -> None:
    """SGLang's ServerArgs as the region probe publishes them, with this server's flags, and the FP8
    GEMM runner chosen from them as the scheduler does (initialize_fp8_gemm_config). 0.5.20 publishes
    them in its runtime context (the flags given before it publishes), the prefill on tc_piecewise with
    this compiler (`--cuda-graph-backend-prefill tc_piecewise`)."""
    fp8 = importlib.import_module("sglang.srt.layers.quantization.fp8_utils")
    if tc_piecewise():
        sglang_drivers.serve(ctx, SERVER["moe_runner_backend"], SERVER)
        layer_server.prefill_graph_config(ctx)  # published: the prefill on tc_piecewise, its settings object shared
        args = importlib.import_module("sglang.srt.runtime_context").get_server_args()
        args.cuda_graph_config.prefill.tc_compiler = compiler
    else:
        sglang_drivers.serve(ctx, SERVER["moe_runner_backend"])
        args = importlib.import_module("sglang.srt.server_args").get_global_server_args()
        for name, value in {**SERVER, "piecewise_cuda_graph_compiler": compiler}.items():
            object.__setattr__(args, name, value)
    fp8.initialize_fp8_gemm_config(*([args] if inspect.signature(fp8.initialize_fp8_gemm_config).parameters else []))
    layer_server.single_rank_dp_attention()
    if not torch.distributed.is_initialized():  # SGLang's compile backend asks torch.distributed for its rank
        store = os.path.join(tempfile.mkdtemp(prefix="whole-layer-pg-"), "store")
        torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)


class _Hidden(importlib.abc.MetaPathFinder):
    """Modules served by the probe's stand-in finder (sglang_imports.AbsentModules) though installed."""

    def __init__(self, tops: tuple[str, ...], absent: Any) -> None:
        self.tops, self.absent = tops, absent

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        return self.absent.find_spec(fullname, path, target) if fullname.partition(".")[0] in self.tops else None


def hide(tops: tuple[str, ...]) -> None:
    (absent,) = [f for f in sys.meta_path if isinstance(f, sglang_imports.AbsentModules)]
    for top in tops:
        if top not in sys.modules:
            sglang_imports.STUBBED.setdefault(top, "installed on the GPU machine, hidden as on the CPU (whole_layer_build)")
    sys.meta_path.insert(0, _Hidden(tops, absent))


def random_weights(layer: Any, seed: int) -> None:
    g = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(layer.named_parameters()):
            shape = tuple(param.shape)
            if param.dtype == torch.float8_e4m3fn:
                value = torch.randn(shape, generator=g, dtype=torch.float32).to(torch.float8_e4m3fn)
            elif name.endswith("scale_inv"):
                value = (0.75 + 0.5 * torch.rand(shape, generator=g, dtype=torch.float32)) / (shape[-1] * 128) ** 0.5
            elif "norm" in name:
                value = 1 + 0.1 * torch.randn(shape, generator=g, dtype=torch.float32)
            elif param.dtype.is_floating_point:
                value = torch.randn(shape, generator=g, dtype=torch.float32) / shape[-1] ** 0.5
            else:
                continue
            param.data.copy_(value.to(param.dtype))


def build(sglang_tree: str, flashinfer_tree: str, fake_cc: tuple[int, int] | None = None, seed: int = 0,
          compiler: str = "eager") -> Built:
    """The layer on the GPU (fake_cc None) or on the CPU with that compute capability faked."""
    importlib.import_module("torch._inductor.compile_fx")  # torch's own imports first (SGLang's stand-ins after)
    gpu = sglang_machine.FakeGpu(torch, fake_cc, [os.path.join(sglang_tree, "sglang"),
                                                  os.path.join(flashinfer_tree, "flashinfer")]) if fake_cc else None
    if gpu is not None:
        gpu.setup()
    sys.path[:0] = [flashinfer_tree, sglang_tree]
    import flashinfer  # noqa: F401 - SGLang's import of it needs it first

    builds = sglang_machine.FlashInferBuilds() if gpu is not None else None
    if gpu is not None and builds is not None:
        gpu.refresh()
        builds.stub()
    stand_in = sglang_machine.sgl_kernel_ops(torch)
    sglang_imports.install_imports(sglang_tree, sorted({*sglang_regions.NEEDED, *NEEDS}))
    hide(HIDDEN)
    bodies = sglang_bodies.install(stand_in)
    if gpu is not None:
        gpu.refresh()
    cc = fake_cc or torch.cuda.get_device_capability()
    ctx = sglang_drivers.Context(sglang_tree, cc, torch, os.environ.setdefault(
        "FLASHINFER_WORKSPACE_BASE", tempfile.mkdtemp(prefix="whole-layer-fi-")))
    server(ctx, compiler)
    if gpu is not None:  # no Triton on the CPU: 0.5.20's Triton router as the region probe fakes it (a GPU runs it)
        kernels.jit_topk_fake(ctx)
    device = "cpu" if gpu is not None else "cuda"
    quant = importlib.import_module("sglang.srt.layers.quantization.fp8").Fp8Config.from_config(FP8_CHECKPOINT)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # the model's dtype, as SGLang's loader sets it while it builds
    try:
        with torch.device(device):
            layer = importlib.import_module(MODEL).Qwen3MoeDecoderLayer(models.model("qwen3-moe").config(), 0, quant_config=quant,
                                                                         prefix="model.layers.0")
    finally:
        torch.set_default_dtype(default)
    random_weights(layer, seed)
    for module in layer.modules():
        method = getattr(module, "quant_method", None)
        if method is not None and hasattr(method, "process_weights_after_loading"):
            method.process_weights_after_loading(module)
    pools = _pools(device)
    if gpu is not None and builds is not None:
        gpu.for_tracing()
        builds.restore()
    return Built(layer, quant, device, bodies, dict(sglang_imports.STUBBED), pools)


def _pools(device: str) -> tuple[Any, Any, Any]:
    memory = importlib.import_module("sglang.srt.mem_cache.memory_pool")
    cfg = models.model("qwen3-moe").config()
    req_pool = memory.ReqToTokenPool(size=2, max_context_len=512, device=device, enable_memory_saver=False)
    kv_pool = memory.MHATokenToKVPool(size=512, page_size=1, dtype=torch.bfloat16, head_num=cfg.num_key_value_heads,
                                      head_dim=cfg.head_dim, layer_num=1, device=device, enable_memory_saver=False,
                                      start_layer=0, end_layer=0, enable_alt_stream=False)
    runner = type("ModelRunner", (), {"device": device, "req_to_token_pool": req_pool, "token_to_kv_pool": kv_pool})()
    backend = importlib.import_module("sglang.srt.layers.attention.torch_native_backend").TorchNativeAttnBackend(runner)
    return req_pool, kv_pool, backend
