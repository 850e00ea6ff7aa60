"""The target models as their checkpoints' config.json read, for launch lines that name no local config.

Each is the configuration a served checkpoint carries (the architecture, the shapes SGLang's model
config derives from, the quantization): NVIDIA's ModelOpt NVFP4 checkpoints for the MoE models this
project is for, GPT-OSS's MXFP4, DeepSeek-V3's FP8 block-scale. doctor uses the one whose
architecture ``--model-arch`` names (or whose short name it gives); an architecture none of these
has gets a plain decoder configuration of that architecture.
"""

from __future__ import annotations

import copy
from typing import Any

NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": None,
         "exclude_modules": ["lm_head"]}
FP8_BLOCK = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
MXFP4 = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                             "model.embed_tokens", "lm_head"]}

_MLA = {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "num_attention_heads": 128, "num_key_value_heads": 128, "hidden_size": 7168, "intermediate_size": 18432,
        "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "n_group": 8, "topk_group": 4, "first_k_dense_replace": 3, "moe_layer_freq": 1, "num_hidden_layers": 61,
        "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "topk_method": "noaux_tc", "norm_topk_prob": True,
        "vocab_size": 129280, "max_position_embeddings": 163840, "rms_norm_eps": 1e-6, "rope_theta": 10000,
        "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                         "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
        "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16", "hidden_act": "silu", "bos_token_id": 0,
        "eos_token_id": 1, "tie_word_embeddings": False, "attention_bias": False}
_DSA = {"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64}

MODELS: dict[str, dict[str, Any]] = {
    "qwen3-moe": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 4096,
                  "num_hidden_layers": 94, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
                  "intermediate_size": 12288, "moe_intermediate_size": 1536, "num_experts": 128,
                  "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
                  "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000.0,
                  "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16", "hidden_act": "silu", "tie_word_embeddings": False,
                  "eos_token_id": 151645, "quantization_config": NVFP4},
    "deepseek-v3": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", **_MLA,
                    "quantization_config": NVFP4},
    "deepseek-v3-fp8": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", **_MLA,
                        "quantization_config": FP8_BLOCK},
    "kimi-k2": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", **_MLA, "n_routed_experts": 384,
                "n_group": 1, "topk_group": 1, "num_attention_heads": 64, "num_key_value_heads": 64,
                "first_k_dense_replace": 1, "routed_scaling_factor": 2.827, "vocab_size": 163840,
                "quantization_config": NVFP4},
    "deepseek-v3.2": {"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32", **_MLA, **_DSA,
                      "quantization_config": NVFP4},
    "glm-5": {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", **_MLA, **_DSA,
              "hidden_size": 6144, "num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64,
              "q_lora_rank": 2048, "qk_nope_head_dim": 192, "v_head_dim": 256, "n_group": 1, "topk_group": 1,
              "n_routed_experts": 256, "first_k_dense_replace": 3, "vocab_size": 154880,
              "max_position_embeddings": 202752, "rope_scaling": None, "quantization_config": NVFP4},
    "qwen3.5-moe": {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
                    "text_config": {"model_type": "qwen3_5_moe_text", "hidden_size": 4096, "num_hidden_layers": 60,
                                    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 256,
                                    "moe_intermediate_size": 1024, "shared_expert_intermediate_size": 1024,
                                    "num_experts": 512, "num_experts_per_tok": 10, "vocab_size": 248320,
                                    "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
                                    "layer_types": ["linear_attention"] * 3 + ["full_attention"],
                                    "full_attention_interval": 4, "linear_num_value_heads": 64,
                                    "linear_num_key_heads": 16, "linear_key_head_dim": 128,
                                    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
                                    "rope_parameters": {"rope_theta": 10000000, "partial_rotary_factor": 0.25,
                                                        "mrope_section": [11, 11, 10], "mrope_interleaved": True},
                                    "torch_dtype": "bfloat16", "hidden_act": "silu"},
                    "vision_config": {"model_type": "qwen3_5_moe", "depth": 27, "hidden_size": 1152,
                                      "out_hidden_size": 4096, "num_heads": 16, "patch_size": 16,
                                      "spatial_merge_size": 2, "temporal_patch_size": 2},
                    "image_token_id": 248056, "video_token_id": 248057, "vision_start_token_id": 248053,
                    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "quantization_config": NVFP4},
    "gpt-oss": {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
                "num_hidden_layers": 36, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                "intermediate_size": 2880, "num_local_experts": 128, "num_experts_per_tok": 4,
                "experts_per_token": 4, "sliding_window": 128,
                "layer_types": ["sliding_attention", "full_attention"] * 18, "vocab_size": 201088,
                "max_position_embeddings": 131072, "rope_theta": 150000, "rms_norm_eps": 1e-5,
                "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                 "original_max_position_embeddings": 4096, "truncate": False},
                "torch_dtype": "bfloat16", "hidden_act": "silu", "tie_word_embeddings": False,
                "attention_bias": True, "swiglu_limit": 7.0, "eos_token_id": 200002, "quantization_config": MXFP4},
    "minimax-m3": {"architectures": ["MiniMaxM3SparseForConditionalGeneration"], "model_type": "minimax_m3",
                   "hidden_size": 3072, "num_hidden_layers": 62, "num_attention_heads": 48, "num_key_value_heads": 8,
                   "head_dim": 128, "intermediate_size": 1536, "num_local_experts": 256, "num_experts_per_tok": 8,
                   "vocab_size": 200064, "max_position_embeddings": 196608, "rope_theta": 5000000,
                   "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16", "hidden_act": "silu",
                   "tie_word_embeddings": False, "quantization_config": NVFP4},
}

# a plain decoder, for an architecture none of MODELS has: what a Llama-shaped config.json carries
PLAIN = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "head_dim": 128, "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
         "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16", "hidden_act": "silu",
         "tie_word_embeddings": False}


def architecture(model: str) -> str:
    return str(MODELS[model]["architectures"][0])


def config_for(name: str) -> dict[str, Any]:
    """The config.json of a model by its short name (MODELS) or architecture (the first model of it)."""
    if name in MODELS:
        return copy.deepcopy(MODELS[name])
    for config in MODELS.values():
        if config["architectures"][0] == name:
            return copy.deepcopy(config)
    return {"architectures": [name], "model_type": "", **copy.deepcopy(PLAIN)}
