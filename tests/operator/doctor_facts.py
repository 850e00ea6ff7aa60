"""doctor's text and its --json held to the same facts, for any report a test makes (issue 42).

The CLI prints render(report) or data(report) of one typed report; a test that ran `doctor --json` renders the
text from the document it got (after holding the document to a round trip through the report's fields) and
holds each fact the text states to the JSON: the verdict, each problem and note, each distribution, the JIT
cache's modules, the trace, the launch line. Each key the document holds is one docs/install.md's schema
documents.
"""

from __future__ import annotations

import re
from typing import Any

from nvfp4_overlay.cli.doctor import render
from nvfp4_overlay.operate import doctor_schema
from nvfp4_overlay.operate.doctor_report import Report, data, parse

DOCUMENTED = {path for path, *_ in doctor_schema.rows()}
OPAQUE = {path for path, kind, *_ in doctor_schema.rows() if kind.startswith("map of") and "object" not in kind}


def check_document(document: dict[str, Any]) -> str:
    """The document as the text says it: held to the schema, to the report's fields and to the text's facts (an
    error document, doctor stopped before any report with exit 2, is errors.py's, not the report's)."""
    if set(document) == {"error"}:
        return ""
    assert not [n for n in document["notes"] if "doctor's report has no place for" in n], document["notes"]
    undocumented = sorted(set(key_paths(document)) - DOCUMENTED)
    assert not undocumented, f"doctor --json keys docs/install.md's schema does not document: {undocumented}"
    assert data(parse(Report, document)) == document, "the document is not what the report's fields write"
    text = render(parse(Report, document))
    same_facts(text, document)
    return text


def key_paths(value: Any, prefix: str = "") -> list[str]:
    """Each key of a document as the schema names it (`<name>` for a map's key, `[]` for a list's item); the keys
    of a map of values (routes, the region table's cells, eager_only) are its own, not the schema's."""
    if isinstance(value, list):
        return [p for item in value for p in key_paths(item, prefix + "[]")]
    if not isinstance(value, dict):
        return []
    out = []
    for key, item in value.items():
        path = f"{prefix}.{key}" if prefix else key
        if path not in DOCUMENTED and any(d.startswith(f"{prefix}.<name>.") for d in DOCUMENTED):
            out += key_paths(item, f"{prefix}.<name>")  # a map of blocks: its keys are names
            continue
        out.append(path)
        if path not in OPAQUE:
            out += key_paths(item, path)
    return out


def same_facts(text: str, document: dict[str, Any]) -> None:
    """Each fact doctor's text states is the one its JSON holds."""
    lines = text.splitlines()
    assert lines[-1].split(None, 1)[1] == f"{document['verdict']} (exit {document['exit_code']})", lines[-1]
    assert document["ok"] == (document["exit_code"] == 0)
    said = {kind: [line.split(": ", 1)[1] for line in lines if line.startswith(f"{kind}: ")]
            for kind in ("problem", "note", "taken on trust")}
    assert said == {"problem": document["problems"], "note": document["notes"],
                    "taken on trust": document["taken_on_trust"]}
    for name, dist in document["distributions"].items():
        (line,) = [line for line in lines if line.startswith(f"{name} ")]
        assert ("not installed" in line) == (not dist["installed"]), line
        assert not dist["installed"] or (dist["version"] in line and ("patched," in line) == dist["patched"]), line
    _same_jit(lines, document["jit"], document["notes"])
    _same_trace(lines, document["trace"])
    launch = document.get("sglang_launch")
    if launch and "error" not in launch:
        (line,) = [line for line in lines if line.strip().startswith("fullgraph ")]
        assert line.split()[1].rstrip(":") == {True: "yes", False: "no", None: "cannot"}[launch["fullgraph"]], line


def _same_jit(lines: list[str], jit: dict[str, Any], notes: list[str]) -> None:
    if "error" in jit:
        return
    first = [line for line in lines if line.strip().startswith("JIT at 1st call")]
    if jit["will_jit"] is None:  # no cache: every module builds, as the note says
        assert first and first[0].split("call", 1)[1].strip().startswith("every module"), first
    else:
        assert [re.split(r",\s*", f.split("call", 1)[1].strip()) for f in first] == ([jit["will_jit"]] if jit["will_jit"]
                                                                                      else []), first
    every = any("every module of the FP4 serving path builds" in note for note in notes)
    assert every == (jit["will_jit"] is None), (jit, every)


def _same_trace(lines: list[str], trace: dict[str, Any]) -> None:
    (line,) = [line for line in lines if line.startswith("trace ")]
    if trace.get("skipped"):
        assert line.split()[1] == "skipped", line
        return
    entries = trace.get("entries") or {}
    if entries:
        passed = sum(1 for e in entries.values() if e["ok"])
        assert f" {passed} of {len(entries)} entry points" in f" {line.split(None, 1)[1]}", line
        assert [n for n in entries if not entries[n]["ok"]] == trace.get("failed", []), trace.get("failed")
    else:
        assert "FAILED" in line, line
