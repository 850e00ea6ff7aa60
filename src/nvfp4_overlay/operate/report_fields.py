"""The typed report's fields: each a JSON key with its meaning and when it is present; a block written to and read
from JSON by its fields alone (operate/doctor_report.py's blocks; operate/doctor_schema.py documents them)."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, TypeVar, Union, cast

MISSING: Any = dataclasses.MISSING
T = TypeVar("T")


def fact(meaning: str, *, present: str = "", when: Callable[[Any], bool] | None = None, key: str = "",
         default: Any = MISSING) -> Any:
    """A field of the report: what it means; for a key the document holds only sometimes, when (`present`, in
    words, and `when`, its test on the block; without one: the value is not None); the JSON key where it is no
    Python name (`key`)."""
    metadata = {"meaning": meaning, "present": present, "when": when, "key": key}
    if isinstance(default, list):
        return field(default_factory=list, metadata=metadata)
    return field(default=default, metadata=metadata)


def data(value: Any) -> Any:
    """The JSON document of a report or any block of it: each field under its key, where present."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.metadata.get("key") or f.name: data(getattr(value, f.name))
                for f in dataclasses.fields(value) if present(f, value)}
    if isinstance(value, (list, tuple)):
        return [data(v) for v in value]
    if isinstance(value, dict):
        return {str(k): data(v) for k, v in value.items()}
    return value


def present(f: dataclasses.Field[Any], block: Any) -> bool:
    if not f.metadata.get("present"):
        return True
    when = f.metadata.get("when")
    return bool(when(block)) if when is not None else getattr(block, f.name) is not None


def parse(cls: type[T], facts: Mapping[str, Any]) -> T:
    """A block from a probe's JSON facts: each field from its key, a nested block's too; a key no field names is
    left out (unplaced() names them)."""
    hints = typing.get_type_hints(cls)
    values = {f.name: _parsed(hints[f.name], facts[f.metadata.get("key") or f.name])
              for f in dataclasses.fields(cast(Any, cls)) if (f.metadata.get("key") or f.name) in facts}
    return cls(**values)


def unplaced(cls: Any, facts: Any, prefix: str = "") -> list[str]:
    """The keys of `facts` (nested too, as a.b) that no field of the block `cls` names: what parse() leaves out."""
    if not isinstance(facts, Mapping):
        return []
    hints, out = typing.get_type_hints(cls), []
    fields = {f.metadata.get("key") or f.name: f for f in dataclasses.fields(cls)}
    for key, value in facts.items():
        if key not in fields:
            out.append(f"{prefix}{key}")
            continue
        shape, inner = block_type(hints[fields[key].name])
        if not dataclasses.is_dataclass(inner) or value is None:
            continue
        items = enumerate(value) if shape == "list" else value.items() if shape == "map" else [(None, value)]
        out += [p for k, v in items for p in unplaced(inner, v, f"{prefix}{key}." + ("" if k is None else f"{k}."))]
    return out


def block_type(hint: Any) -> tuple[str, Any]:
    """A field's type as the document holds it: ("block" | "list" | "map" | "value", the block or value type),
    null left aside (typing's X | None)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (Union, types.UnionType) and len(args) == 1:
        return block_type(args[0])
    origin = typing.get_origin(hint)
    if origin is list:
        return "list", typing.get_args(hint)[0]
    if origin is dict:
        return "map", typing.get_args(hint)[1]
    return ("block" if dataclasses.is_dataclass(hint) else "value"), hint


def _parsed(hint: Any, value: Any) -> Any:
    shape, inner = block_type(hint)
    if not dataclasses.is_dataclass(inner) or value is None:
        return value
    inner = cast(Any, inner)
    if shape == "list":
        return [parse(inner, v) for v in value]
    if shape == "map":
        return {k: parse(inner, v) for k, v in value.items()}
    return parse(inner, value)
