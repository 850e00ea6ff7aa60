"""The traced path opaque.py writes for each entry point against the generic binder it replaces.

Up to +nvfp4.6 (+nvfp4.5), a routed call bound its arguments while dynamo traced with a generic binder
(a dict of the defaults, the positional names zipped in, the keywords over them, generator
expressions over the routes and the type checks, the result's text parsed on every call): about
170 ms of tracing a call, as dynamo inlines every Python call it makes. opaque.py now writes a
function for each signature instead. That binder is kept here as the reference (STYLE.md: a slow
implementation kept as the oracle of the fast one), and both are called, eagerly, on every form a
caller can use: each parameter by position, by keyword or left out, values the op takes and values it
does not, a parameter too many, an unknown keyword, a required one missing. Both must take the same
calls to the op, with the same arguments, and hand back the same result; what dynamo makes of the
written path is the trace ladder's to prove, release by release (tests/releases/test_trace_flashinfer.py).
"""

# The upstream-shaped functions below are annotated as FlashInfer annotates (typing.Optional, Union,
# List): opaque.py reads those forms, and `X | Y` is another (types.UnionType).
# ruff: noqa: UP006, UP007, UP035, UP045

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any, List, Optional, Union

import pytest
import torch
from helpers import assemble, overlay_package
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.torch]


@pytest.fixture(scope="module")
def overlay(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """opaque.py from this checkout, imported under a package of its own (0.7.4's release)."""
    with overlay_package(tmp_path_factory.mktemp("overlay"), "fi_traced_path_under_test") as opaque:
        yield opaque


class Layout(enum.IntEnum):  # SfLayout's shape: members route, a plain int does not
    layout_128x4 = 0
    layout_8x4 = 1


# --- upstream-shaped functions, one per feature of entries.py ---------------------------------------


def quantize(input: torch.Tensor, global_scale: Optional[torch.Tensor] = None, sf_vec_size: int = 16,
             backend: str = "cuda", per_token: bool = False, *, enable_pdl: Optional[bool] = None) -> Any:
    raise AssertionError("upstream's body is not called by the traced path")


def moe(hidden: torch.Tensor, top_k: int, output: Optional[torch.Tensor] = None, do_finalize: bool = True,
        scales: Optional[List[torch.Tensor]] = None, layout: Any = None) -> Any:
    raise AssertionError


def paged(k: torch.Tensor, v: torch.Tensor, k_sf: Union[float, torch.Tensor] = 1.0) -> Any:
    raise AssertionError


def norm(out: torch.Tensor, input: torch.Tensor, scale: Union[float, torch.Tensor], eps: float = 1e-6) -> Any:
    raise AssertionError


def positional_only(a: torch.Tensor, /, b: int = 1) -> Any:
    raise AssertionError


def with_skip_check(fn: Callable[..., Any]) -> Callable[..., Any]:
    """backend_requirement's shape: a wrapper that pops skip_check from its keywords."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("skip_check", False)
        return fn(*args, **kwargs)
    return wrapper


def _entries(entries: Any) -> dict[str, tuple[Callable[..., Any], Any]]:
    E, Codec = entries.Entry, entries.Codec
    layout = Codec("int?", lambda up, v: None if v is None else int(v), lambda up, c: None if c is None else Layout(c),
                   lambda up, v: v is None or isinstance(v, Layout))

    def fake_quantize(input: Any, sf_vec_size: Any, per_token: Any) -> Any:
        return (torch.empty(1),) * (3 if per_token else 2)

    return {
        "traced_path_quantize": (quantize, E(
            returns="(Tensor, Tensor)", variants={"per_token": {True: "(Tensor, Tensor, Tensor)"}},
            fake=fake_quantize, inert=frozenset({"global_scale", "enable_pdl"}),
            routes={"backend": frozenset({"cuda", "auto"}), "batch_invariant": frozenset({False})},
            when=lambda values: values["sf_vec_size"] != 32)),
        "traced_path_moe": (moe, E(
            # 0-dim: the output it allocates for output=None compares equal on both sides (_same)
            returns="[output, Tensor]", fake=lambda hidden: [torch.tensor(7.0), torch.tensor(8.0)],
            inert=frozenset({"top_k", "output", "scales", "layout"}), mutates=frozenset({"output"}),
            routes={"do_finalize": frozenset({True})},
            codecs={"scales": entries.TENSOR_LIST_OR_NONE, "layout": layout})),
        "traced_path_paged": (paged, E(
            returns="((Tensor, Tensor), float)", fake=lambda k, v: [torch.empty(1)] * 3,
            inert=frozenset({"k_sf"}), codecs={"k_sf": entries.TENSOR_OR_FLOAT})),
        "traced_path_norm": (with_skip_check(norm), E(
            returns="()", fake=lambda: None, inert=frozenset({"out", "input", "scale", "eps", "skip_check"}),
            mutates=frozenset({"out"}), codecs={"scale": entries.TENSOR_OR_FLOAT},
            hidden={"skip_check": ("bool", False)})),
        "traced_path_positional_only": (positional_only, E(
            returns="(Tensor,)", fake=lambda a: [torch.empty(1)], inert=frozenset({"b"}))),
    }


@pytest.fixture(scope="module")
def plans(overlay: Any) -> dict[str, Any]:
    entries = sys.modules["fi_traced_path_under_test._nvfp4_overlay.entries"]
    out = {}
    for name, (fn, entry) in _entries(entries).items():
        fn = functools.wraps(fn)(functools.partial(fn))  # the op is named after the function
        fn.__name__ = name  # type: ignore[attr-defined]
        out[name] = overlay._plan(fn, entry)
    return out


# --- the reference: the generic binder of +nvfp4.6 ---------------------------------------------------


UPSTREAM = "upstream's path"


def reference(plan: Any, op: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    names, positional, defaults = plan.names, plan.positional, plan.defaults
    entry = plan.entry
    if len(args) <= len(positional):
        values = dict(defaults)
        values.update(zip(positional, args))
        values.update(kwargs)
        if (len(values) == len(names)
                and all(values[k] in v for k, v in entry.routes.items() if k in values)
                and all(ok(values[n]) for n, ok in plan.accepts.items())
                and (entry.when is None or entry.when(values))):
            allocate(plan, values)
            fresh = op(*[plan.encode[n](values[n]) if n in plan.encode else values[n] for n in names])
            fresh = fresh if plan.form is None else [] if fresh is None else [fresh] if plan.form == 1 else list(fresh)
            return assemble(entry.result_for(values), values, fresh)
    return UPSTREAM


def allocate(plan: Any, values: dict[str, Any]) -> None:
    """A mutating op returns a fixed form: a parameter upstream hands back that the call left None is
    allocated by the fake (its tensor at the parameter's place in upstream's result) and given to the op."""
    if plan.form is None:
        return
    reads = [n for n in inspect.signature(plan.entry.fake).parameters if n in plan.names]
    for name, where in plan.entry.result.handed_back(plan.names).items():
        if values[name] is None:
            leaf = plan.entry.fake(**{n: values[n] for n in reads})
            for i in where:
                leaf = leaf[i]
            values[name] = leaf


class Recorder:
    """The op: records its arguments, returns fresh 0-dim float64 tensors (a float node reads one): a
    list of `count`, or in a mutating op's fixed form (`form` of them: None, one tensor, a tuple)."""

    def __init__(self, count: int, form: int | None = None) -> None:
        self.count, self.form, self.calls = count, form, []  # type: ignore[var-annotated]

    def __call__(self, *args: Any) -> Any:
        self.calls.append(args)
        fresh = [torch.tensor(float(i), dtype=torch.float64) for i in range(self.count if self.form is None else self.form)]
        return fresh if self.form is None else None if self.form == 0 else fresh[0] if self.form == 1 else tuple(fresh)


def _same(a: Any, b: Any) -> bool:
    """Equal structure, and the very same objects at the leaves (a tensor is one object, not a value)."""
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and (a is b or a.equal(b) and a.dim() == 0)
    return type(a) is type(b) and a == b


def both(overlay: Any, plan: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """(reference, written path): each as (result, the op's calls); an exception as its type."""
    out = []
    for run in (lambda op: reference(plan, op, args, kwargs),
                lambda op: overlay._traced_path(dataclasses.replace(plan, op=op))(*args, **kwargs)):
        op = Recorder(4, plan.form)
        try:
            result = run(op)
        except Exception as exc:  # noqa: BLE001 - the same refusal on both sides is a result too
            result = type(exc)
        out.append((UPSTREAM if result is overlay._UPSTREAM else result, op.calls))
    return out[0], out[1]


# What a caller may pass for each parameter: values the op takes and values it does not.
T = torch.zeros(2)
POOL: dict[str, list[Any]] = {
    "input": [T, None, 1.0], "hidden": [T, "x"], "top_k": [2], "k": [T], "v": [T, None], "out": [T], "a": [T, 3],
    "global_scale": [None, T, 2.0], "sf_vec_size": [16, 32], "backend": ["cuda", "auto", "cute-dsl"],
    "per_token": [False, True, 1], "enable_pdl": [None, True],
    "output": [None, torch.ones(3)], "do_finalize": [True, False], "scales": [None, [T, T], [T, 1], (T,)],
    "layout": [None, Layout.layout_8x4, 1],
    "k_sf": [1.0, torch.tensor([2.0]), torch.tensor(2.0, dtype=torch.float64), 2],
    "scale": [0.5, torch.tensor([2.0]), "s"], "eps": [1e-6], "b": [1, 2], "skip_check": [False, True],
}


@st.composite
def calls(draw: st.DrawFn, plan: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """One call: a prefix of the positional parameters by position, the rest by keyword or left out;
    sometimes an argument too many, an unknown keyword, or a required parameter left out."""
    names, positional = list(plan.names), list(plan.positional)
    by_position = draw(st.integers(0, len(positional)))
    args = [draw(st.sampled_from(POOL[n])) for n in positional[:by_position]]
    kwargs = {}
    for name in names[by_position:]:
        required = name not in plan.defaults
        if draw(st.booleans()) if not required else draw(st.integers(0, 9)) > 0:
            kwargs[name] = draw(st.sampled_from(POOL[name]))
    if by_position == len(positional) and draw(st.integers(0, 4)) == 0:
        args.append(T)  # one too many
    if draw(st.integers(0, 9)) == 0:
        kwargs["unknown"] = 1
    return tuple(args), kwargs


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                              HealthCheck.function_scoped_fixture])
NAMES = ["traced_path_quantize", "traced_path_moe", "traced_path_paged", "traced_path_norm",
         "traced_path_positional_only"]


@pytest.mark.parametrize("name", NAMES)
@PROPERTY
@given(data=st.data())
def test_the_written_path_takes_the_calls_the_binder_took(overlay: Any, plans: dict[str, Any], name: str,
                                                          data: st.DataObject) -> None:
    plan = plans[name]
    args, kwargs = data.draw(calls(plan))
    if name == "traced_path_positional_only" and "a" in kwargs:
        return  # a positional-only parameter by keyword: Python refuses it; the binder routed it (below)
    theirs, ours = both(overlay, plan, args, kwargs)
    if theirs[0] is KeyError:
        # The binder counted values, not names: a required parameter left out and an unknown keyword
        # given made the count right, and it raised KeyError while tracing where upstream raises
        # TypeError. The written path leaves that call to upstream's function.
        assert ours == (UPSTREAM, []), (args, kwargs, ours)
        return
    assert _same(theirs[0], ours[0]) or theirs[0] is ours[0], (args, kwargs, theirs, ours)
    assert len(theirs[1]) == len(ours[1]) and all(_same(list(a), list(b)) for a, b in zip(theirs[1], ours[1]))


def test_every_form_is_drawn(overlay: Any, plans: dict[str, Any]) -> None:
    """The property above reaches both outcomes on each entry, and each result form (a control)."""
    plan = plans["traced_path_quantize"]
    routed, ours = both(overlay, plan, (T,), {"per_token": True})
    assert len(routed[0]) == 3 and len(routed[1]) == 1 and ours[0] is not UPSTREAM
    assert both(overlay, plan, (T,), {"backend": "cute-dsl"})[1][0] == UPSTREAM  # a route refused
    assert both(overlay, plan, (T,), {"sf_vec_size": 32})[1][0] == UPSTREAM  # `when` refused
    assert both(overlay, plan, (T, None, 16, "cuda", False, True), {})[1][0] == UPSTREAM  # a keyword-only by position
    assert both(overlay, plans["traced_path_norm"], (T, T), {})[1][0] == UPSTREAM  # scale missing
    assert both(overlay, plans["traced_path_moe"], (T,), {})[1][0] == UPSTREAM  # top_k (an int) missing
    out = torch.ones(3)
    moe_result = both(overlay, plans["traced_path_moe"], (T, 2), {"output": out})[1][0]
    assert moe_result[0] is out and isinstance(moe_result[1], torch.Tensor)
    (allocated, fresh), (call,) = both(overlay, plans["traced_path_moe"], (T, 2), {})[1]  # output=None
    assert allocated is call[2] and allocated.item() == 7.0 and fresh.item() == 0.0  # the fake's, given to the op
    assert plans["traced_path_moe"].form == 1 and plans["traced_path_norm"].form == 0
    assert plans["traced_path_quantize"].form is None  # mutates nothing: Tensor[]
    nested = both(overlay, plans["traced_path_paged"], (T, T), {})[1][0]
    assert isinstance(nested[0], tuple) and type(nested[1]) is float
    assert both(overlay, plans["traced_path_norm"], (T, T, 0.5), {"skip_check": True})[1][0] is None


def test_where_the_written_path_is_stricter_it_is_pythons_binding(overlay: Any, plans: dict[str, Any]) -> None:
    """Two calls Python itself refuses, which the binder routed: a parameter given twice, and a
    positional-only one by keyword. The written path refuses the first as Python does (TypeError,
    as upstream's function would) and leaves the second to upstream's path (which refuses it)."""
    plan = plans["traced_path_quantize"]
    with pytest.raises(TypeError, match="multiple values"):
        overlay._traced_path(dataclasses.replace(plan, op=Recorder(2)))(T, input=T)
    assert reference(plan, Recorder(2), (T,), {"input": T}) != UPSTREAM
    only = plans["traced_path_positional_only"]
    assert overlay._traced_path(dataclasses.replace(only, op=Recorder(1)))(a=T) is overlay._UPSTREAM
    assert reference(only, Recorder(1), (), {"a": T}) != UPSTREAM


def test_the_written_path_makes_no_call_but_the_codecs_and_the_op(overlay: Any, plans: dict[str, Any]) -> None:
    """What makes it cheap to trace: its code calls nothing else (dynamo inlines each call it makes)."""
    import dis

    for name, plan in plans.items():
        traced = overlay._traced_path(plan)
        called = {i.argval for i in dis.get_instructions(traced) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        allowed = {"isinstance", "iter", "next"} | {n for n in traced.__globals__ if n.startswith("_nvfp4_")}
        assert called <= allowed, (name, called - allowed, traced.__nvfp4_overlay_source__)
