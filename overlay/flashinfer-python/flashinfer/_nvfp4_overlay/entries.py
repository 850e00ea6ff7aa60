"""nvfp4-overlay: what opaque.py needs about each routed entry point that its signature cannot say.

One Entry per public function name, for every release that has it. The parameters, their order
and their schema types come from the release's own signature; only these stay declarative:

- returns: the op's output schema;
- fake: the function of fakes.py that allocates the outputs as upstream's wrapper does;
- routes: parameter -> the values that take the op while tracing (the others stay upstream's
  path, e.g. the experimental cute-dsl backend, whose outputs no fake here is proven for);
- codecs: parameters whose values no schema type carries, with upstream's own encoding.
"""

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Mapping

from . import fakes


@dataclass(frozen=True)
class Codec:
    """A parameter carried as `schema`: encode(upstream_globals, value) and decode back."""

    schema: str
    encode: Callable[[Mapping[str, Any], Any], Any]
    decode: Callable[[Mapping[str, Any], Any], Any]


@dataclass(frozen=True)
class Entry:
    returns: str
    fake: Callable[..., Any]
    routes: Mapping[str, FrozenSet[Any]] = field(default_factory=dict)
    codecs: Mapping[str, Codec] = field(default_factory=dict)


def _4over6_code(upstream: Mapping[str, Any], value: Any) -> int:
    # 0.7.4: an omitted recipe (the _UNSET sentinel) is read from the environment by the kernel
    # wrapper; upstream's own int code says so with NVFP4_4OVER6_CODE_FROM_ENV.
    if value is upstream["_UNSET"]:
        return int(upstream["NVFP4_4OVER6_CODE_FROM_ENV"])
    return int(upstream["nvfp4_4over6_code"](value))


def _4over6_recipe(upstream: Mapping[str, Any], code: int) -> Any:
    return upstream["nvfp4_4over6_from_code"](code)


NVFP4_4OVER6 = Codec("int", _4over6_code, _4over6_recipe)

ENTRIES: Dict[str, Entry] = {
    "fp4_quantize": Entry(
        returns="(Tensor, Tensor)",
        fake=fakes.fp4_quantize,
        routes={"backend": frozenset({"cuda", "auto"}), "batch_invariant": frozenset({False})},
        codecs={"nvfp4_4over6": NVFP4_4OVER6},
    ),
}
