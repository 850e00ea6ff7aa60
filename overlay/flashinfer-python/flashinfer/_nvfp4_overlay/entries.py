"""nvfp4-overlay: what opaque.py needs about each routed entry point that its signature cannot say.

One Entry per public function name, for every release that has it. The parameters, their order
and their schema types come from the release's own signature. The op's fake is upstream's own
function run with the JIT layer stood in for (faking.py), unless the entry names a hand-written one;
what upstream returns is then read off its result (forms.py). Only these stay declarative:

- fake: a function of fakes.py that returns what upstream's wrapper returns, for a wrapper that
  cannot run as a fake (it reads a value from a tensor on the host, reads what a kernel returns,
  keeps an allocation in a cache of its own, or compiles with a library outside FlashInfer's
  loader: each entry says which); it names the parameters it reads, and only those;
- returns: what upstream returns (results.py's Result), for a hand-written fake and for an op that
  writes into a parameter (its form is fixed): "(Tensor, Tensor)", "[output]" (a list holding the
  parameter ``output`` when the caller passed one, else a fresh tensor), "out", "()" (nothing);
  variants: parameter -> value -> what a hand-written fake's upstream returns instead when the call
  passes that value (nvfp4_quantize's per_token_activation=True adds the per-token scales);
- inert: the parameters a hand-written fake does not read because they do not shape the outputs (a
  scale, PDL, a tactic hint); every other parameter of the release's signature must be read by the
  fake or routed on, or the entry point is not routed;
- since: parameters a hand-written fake reads that older releases lack, with the release that added them;
- mutates: parameters upstream writes into (``out``, a residual): the op declares them mutated and
  returns a fixed form (results.fixed_form). One upstream hands back that a call leaves None: a
  hand-written fake allocates it in the traced path; a derived one's call goes to a second op that
  leaves it to upstream (ops.py). A mutating entry point has no variants;
- routes: parameter -> the values that take the op while tracing (the others stay upstream's
  path, e.g. the experimental cute-dsl backend, whose outputs no fake here is proven for);
- codecs: parameters whose values no schema type carries, with upstream's own encoding (codecs.py);
- types: schema types of the parameters upstream leaves unannotated (an annotation wins);
- hidden: keywords a decorator of upstream's takes beyond the signature, with their schema type
  and default (``backend_requirement`` pops ``skip_check``); in the schema only while the
  decorator still takes them;
- when: a condition on the bound values, for a path a parameter value alone cannot name (the
  host branch mxfp8_quantize takes for a CPU tensor).
"""

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Mapping, Optional, Tuple

from . import fakes
from .codecs import (ACTIVATION_TYPE, NONE_ONLY, NVFP4_4OVER6, SF_LAYOUT, SF_LAYOUT_OR_NONE, TENSOR_LIST_OR_NONE,
                     TENSOR_OR_FLOAT, TENSOR_OR_PAIR, Codec)
from .results import Result


@dataclass(frozen=True)
class Entry:
    returns: Optional[str] = None
    fake: Optional[Callable[..., Any]] = None
    inert: FrozenSet[str] = frozenset()
    since: Mapping[str, str] = field(default_factory=dict)
    mutates: FrozenSet[str] = frozenset()
    routes: Mapping[str, FrozenSet[Any]] = field(default_factory=dict)
    codecs: Mapping[str, Codec] = field(default_factory=dict)
    types: Mapping[str, str] = field(default_factory=dict)
    hidden: Mapping[str, Tuple[str, Any]] = field(default_factory=dict)
    when: Optional[Callable[[Mapping[str, Any]], bool]] = None
    variants: Mapping[str, Mapping[Any, str]] = field(default_factory=dict)
    # upstream's decorator sets attributes on its wrapper at call time that the function's body
    # reads back through its module global (backend_requirement's suitable_auto_backends, mm_fp4)
    live_attributes: bool = False

    @property
    def result(self) -> Result:
        return Result(self.returns)

    def result_for(self, values: Mapping[str, Any]) -> Result:
        """What upstream returns for a call with these values (a variant's, else ``returns``)."""
        for name, by_value in self.variants.items():
            if name in values and values[name] in by_value:
                return Result(by_value[values[name]])
        return self.result


# The cuda kernels; 0.7.4's "auto" is "cuda" unless batch_invariant. Not routed: "cute-dsl" and
# "cake" (other kernels, other allocations) and batch_invariant=True.
_CUDA = {"backend": frozenset({"cuda", "auto"}), "batch_invariant": frozenset({False})}
_TENSORS = {"a": "Tensor", "mask": "Tensor"}
_4OVER6 = {"nvfp4_4over6": "0.7.1"}
# mm_fp4: every backend but the experimental "cake" (0.7.2 on; its own allocation path).
_MM_FP4_BACKENDS = frozenset({"cudnn", "trtllm", "cutlass", "cute-dsl", "cutedsl_low_latency", "b12x", "auto"})
# trtllm-gen MoE: what the fakes never read (scales, weights, routing, tactics and hints: the
# outputs are (tokens, hidden) bf16 whatever they are).
_TRTLLM_MOE_INERT = frozenset({
    "routing_logits", "topk_ids", "routing_bias", "hidden_states_scale", "gemm1_weights",
    "gemm1_weights_scale", "gemm1_bias", "gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit",
    "gemm2_weights", "gemm2_weights_scale", "gemm2_bias", "output1_scale_scalar",
    "output1_scale_gate_scalar", "output2_scale_scalar", "num_experts", "top_k", "n_group",
    "topk_group", "intermediate_size", "local_expert_offset", "local_num_experts",
    "routed_scaling_factor", "routing_method_type", "enable_pdl", "gated_act_type", "activation_type",
    "per_token_scale", "tune_max_num_tokens", "norm_topk_prob", "num_fused_shared_experts",
    "valid_intermediate_size", "hidden_states_scale_layout", "gemm1_lora_delta", "nvfp4_4over6",
})

def _cute_dsl_tma_rows(values: Mapping[str, Any]) -> bool:
    """nvfp4_quantize's CuTe-DSL 8x4 path of 1024 rows or more before 0.7.4 (not per token): the TMA
    kernel may take it (FLASHINFER_NVFP4_QUANTIZE_USE_TMA, SM107), whose scale rows pad to 16."""
    if values.get("backend") != "cute-dsl" or values.get("per_token_activation") or fakes.RELEASE_074:
        return False
    a, layout = values["a"], values["sfLayout"]
    return getattr(layout, "name", None) == "layout_8x4" and a.numel() // a.shape[-1] >= 1024


# Entries without a fake get upstream's own wrapper as theirs (faking.py). The others say why not.
ENTRIES: Dict[str, Entry] = {
    "fp4_quantize": Entry(
        routes=_CUDA,
        codecs={"nvfp4_4over6": NVFP4_4OVER6},
    ),
    # The cuda kernel and, from 0.6.8, the CuTe-DSL one (0.6.11 on also per token, 0.6.13 on per
    # token with CuTe DSL): (fp4, scales), and per token a third tensor, the per-token scales. The
    # cuda per-token path reads the scale on the host (a_global_sf.item()): inside the op that runs
    # when the graph runs, not while dynamo traces; a host float scale travels as a tensor
    # (TENSOR_OR_FLOAT). Hand-written: the CuTe-DSL paths compile with CuTe DSL's own cute.compile
    # up to 0.7.2 (outside FlashInfer's loader), and the per-token path reads a_global_sf on the
    # host. Upstream's path: do_shuffle=True (weight preparation: a row gather and
    # block_scale_interleave), 0.7.1's backend="cake" and batch_invariant=True (other programs), and the
    # CuTe-DSL 8x4 layout of 1024 rows or more before 0.7.4 (its TMA kernel, chosen by an
    # environment variable, pads the rows to 16 there).
    "nvfp4_quantize": Entry(
        returns="(Tensor, Tensor)",
        variants={"per_token_activation": {True: "(Tensor, Tensor, Tensor)"}},
        fake=fakes.nvfp4_quantize,
        inert=frozenset({"a_global_sf", "enable_pdl", "out_scale", "nvfp4_4over6"}),
        since={"backend": "0.6.8", "per_token_activation": "0.6.11", "expanded_idx_to_permuted_idx": "0.6.11"},
        routes={**_CUDA, "backend": frozenset({"cuda", "auto", "cute-dsl"}), "do_shuffle": frozenset({False}),
                "per_token_activation": frozenset({False, True})},
        codecs={"sfLayout": SF_LAYOUT, "nvfp4_4over6": NVFP4_4OVER6, "a_global_sf": TENSOR_OR_FLOAT},
        types={"a": "Tensor", "do_shuffle": "bool", "sf_vec_size": "int",
               "enable_pdl": "bool?"},
        when=lambda values: not _cute_dsl_tma_rows(values),
    ),
    # CuTe DSL only (0.6.16 on): the SwiGLU of (..., 2k) then NVFP4, (fp4 (m, k/2), scales).
    # Hand-written: up to 0.7.2 it compiles with CuTe DSL's own cute.compile, outside FlashInfer's loader.
    "silu_and_mul_nvfp4_quantize": Entry(
        returns="(Tensor, Tensor)",
        fake=fakes.silu_and_mul_nvfp4_quantize,
        inert=frozenset({"global_scale", "enable_pdl", "nvfp4_4over6"}),
        codecs={"nvfp4_4over6": NVFP4_4OVER6},
    ),
    "nvfp4_batched_quantize": Entry(
        codecs={"nvfp4_4over6": NVFP4_4OVER6},
        types={"a": "Tensor", "a_global_sf": "Tensor?", "sf_vec_size": "int"},
    ),
    "scaled_fp4_grouped_quantize": Entry(
        codecs={"nvfp4_4over6": NVFP4_4OVER6},
        types={**_TENSORS, "a_global_sf": "Tensor"},
    ),
    "silu_and_mul_scaled_nvfp4_experts_quantize": Entry(
        codecs={"nvfp4_4over6": NVFP4_4OVER6},
        types={**_TENSORS, "a_global_sf": "Tensor?"},
    ),
    "nvfp4_kv_quantize": Entry(
        hidden={"skip_check": ("bool", False)},
    ),
    # The paged KV cache (0.6.7 on): ((k_fp4, v_fp4), (k_scales, v_scales), 1 / k_global_sf,
    # 1 / v_global_sf), the last two host floats. The op takes the whole body: the amax and its host
    # read when no global scale is given, both fp4_quantize calls, the V-scale swizzle; the wrapper
    # reads the two floats off the op's outputs, as upstream reads them off its scales. Hand-written:
    # upstream reads the amax (and its global scales) on the host, which a fake tensor does not hold.
    "nvfp4_quantize_paged_kv_cache": Entry(
        returns="((Tensor, Tensor), (Tensor, Tensor), float, float)",
        fake=fakes.nvfp4_quantize_paged_kv_cache,
        inert=frozenset({"k_global_sf", "v_global_sf"}),
    ),
    # A CPU tensor takes upstream's host branch (another kernel, another allocation): not routed.
    "mxfp8_quantize": Entry(
        routes=_CUDA,
        codecs={"sf_swizzle_layout": SF_LAYOUT_OR_NONE},
        when=lambda values: values["input"].device.type != "cpu",
    ),
    "mxfp4_quantize": Entry(
        routes=_CUDA,
        codecs={"sfLayout": SF_LAYOUT},
        types={"a": "Tensor"},
    ),
    # trtllm-gen MoE with the finalize step (do_finalize=True): [output], the caller's or a fresh
    # (tokens, hidden) bf16. Upstream's path for a call that routes otherwise: do_finalize=False (the
    # rows of its results depend on the routing and the tactic's tile: a data-dependent shape),
    # gemm1_lora_delta (two more outputs sized by the kernel), 0.7.4's routing_metadata (an object
    # no schema carries). The AutoTuner's choice and the cubin loader run when the op runs.
    # Hand-written: the wrapper loads its kernels through the cubin loader (trtllm-gen) and asks the
    # AutoTuner, which reads what the runner's kernels return.
    "trtllm_fp4_block_scale_moe": Entry(
        returns="[output]",
        fake=fakes.trtllm_fp4_block_scale_moe,
        inert=_TRTLLM_MOE_INERT | {"routing_replay_out", "workspace_buffer"},
        since={"valid_hidden_size": "0.7.0"},
        mutates=frozenset({"output", "routing_replay_out", "workspace_buffer"}),
        routes={"do_finalize": frozenset({True})},
        codecs={"hidden_states_scale_layout": SF_LAYOUT_OR_NONE, "nvfp4_4over6": NVFP4_4OVER6},
    ),
    "trtllm_fp4_block_scale_routed_moe": Entry(
        returns="[output]",
        fake=fakes.trtllm_fp4_block_scale_routed_moe,
        inert=_TRTLLM_MOE_INERT | {"workspace_buffer", "routing_metadata"},
        since={"valid_hidden_size": "0.7.0"},
        mutates=frozenset({"output", "workspace_buffer"}),
        routes={"do_finalize": frozenset({True})},
        codecs={"topk_ids": TENSOR_OR_PAIR, "hidden_states_scale_layout": SF_LAYOUT_OR_NONE,
                "nvfp4_4over6": NVFP4_4OVER6, "routing_metadata": NONE_ONLY},
        when=lambda values: values.get("gemm1_lora_delta") is None,
    ),
    # The CUTLASS fused MoE (every quantization: BF16, FP8, NVFP4, MXFP4 x BF16/MXFP8, W4A8; SM90,
    # SM100, SM103, SM120 modules): four tensors, the caller's output or a fresh one, and three the
    # wrapper allocates for the min-latency mode. Upstream's path: min_latency_mode (upstream
    # refuses it before any kernel) and 0.7.1's backend="cake" (another program). The module build,
    # the AutoTuner's two GEMM tactics and the launch run when the op runs. Hand-written: the wrapper
    # builds its runner with a call into the module (module.init) and runs what that returns.
    "cutlass_fused_moe": Entry(
        returns="[output, Tensor, Tensor, Tensor]",
        fake=fakes.cutlass_fused_moe,
        inert=frozenset({
            "token_selected_experts", "token_final_scales", "fc1_expert_weights", "quant_scales",
            "fc1_expert_biases", "fc2_expert_biases", "input_sf", "swiglu_alpha", "swiglu_beta", "swiglu_limit",
            "tp_size", "tp_rank", "ep_size", "ep_rank", "cluster_size", "cluster_rank", "enable_alltoall",
            "use_deepseek_fp8_block_scale", "use_w4_group_scaling", "use_mxfp8_act_scaling", "use_packed_weights",
            "use_wfp4afp8_humming", "tune_max_num_tokens", "enable_pdl", "activation_type", "swizzled_input_sf",
            "use_fused_finalize", "profile_ids", "workspace_buffer", "clamped_relu2_limit", "situ_beta",
            "situ_linear_beta", "nvfp4_4over6",
        }),
        mutates=frozenset({"output", "workspace_buffer"}),
        routes={"min_latency_mode": frozenset({False}), "backend": frozenset({"cutlass"})},
        codecs={"activation_type": ACTIVATION_TYPE, "quant_scales": TENSOR_LIST_OR_NONE,
                "nvfp4_4over6": NVFP4_4OVER6},
    ),
    # Norm + FP8 quantize into `out` (and the residual add in place): nothing returned. `scale` is a
    # float up to 0.6.6, a float or a tensor from 0.6.7 (upstream makes a float a device tensor when
    # it runs): a host float travels as TENSOR_OR_FLOAT does, so both forms are routed everywhere.
    "rmsnorm_quant": Entry(
        returns="()",
        mutates=frozenset({"out"}),
        codecs={"scale": TENSOR_OR_FLOAT},
    ),
    "fused_add_rmsnorm_quant": Entry(
        returns="()",
        mutates=frozenset({"out", "residual"}),
        codecs={"scale": TENSOR_OR_FLOAT},
    ),
    # The GEMM: `out` when the caller passes it (written in place and handed back), else a fresh
    # (m, n) tensor of out_dtype. backend_requirement's checks, the backend heuristic, the runners
    # and the AutoTuner's tactic all run when the graph executes. Hand-written: the wrapper keeps its
    # workspace in a cache of its own (utils._get_stream_cache_buf, a module-level dict), which a
    # fake's allocation would stay in, and the trtllm backend loads through the cubin loader.
    "mm_fp4": Entry(
        returns="out",
        fake=fakes.mm_fp4,
        inert=frozenset({"a_descale", "b_descale", "alpha", "block_size", "use_8x4_sf_layout", "use_nvfp4",
                         "enable_pdl", "skip_check"}),
        mutates=frozenset({"out"}),
        routes={"backend": _MM_FP4_BACKENDS, "batch_invariant": frozenset({False})},
        hidden={"skip_check": ("bool", False)},
        live_attributes=True,
    ),
    # Outside FP4, the two GEMMs SGLang calls inside its compiled regions: the FP8 block-scale GEMM
    # of the FP8 linear layer (SM90 alone; upstream refuses every other GPU before any kernel) and
    # GPT-OSS's small BF16 GEMM, which writes into `out`. The DeepGEMM runner's JIT build, its
    # workspace and the launch run when the op runs. Both are hand-written: fp8_blockscale_gemm_sm90's
    # wrapper sizes its workspace from what the runner returns (get_workspace_size); tinygemm_bf16's
    # picks its program by the inputs' addresses (data_ptr() % 16, 0.7.4's SM100 path), which a fake
    # tensor does not have.
    "fp8_blockscale_gemm_sm90": Entry(
        returns="out",
        fake=fakes.fp8_blockscale_gemm_sm90,
        inert=frozenset({"input_scale", "weight_scale"}),
        mutates=frozenset({"out"}),
    ),
    "tinygemm_bf16": Entry(
        returns="()",
        fake=fakes.nothing,
        inert=frozenset({"input", "weight", "out", "bias", "use_pdl", "skip_check"}),
        mutates=frozenset({"out"}),
        hidden={"skip_check": ("bool", False)},
    ),
}


# FlashInfer's own compile list (compile_list.py), routed the same way; it needs Entry, defined above.
from .compile_list import COMPILE_LIST  # noqa: E402

ENTRIES.update(COMPILE_LIST)
