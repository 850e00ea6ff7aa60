"""sglang_reach: patches/sglang/region-reach.toml read, refused when malformed, its evidence checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvfp4_overlay.audit import sglang_audit, sglang_reach
from nvfp4_overlay.errors import ConfigError

ENTRY = '''[[unreached]]
regions = ["kv_fp4_quantize"]
releases = ">=0.5.16, <0.5.22"
why = "runs inside the attention op"
evidence = [
    { text = "quantize(", only_in = ["sglang/srt/a.py"] },
    { file = "sglang/srt/b.py", has = "@register_split_op()" },
    { file = "sglang/srt/b.py", lacks = "fullgraph" },
]
'''
SOURCES = {"sglang/srt/a.py": "x = quantize(1)\n", "sglang/srt/b.py": "@register_split_op()\ndef f(): ...\n",
           "sglang/test/t.py": "quantize(2)\n"}


def _reach(tmp_path: Path, text: str) -> tuple[sglang_reach.Unreached, ...]:
    (tmp_path / "sglang").mkdir(exist_ok=True)
    (tmp_path / "sglang" / sglang_reach.REACH).write_text(text)
    return sglang_reach.load_reach(tmp_path)


def test_an_entry_covers_its_regions_in_its_releases(tmp_path: Path) -> None:
    (entry,) = _reach(tmp_path, ENTRY)
    assert sglang_reach.unreached([entry], "0.5.19", "kv_fp4_quantize") is entry
    assert sglang_reach.unreached([entry], "0.5.22", "kv_fp4_quantize") is None
    assert sglang_reach.unreached([entry], "0.5.19", "inkling_packed_topk") is None
    assert sglang_reach.evidence_problems(entry, SOURCES) == []  # sglang/test is not SGLang's runtime


def test_evidence_that_moved_is_found(tmp_path: Path) -> None:
    (entry,) = _reach(tmp_path, ENTRY)
    moved = {**SOURCES, "sglang/srt/c.py": "quantize(3)\n", "sglang/srt/b.py": "def f(): ...  # fullgraph\n"}
    problems = sglang_reach.evidence_problems(entry, moved)
    assert any("occurs outside" in p and "sglang/srt/c.py" in p for p in problems)
    assert any("lacks '@register_split_op()'" in p for p in problems)
    assert any("holds 'fullgraph'" in p for p in problems)
    assert sglang_reach.evidence_problems(entry, {"sglang/srt/a.py": ""}) == [
        "sglang/srt/b.py is not in the release", "sglang/srt/b.py is not in the release"]


def test_every_region_entry_leaves_a_stack_nothing_remaining(tmp_path: Path) -> None:
    (entry,) = _reach(tmp_path, ENTRY.replace('["kv_fp4_quantize"]', '["*"]'))
    raw = {"calls": [{"function": "fp4_quantize", "module": "flashinfer", "args": {}, "site": "x.py:1 f",
                      "upstream": "fails"}], "sglang_break": None, "frontier": "flashinfer"}
    table = {"releases": {"0.5.19": {"flashinfer": "0.6.18", "sglang": {"upstream": {
        "kv_fp4_quantize": {"sm120": raw, "sm100": raw}}}}}}
    assert sglang_audit.stack_remaining(table, "0.5.19", False, None) != {}
    assert sglang_audit.stack_remaining(table, "0.5.19", False, None, (entry,)) == {}


@pytest.mark.parametrize(("text", "says"), [
    (ENTRY.replace('releases = ">=0.5.16, <0.5.22"', 'releases = "from 0.5.16"'), "Invalid specifier"),
    (ENTRY.replace('why = "runs inside the attention op"', 'why = ""'), "why must say why"),
    (ENTRY.replace('regions = ["kv_fp4_quantize"]', "regions = []"), "regions must be"),
    (ENTRY.replace('{ file = "sglang/srt/b.py", lacks = "fullgraph" },', '"fullgraph",'), "is not a table"),
    ("[[unreached]\n", "not valid TOML"),
])
def test_a_malformed_entry_is_refused_naming_the_file(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _reach(tmp_path, text)
    assert says in str(caught.value) and sglang_reach.REACH in str(caught.value)
    assert caught.value.exit_code == 2 and caught.value.path
