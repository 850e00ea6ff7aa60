"""The SGLang probes' msgspec stand-in (probes/sglang/sglang_imports.py) keeps the msgspec.Struct semantics
SGLang's code relies on: positional construction in field order (0.5.21's `Layout(frozenset(...))`),
comparison by value (its stage boundaries compare layouts), frozen and kw_only as asked, and
`structs.fields` reporting NODEFAULT where a field has no default (0.5.21's `collect_input_fields`
builds ServerArgs from it). msgspec's documented behaviour is the reference: the package is compiled
and not installed here."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from nvfp4_overlay.probes.sglang.sglang_imports import msgspec_stand_in


@pytest.fixture
def msgspec() -> Any:
    return msgspec_stand_in()


def test_a_struct_takes_its_fields_in_order_and_compares_by_value(msgspec: Any) -> None:
    class Layout(msgspec.Struct, frozen=True):
        sharded: frozenset[str]
        width: int = 1

    assert Layout(frozenset({"tp"})) == Layout(sharded=frozenset({"tp"}), width=1)
    assert Layout(frozenset()) != Layout(frozenset(), 2)
    assert hash(Layout(frozenset())) == hash(Layout(frozenset()))  # frozen: hashable by value
    with pytest.raises(dataclasses.FrozenInstanceError):
        Layout(frozenset()).width = 3  # type: ignore[misc]


def test_kw_only_and_eq_false_are_honoured(msgspec: Any) -> None:
    class Spec(msgspec.Struct, kw_only=True, eq=False):
        name: str

    with pytest.raises(TypeError):
        Spec("a")  # type: ignore[misc]
    assert Spec(name="a") != Spec(name="a")  # eq=False: identity


def test_fields_report_nodefault_as_msgspec_does(msgspec: Any) -> None:
    class Args(msgspec.Struct):
        model: str
        port: int = 30000
        hosts: list[str] = msgspec.field(default_factory=list)

    fields = {f.name: f for f in msgspec.structs.fields(Args)}
    assert fields["model"].default is msgspec.NODEFAULT and fields["model"].required
    assert fields["port"].default == 30000 and fields["port"].default_factory is msgspec.NODEFAULT
    assert fields["hosts"].default is msgspec.NODEFAULT and fields["hosts"].default_factory is list
    # defstruct over what collect_input_fields hands it: defaults where given, none otherwise
    built = msgspec.defstruct("Built", [("model", str), ("port", int, 30000)])
    assert built("m") == built(model="m", port=30000)
