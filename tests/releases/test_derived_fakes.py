"""Fakes derived from upstream's own function: what it returns is what the compiled call returns.

An entry in the overlay's entries.py that names no fake gets upstream's function itself as its op's
fake (faking.py), its result's form read off what that returns (forms.py). Upstream-shaped functions
with the three kinds of change issue 41 found a hand-kept fake to miss are routed here by this
checkout's opaque.py and compiled with fullgraph (aot_eager and inductor functionalize first), beside
the eager call of the same function:

- a size threshold in the allocation (the scale factors' rows padded to 256 from 1024 rows on);
- a NamedTuple result (the compiled call returns the same class, its fields readable);
- an arity that follows an argument's value (a third tensor when no global scale is given);

and an op that writes into ``out``, with ``out`` given and left None (a second op leaves its
allocation to upstream). What dynamo makes of FlashInfer's own wrappers is the trace ladder's to prove
(tests/releases/test_trace_flashinfer.py), and the synthetic releases' (tests/carrying/).
"""

# The upstream-shaped functions below are annotated as FlashInfer annotates (typing.Optional).
# ruff: noqa: UP045

from __future__ import annotations

import shutil
import sys
from typing import Any, NamedTuple, Optional

import pytest
import torch
from helpers import overlay_package

pytestmark = [pytest.mark.torch]


class Quantized(NamedTuple):
    values: torch.Tensor
    sf: torch.Tensor


def _round_up(x: int, y: int) -> int:
    return (x + y - 1) // y * y


def derived_padded(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale factors padded to 128 rows, to 256 from 1024 rows on (0.6.8-0.7.2's TMA path pads otherwise)."""
    rows = x.shape[0]
    sf = torch.empty((_round_up(rows, 256 if rows >= 1024 else 128), x.shape[1] // 16), dtype=torch.uint8)
    return torch.empty((rows, x.shape[1] // 2), dtype=torch.uint8), sf


def derived_named(x: torch.Tensor) -> Quantized:
    return Quantized(torch.empty((x.shape[0], x.shape[1] // 2), dtype=torch.uint8),
                     torch.empty((x.shape[0], x.shape[1] // 16), dtype=torch.uint8))


def derived_arity(x: torch.Tensor, global_scale: Optional[torch.Tensor] = None) -> Any:
    values = torch.empty((x.shape[0], x.shape[1] // 2), dtype=torch.uint8)
    sf = torch.empty((x.shape[0], x.shape[1] // 16), dtype=torch.uint8)
    if global_scale is None:  # the scale upstream computed, returned beside
        return values, sf, torch.empty((1,), dtype=torch.float32)
    return values, sf


def derived_gemm(a: torch.Tensor, b: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    if out is None:
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    torch.mm(a, b, out=out)
    return out


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with overlay_package(tmp_path_factory.mktemp("overlay"), "fi_derived_under_test") as opaque:
        E = sys.modules["fi_derived_under_test._nvfp4_overlay.entries"].Entry
        table = {derived_padded: E(), derived_named: E(), derived_arity: E(),
                 derived_gemm: E(returns="out", mutates=frozenset({"out"}))}
        yield {fn.__name__.split("_", 1)[1]: opaque._plan(fn, entry).wrapper() for fn, entry in table.items()}


def _shapes(value: Any) -> Any:
    """The result's classes and its tensors' shapes, strides and dtypes: what a caller can tell apart."""
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.stride(), value.dtype)
    return (type(value), tuple(_shapes(v) for v in value))


def _compiled(fn: Any, *args: Any, backend: str = "aot_eager", **kwargs: Any) -> Any:
    torch._dynamo.reset()
    return torch.compile(lambda *a: fn(*a, **kwargs), fullgraph=True, backend=backend)(*args)


@pytest.mark.parametrize("rows", [1, 127, 1000, 1023, 1024, 1100, 2049])
def test_a_size_threshold_in_upstreams_allocation_is_followed(routed: Any, rows: int) -> None:
    x = torch.randn(rows, 64)
    eager, compiled = routed["padded"](x), _compiled(routed["padded"], x)
    assert _shapes(compiled) == _shapes(eager)
    assert compiled[1].shape[0] == (_round_up(rows, 256) if rows >= 1024 else _round_up(rows, 128))


def test_a_named_tuple_comes_back_as_its_class(routed: Any) -> None:
    x = torch.randn(40, 64)
    compiled = _compiled(routed["named"], x)
    assert type(compiled) is Quantized and compiled._fields == ("values", "sf")
    assert _shapes(compiled) == _shapes(routed["named"](x))
    assert _compiled(lambda t: routed["named"](t).sf, x).shape == (40, 4)  # a caller reading a field


def test_an_arity_that_follows_a_value_is_followed(routed: Any) -> None:
    x, scale = torch.randn(40, 64), torch.tensor([2.0])
    for kwargs in ({}, {"global_scale": scale}, {"global_scale": None}):
        eager, compiled = routed["arity"](x, **kwargs), _compiled(routed["arity"], x, **kwargs)
        assert _shapes(compiled) == _shapes(eager), kwargs
    assert len(_compiled(routed["arity"], x)) == 3 and len(_compiled(routed["arity"], x, global_scale=scale)) == 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_an_op_that_writes_into_out_leaves_a_none_out_to_upstream(routed: Any, backend: str) -> None:
    """out given: the op writes into it and hands it back; out None: the second op returns what upstream
    allocates. Both through AOT functionalization; the values are upstream's (torch.mm)."""
    if backend == "inductor" and shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("inductor on the CPU needs a C++ compiler")
    a, b, out = torch.randn(4, 8), torch.randn(8, 16), torch.zeros(4, 16)
    gemm = routed["gemm"]
    torch._dynamo.reset()
    fresh, given = torch.compile(lambda a, b, o: (gemm(a, b) + 1, gemm(a, b, out=o)), fullgraph=True,
                                 backend=backend)(a, b, out)
    torch.testing.assert_close(fresh, a @ b + 1)
    assert given is out and torch.equal(out, a @ b)
    schemas = (str(gemm.__nvfp4_overlay_op__._opoverload._schema),
               str(sys.modules["fi_derived_under_test._nvfp4_overlay.ops"]._ops["flashinfer_derived_gemm_fresh"]
                   ._opoverload._schema))
    assert schemas[0].endswith("(Tensor a, Tensor b, Tensor(a2!)? out) -> ()"), schemas
    assert schemas[1].endswith("(Tensor a, Tensor b, Tensor? out) -> Tensor[]"), schemas
