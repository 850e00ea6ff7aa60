"""doctor --json's schema as docs/install.md shows it, rendered from the report's dataclasses (doctor_report.py).

Each row is one key: its path (`a.b`, `<name>` for a map's key, `[]` for a list's item), its JSON type, when
it is present, and what it means, all read from the fields. `nvfp4-overlay generate doctor-schema [--check]`
writes it between docs/install.md's markers (or says whether it is there as rendered);
tests/unit/test_doctor_schema.py holds the document to it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..formats import render_between
from .doctor_report import Report
from .report_fields import block_type

BEGIN, END = "<!-- schema:doctor-json", "<!-- /schema:doctor-json -->"
DOCUMENT = Path("docs") / "install.md"
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", Any: "any"}


def rows(block: type[Any] = Report, prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    """(key path, JSON type, when present, meaning) for every key of `block`, its nested blocks' after it."""
    hints = typing.get_type_hints(block)
    for f in dataclasses.fields(block):
        path = f"{prefix}{f.metadata.get('key') or f.name}"
        hint = hints[f.name]
        when, meaning = f.metadata.get("present") or "always", f.metadata["meaning"]
        yield path, json_type(hint, when == "always" or "null" in meaning), when, meaning
        shape, inner = block_type(hint)
        if dataclasses.is_dataclass(inner):
            yield from rows(typing.cast(Any, inner), path + {"list": "[].", "map": ".<name>.", "block": "."}[shape])


def json_type(hint: Any, null: bool = True) -> str:
    """A field's type in JSON words: string, integer, object, list of string, map of object, ...; "or null" where
    the key can hold null when present (`null`: a key present only sometimes holds a value when it is, unless its
    meaning says what null means)."""
    nullable = null and type(None) in typing.get_args(hint)
    shape, inner = block_type(hint)
    word = "object" if dataclasses.is_dataclass(inner) else JSON_TYPES.get(inner, "object")
    text = {"list": f"list of {word}", "map": f"map of {word}"}.get(shape, word)
    return f"{text} or null" if nullable else text


def markdown() -> str:
    lines = ["| key | type | present | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| `{path}` | {kind} | {when} | {meaning} |" for path, kind, when, meaning in rows()]
    return "\n".join(lines) + "\n"


def rendered(document: str) -> str:
    """docs/install.md with the schema between its markers, made anew."""
    return render_between(document, BEGIN, END, markdown(), "doctor --json's schema")
