"""The overlay's ops that write into a parameter under AOT functionalization: aot_eager and inductor.

Every compiler but dynamo's own ``eager`` functionalizes the graph first (AOT autograd), and it
refuses a custom op that mutates a parameter and returns ``Tensor[]``. opaque.py gives such an op a
fixed form, the parameter upstream hands back always given (the traced path allocates it with the
fake when the call leaves it None). Here upstream-shaped functions of each result form that writes
(``out``, ``[output, Tensor]``, ``()``) are routed by this checkout's opaque.py and compiled
together, with the parameter passed and left None: each compiler's result equals the eager call's,
upstream's body runs once per call and writes into what it is given. The trace ladder
(tests/releases/test_trace_flashinfer.py) holds every routed entry point of every release to AOT
functionalization (aot_eager's); this is inductor's own lowering of such an op, on the CPU.
"""

# The upstream-shaped functions below are annotated as FlashInfer annotates (typing.Optional, List).
# ruff: noqa: UP006, UP035, UP045

from __future__ import annotations

import shutil
import sys
from typing import Any, List, Optional

import pytest
import torch
from helpers import overlay_package

pytestmark = [pytest.mark.torch]

GIVEN: list[Any] = []  # what upstream's bodies were handed for the parameter they write into


def gemm(a: torch.Tensor, b: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    GIVEN.append(out)
    if out is None:
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    torch.mm(a, b, out=out)
    return out


def moe(x: torch.Tensor, output: Optional[torch.Tensor] = None) -> List[torch.Tensor]:
    GIVEN.append(output)
    if output is None:
        output = torch.empty_like(x)
    output.copy_(x * 2)
    return [output, x.sum(0)]


def norm(out: torch.Tensor, input: torch.Tensor) -> None:
    GIVEN.append(out)
    out.copy_(input * 3)


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with overlay_package(tmp_path_factory.mktemp("overlay"), "fi_functionalized_under_test") as opaque:
        entries = sys.modules["fi_functionalized_under_test._nvfp4_overlay.entries"]
        E = entries.Entry
        table = {
            "functionalized_gemm": (gemm, E(
                returns="out", mutates=frozenset({"out"}),
                fake=lambda a, b, out: out if out is not None else a.new_empty((a.shape[0], b.shape[1])))),
            "functionalized_moe": (moe, E(
                returns="[output, Tensor]", mutates=frozenset({"output"}),
                fake=lambda x, output: [x.new_empty(x.shape) if output is None else output, x.new_empty(x.shape[1:])])),
            "functionalized_norm": (norm, E(
                returns="()", fake=lambda: None, inert=frozenset({"out", "input"}),
                mutates=frozenset({"out"}))),
        }
        out = {}
        for name, (fn, entry) in table.items():
            fn.__name__ = name  # the op is named after the function
            out[name.split("_", 1)[1]] = opaque._plan(fn, entry).wrapper()
        yield out


def calls(routed: Any, a: torch.Tensor, b: torch.Tensor, o: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
          n: torch.Tensor) -> Any:
    """Each form with its parameter left None and given; the results read after every call."""
    fresh_gemm, given_gemm = routed["gemm"](a, b), routed["gemm"](a, b, out=o)
    fresh_moe, given_moe = routed["moe"](x), routed["moe"](x, output=y)
    none = routed["norm"](n, x)
    return fresh_gemm + 1, given_gemm, fresh_moe[0] - 1, fresh_moe[1], given_moe[0], given_moe[1], none


def inputs() -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    a, b, x = (torch.randn(shape, generator=generator) for shape in ((4, 8), (8, 16), (5, 6)))
    return a, b, torch.zeros(4, 16), x, torch.zeros(5, 6), torch.zeros(5, 6)


def test_the_schemas_return_a_fixed_form(routed: Any) -> None:
    schemas = {name: str(fn.__nvfp4_overlay_op__._opoverload._schema) for name, fn in routed.items()}
    assert schemas["gemm"].endswith("(Tensor a, Tensor b, Tensor(a2!)? out) -> ()"), schemas
    assert schemas["moe"].endswith("(Tensor x, Tensor(a1!)? output) -> Tensor"), schemas
    assert schemas["norm"].endswith("(Tensor(a0!) out, Tensor input) -> ()"), schemas


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_mutating_op_compiles_and_runs_as_eager(routed: Any, backend: str) -> None:
    if backend == "inductor" and shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("inductor on the CPU needs a C++ compiler")
    want_inputs, got_inputs = inputs(), inputs()
    del GIVEN[:]
    want = calls(routed, *want_inputs)
    eager_given = list(GIVEN)
    del GIVEN[:]
    torch._dynamo.reset()
    got = torch.compile(lambda *a: calls(routed, *a), backend=backend, fullgraph=True)(*got_inputs)
    assert got[-1] is None and want[-1] is None
    for g, w in zip(got[:-1], want[:-1]):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    for g, w in zip(got_inputs, want_inputs):  # out, output and the norm's out written alike
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    # upstream's bodies ran once a call; eagerly they got None where the caller passed none, compiled a
    # tensor the shape upstream allocates (the traced path's, from the fake); inductor may reorder the
    # calls, which depend on none of each other
    assert [v is None for v in eager_given] == [True, False, True, False, False]
    assert len(GIVEN) == 5 and all(isinstance(v, torch.Tensor) for v in GIVEN), GIVEN
    assert sorted(tuple(v.shape) for v in GIVEN) == [(4, 16), (4, 16), (5, 6), (5, 6), (5, 6)]
