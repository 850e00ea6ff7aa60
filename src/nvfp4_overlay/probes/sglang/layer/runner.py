"""A whole tiny model compiled by the release's own piecewise runner warm-up, with the attention backend the server picks.

The layer probe (probe.py) compiles one decoder layer and stands in for what its attention
split op reads. Where the graph traces into the attention backend itself (SGLang 0.5.9 and GLM-5: the
DSA indexer runs inside the compiled graph, no split op around it), the backend, its memory pools and
the forward batch must be SGLang's own. For such a model (``Model.whole``) the probe builds:

- the server arguments as the release resolves them for the launch line: SGLang's own
  ``ServerArgs._handle_model_specific_adjustments`` over the model's HF config (the attention backend,
  its KV cache dtype and page size, the NSA prefill/decode kernels, the MoE runner on SM100), then
  ``initialize_moe_config`` again as the scheduler runs it after resolution;
- the whole causal LM (``Model.causal_lm``) of the tiny config's layers, as the loader makes it, its
  weights ones, each linear's ``process_weights_after_loading``, then the model's own ``post_load_weights``;
- a ModelRunner made without ``__init__`` (no GPU, no process groups of its own) holding what the
  runner's set-up would: ``configure_kv_cache_dtype`` (SGLang's), the request-to-token pool and the
  model's KV pool (made with the arguments ModelRunner's memory-pool set-up passes, small sizes;
  ``calculate_mla_kv_cache_dim`` SGLang's), the attention backend by SGLang's own
  ``_get_attention_backend``, the attention and MoE layers collected as ``init_piecewise_cuda_graphs``
  collects them;
- a PiecewiseCudaGraphRunner made without ``__init__`` (its __init__ allocates a CUDA graph pool and
  captures), holding the input buffers its __init__ makes; then its own ``warmup_torch_compile``
  builds the prefill ForwardBatch, runs the backend's ``init_forward_metadata`` eagerly and calls
  the model's forward inside SGLang's forward context, through ``install_torch_compiled``'s trampoline.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

import torch

RUNNER = "sglang.srt.model_executor.model_runner"
PIECEWISE_RUNNER = "sglang.srt.model_executor.piecewise_cuda_graph_runner"
POOLS = "sglang.srt.mem_cache.memory_pool"
MAX_REQUESTS, MAX_TOKENS = 4, 256  # the pools' sizes: requests and KV tokens (a server sizes them from memory)


def made(ctx: Any, chosen: Any, cc: tuple[int, int], checkpoint_config: Any) -> Any:
    """The ModelRunner of the whole model (``chosen.whole``): the server arguments resolved, the model built
    under the checkpoint's quantization config (``checkpoint_config(ctx, chosen)``), its runner."""
    args = resolve(ctx, chosen.config(), cc)
    return model_runner(ctx, build(ctx, chosen, checkpoint_config(ctx, chosen)), chosen.config(), args)


def resolve(ctx: Any, config: Any, cc: tuple[int, int]) -> Any:
    """The published server arguments resolved for this model as the release resolves them before the
    scheduler starts: its model-specific adjustments over the HF config, then the MoE config."""
    server_args = importlib.import_module("sglang.srt.server_args")
    args = server_args.get_global_server_args()
    args.get_model_config = lambda: types.SimpleNamespace(hf_config=config)  # the HF config, read once
    torch.cuda.get_device_capability = lambda device=None: cc  # asked by the adjustments themselves
    args._handle_model_specific_adjustments()
    del args.get_model_config
    initialize = importlib.import_module("sglang.srt.layers.moe.utils").initialize_moe_config
    initialize(args)
    return args


def build(ctx: Any, chosen: Any, quant: Any) -> Any:
    """The causal LM as the loader makes it (the default dtype BF16), weights ones and prepared."""
    from nvfp4_overlay.probes.sglang import sglang_drivers

    where, _, name = chosen.causal_lm.rpartition(".")
    default, stream = torch.get_default_dtype(), torch.cuda.Stream
    torch.set_default_dtype(torch.bfloat16)
    torch.cuda.Stream = AltStream  # the model's alternate stream (no CUDA here)
    try:
        model = getattr(importlib.import_module(where), name)(chosen.config(), quant_config=quant)
    finally:
        torch.set_default_dtype(default)
        torch.cuda.Stream = stream
    sglang_drivers.ones(model, torch)
    for module in model.modules():
        method = getattr(module, "quant_method", None)
        if method is not None and hasattr(method, "process_weights_after_loading"):
            method.process_weights_after_loading(module)
    model.post_load_weights()
    return model


class AltStream:
    """The CUDA stream a model makes for its overlapped work (DeepseekV2Model's alt_stream): held, and used
    only under CUDA graph capture (get_is_capture_mode), which the prefill compile is not."""


def model_runner(ctx: Any, model: Any, config: Any, args: Any) -> Any:
    """A ModelRunner holding what its set-up would, made without __init__ (see the module's doc)."""
    klass = importlib.import_module(RUNNER).ModelRunner
    runner = object.__new__(klass)
    config.get_text_config = lambda: config  # transformers' PretrainedConfig method: a text model is its own
    model_config = types.SimpleNamespace(
        hf_config=config, context_len=config.max_position_embeddings, num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, qk_nope_head_dim=config.qk_nope_head_dim,
        kv_lora_rank=config.kv_lora_rank, qk_rope_head_dim=config.qk_rope_head_dim, attention_arch=None)
    vars(runner).update(model=model, model_config=model_config, server_args=args, device="cpu", gpu_id=0,
                        dtype=torch.bfloat16, page_size=args.page_size, is_draft_worker=False, start_layer=0,
                        end_layer=config.num_hidden_layers, num_effective_layers=config.num_hidden_layers,
                        max_total_num_tokens=MAX_TOKENS, spec_algorithm=None, is_hybrid_swa=False,
                        is_multimodal=False)
    runner.configure_kv_cache_dtype()
    pools = importlib.import_module(POOLS)
    runner.req_to_token_pool = pools.ReqToTokenPool(MAX_REQUESTS, model_config.context_len, "cpu", False)
    index_head_dim = importlib.import_module("sglang.srt.configs.model_config").get_nsa_index_head_dim(config)
    runner.token_to_kv_pool = pools.NSATokenToKVPool(
        MAX_TOKENS, page_size=runner.page_size, dtype=runner.kv_cache_dtype, kv_lora_rank=config.kv_lora_rank,
        qk_rope_head_dim=config.qk_rope_head_dim, layer_num=config.num_hidden_layers, device="cpu",
        kv_cache_dim=runner.calculate_mla_kv_cache_dim(), enable_memory_saver=False, start_layer=0,
        end_layer=config.num_hidden_layers, index_head_dim=index_head_dim)
    runner.attn_backend = runner._get_attention_backend()
    runner.attention_layers, runner.moe_layers, runner.moe_fusions = layers_collected(model)
    return runner


def layers_collected(model: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """The attention and MoE layers, as init_piecewise_cuda_graphs collects them (a DeepSeek layer's
    attn_mqa; each layer's experts and its MoE block, None where dense)."""
    attention, moe, fusions = [], [], []
    for layer in model.model.layers:
        attn = layer.self_attn
        attention.append(attn.attn if hasattr(attn, "attn") else attn.attn_mqa)
        experts = getattr(layer.mlp, "experts", None)
        moe.append(experts)
        fusions.append(layer.mlp if experts is not None else None)
    return attention, moe, fusions


def piecewise_runner(runner: Any, tokens: int) -> Any:
    """A PiecewiseCudaGraphRunner holding the input buffers its __init__ makes (max tokens the one size
    compiled), made without __init__ (which allocates a CUDA graph pool and captures)."""
    klass = importlib.import_module(PIECEWISE_RUNNER).PiecewiseCudaGraphRunner
    pw = object.__new__(klass)
    vars(pw).update(
        model_runner=runner, device="cpu", is_multimodal=False, input_ids=torch.zeros(tokens, dtype=torch.int64),
        positions=torch.zeros(tokens, dtype=torch.int64), out_cache_loc=torch.zeros(tokens, dtype=torch.int64),
        out_cache_loc_swa=None, mamba_track_indices=None, mamba_track_mask=None, mamba_track_seqlens=None,
        attention_layers=runner.attention_layers, moe_layers=runner.moe_layers, moe_fusions=runner.moe_fusions,
        quant_config=getattr(runner.model, "quant_config", None), capture_num_tokens=[tokens],
        max_num_tokens=tokens)
    return pw
