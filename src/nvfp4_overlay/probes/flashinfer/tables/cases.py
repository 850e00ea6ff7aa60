"""The calls the trace probe makes of each entry point: layouts and argument tables, per release.

cases(name, fn) yields (case id, make) where make(torch) -> (args, kwargs) builds fresh inputs.
Each row says from which release on it applies (``since``, and ``until`` for a row an older
signature alone takes); a row that applies passes only keywords the release's signature has, or
cases() raises naming the keyword (a renamed parameter must not make its rows vanish), and an
entry point keeps at least MINIMUM cases in every release. A case names the values it sets apart
from the defaults, so a parameter that fails to reach the op shows as different kernel arguments
(or, for a value upstream refuses, as a compiled call that does not refuse it). SfLayout values
are the release's own members, read from the module that defines the entry point.

mxfp8_quantize runs on ``meta`` tensors: its inner op takes a host branch for a CPU tensor (another
kernel, another allocation) and the CUDA branch for any other device; the wrapper never asks a meta
tensor for its compute capability.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Iterator
from typing import Any

from packaging.version import Version

from nvfp4_overlay.probes.flashinfer.tables import moe_cases, quant_cases
from nvfp4_overlay.probes.flashinfer.tables.rows import Row, bf16, u8, with_scale

Make = Callable[[Any], tuple[tuple[Any, ...], dict[str, Any]]]


class CaseTableError(ValueError):
    """A row that applies to a release passes a keyword its signature lacks, or too few rows remain."""


# The fewest cases an entry point may run in a release; the ladder refuses a table that falls under.
MINIMUM = {"fp4_quantize": 9}
DEFAULT_MINIMUM = 3

# Entry points that upstream builds no kernel for on a GPU before a release: entry point -> GPU ->
# the first release that has one. There every eager call refuses (upstream's as well as the
# patched wheel's), the compiled call must refuse too, and the ladder asks no case to reach the
# kernel; a release that does reach it fails the ladder until this says so. The trtllm-gen MoE
# module asks for SM10x alone up to 0.6.6 (jit/fused_moe.py, supported_major_versions=[10]).
NO_KERNEL: dict[str, dict[str, str]] = {
    "trtllm_fp4_block_scale_moe": {"12.0": "0.6.7"},
    "trtllm_fp4_block_scale_routed_moe": {"12.0": "0.6.7"},
}


# Entry points upstream runs on one GPU alone, refusing every other before any kernel: the ladder
# runs them on that GPU too, with their cases alone (the plan's "gpu_entries"); on the others every
# call refuses. fp8_blockscale_gemm_sm90 asks _match_sm_version(["90", "90a"]) first, 0.6.1-0.7.4.
ONLY_GPU: dict[str, str] = {"fp8_blockscale_gemm_sm90": "9.0"}


def ladder_gpus(name: str, gpus: tuple[str, ...]) -> tuple[str, ...]:
    """The GPUs the ladder runs the entry point on: the plan's, and its ONLY_GPU."""
    only = ONLY_GPU.get(name)
    return gpus + (only,) if only is not None and only not in gpus else gpus


def kernel_gpus(name: str, gpus: tuple[str, ...]) -> tuple[str, ...]:
    """Of the GPUs the ladder runs the entry point on, those upstream may launch its kernel on."""
    return (ONLY_GPU[name],) if name in ONLY_GPU else gpus


def has_kernel(name: str, gpu: str, release: str) -> bool:
    """Whether upstream builds a kernel for the entry point on the GPU ("12.0") in the release."""
    if name in ONLY_GPU:
        return gpu == ONLY_GPU[name]
    first = NO_KERNEL.get(name, {}).get(gpu)
    return first is None or Version(release) >= Version(first)

# fp4_quantize layouts: (id, keyword arguments, column-major input)
FP4_LAYOUTS = [
    ("swizzled128-sf16", {"sf_vec_size": 16}, False),
    ("swizzled8x4-sf16", {"sf_vec_size": 16, "is_sf_8x4_layout": True}, False),
    ("linear-sf16", {"sf_vec_size": 16, "is_sf_swizzled_layout": False}, False),
    ("swizzled128-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True}, False),
    ("swizzled8x4-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True, "is_sf_8x4_layout": True}, False),
    ("linear-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True, "is_sf_swizzled_layout": False}, False),
    ("colmajor-swizzled128-sf16", {"sf_vec_size": 16}, True),
    ("colmajor-linear-sf16", {"sf_vec_size": 16, "is_sf_swizzled_layout": False}, True),
    ("colmajor-swizzled128-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True}, True),
    ("pdl-inverted", {"sf_vec_size": 16, "enable_pdl": True, "is_global_scale_inversed": True}, False),
]
# K = 224: K / sf_vec_size (14, 7) is not a multiple of 4, where 0.6.8 changed the scale factors' view.
FP4_ODD_K = [
    ("k224-swizzled128-sf16", {"sf_vec_size": 16}, False),
    ("k224-swizzled8x4-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True, "is_sf_8x4_layout": True}, False),
    ("k224-linear-sf16", {"sf_vec_size": 16, "is_sf_swizzled_layout": False}, False),
    ("k224-colmajor-swizzled128-sf16", {"sf_vec_size": 16}, True),
]


# Keywords a decorator of upstream's takes beyond the signature: backend_requirement's wrapper
# (nvfp4_kv_quantize, 0.6.7+; mm_fp4) pops skip_check from its kwargs.
HIDDEN_KEYWORDS = ("skip_check",)


def parameters(fn: Callable[..., Any]) -> list[str]:
    """What a caller may pass: the signature's parameters, then the hidden keywords a wrapper on
    the __wrapped__ chain reads (the name is a constant of its code)."""
    names = list(inspect.signature(fn).parameters)
    for keyword in HIDDEN_KEYWORDS:
        f: Any = fn
        while hasattr(f, "__wrapped__"):
            if keyword in getattr(getattr(f, "__code__", None), "co_consts", ()):
                names.append(keyword)
                break
            f = f.__wrapped__
    return names


def cases(name: str, fn: Callable[..., Any], *, quick: bool = False,
          release: str | None = None) -> Iterator[tuple[str, Make]]:
    params = set(parameters(fn))
    table = _TABLES.get(name)
    if table is None:
        return
    rows = table(inspect.unwrap(fn).__globals__.get("SfLayout"))
    found = applying(name, rows, params, release or _release_of(fn))
    yield from (_make(row) for row in (found[:1] if quick else found))


def applying(name: str, rows: list[Row], params: set[str], release: str) -> list[Row]:
    """The rows of the table that apply to the release; CaseTableError names a keyword a row that
    applies passes and the signature lacks, and a table left with fewer than MINIMUM rows."""
    version = Version(release)
    found = [r for r in rows if Version(r.since) <= version and (r.until is None or version < Version(r.until))]
    missing = sorted({k for r in found for k in r.kwargs if k not in params})
    if missing:
        msg = (f"flashinfer {release}: {name} has no parameter {', '.join(map(repr, missing))}, which the cases "
               f"of probes/flashinfer/tables/cases.py pass from the release they name: upstream renamed or dropped it; give "
               f"those rows an `until` and the new name its own rows")
        raise CaseTableError(msg)
    floor = MINIMUM.get(name, DEFAULT_MINIMUM)
    if len(found) < floor:
        msg = f"flashinfer {release}: {name} has {len(found)} cases in probes/flashinfer/tables/cases.py, fewer than {floor}"
        raise CaseTableError(msg)
    return found


def _make(row: Row) -> tuple[str, Make]:
    def make(torch: Any, kwargs: dict[str, Any] = row.kwargs, inputs: Any = row.inputs) -> Any:
        return inputs(torch), {k: v(torch) if callable(v) else v for k, v in kwargs.items()}

    return row.id, make


def _release_of(fn: Callable[..., Any]) -> str:
    package = inspect.unwrap(fn).__globals__["__name__"].split(".")[0]
    return str(sys.modules[package].__version__)


def _alone(*shape: int, device: str = "cpu") -> Callable[[Any], tuple[Any, ...]]:
    """The input tensor as the only positional argument."""
    return lambda torch: (bf16(*shape, device=device)(torch),)


def _fp4_quantize(sf_layout: Any) -> list[Row]:
    rows = []
    for case_id, kwargs, column_major in FP4_LAYOUTS + FP4_ODD_K:
        k = 224 if case_id.startswith("k224") else 256

        def inputs(torch: Any, column_major: bool = column_major, k: int = k) -> tuple[Any, ...]:
            x = torch.randn(40, k, dtype=torch.bfloat16)
            return (x.t() if column_major else x), torch.tensor([2.0])  # column-major: stride(-2) == 1

        if case_id == "pdl-inverted":  # is_global_scale_inversed from 0.6.11; PDL alone before
            rows.append(Row("pdl", {"sf_vec_size": 16, "enable_pdl": True}, inputs, until="0.6.11"))
            rows.append(Row(case_id, kwargs, inputs, since="0.6.11"))
        else:
            rows.append(Row(case_id, kwargs, inputs))
    return rows


def _mxfp4_quantize(sf_layout: Any) -> list[Row]:
    return [
        Row("swizzled128", {}, _alone(40, 256)),
        Row("linear", {"sfLayout": getattr(sf_layout, "layout_linear", None)}, _alone(40, 256), since="0.6.16"),
        Row("swizzled8x4", {"sfLayout": getattr(sf_layout, "layout_8x4", None)}, _alone(40, 256), since="0.6.16"),
        Row("backend-cuda-pdl", {"backend": "cuda", "enable_pdl": True}, _alone(40, 256), since="0.6.7"),
        Row("k224", {}, _alone(40, 224)),  # K / 32 = 7: up to 0.6.7.post3 the scale factors' view raises
        Row("3d", {}, _alone(2, 40, 256)),
    ]


def _nvfp4_batched_quantize(sf_layout: Any) -> list[Row]:
    return [
        Row("sf16", {}, with_scale(2, 40, 256)),
        Row("sf32", {"sf_vec_size": 32}, with_scale(2, 40, 256)),
        Row("k224-m200", {}, with_scale(3, 200, 224)),
        Row("4over6-off", {"nvfp4_4over6": None}, with_scale(2, 40, 256), since="0.7.1"),
    ]


def _grouped(groups: int, m: int, k: int) -> Callable[[Any], tuple[Any, ...]]:
    # (a, mask, a_global_sf): the valid rows per group (int32) and one scale per group (float32)
    return lambda torch: (bf16(groups, m, k)(torch), torch.tensor([m, m // 2, 1][:groups], dtype=torch.int32),
                          torch.tensor([2.0, 3.0, 4.0][:groups]))


def _scaled_fp4_grouped_quantize(sf_layout: Any) -> list[Row]:
    return [
        Row("l2-m40-k256", {}, _grouped(2, 40, 256)),
        Row("l3-m200-k224", {}, _grouped(3, 200, 224)),
        Row("k200", {}, _grouped(2, 40, 200)),  # k % 16 != 0: upstream asserts
        Row("4over6-off", {"nvfp4_4over6": None}, _grouped(2, 40, 256), since="0.7.1"),
    ]


def _silu_and_mul_scaled_nvfp4_experts_quantize(sf_layout: Any) -> list[Row]:
    # a is (l, m, 2 * k): gate, then up
    return [
        Row("l2-m40-k256", {}, _grouped(2, 40, 512)),
        Row("l3-m200-k224", {}, _grouped(3, 200, 448)),
        Row("k200", {}, _grouped(2, 40, 400)),  # k % 16 != 0: upstream asserts
        Row("4over6-off", {"nvfp4_4over6": None}, _grouped(2, 40, 512), since="0.7.1"),
    ]


def _nvfp4_kv_quantize(sf_layout: Any) -> list[Row]:
    return [
        Row("m40-k256", {}, with_scale(40, 256)),
        Row("m200-k224", {}, with_scale(200, 224)),
        Row("k200", {}, with_scale(40, 200)),  # K % 16 != 0: upstream raises ValueError
        Row("skip-check", {"skip_check": True}, with_scale(40, 256)),  # backend_requirement's keyword
    ]


def _paged_kv(*shape: int, fp16: bool = False) -> Callable[[Any], tuple[Any, ...]]:
    """(k_cache, v_cache) of one shape: values fixed by position, so that the amax upstream reads on
    the host (no global scale given), and the floats it returns, are the same in every run."""
    def inputs(torch: Any) -> tuple[Any, ...]:
        dtype = torch.float16 if fp16 else torch.bfloat16
        n = 1
        for d in shape:
            n *= d
        k = torch.linspace(-3.0, 3.0, n).reshape(shape).to(dtype)
        return k, (k * 0.5).flip(-1)
    return inputs


def _nvfp4_quantize_paged_kv_cache(sf_layout: Any) -> list[Row]:
    # (pages, heads, page size, head_dim) in HND, (pages, page size, heads, head_dim) in NHD
    def scale(value: float) -> Callable[[Any], Any]:
        return lambda torch: torch.tensor([value])

    return [
        Row("hnd-amax", {}, _paged_kv(2, 2, 16, 64)),  # no global scale: upstream reads the amax on the host
        Row("nhd-amax", {"kv_layout": "NHD"}, _paged_kv(2, 16, 2, 128)),
        Row("hnd-given", {"k_global_sf": scale(2.0), "v_global_sf": scale(4.0)}, _paged_kv(3, 1, 8, 128)),
        Row("nhd-given-fp16", {"kv_layout": "NHD", "k_global_sf": scale(8.0), "v_global_sf": scale(0.5)},
            _paged_kv(1, 4, 2, 64, fp16=True)),
        Row("page-6", {}, _paged_kv(2, 2, 6, 64)),  # page_size % 4 != 0: upstream refuses
        Row("head-96", {"kv_layout": "NHD"}, _paged_kv(2, 8, 2, 96)),  # head_dim % 64 != 0: refused
    ]


def _mxfp8_quantize(sf_layout: Any) -> list[Row]:
    meta = functools.partial(_alone, device="meta")
    return [
        Row("swizzled", {}, meta(40, 256)),
        Row("linear", {"is_sf_swizzled_layout": False}, meta(40, 256)),
        Row("align64-k224", {"alignment": 64}, meta(40, 224)),
        Row("pdl-3d", {"enable_pdl": True}, meta(2, 40, 256)),
        Row("layout-8x4", {"sf_swizzle_layout": getattr(sf_layout, "layout_8x4", None)}, meta(40, 256),
            since="0.6.7"),
        Row("layout-linear-over-bool", {"sf_swizzle_layout": getattr(sf_layout, "layout_linear", None)},
            meta(40, 256), since="0.6.7"),
        Row("backend-cuda", {"backend": "cuda", "is_sf_swizzled_layout": False}, meta(40, 256), since="0.6.7"),
        Row("k200", {}, meta(40, 200)),  # K % 32 != 0: upstream asserts
    ]


# --- the serving path: GEMM, MoE, norm + quantize ----------------------------------------------


def _fp4_gemm(m: int, k: int, n: int, block: int = 16, alpha: bool = True) -> Callable[[Any], tuple[Any, ...]]:
    """(a, b, a_descale, b_descale[, alpha]): packed FP4 a (m, k/2), b the column-major (k/2, n) view
    of an (n, k/2) weight, 128x4 scale factors (rows padded to 128), a scalar alpha."""
    def inputs(torch: Any) -> tuple[Any, ...]:
        def pad(rows: int) -> int:
            return (rows + 127) // 128 * 128

        scales = (u8(m, k // 2)(torch), u8(n, k // 2)(torch).t(), u8(pad(m), k // block)(torch),
                  u8(pad(n), k // block)(torch).t())
        return (*scales, torch.tensor([1.0])) if alpha else scales
    return inputs


def _fp16_out(m: int, n: int) -> Callable[[Any], Any]:
    return lambda torch: torch.empty(m, n, dtype=torch.float16)


def _mm_fp4(sf_layout: Any) -> list[Row]:
    gemm = _fp4_gemm(40, 256, 128)
    fp16 = {"out_dtype": lambda torch: torch.float16, "out": _fp16_out(40, 128)}
    return [
        Row("cutlass", {"backend": "cutlass"}, gemm),
        Row("cutlass-out-fp16", {"backend": "cutlass", **fp16}, gemm),
        Row("cutlass-m1-no-alpha", {"backend": "cutlass"}, _fp4_gemm(1, 256, 128, alpha=False)),
        # the backend heuristic's choice, which mm_fp4 reads back through its module global
        # (mm_fp4.suitable_auto_backends, set by backend_requirement's wrapper at each call)
        Row("auto", {}, gemm),
        Row("auto-out-fp16", fp16, gemm),
        Row("trtllm", {"backend": "trtllm"}, gemm),  # SM100 only: SM120 refuses
        Row("trtllm-8x4", {"backend": "trtllm", "use_8x4_sf_layout": True}, gemm),
        # without cuDNN's frontend installed upstream refuses: so must the compiled call
        Row("cudnn", {"backend": "cudnn"}, gemm),
        Row("cutlass-pdl-off", {"backend": "cutlass", "enable_pdl": False}, gemm, since="0.6.5"),
        Row("cutlass-skip-check", {"backend": "cutlass", "skip_check": True}, gemm),
        Row("cudnn-mxfp4", {"backend": "cudnn", "block_size": 32, "use_nvfp4": False}, _fp4_gemm(40, 256, 128, block=32)),
        Row("auto-mxfp4", {"block_size": 32, "use_nvfp4": False}, _fp4_gemm(40, 256, 128, block=32)),
        Row("cutlass-mxfp4", {"backend": "cutlass", "block_size": 32, "use_nvfp4": False},  # upstream refuses
            _fp4_gemm(40, 256, 128, block=32)),
        Row("k-mismatch", {"backend": "cutlass"},  # upstream refuses: so must the compiled call
            lambda torch: (u8(40, 128)(torch), u8(128, 64)(torch).t(), *_fp4_gemm(40, 256, 128)(torch)[2:])),
    ]


def _norm(fused: bool, float_scale: bool = False, out_dtype: str = "float8_e4m3fn") -> Callable[[Any], tuple[Any, ...]]:
    """(out, input[, residual], weight, scale): FP8 out, bf16 (40, 256) input, one scale."""
    def inputs(torch: Any) -> tuple[Any, ...]:
        out = torch.empty(40, 256, dtype=getattr(torch, out_dtype))
        scale = 0.5 if float_scale else torch.tensor([0.5])
        residual = (bf16(40, 256)(torch),) if fused else ()
        return (out, bf16(40, 256)(torch), *residual, bf16(256)(torch), scale)
    return inputs


def _norm_rows(fused: bool) -> list[Row]:
    # scale is a float up to 0.6.6, a float or a tensor from 0.6.7 (a host float travels as a tensor);
    # the first row is the form the release documents (upstream's compiled case, the quick ladder's)
    return [
        Row("scale-float", {}, _norm(fused, float_scale=True), until="0.6.7"),
        Row("scale-tensor", {}, _norm(fused), since="0.6.7"),
        Row("scale-float", {}, _norm(fused, float_scale=True), since="0.6.7"),  # deprecated there, still taken
        Row("eps-pdl", {"eps": 1e-5, "enable_pdl": True}, _norm(fused), since="0.6.7"),
        Row("eps-pdl-float", {"eps": 1e-5, "enable_pdl": True}, _norm(fused, float_scale=True), until="0.6.7"),
        Row("e5m2", {}, _norm(fused, float_scale=False, out_dtype="float8_e5m2"), since="0.6.7"),
        Row("e5m2-float", {}, _norm(fused, float_scale=True, out_dtype="float8_e5m2"), until="0.6.7"),
    ]


def _fp8_gemm(m: int, k: int, n: int, *, a8: bool = True, w8: bool = True,
              per_token_w: bool = False) -> Callable[[Any], tuple[Any, ...]]:
    """(input, weight, input_scale, weight_scale): DeepSeek FP8's W8A8 (per-token 1x128 input
    scales, 128x128 weight blocks), or BF16 on either side without its scale."""
    def inputs(torch: Any) -> tuple[Any, ...]:
        x, w = bf16(m, k)(torch), bf16(n, k)(torch)
        x_scale = torch.ones(m, k // 128) if a8 else None
        w_scale = torch.ones(n if per_token_w else (n + 127) // 128, k // 128) if w8 else None
        return (x.to(torch.float8_e4m3fn) if a8 else x, w.to(torch.float8_e4m3fn) if w8 else w, x_scale, w_scale)
    return inputs


def _k_mismatch(torch: Any) -> tuple[Any, ...]:
    a, b = _fp8_gemm(40, 256, 256)(torch), _fp8_gemm(40, 128, 256)(torch)
    return a[0], b[1], a[2], b[3]


def _fp8_blockscale_gemm_sm90(sf_layout: Any) -> list[Row]:
    fp16_out = {"out": _fp16_out(40, 256), "out_dtype": lambda torch: torch.float16}
    return [
        Row("w8a8-m40", {}, _fp8_gemm(40, 256, 256)),
        Row("w8a8-m1", {}, _fp8_gemm(1, 512, 128)),  # M < 32: the swapAB kernel
        Row("w8a8-out-fp16", fp16_out, _fp8_gemm(40, 256, 256)),
        Row("bf16-w8-per-token", {}, _fp8_gemm(40, 256, 256, a8=False, per_token_w=True)),
        Row("bf16-bf16", {}, _fp8_gemm(40, 256, 256, a8=False, w8=False)),
        Row("out-dtype-fp16", {"out_dtype": lambda torch: torch.float16}, _fp8_gemm(40, 256, 256)),
        Row("n-96", {}, _fp8_gemm(40, 256, 96)),  # N % 64 != 0: upstream refuses
        Row("k-mismatch", {}, _k_mismatch),  # upstream refuses: so must the compiled call
    ]


def _tiny(m: int, k: int, n: int, *, bias: bool = True) -> Callable[[Any], tuple[Any, ...]]:
    """(input, weight, out[, bias]): BF16 (m, k) @ (n, k).T into a BF16 (m, n) out."""
    def inputs(torch: Any) -> tuple[Any, ...]:
        out = torch.empty(m, n, dtype=torch.bfloat16)
        extra = (bf16(n)(torch),) if bias else ()
        return (bf16(m, k)(torch), bf16(n, k)(torch), out, *extra)
    return inputs


def _tinygemm_bf16(sf_layout: Any) -> list[Row]:
    return [
        Row("bias-m4", {}, _tiny(4, 128, 32)),  # GPT-OSS's router: a few tokens, 32 experts
        Row("no-bias", {}, _tiny(4, 128, 32, bias=False)),
        Row("pdl-m1", {"use_pdl": True}, _tiny(1, 256, 64)),
        Row("skip-check", {"skip_check": True}, _tiny(8, 128, 16)),
        Row("n-24", {}, _tiny(4, 128, 24)),  # output_features % 16 != 0: upstream refuses
    ]


_TABLES: dict[str, Callable[[Any], list[Row]]] = {
    "fp4_quantize": _fp4_quantize,
    "nvfp4_quantize": quant_cases.TABLES["nvfp4_quantize"],
    "nvfp4_batched_quantize": _nvfp4_batched_quantize,
    "scaled_fp4_grouped_quantize": _scaled_fp4_grouped_quantize,
    "silu_and_mul_scaled_nvfp4_experts_quantize": _silu_and_mul_scaled_nvfp4_experts_quantize,
    "nvfp4_kv_quantize": _nvfp4_kv_quantize,
    "nvfp4_quantize_paged_kv_cache": _nvfp4_quantize_paged_kv_cache,
    "mxfp8_quantize": _mxfp8_quantize,
    "mxfp4_quantize": _mxfp4_quantize,
    "rmsnorm_quant": lambda sf_layout: _norm_rows(fused=False),
    "fused_add_rmsnorm_quant": lambda sf_layout: _norm_rows(fused=True),
    "mm_fp4": _mm_fp4,
    **moe_cases.TABLES,
    "silu_and_mul_nvfp4_quantize": quant_cases.TABLES["silu_and_mul_nvfp4_quantize"],
    "fp8_blockscale_gemm_sm90": _fp8_blockscale_gemm_sm90,
    "tinygemm_bf16": _tinygemm_bf16,
}

# The public entry points the trace ladder calls (in this order); the overlay's entries.py says which it routes.
CANDIDATES: tuple[str, ...] = tuple(_TABLES)
