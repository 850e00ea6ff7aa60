"""FlashInfer's own compile list and the calls the compile-list probe makes of each function.

COMPILE_LIST is the list upstream's tests/conftest.py wraps in torch.compile(fullgraph=True) under
FLASHINFER_TEST_TORCH_COMPILE=1 (the same 40 names at every release tag 0.6.0-0.6.17), by group,
each as conftest names it under ``flashinfer.``. cases(qualname) gives (case id, make) where
make(torch) -> (args, kwargs) builds fresh CPU inputs; the shapes are small and each case names
what it sets apart from the defaults. A wrapper method's case makes the wrapper and calls its
plan() eagerly (as every engine does), the wrapper then being the call's first argument.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

Make = Callable[[Any], tuple[tuple[Any, ...], dict[str, Any]]]

COMPILE_LIST: dict[str, tuple[str, ...]] = {
    "activation": ("activation.silu_and_mul", "activation.gelu_and_mul", "activation.gelu_tanh_and_mul"),
    "cascade": ("cascade.merge_state", "cascade.merge_state_in_place", "cascade.merge_states",
                "cascade.MultiLevelCascadeAttentionWrapper.run",
                "cascade.BatchDecodeWithSharedPrefixPagedKVCacheWrapper.forward",
                "cascade.BatchPrefillWithSharedPrefixPagedKVCacheWrapper.forward"),
    "decode": ("decode.single_decode_with_kv_cache", "decode.BatchDecodeWithPagedKVCacheWrapper.run"),
    "gemm": ("gemm.bmm_fp8", "gemm.SegmentGEMMWrapper.run"),
    "norm": ("norm.rmsnorm", "norm.fused_add_rmsnorm", "norm.gemma_rmsnorm", "norm.gemma_fused_add_rmsnorm"),
    "page": ("page.append_paged_kv_cache",),
    "prefill": ("prefill.single_prefill_with_kv_cache", "prefill.BatchPrefillWithPagedKVCacheWrapper.run",
                "prefill.BatchPrefillWithRaggedKVCacheWrapper.run"),
    "quantization": ("quantization.packbits",),
    "rope": ("rope.apply_rope", "rope.apply_rope_inplace", "rope.apply_rope_pos_ids", "rope.apply_rope_pos_ids_inplace",
             "rope.apply_llama31_rope", "rope.apply_llama31_rope_inplace", "rope.apply_llama31_rope_pos_ids",
             "rope.apply_llama31_rope_pos_ids_inplace"),
    "sampling": ("sampling.sampling_from_probs", "sampling.sampling_from_logits", "sampling.top_p_sampling_from_probs",
                 "sampling.top_k_sampling_from_probs", "sampling.min_p_sampling_from_probs",
                 "sampling.top_k_top_p_sampling_from_probs", "sampling.top_p_renorm_probs",
                 "sampling.top_k_renorm_probs", "sampling.top_k_mask_logits", "sampling.chain_speculative_sampling"),
}


def group_of(qualname: str) -> str:
    return next(group for group, names in COMPILE_LIST.items() if qualname in names)


def every_name() -> list[str]:
    return [name for names in COMPILE_LIST.values() for name in names]


def is_method(qualname: str) -> bool:
    return qualname.split(".")[-2][:1].isupper()


# --- inputs ---------------------------------------------------------------------------------------------


def _half(*shape: int) -> Make:
    return lambda torch: torch.randn(*shape, dtype=torch.float16)


def _bf16(*shape: int) -> Callable[[Any], Any]:
    return lambda torch: torch.randn(*shape, dtype=torch.bfloat16)


def _probs(torch: Any, *shape: int) -> Any:
    return torch.softmax(torch.randn(*shape), dim=-1)


def _activation(torch: Any) -> dict[str, Any]:
    return {"input": torch.randn(4, 256, dtype=torch.bfloat16)}


def _rope_ragged(torch: Any) -> dict[str, Any]:
    """Two requests of 3 and 5 tokens at offsets 0 and 7: q (8, 4, 64), k (8, 2, 64)."""
    return {"q": torch.randn(8, 4, 64, dtype=torch.float16), "k": torch.randn(8, 2, 64, dtype=torch.float16),
            "indptr": torch.tensor([0, 3, 8], dtype=torch.int32), "offsets": torch.tensor([0, 7], dtype=torch.int32)}


def _rope_pos(torch: Any) -> dict[str, Any]:
    return {"q": torch.randn(8, 4, 64, dtype=torch.float16), "k": torch.randn(8, 2, 64, dtype=torch.float16),
            "pos_ids": torch.arange(8, dtype=torch.int32)}


def _norm(torch: Any) -> dict[str, Any]:
    return {"input": torch.randn(4, 128, dtype=torch.bfloat16), "weight": torch.randn(128, dtype=torch.bfloat16)}


def _fused_norm(torch: Any) -> dict[str, Any]:
    return {**_norm(torch), "residual": torch.randn(4, 128, dtype=torch.bfloat16)}


def _merge(torch: Any) -> dict[str, Any]:
    return {"v_a": torch.randn(5, 4, 64, dtype=torch.float16), "s_a": torch.randn(5, 4),
            "v_b": torch.randn(5, 4, 64, dtype=torch.float16), "s_b": torch.randn(5, 4)}


def _merge_in_place(torch: Any) -> dict[str, Any]:
    return {"v": torch.randn(5, 4, 64, dtype=torch.float16), "s": torch.randn(5, 4),
            "v_other": torch.randn(5, 4, 64, dtype=torch.float16), "s_other": torch.randn(5, 4)}


def _decode(torch: Any) -> dict[str, Any]:
    return {"q": torch.randn(4, 64, dtype=torch.float16), "k": torch.randn(16, 4, 64, dtype=torch.float16),
            "v": torch.randn(16, 4, 64, dtype=torch.float16)}


def _prefill(torch: Any) -> dict[str, Any]:
    return {"q": torch.randn(8, 4, 64, dtype=torch.float16), "k": torch.randn(16, 4, 64, dtype=torch.float16),
            "v": torch.randn(16, 4, 64, dtype=torch.float16)}


def _bmm_fp8(torch: Any) -> dict[str, Any]:
    # B column-major, as upstream's test makes it (transpose of a contiguous (b, n, k))
    return {"A": torch.randn(2, 16, 64).to(torch.float8_e4m3fn),
            "B": torch.randn(2, 32, 64).to(torch.float8_e4m3fn).transpose(-2, -1),
            "A_scale": torch.tensor(1.0), "B_scale": torch.tensor(1.0), "dtype": torch.bfloat16}


def _append_paged(torch: Any) -> dict[str, Any]:
    """Two requests appending 3 and 2 tokens to a cache of 4 pages of 4 tokens (NHD), 2 heads of 64."""
    return {"append_key": torch.randn(5, 2, 64, dtype=torch.float16),
            "append_value": torch.randn(5, 2, 64, dtype=torch.float16),
            "batch_indices": torch.tensor([0, 0, 0, 1, 1], dtype=torch.int32),
            "positions": torch.tensor([0, 1, 2, 0, 1], dtype=torch.int32),
            "paged_kv_cache": torch.zeros(4, 2, 4, 2, 64, dtype=torch.float16),
            "kv_indices": torch.tensor([0, 1], dtype=torch.int32), "kv_indptr": torch.tensor([0, 1, 2], dtype=torch.int32),
            "kv_last_page_len": torch.tensor([3, 2], dtype=torch.int32)}


def _sampling(torch: Any, **extra: Any) -> dict[str, Any]:
    return {"probs": _probs(torch, 4, 32), **extra}


def _spec(torch: Any) -> dict[str, Any]:
    return {"draft_probs": _probs(torch, 2, 3, 32), "draft_token_ids": torch.randint(0, 32, (2, 3), dtype=torch.int32),
            "target_probs": _probs(torch, 2, 4, 32)}


def _keywords(build: Callable[[Any], dict[str, Any]], **extra: Any) -> Make:
    """A case whose inputs are all keywords: build's, then extra (a callable value made with torch)."""
    return lambda torch: ((), {**build(torch), **{k: v(torch) if callable(v) else v for k, v in extra.items()}})


_ACT = {"default": _keywords(_activation),
        "out": _keywords(_activation, out=lambda torch: torch.empty(4, 128, dtype=torch.bfloat16))}
_ROPE = {"default": _keywords(_rope_ragged), "interleave-rotary32": _keywords(_rope_ragged, interleave=True, rotary_dim=32)}
_ROPE_POS = {"default": _keywords(_rope_pos), "interleave-rotary32": _keywords(_rope_pos, interleave=True, rotary_dim=32)}
_NORM = {"default": _keywords(_norm), "out-eps": _keywords(_norm, eps=1e-5, out=lambda t: t.empty(4, 128, dtype=t.bfloat16))}
_FUSED = {"default": _keywords(_fused_norm), "eps": _keywords(_fused_norm, eps=1e-5)}

CASES: dict[str, dict[str, Make]] = {
    "activation.silu_and_mul": _ACT, "activation.gelu_and_mul": _ACT, "activation.gelu_tanh_and_mul": _ACT,
    "cascade.merge_state": {"default": _keywords(_merge)},
    "cascade.merge_state_in_place": {
        "default": _keywords(_merge_in_place),
        "mask": _keywords(_merge_in_place, mask=lambda t: t.tensor([True, False, True, True, False]))},
    "cascade.merge_states": {"default": lambda torch: ((), {"v": torch.randn(5, 3, 4, 64, dtype=torch.float16),
                                                           "s": torch.randn(5, 3, 4)})},
    "decode.single_decode_with_kv_cache": {"default": _keywords(_decode), "lse": _keywords(_decode, return_lse=True)},
    "prefill.single_prefill_with_kv_cache": {"default": _keywords(_prefill),
                                            "causal-lse": _keywords(_prefill, causal=True, return_lse=True)},
    "gemm.bmm_fp8": {"default": _keywords(_bmm_fp8)},
    "norm.rmsnorm": _NORM, "norm.gemma_rmsnorm": _NORM,
    "norm.fused_add_rmsnorm": _FUSED, "norm.gemma_fused_add_rmsnorm": _FUSED,
    "page.append_paged_kv_cache": {"default": _keywords(_append_paged)},
    "quantization.packbits": {"big": lambda t: ((), {"x": t.rand(37) > 0.5}),
                              "little": lambda t: ((), {"x": t.rand(37) > 0.5, "bitorder": "little"})},
    **{f"rope.{n}": _ROPE for n in ("apply_rope", "apply_rope_inplace", "apply_llama31_rope", "apply_llama31_rope_inplace")},
    **{f"rope.{n}": _ROPE_POS for n in ("apply_rope_pos_ids", "apply_rope_pos_ids_inplace", "apply_llama31_rope_pos_ids",
                                        "apply_llama31_rope_pos_ids_inplace")},
    "sampling.sampling_from_probs": {"default": lambda t: ((), _sampling(t))},
    "sampling.sampling_from_logits": {"default": lambda t: ((), {"logits": t.randn(4, 32)})},
    "sampling.top_p_sampling_from_probs": {"float": lambda t: ((), _sampling(t, top_p=0.9)),
                                          "tensor": lambda t: ((), _sampling(t, top_p=t.full((4,), 0.9)))},
    "sampling.top_k_sampling_from_probs": {"int": lambda t: ((), _sampling(t, top_k=5)),
                                          "tensor": lambda t: ((), _sampling(t, top_k=t.full((4,), 5, dtype=t.int32)))},
    "sampling.min_p_sampling_from_probs": {"float": lambda t: ((), _sampling(t, min_p=0.1))},
    "sampling.top_k_top_p_sampling_from_probs": {"scalars": lambda t: ((), _sampling(t, top_k=5, top_p=0.9))},
    "sampling.top_p_renorm_probs": {"float": lambda t: ((), {"probs": _probs(t, 4, 32), "top_p": 0.9})},
    "sampling.top_k_renorm_probs": {"int": lambda t: ((), {"probs": _probs(t, 4, 32), "top_k": 5})},
    "sampling.top_k_mask_logits": {"int": lambda t: ((), {"logits": t.randn(4, 32), "top_k": 5})},
    "sampling.chain_speculative_sampling": {"default": lambda t: ((), _spec(t))},
}


# --- the wrappers: made and planned eagerly, as every engine does; the call's first argument -----------------

_WORKSPACE = 128 * 1024 * 1024  # upstream's tests' float workspace


def _paged(torch: Any) -> dict[str, Any]:
    """Two requests over 3 pages of 4 tokens (2 + 1 pages, last pages holding 3 and 4), NHD, 4 heads of 64."""
    return {"indptr": torch.tensor([0, 2, 3], dtype=torch.int32), "indices": torch.tensor([0, 1, 2], dtype=torch.int32),
            "last": torch.tensor([3, 4], dtype=torch.int32), "kv": torch.randn(3, 2, 4, 4, 64, dtype=torch.float16)}


def _decode_wrapper(torch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import flashinfer

    p = _paged(torch)
    wrapper = flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper(torch.empty(_WORKSPACE, dtype=torch.uint8), "NHD")
    wrapper.plan(p["indptr"], p["indices"], p["last"], 4, 4, 64, 4, data_type=torch.float16)
    return (wrapper, torch.randn(2, 4, 64, dtype=torch.float16), p["kv"]), {}


def _prefill_paged_wrapper(torch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import flashinfer

    p = _paged(torch)
    wrapper = flashinfer.prefill.BatchPrefillWithPagedKVCacheWrapper(torch.empty(_WORKSPACE, dtype=torch.uint8), "NHD")
    wrapper.plan(torch.tensor([0, 3, 5], dtype=torch.int32), p["indptr"], p["indices"], p["last"], 4, 4, 64, 4,
                 causal=True, q_data_type=torch.float16)
    return (wrapper, torch.randn(5, 4, 64, dtype=torch.float16), p["kv"]), {}


def _prefill_ragged_wrapper(torch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import flashinfer

    wrapper = flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(_WORKSPACE, dtype=torch.uint8), "NHD")
    wrapper.plan(torch.tensor([0, 3, 5], dtype=torch.int32), torch.tensor([0, 4, 9], dtype=torch.int32), 4, 4, 64,
                 causal=True, q_data_type=torch.float16)
    kv = [torch.randn(9, 4, 64, dtype=torch.float16) for _ in range(2)]
    return (wrapper, torch.randn(5, 4, 64, dtype=torch.float16), *kv), {}


def _cascade_wrapper(torch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Two levels: a prefix page all 5 queries share, then the two requests' own pages."""
    import flashinfer

    p = _paged(torch)
    i32 = functools.partial(torch.tensor, dtype=torch.int32)
    wrapper = flashinfer.cascade.MultiLevelCascadeAttentionWrapper(2, torch.empty(_WORKSPACE, dtype=torch.uint8), "NHD")
    wrapper.plan([i32([0, 5]), i32([0, 3, 5])], [i32([0, 1]), p["indptr"]], [i32([2]), p["indices"]],
                 [i32([4]), p["last"]], 4, 4, 64, 4, causal=True, q_data_type=torch.float16)
    return (wrapper, torch.randn(5, 4, 64, dtype=torch.float16), p["kv"]), {}


def _shared_prefix(torch: Any, decode: bool) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The shared-prefix wrappers (begin_forward, forward): a 7-token prefix in its own tensors."""
    import flashinfer

    p = _paged(torch)
    workspace = torch.empty(_WORKSPACE, dtype=torch.uint8)
    shared = [torch.randn(7, 4, 64, dtype=torch.float16) for _ in range(2)]
    if decode:
        wrapper = flashinfer.cascade.BatchDecodeWithSharedPrefixPagedKVCacheWrapper(workspace, "NHD")
        wrapper.begin_forward(p["indptr"], p["indices"], p["last"], 4, 4, 64, 4, data_type=torch.float16)
        return (wrapper, torch.randn(2, 4, 64, dtype=torch.float16), *shared, p["kv"]), {}
    wrapper = flashinfer.cascade.BatchPrefillWithSharedPrefixPagedKVCacheWrapper(workspace, "NHD")
    wrapper.begin_forward(torch.tensor([0, 3, 5], dtype=torch.int32), p["indptr"], p["indices"], p["last"], 4, 4, 64, 4)
    return (wrapper, torch.randn(5, 4, 64, dtype=torch.float16), *shared, p["kv"]), {"causal": True}


def _segment_gemm(torch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Two segments of 4 and 6 rows, each with its (32, 64) weight, column-major; the SM80 kernel
    (the SM90 one's arguments are computed by a Triton kernel, which a CPU machine does not run)."""
    import flashinfer

    wrapper = flashinfer.gemm.SegmentGEMMWrapper(torch.empty(_WORKSPACE, dtype=torch.uint8), backend="sm80")
    return (wrapper, torch.randn(10, 64, dtype=torch.float16), torch.randn(2, 32, 64, dtype=torch.float16), 2,
            True), {"seg_lens": torch.tensor([4, 6])}


CASES.update({
    "decode.BatchDecodeWithPagedKVCacheWrapper.run": {"default": _decode_wrapper},
    "prefill.BatchPrefillWithPagedKVCacheWrapper.run": {"causal": _prefill_paged_wrapper},
    "prefill.BatchPrefillWithRaggedKVCacheWrapper.run": {"causal": _prefill_ragged_wrapper},
    "cascade.MultiLevelCascadeAttentionWrapper.run": {"two-levels": _cascade_wrapper},
    "cascade.BatchDecodeWithSharedPrefixPagedKVCacheWrapper.forward": {
        "default": functools.partial(_shared_prefix, decode=True)},
    "cascade.BatchPrefillWithSharedPrefixPagedKVCacheWrapper.forward": {
        "causal": functools.partial(_shared_prefix, decode=False)},
    "gemm.SegmentGEMMWrapper.run": {"sm80": _segment_gemm},
})


def _seed_offset(torch: Any) -> dict[str, Any]:
    """The generator state as tensors (seed, offset: (1,) int64 each), which the kernel reads on the
    device, so that a CUDA graph's replay draws anew: from 0.6.4 (an int pair before)."""
    return {"seed": torch.tensor([1234], dtype=torch.int64), "offset": torch.tensor([0], dtype=torch.int64)}


def _with_state(make: Make) -> Make:
    def made(torch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args, kwargs = make(torch)
        return args, {**kwargs, **_seed_offset(torch)}

    return made


_RANDOM = ("sampling.sampling_from_probs", "sampling.sampling_from_logits", "sampling.top_p_sampling_from_probs",
           "sampling.top_k_sampling_from_probs", "sampling.min_p_sampling_from_probs",
           "sampling.top_k_top_p_sampling_from_probs", "sampling.chain_speculative_sampling")
# Rows some releases' signatures take: qualname -> (case id, make, the first release that takes it).
SINCE: dict[str, list[tuple[str, Make, str]]] = {
    name: [("seed-offset-tensors", _with_state(next(iter(CASES[name].values()))), "0.6.4")] for name in _RANDOM}


# What stays upstream's path by design (the overlay's compile_list.py says why): whole functions, and
# cases of the routed ones. The verdicts count the other cases and name these apart.
HOST_STATE = "the generator state stays on the host (no seed and offset tensors): upstream's path by design"
WRAPPER = "a wrapper's run(): not routed (its plan() keeps host state on the wrapper object)"
EAGER_ONLY_CASES: dict[str, dict[str, str]] = {
    name: {case: HOST_STATE for case in CASES[name] if case != "seed-offset-tensors"} for name in _RANDOM}
EAGER_ONLY: dict[str, str] = {
    **{name: WRAPPER for name in every_name() if is_method(name)},
    "gemm.SegmentGEMMWrapper.run": "its segment arguments come from a Triton kernel the wrapper launches; not routed",
}


def routed_case(name: str, release: str) -> tuple[str, Make] | None:
    """The first case of the function named `name` (its public name, "rmsnorm") that the overlay routes,
    in a release; None for a function outside the list or eager-only there."""
    qualname = next((q for q in every_name() if q.rsplit(".", 1)[1] == name and q not in EAGER_ONLY), None)
    if qualname is None:
        return None
    skip = EAGER_ONLY_CASES.get(qualname, {})
    return next(((c, make) for c, make in cases(qualname, release) if c not in skip), None)


def eager_only(name: str, release: str) -> str | None:
    """Why the function named `name` (its public name) stays upstream's path in a release; None where
    the overlay routes it (or it is no function of the list)."""
    qualname = next((q for q in every_name() if q.rsplit(".", 1)[1] == name), None)
    if qualname is None:
        return None
    if qualname in EAGER_ONLY:
        return EAGER_ONLY[qualname]
    if routed_case(name, release) is None:
        return f"{HOST_STATE} (before 0.6.4 seed and offset are host ints)"
    return None


def cases(qualname: str, release: str) -> Iterator[tuple[str, Make]]:
    """The calls of one function of the list in a release."""
    from packaging.version import Version

    yield from CASES.get(qualname, {}).items()
    for case_id, make, since in SINCE.get(qualname, []):
        if Version(release) >= Version(since):
            yield case_id, make
