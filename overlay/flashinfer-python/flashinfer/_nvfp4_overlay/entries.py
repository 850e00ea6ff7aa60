"""nvfp4-overlay: what opaque.py needs about each routed entry point that its signature cannot say.

One Entry per public function name, for every release that has it. The parameters, their order
and their schema types come from the release's own signature; only these stay declarative:

- returns: the op's output schema;
- fake: the function of fakes.py that allocates the outputs as upstream's wrapper does;
- routes: parameter -> the values that take the op while tracing (the others stay upstream's
  path, e.g. the experimental cute-dsl backend, whose outputs no fake here is proven for);
- codecs: parameters whose values no schema type carries, with upstream's own encoding;
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


@dataclass(frozen=True)
class Entry:
    returns: str
    fake: Callable[..., Any]
    routes: Mapping[str, FrozenSet[Any]] = field(default_factory=dict)
    codecs: Mapping[str, Codec] = field(default_factory=dict)
    types: Mapping[str, str] = field(default_factory=dict)
    hidden: Mapping[str, Tuple[str, Any]] = field(default_factory=dict)
    when: Optional[Callable[[Mapping[str, Any]], bool]] = None


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

# The cuda kernels; 0.7.4's "auto" is "cuda" unless batch_invariant. Not routed: "cute-dsl" and
# "cake" (other kernels, other allocations) and batch_invariant=True.
_CUDA = {"backend": frozenset({"cuda", "auto"}), "batch_invariant": frozenset({False})}
_TENSORS = {"a": "Tensor", "mask": "Tensor"}

ENTRIES: Dict[str, Entry] = {
    "fp4_quantize": Entry(
        returns="(Tensor, Tensor)",
        fake=fakes.fp4_quantize,
        routes=_CUDA,
        codecs={"nvfp4_4over6": NVFP4_4OVER6},
    ),
    # per_token_activation (three outputs, a host read of the scale) and do_shuffle (weight
    # preparation: a row gather and block_scale_interleave) stay upstream's.
    "nvfp4_quantize": Entry(
        returns="(Tensor, Tensor)",
        fake=fakes.nvfp4_quantize,
        routes={**_CUDA, "do_shuffle": frozenset({False}), "per_token_activation": frozenset({False})},
        codecs={"sfLayout": SF_LAYOUT, "nvfp4_4over6": NVFP4_4OVER6},
        types={"a": "Tensor", "a_global_sf": "Tensor", "do_shuffle": "bool", "sf_vec_size": "int",
               "enable_pdl": "bool?"},
    ),
    "nvfp4_batched_quantize": Entry(
        returns="(Tensor, Tensor)",
        fake=fakes.nvfp4_batched_quantize,
        codecs={"nvfp4_4over6": NVFP4_4OVER6},
        types={"a": "Tensor", "a_global_sf": "Tensor?", "sf_vec_size": "int"},
    ),
    "scaled_fp4_grouped_quantize": Entry(
        returns="(Tensor, Tensor)",
        fake=fakes.scaled_fp4_grouped_quantize,
        codecs={"nvfp4_4over6": NVFP4_4OVER6},
        types={**_TENSORS, "a_global_sf": "Tensor"},
    ),
    "silu_and_mul_scaled_nvfp4_experts_quantize": Entry(
        returns="(Tensor, Tensor)",
        fake=fakes.silu_and_mul_scaled_nvfp4_experts_quantize,
        codecs={"nvfp4_4over6": NVFP4_4OVER6},
        types={**_TENSORS, "a_global_sf": "Tensor?"},
    ),
    "nvfp4_kv_quantize": Entry(
        returns="(Tensor, Tensor)",
        fake=fakes.nvfp4_kv_quantize,
        hidden={"skip_check": ("bool", False)},
    ),
    # A CPU tensor takes upstream's host branch (another kernel, another allocation): not routed.
    "mxfp8_quantize": Entry(
        returns="(Tensor, Tensor)",
        fake=fakes.mxfp8_quantize,
        routes=_CUDA,
        codecs={"sf_swizzle_layout": SF_LAYOUT_OR_NONE},
        when=lambda values: values["input"].device.type != "cpu",
    ),
    "mxfp4_quantize": Entry(
        returns="(Tensor, Tensor)",
        fake=fakes.mxfp4_quantize,
        routes=_CUDA,
        codecs={"sfLayout": SF_LAYOUT},
        types={"a": "Tensor"},
    ),
}
