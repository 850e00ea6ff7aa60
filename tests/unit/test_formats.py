"""The committed files' formats: one TOML loader, one JSON loader, one renderer of the docs' generated
tables; each bad file is a ConfigError naming it, what was found and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import PATCHES

from nvfp4_overlay.errors import ConfigError
from nvfp4_overlay.formats import read_json, read_toml, render_between


@pytest.mark.parametrize(("name", "text", "match"), [
    ("a.toml", None, r"a.toml: not found; restore it from git"),
    ("a.toml", "[x\n", r"a.toml: not valid TOML \(.*\); fix the syntax"),
    ("a.toml", b"\xff = 1\n", r"a.toml: not valid TOML"),
    ("a.json", None, r"a.json: not found; restore it from git"),
    ("a.json", "{", r"a.json: cannot read the audit \(.*\); restore it from git"),
], ids=["toml-missing", "toml-syntax", "toml-not-utf8", "json-missing", "json-syntax"])
def test_a_bad_file_is_named_with_its_fix(tmp_path: Path, name: str, text: str | bytes | None, match: str) -> None:
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text)
    elif isinstance(text, bytes):
        path.write_bytes(text)
    with pytest.raises(ConfigError, match=match) as caught:
        read_toml(path) if name.endswith(".toml") else read_json(path, what="the audit")
    assert caught.value.path == str(path) and caught.value.fix


def test_every_committed_toml_and_json_file_reads() -> None:
    tomls, jsons = sorted(PATCHES.rglob("*.toml")), sorted(PATCHES.rglob("*.json"))
    assert len(tomls) > 50 and len(jsons) >= 3
    assert all(isinstance(read_toml(p), dict) for p in tomls)
    assert all(read_json(p, what="a committed file") for p in jsons)


def test_render_between_replaces_only_the_marked_region() -> None:
    doc = "intro\n<!-- t (generated) -->\nold\n<!-- /t -->\nrest\n"
    assert render_between(doc, "<!-- t", "<!-- /t -->", "new\n", "the table") == \
        "intro\n<!-- t (generated) -->\nnew\n<!-- /t -->\nrest\n"
    with pytest.raises(ConfigError, match="no <!-- t ... <!-- /t --> region to render the table into"):
        render_between("no markers", "<!-- t", "<!-- /t -->", "new\n", "the table")
