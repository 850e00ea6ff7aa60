"""nvfp4-overlay: the entries of FlashInfer's own compile list, routed as the FP4 entry points are (entries.py).

The functions of the list FlashInfer's tests compile (tests/conftest.py, TORCH_COMPILE_FNS) that take
and return tensors: activation, norm, rope, sampling, the paged-KV append, the cascade merges, the
single-request attention, packbits and the FP8 batched GEMM. Each becomes one opaque op while
dynamo traces and stays upstream's function eagerly; every fake is upstream's own function run with
the JIT layer stood in for (faking.py): no fake here is written by hand. An entry says only what a
signature cannot: what a writing function writes into (``mutates``, its fixed ``returns``) and the
parameters no schema type carries (``codecs``), as entries.py's header says.

What stays upstream's path (eager-only under ``fullgraph=True``, where it breaks as upstream does):

- sampling drawn from a host generator: a call routes only with its generator state passed as
  tensors (``seed`` and ``offset``, each an int64 tensor, which the kernel reads on the device, so
  that a CUDA graph's replay draws anew), from 0.6.4 on (before, seed and offset are host ints). A
  call that leaves them to a torch.Generator advances the generator on the host as it runs, which a
  captured graph would replay unchanged;
- ``bmm_fp8(backend="cute-dsl")`` (0.7.x): CuTe DSL compiles outside FlashInfer's loader;
- the attention wrappers' ``plan()``, the segment GEMM (its arguments come from a Triton kernel
  launched on the host's schedule) and every function outside the list.
"""

from typing import Dict

from .codecs import (NONE_ONLY, TENSOR_OR_FLOAT, TENSOR_OR_INT, TENSOR_OR_NONE, TENSOR_OR_PAIR, TENSOR_PAIR_OR_NONE,
                     TENSOR_STATE)
from .entries import Entry

# Upstream writes into `out` when given (and hands it back), else into a tensor it allocates.
_OUT = {"returns": "out", "mutates": frozenset({"out"})}
# The activations annotate out as a Tensor that defaults to None: it travels as an optional tensor.
_ACTIVATION = {**_OUT, "codecs": {"out": TENSOR_OR_NONE}}
# A sampling call's generator state: routed only as tensors (seed, offset), the host generator never.
_STATE = {"generator": NONE_ONLY, "seed": TENSOR_STATE, "offset": TENSOR_STATE}
_IN_PLACE = {"returns": "()", "mutates": frozenset({"q", "k"})}

COMPILE_LIST: Dict[str, Entry] = {
    "silu_and_mul": Entry(**_ACTIVATION),
    "gelu_and_mul": Entry(**_ACTIVATION),
    "gelu_tanh_and_mul": Entry(**_ACTIVATION),
    "rmsnorm": Entry(**_OUT),
    "gemma_rmsnorm": Entry(**_OUT),
    "fused_add_rmsnorm": Entry(returns="()", mutates=frozenset({"input", "residual"})),
    "gemma_fused_add_rmsnorm": Entry(returns="()", mutates=frozenset({"input", "residual"})),
    "apply_rope": Entry(),
    "apply_rope_pos_ids": Entry(),
    "apply_llama31_rope": Entry(),
    "apply_llama31_rope_pos_ids": Entry(),
    "apply_rope_inplace": Entry(**_IN_PLACE),
    "apply_rope_pos_ids_inplace": Entry(**_IN_PLACE),
    "apply_llama31_rope_inplace": Entry(**_IN_PLACE),
    "apply_llama31_rope_pos_ids_inplace": Entry(**_IN_PLACE),
    "merge_state": Entry(),
    "merge_states": Entry(),
    "merge_state_in_place": Entry(returns="()", mutates=frozenset({"v", "s"})),
    # The cache is one tensor or a (k, v) pair; it travels as a list of one or two, written in place.
    "append_paged_kv_cache": Entry(returns="()", mutates=frozenset({"paged_kv_cache"}),
                                   codecs={"paged_kv_cache": TENSOR_OR_PAIR}),
    "packbits": Entry(),
    "single_decode_with_kv_cache": Entry(),
    # kv_cache_sf (0.6.18 on): the NVFP4 cache's (k, v) scale factors, or None.
    "single_prefill_with_kv_cache": Entry(codecs={"kv_cache_sf": TENSOR_PAIR_OR_NONE}),
    # backend_requirement's wrapper takes skip_check and sets suitable_auto_backends on itself, which
    # the body reads back through its module global for backend="auto" (as mm_fp4's).
    "bmm_fp8": Entry(returns="out", mutates=frozenset({"out"}), hidden={"skip_check": ("bool", False)},
                     routes={"backend": frozenset({"cudnn", "cublas", "cutlass", "auto"})}, live_attributes=True),
    "sampling_from_probs": Entry(codecs=_STATE),
    "sampling_from_logits": Entry(codecs=_STATE),
    "top_p_sampling_from_probs": Entry(codecs={**_STATE, "top_p": TENSOR_OR_FLOAT}),
    "top_k_sampling_from_probs": Entry(codecs={**_STATE, "top_k": TENSOR_OR_INT}),
    "min_p_sampling_from_probs": Entry(codecs={**_STATE, "min_p": TENSOR_OR_FLOAT}),
    "top_k_top_p_sampling_from_probs": Entry(codecs={**_STATE, "top_k": TENSOR_OR_INT, "top_p": TENSOR_OR_FLOAT}),
    "chain_speculative_sampling": Entry(codecs=_STATE, types={"draft_probs": "Tensor", "draft_token_ids": "Tensor",
                                                              "target_probs": "Tensor"}),
    "top_p_renorm_probs": Entry(codecs={"top_p": TENSOR_OR_FLOAT}),
    "top_k_renorm_probs": Entry(codecs={"top_k": TENSOR_OR_INT}),
    "top_k_mask_logits": Entry(codecs={"top_k": TENSOR_OR_INT}),
}
