"""nvfp4-overlay: parameters no schema type carries (Codec), each carried in upstream's own encoding.

entries.py names, per entry point, the parameters that travel through one of these.
"""

from dataclasses import dataclass
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class Codec:
    """A parameter carried as `schema`: encode(upstream_globals, value) and decode back."""

    schema: str
    encode: Callable[[Mapping[str, Any], Any], Any]
    decode: Callable[[Mapping[str, Any], Any], Any]
    # accepts(upstream_globals, value): whether decode(encode(value)) is what upstream would get;
    # a value it refuses takes upstream's path.
    accepts: Callable[[Mapping[str, Any], Any], bool] = lambda upstream, value: True
    # scope(defining module's globals) -> the names the three functions read, resolved once when
    # the entry point is routed (flashinfer/activation.py imports only part of the 4over6 helpers).
    scope: Callable[[Mapping[str, Any]], Mapping[str, Any]] = lambda upstream: upstream


def _4over6_code(upstream: Mapping[str, Any], value: Any) -> int:
    # 0.7.4: an omitted recipe (the _UNSET sentinel) is read from the environment by the kernel
    # wrapper; upstream's own int code says so with NVFP4_4OVER6_CODE_FROM_ENV.
    if value is upstream["_UNSET"]:
        return int(upstream["NVFP4_4OVER6_CODE_FROM_ENV"])
    return int(upstream["nvfp4_4over6_code"](value))


def _4over6_recipe(upstream: Mapping[str, Any], code: int) -> Any:
    return upstream["nvfp4_4over6_from_code"](code)


# The helpers' own module (quantization/nvfp4_quantization_utils.py), found through one of them.
NVFP4_4OVER6 = Codec("int", _4over6_code, _4over6_recipe,
                     scope=lambda upstream: upstream["nvfp4_4over6_code"].__globals__)


# SfLayout: an Enum up to 0.6.6 (flashinfer/fp4_quantization.py), an IntEnum from 0.6.7
# (flashinfer/tllm_enums.py); 128x4 = 0, 8x4 = 1, linear = 2 in every release. It travels as its
# value and comes back as the release's own member, read from the defining module. Only members
# route: upstream compares the Enum with `==` (an int never equals a member up to 0.6.6) and reads
# `.value` of it (mxfp8_quantize), so an int may mean something else there than here.
def _sf_layout_code(upstream: Mapping[str, Any], value: Any) -> Any:
    return None if value is None else int(value.value)


def _sf_layout(upstream: Mapping[str, Any], code: Any) -> Any:
    return None if code is None else upstream["SfLayout"](code)


SF_LAYOUT = Codec("int", _sf_layout_code, _sf_layout,
                  lambda upstream, value: isinstance(value, upstream["SfLayout"]))
SF_LAYOUT_OR_NONE = Codec("int?", _sf_layout_code, _sf_layout,
                          lambda upstream, value: value is None or isinstance(value, upstream["SfLayout"]))

# topk_ids of trtllm_fp4_block_scale_routed_moe: a packed tensor, or (from 0.6.12) an (ids, weights)
# pair; it travels as a list of one or two tensors.
def _tensors(upstream: Mapping[str, Any], value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else [value]


def _tensor_or_pair(upstream: Mapping[str, Any], value: Any) -> Any:
    return value[0] if len(value) == 1 else tuple(value)


TENSOR_OR_PAIR = Codec("Tensor[]", _tensors, _tensor_or_pair, lambda upstream, value: _is_tensors(value))


def _is_tensors(value: Any) -> bool:
    import torch

    if isinstance(value, tuple):
        return len(value) == 2 and all(isinstance(v, torch.Tensor) for v in value)
    return isinstance(value, torch.Tensor)


# cutlass_fused_moe's activation_type: a member of the release's ActivationType (an IntEnum, in
# fused_moe/core.py up to 0.6.6, tllm_enums.py from 0.6.7), carried as its value and handed back as the member.
# A plain int takes upstream's path (the kernel would get the member where the caller passed an int).
ACTIVATION_TYPE = Codec("int", lambda upstream, value: int(value),
                        lambda upstream, code: upstream["ActivationType"](code),
                        lambda upstream, value: isinstance(value, upstream["ActivationType"]))


# cutlass_fused_moe's quant_scales: a list of tensors (empty for BF16), or None where a caller
# passes none; a tuple, or a list holding anything else, takes upstream's path.
def _is_tensor_list(value: Any) -> bool:
    import torch

    return isinstance(value, list) and all(isinstance(v, torch.Tensor) for v in value)


TENSOR_LIST_OR_NONE = Codec("Tensor[]?", lambda upstream, value: value, lambda upstream, value: value,
                            lambda upstream, value: value is None or _is_tensor_list(value))


# nvfp4_quantize's a_global_sf: a tensor, or a host float (per token; the CuTe-DSL kernel from
# 0.6.17), which travels as a 0-dim float64 CPU tensor and comes back as the float; the op reads it
# on the host when it runs. A caller's own 0-dim float64 CPU tensor takes upstream's path (it would
# come back a float).
def _scale_code(upstream: Mapping[str, Any], value: Any) -> Any:
    import torch

    return torch.tensor(value, dtype=torch.float64) if isinstance(value, float) else value


def _scale(upstream: Mapping[str, Any], code: Any) -> Any:
    return float(code.item()) if _is_float_code(code) else code


def _is_float_code(value: Any) -> bool:
    import torch

    return (isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype == torch.float64
            and value.device.type == "cpu")


def _is_scale(value: Any) -> bool:
    import torch

    return isinstance(value, float) or isinstance(value, torch.Tensor) and not _is_float_code(value)


TENSOR_OR_FLOAT = Codec("Tensor", _scale_code, _scale, lambda upstream, value: _is_scale(value))


# A parameter routed only when it is None (an object no schema carries: 0.7.4's routing_metadata).
NONE_ONLY = Codec("int?", lambda upstream, value: None, lambda upstream, code: None,
                  lambda upstream, value: value is None)


# top_k of the sampling functions: a tensor, or a host int, which travels as a 0-dim int64 CPU
# tensor and comes back as the int (TENSOR_OR_FLOAT's way); a caller's own 0-dim int64 CPU tensor
# takes upstream's path (it would come back an int).
def _int_code(upstream: Mapping[str, Any], value: Any) -> Any:
    import torch

    return torch.tensor(value, dtype=torch.int64) if isinstance(value, int) else value


def _int(upstream: Mapping[str, Any], code: Any) -> Any:
    return int(code.item()) if _is_int_code(code) else code


def _is_int_code(value: Any) -> bool:
    import torch

    return (isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype == torch.int64
            and value.device.type == "cpu")


def _is_count(value: Any) -> bool:
    import torch

    if isinstance(value, bool):
        return False
    return isinstance(value, int) or isinstance(value, torch.Tensor) and not _is_int_code(value)


TENSOR_OR_INT = Codec("Tensor", _int_code, _int, lambda upstream, value: _is_count(value))


# A sampling call's seed and offset: routed only as tensors (the generator state the kernel reads on
# the device); an int, or None (the state drawn from a host generator), takes upstream's path.
def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


TENSOR_STATE = Codec("Tensor?", lambda upstream, value: value, lambda upstream, value: value,
                     lambda upstream, value: _is_tensor(value))


# single_prefill_with_kv_cache's kv_cache_sf (0.6.18 on): None, or a (k, v) pair of scale-factor
# tensors, which travels as a list of two.
TENSOR_PAIR_OR_NONE = Codec("Tensor[]?", lambda upstream, value: None if value is None else list(value),
                            lambda upstream, value: None if value is None else tuple(value),
                            lambda upstream, value: value is None or isinstance(value, tuple) and len(value) == 2
                            and all(_is_tensor(v) for v in value))


# The activations' out (``out: torch.Tensor = None``: annotated Tensor, defaulting to None): a tensor
# or None, as the default says.
TENSOR_OR_NONE = Codec("Tensor?", lambda upstream, value: value, lambda upstream, value: value,
                       lambda upstream, value: value is None or _is_tensor(value))
