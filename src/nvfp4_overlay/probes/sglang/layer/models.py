"""The target architectures the whole-layer probe builds tiny from a release's own model code.

Each ``Model`` names the release's model module, its decoder layer class, the HF architecture the
tiny configuration stands for (``architectures[0]``), the tiny configuration itself (as its
config.json would read: the routing of the real model kept whole, the widths shrunk), the layer
built (``layer_id``), the checkpoint's modules left BF16 (``exclude``), the model class whose shared-
expert fusion decision the server makes before the layers exist (``causal_lm``), and what its
forward needs beyond the probe's common fakes (by name, from fakes.py: sgl-kernel
functions, SGLang's own Triton kernels, absent packages as stand-ins), and the attention backend the
runner stamps (0.5.20 on).

- ``qwen3-moe``: Qwen3-MoE (``Qwen3MoeDecoderLayer``), every layer sparse, 8 experts top-2.
- ``deepseek-v3``: DeepSeek-V3/R1 (``DeepseekV2DecoderLayer`` of a DeepseekV3 config), layer 1 (MoE;
  ``first_k_dense_replace`` 1): MLA with q/kv LoRA ranks, 256 routed experts in 8 groups (top-4
  groups, top-8, noaux_tc sigmoid, correction bias), one shared expert, which the server fuses into
  the routed ones (256 and one shared: ``determine_num_fused_shared_experts``). Attention BF16 as
  NVIDIA's NVFP4 DeepSeek checkpoints leave it (post_load_weights splits kv_b_proj's BF16 weight).
- ``deepseek-v3-dense``: its layer 0 (``first_k_dense_replace``): the dense NVFP4 MLP.
- ``kimi-k2``: Kimi-K2 (the same class and architecture, 384 routed experts in one group): the
  server keeps its shared expert unfused (an NVFP4 MLP) and routes with sgl-kernel's
  ``kimi_k2_moe_fused_gate``.
- ``glm4-moe``: GLM-4.5/4.6/4.7 (``Glm4MoeDecoderLayer``), layer 1: GQA with QK norm and partial
  rope, 160 routed experts in one group, top-8, one shared expert (fused).
- ``qwen3.5-moe``: Qwen3.5 MoE's full-attention layer (``Qwen3_5AttentionDecoderLayer``, gated
  attention output, Gemma RMSNorm, interleaved mrope), 8 experts top-2 with a gated shared expert.
- ``qwen3.5-moe-linear``: its linear-attention layer (``Qwen3_5LinearDecoderLayer``, layer 0: the
  GatedDeltaNet, left unquantized under modelopt_fp4 by SGLang itself, its core SGLang's split op
  ``unified_linear_attention_with_output``), the same MoE.
- ``glm-5``: GLM-5 (``GlmMoeDsaForCausalLM``: the DeepseekV2 layer with the DSA indexer), layer 1:
  256 routed experts in one group, top-8, one shared (fused). ``glm-5+torchada`` is the same with an
  importable ``torchada`` (0.5.20's is_musa imports it inside the trace; see ``torchada``).

What each release's code asks beyond the probe's common fakes (one construction for every release
0.5.8 on; the fakes are set where the release keeps the kernel, found in its tree):

- 0.5.8-0.5.10.post1: DeepSeek-V3's grouped router is sgl-kernel's ``moe_fused_gate`` (a fake);
  from 0.5.11 SGLang's own op ``fused_topk_deepseek``.
- Qwen3.5 (from 0.5.9): Gemma RMSNorm (sgl-kernel fakes); around the GatedDeltaNet its Triton split
  (none in 0.5.9, ``jit_kernel.triton`` 0.5.10-0.5.16, ``kernels.ops.attention`` on) and FLA's gated
  RMSNorm (``srt.layers.attention.fla`` to 0.5.15, ``kernels.ops.attention.fla`` on); from 0.5.14 the
  Triton sigmoid gates (``fused_sigmoid_mul``, ``fused_gate_sigmoid_mul_add``), from 0.5.15 the
  fused QK norm + rope + gate (0.5.19 on with mrope's axis map); the configuration's
  ``output_gate_type`` (read from 0.5.17 on) at its config class's default.
- 0.5.17 on, the DeepseekV2 layer: the CP decode-attention context, made as the decode graphs make
  it before the prefill compile (``after_loading``).
- GLM-5, 0.5.13-0.5.14: the DSA indexer's Triton ``act_quant``, traced before their split op
  ``k_cache_and_topk_result``, an opaque fake computing the per-block FP8 (``dsa_act_quant``).
- 0.5.21 on: the layer stack's residual stream started inside the compiled call, and the batch's
  own ``moe_num_token_non_padded`` method bound to the probe's batch (``forward``).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import torch

Tensor: TypeAlias = torch.Tensor  # torch is skipped by mypy: Any there


DECODE_ATTN_TP = "sglang.srt.layers.cp.cp_decode_attn_tp"  # 0.5.17 on
BATCH_METHODS = ("moe_num_token_non_padded",)  # ForwardBatch's own, which the MoE layers call (0.5.21 on)


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # its package absent in this release
        return False


@dataclass(frozen=True)
class Model:
    name: str  # the probe's model argument
    module: str  # the release's model module
    layer: str  # its decoder layer class
    architecture: str  # the HF architecture (config.json's architectures[0]) the tiny config stands for
    config: Callable[[], Any]
    layer_id: int = 0
    fakes: tuple[str, ...] = ()  # fakes.py: sgl-kernel functions beyond the common ones
    # (EXTRA_FAKES), or SGLang's own kernels that need what is absent here (SGLANG_FAKES: Triton)
    exclude: tuple[str, ...] = ()  # the checkpoint's hf_quant_config exclude_modules (left BF16)
    stand_ins: tuple[str, ...] = ()  # absent packages as permissive stand-ins (fakes.STAND_INS)
    attention_backend: str | None = None  # the runner's resolved one where the model's forward reads it (0.5.20 on)
    causal_lm: str = ""  # the model class whose determine_num_fused_shared_experts the server runs
    quantization: str = "modelopt_fp4"  # the checkpoint's: ModelOpt NVFP4, or fp8 (block-scale: server.CHECKPOINTS)
    whole: bool = False  # the whole causal LM through the runner's warm-up (runner.py), not one layer

    def build(self, quant: Any) -> Any:
        """The layer, made under the checkpoint's dtype as default (BF16), as SGLang's model loader
        makes it, after the model's own shared-expert fusion decision (``resolve``)."""
        module = importlib.import_module(self.module)
        config = self.config()
        self.resolve(module, config, quant)
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            return getattr(module, self.layer)(config, self.layer_id, quant_config=quant,
                                               prefix=f"model.layers.{self.layer_id}")
        finally:
            torch.set_default_dtype(default)

    def resolve(self, module: Any, config: Any, quant: Any) -> None:
        """The server's shared-expert fusion decision for this checkpoint, made as the release makes it
        before the layers exist: from 0.5.20 the loader's install_shared_experts_fusion_decision over
        the model class; before, the class's determine_num_fused_shared_experts (DeepSeek's takes the
        architecture its subclasses pass), which sets disable_shared_experts_fusion where the checkpoint
        cannot fuse (DeepSeek: unless 256 routed experts and one shared; Kimi-K2's 384 do not)."""
        if not self.causal_lm:
            return
        where, _, name = self.causal_lm.rpartition(".")
        model_class = getattr(importlib.import_module(where), name)
        install = getattr(importlib.import_module("sglang.srt.layers.moe.utils"),
                          "install_shared_experts_fusion_decision", None)
        if install is not None:
            install(model_class, config, quant)
            return
        owner = types.SimpleNamespace(config=config, quant_config=quant)
        for klass in model_class.__mro__:  # GlmMoeDsa's own passes its name up with a zero-argument super()
            determine = vars(klass).get("determine_num_fused_shared_experts")
            if determine is not None and "architecture" in inspect.signature(determine).parameters:
                determine(owner, self.architecture)
                return
        model_class.determine_num_fused_shared_experts(owner)

    def after_loading(self, layer: Any, quant: Any) -> None:
        """What the model's load_weights does after every layer's own preparation: DeepSeek's
        post_load_weights splits kv_b_proj into the absorbed MLA weights w_kc and w_vc. Then what the
        server's decode CUDA graphs (captured eagerly, before the piecewise prefill graphs) have set up:
        from 0.5.17 the layer's maybe_use_decode_attn_tp makes the CP decode-attention context, a
        singleton whose constructor logs (which dynamo cannot trace)."""
        if not self.module.endswith("deepseek_v2"):
            return
        if _has_module(DECODE_ATTN_TP):
            importlib.import_module(DECODE_ATTN_TP).get_cp_decode_attn_tp_ctx()
        loader = importlib.import_module("sglang.srt.models.deepseek_common.deepseek_weight_loader")
        model = types.SimpleNamespace(layers={self.layer_id: layer}, start_layer=self.layer_id,
                                      end_layer=self.layer_id + 1)
        owner = types.SimpleNamespace(model=model, config=layer.config, quant_config=quant)
        loader.DeepseekV2WeightLoaderMixin.post_load_weights(owner)

    @property
    def imports(self) -> tuple[str, ...]:
        """The release's modules the build runs (imported for real, never stand-ins)."""
        return (self.module, self.causal_lm.rpartition(".")[0]) if self.causal_lm else (self.module,)

    def moe_layers(self, layer: Any) -> list[Any]:
        """The FusedMoE layers the piecewise forward context lists (the MoE split op's); none in a dense layer."""
        experts = getattr(layer.mlp, "experts", None)
        return [experts] if experts is not None else []

    def attention(self, layer: Any) -> list[Any]:
        """The RadixAttention layers the piecewise forward context lists (the attention split op's)."""
        attn = getattr(layer, "self_attn", None) or getattr(getattr(layer, "linear_attn", None), "attn", None) or layer
        # Qwen3.5's attention layer holds its RadixAttention itself, its linear one a RadixLinearAttention
        found = [getattr(attn, name) for name in ("attn", "attn_mqa", "attn_mha") if hasattr(attn, name)]
        return found or [attn]

    def forward(self, layer: Any, batch: Any) -> Callable[[Tensor, Tensor], Any]:
        """The call the model's own forward makes for one layer (the first: no residual yet), as a
        function of positions and hidden states (what is imported, imported before dynamo traces).
        From 0.5.21 the model's forward starts the layer stack's residual stream first (its
        layer_boundary ``residual_batch.start``), inside the compiled forward as the model does; and
        the DeepseekV2 and GLM-4.5 MoE ask the batch's own ``moe_num_token_non_padded`` (the
        release's ForwardBatch method, bound to the probe's batch)."""
        batch_class = importlib.import_module("sglang.srt.model_executor.forward_batch_info").ForwardBatch
        for name in BATCH_METHODS:
            if hasattr(batch_class, name):
                setattr(batch, name, types.MethodType(getattr(batch_class, name), batch))
        call = self._layer_call(layer, batch)
        try:
            stack = importlib.import_module("sglang.srt.layers.layer_boundary.residual.batch")
        except ModuleNotFoundError:  # before 0.5.21: no layer stack to start
            return call

        def started(positions: Tensor, hidden: Tensor) -> Any:
            stack.start(batch)
            return call(positions, hidden)

        return started

    def _layer_call(self, layer: Any, batch: Any) -> Callable[[Tensor, Tensor], Any]:
        if self.module.endswith("deepseek_v2"):  # DeepseekV2Model.forward: a BumpAllocator per forward
            allocator = importlib.import_module("sglang.srt.utils").BumpAllocator
            # the layer's residual argument, gone from 0.5.21 (the layer stack carries the residual)
            residual = (None,) if "residual" in inspect.signature(type(layer).forward).parameters else ()

            def deepseek(positions: Tensor, hidden: Tensor) -> Any:
                zero = allocator(buffer_size=2, dtype=torch.float32, device=hidden.device)
                return layer(positions, hidden, batch, *residual, zero)

            return deepseek
        if self.module.endswith("qwen3_5"):  # Qwen3_5ForCausalLM.forward passes keywords
            return lambda positions, hidden: layer(positions=positions, hidden_states=hidden, residual=None,
                                                   forward_batch=batch)
        return lambda positions, hidden: layer(positions, hidden, batch, None)


def _qwen3_moe() -> Any:
    return types.SimpleNamespace(
        hidden_size=256, intermediate_size=256, moe_intermediate_size=256, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
        rms_norm_eps=1e-6, rope_theta=1e6, max_position_embeddings=4096, hidden_act="silu", decoder_sparse_step=1,
        mlp_only_layers=[], num_hidden_layers=1, vocab_size=1024, attention_bias=False, rope_scaling=None,
        architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe")


def _deepseek_v3() -> Any:
    """DeepSeek-V3's routing whole (256 routed experts in 8 groups, top-4 groups, top-8, one shared,
    noaux_tc sigmoid with correction bias), its widths shrunk: hidden 256, MLA of 4 heads (q_lora 128,
    kv_lora 128, rope 32, nope 64, v 64), yarn rope as V3's."""
    return types.SimpleNamespace(
        architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", hidden_size=256,
        intermediate_size=512, moe_intermediate_size=256, num_attention_heads=4, num_key_value_heads=4,
        q_lora_rank=128, kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64,
        n_routed_experts=256, n_shared_experts=1, num_experts_per_tok=8, n_group=8, topk_group=4,
        topk_method="noaux_tc", scoring_func="sigmoid", norm_topk_prob=True, routed_scaling_factor=2.5,
        first_k_dense_replace=1, moe_layer_freq=1, num_hidden_layers=2, hidden_act="silu", rms_norm_eps=1e-6,
        rope_theta=10000.0, max_position_embeddings=4096, vocab_size=1024, attention_bias=False, ep_size=1,
        rope_scaling={"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                      "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
        tie_word_embeddings=False, num_nextn_predict_layers=0)


def _deepseek_v3_fp8() -> Any:
    """DeepSeek-V3's own FP8 checkpoint, every linear block-quantized (128x128), MLA included: the widths
    shrunk so that each GEMM's N is a multiple of 64 and its K of 128, as FlashInfer's SM90 block-scale GEMM
    asks (rope 64: the fused q/kv-a projection 128 + 128 + 64), and as DeepSeek-V3's are."""
    config = _deepseek_v3()
    config.qk_rope_head_dim = 64
    return config


def _kimi_k2() -> Any:
    """Kimi-K2: DeepSeek-V3's architecture with 384 routed experts in one group, top-8, scale 2.827."""
    config = _deepseek_v3()
    config.n_routed_experts, config.n_group, config.topk_group, config.routed_scaling_factor = 384, 1, 1, 2.827
    return config


def _glm4_moe() -> Any:
    """GLM-4.5's routing whole (160 routed experts, one group, top-8, one shared, noaux_tc), its widths
    shrunk: GQA 4 heads of 64 over 2 KV heads, QK norm, half the head rotated."""
    return types.SimpleNamespace(
        architectures=["Glm4MoeForCausalLM"], model_type="glm4_moe", hidden_size=256, intermediate_size=512,
        moe_intermediate_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        partial_rotary_factor=0.5, use_qk_norm=True, attention_bias=True, n_routed_experts=160,
        n_shared_experts=1, num_experts_per_tok=8, n_group=1, topk_group=1, topk_method="noaux_tc",
        norm_topk_prob=True, routed_scaling_factor=2.5, first_k_dense_replace=1, num_hidden_layers=2,
        hidden_act="silu", rms_norm_eps=1e-5, rope_theta=1e6, rope_scaling=None, max_position_embeddings=4096,
        vocab_size=1024, num_nextn_predict_layers=0, tie_word_embeddings=False)


def _qwen3_5_moe() -> Any:
    """Qwen3.5 MoE's text config, shrunk, its full-attention layer (layer 3 of 4: every 4th is full)."""
    return types.SimpleNamespace(
        architectures=["Qwen3_5MoeForCausalLM"], model_type="qwen3_5_moe_text", hidden_size=256,
        intermediate_size=512, moe_intermediate_size=256, shared_expert_intermediate_size=256,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], num_hidden_layers=4,
        full_attention_interval=4, layer_types=["linear_attention"] * 3 + ["full_attention"],
        hidden_act="silu", rms_norm_eps=1e-6, rope_theta=1e7, partial_rotary_factor=0.25,
        rope_scaling={"rope_type": "default", "mrope_section": [3, 3, 2], "mrope_interleaved": True},
        max_position_embeddings=4096, vocab_size=1024, attention_bias=False, attn_output_gate=True,
        linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=64, linear_value_head_dim=64,
        linear_conv_kernel_dim=4, tie_word_embeddings=False, torch_dtype=torch.bfloat16,
        output_gate_type=None)  # Qwen3NextConfig's default (read from 0.5.17 on)


def _glm5() -> Any:
    """GLM-5 (GlmMoeDsa): DeepSeek-V3's layer with the DSA indexer (index heads, head dim, top-k), 256
    routed experts in one group, top-8, one shared."""
    config = _deepseek_v3()
    config.architectures, config.model_type = ["GlmMoeDsaForCausalLM"], "glm_moe_dsa"
    config.n_group, config.topk_group = 1, 1
    config.index_n_heads, config.index_head_dim, config.index_topk = 4, 128, 64
    config.rope_scaling = None
    config.pad_token_id = None  # an HF config's default (the whole model's embedding reads it)
    return config


# NVIDIA's NVFP4 DeepSeek checkpoints quantize the MoE and MLP linears and leave attention BF16 (the
# absorbed MLA weights are split from kv_b_proj's BF16 weight: post_load_weights has no NVFP4 path).
MLA_BF16 = ("model.layers.*.self_attn*",)
DEEPSEEK = "sglang.srt.models.deepseek_v2"
MODELS: dict[str, Model] = {m.name: m for m in (
    Model("qwen3-moe", "sglang.srt.models.qwen3_moe", "Qwen3MoeDecoderLayer", "Qwen3MoeForCausalLM", _qwen3_moe),
    Model("deepseek-v3", DEEPSEEK, "DeepseekV2DecoderLayer", "DeepseekV3ForCausalLM", _deepseek_v3, layer_id=1,
          exclude=MLA_BF16, causal_lm=DEEPSEEK + ".DeepseekV2ForCausalLM", fakes=("moe_fused_gate",)),
    Model("deepseek-v3-dense", DEEPSEEK, "DeepseekV2DecoderLayer", "DeepseekV3ForCausalLM", _deepseek_v3,
          layer_id=0, exclude=MLA_BF16, causal_lm=DEEPSEEK + ".DeepseekV2ForCausalLM"),
    Model("kimi-k2", DEEPSEEK, "DeepseekV2DecoderLayer", "DeepseekV3ForCausalLM", _kimi_k2, layer_id=1,
          exclude=MLA_BF16, causal_lm=DEEPSEEK + ".DeepseekV2ForCausalLM", fakes=("kimi_k2_moe_fused_gate",)),
    Model("glm4-moe", "sglang.srt.models.glm4_moe", "Glm4MoeDecoderLayer", "Glm4MoeForCausalLM", _glm4_moe,
          layer_id=1, causal_lm="sglang.srt.models.glm4_moe.Glm4MoeForCausalLM"),
    Model("qwen3.5-moe", "sglang.srt.models.qwen3_5", "Qwen3_5AttentionDecoderLayer", "Qwen3_5MoeForCausalLM",
          _qwen3_5_moe, layer_id=3, fakes=("gemma_rmsnorm", "qk_norm_rope_gate", "sigmoid_mul")),
    Model("qwen3.5-moe-linear", "sglang.srt.models.qwen3_5", "Qwen3_5LinearDecoderLayer", "Qwen3_5MoeForCausalLM",
          _qwen3_5_moe, layer_id=0, fakes=("gemma_rmsnorm", "gdn_triton", "sigmoid_mul")),
    Model("glm-5", DEEPSEEK, "DeepseekV2DecoderLayer", "GlmMoeDsaForCausalLM", _glm5, layer_id=1,
          exclude=MLA_BF16, causal_lm="sglang.srt.models.glm4_moe.GlmMoeDsaForCausalLM", stand_ins=("deep_gemm",),
          attention_backend="dsa", fakes=("dsa_act_quant",)),
    Model("qwen3-moe-fp8", "sglang.srt.models.qwen3_moe", "Qwen3MoeDecoderLayer", "Qwen3MoeForCausalLM", _qwen3_moe,
          quantization="fp8"),
    Model("qwen3-moe-mxfp8", "sglang.srt.models.qwen3_moe", "Qwen3MoeDecoderLayer", "Qwen3MoeForCausalLM", _qwen3_moe,
          quantization="fp8-mxfp8"),
    Model("deepseek-v3-fp8", DEEPSEEK, "DeepseekV2DecoderLayer", "DeepseekV3ForCausalLM", _deepseek_v3_fp8, layer_id=1,
          causal_lm=DEEPSEEK + ".DeepseekV2ForCausalLM", fakes=("moe_fused_gate",), quantization="fp8"),
    Model("glm-5-model", DEEPSEEK, "DeepseekV2DecoderLayer", "GlmMoeDsaForCausalLM", _glm5, exclude=MLA_BF16,
          causal_lm="sglang.srt.models.glm4_moe.GlmMoeDsaForCausalLM", stand_ins=("deep_gemm",),
          attention_backend="dsa", fakes=("dsa_act_quant", "flash_mla_metadata"), whole=True),
    Model("glm-5+torchada", DEEPSEEK, "DeepseekV2DecoderLayer", "GlmMoeDsaForCausalLM", _glm5, layer_id=1,
          exclude=MLA_BF16, causal_lm="sglang.srt.models.glm4_moe.GlmMoeDsaForCausalLM",
          stand_ins=("deep_gemm", "torchada"), attention_backend="dsa"),
)}
DEFAULT = "qwen3-moe"


def model(name: str) -> Model:
    if name not in MODELS:
        msg = f"unknown model {name!r}; the probe builds {', '.join(MODELS)}"
        raise SystemExit(msg)
    return MODELS[name]
