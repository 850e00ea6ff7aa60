"""drift and refresh on small upstream releases built in the test: one per hunk state, the command's
outputs and exit codes, a release shipped unpatched by design, refresh's ports and refusals. On the
real releases (make drift green, the committed series regenerated): tests/carrying/test_committed_series.py."""

from __future__ import annotations

import datetime
import difflib
import hashlib
import json
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import cli_args, run_cli, write_wheel
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nvfp4_overlay.carry.drift import PatchDrift, State, drift_series
from nvfp4_overlay.patch.manifest import Target, load_upstream
from nvfp4_overlay.patch.patching import apply_series, read_series

BASE = "".join(f"line {i:02d}\n" for i in range(1, 41))
MOD, OTHER = "demo/mod.py", "demo/other.py"

# Two hunks on demo/mod.py: line 10 and line 30 change; 3 lines of context each.
P1 = """\
Description: change lines 10 and 30
Origin: test
Last-Update: 2020-01-01

--- a/demo/mod.py
+++ b/demo/mod.py
@@ -7,7 +7,7 @@
 line 07
 line 08
 line 09
-line 10
+line 10 patched
 line 11
 line 12
 line 13
@@ -27,7 +27,7 @@
 line 27
 line 28
 line 29
-line 30
+line 30 patched
 line 31
 line 32
 line 33
"""
# A patch that upstream says it took in demo 2.0.
P2 = """\
Description: a fix upstream took
Applied-Upstream: demo 2.0
Last-Update: 2020-01-01

--- a/demo/other.py
+++ b/demo/other.py
@@ -1,3 +1,3 @@
 a
-b
+b fixed
 c
"""
OTHER_TEXT = "a\nb\nc\n"


def edit(text: str, **replace: str) -> str:
    """BASE with whole lines replaced: edit(BASE, line_10='x') turns 'line 10' into 'x'."""
    lines = text.splitlines(keepends=True)
    for key, new in replace.items():
        old = key.replace("_", " ") + "\n"
        lines = [new + "\n" if line == old else line for line in lines]
    return "".join(lines)


def shifted(n: int, text: str = BASE) -> str:
    return "".join(f"new {i:02d}\n" for i in range(1, n + 1)) + text


# release -> (files, state of patch 0001, its hunk states, state of patch 0002)
RELEASES: dict[str, tuple[dict[str, str], State, tuple[State, State], State]] = {
    "1.0": ({MOD: BASE, OTHER: OTHER_TEXT}, State.EXACT, (State.EXACT, State.EXACT), State.EXACT),
    "1.1": ({MOD: shifted(5), OTHER: OTHER_TEXT}, State.OFFSET, (State.OFFSET, State.OFFSET), State.EXACT),
    # A context line changed, not the patched one: only with fuzz for the applier, clean for merge3.
    "1.2": (
        {MOD: edit(BASE, line_07="LINE 07"), OTHER: OTHER_TEXT},
        State.MERGES,
        (State.MERGES, State.EXACT),
        State.EXACT,
    ),
    "1.3": (
        {MOD: edit(BASE, line_10="line 10 upstream"), OTHER: OTHER_TEXT},
        State.CONFLICT,
        (State.CONFLICT, State.EXACT),
        State.EXACT,
    ),
    "1.4": (
        {MOD: edit(BASE, line_10="line 10 patched", line_30="line 30 patched"), OTHER: OTHER_TEXT},
        State.UPSTREAM,
        (State.UPSTREAM, State.UPSTREAM),
        State.EXACT,
    ),
    "1.5": (
        {MOD: edit(BASE, line_10="line 10 patched"), OTHER: OTHER_TEXT},
        State.PARTLY_UPSTREAM,
        (State.UPSTREAM, State.EXACT),
        State.EXACT,
    ),
    # The file moved to a subpackage: the change merges into the file of the same name there.
    "1.6": (
        {"demo/sub/mod.py": BASE, OTHER: OTHER_TEXT},
        State.MERGES,
        (State.MERGES, State.MERGES),
        State.EXACT,
    ),
    "1.7": (
        {MOD: shifted(3, edit(BASE, line_11="line 11 upstream")), OTHER: OTHER_TEXT},
        State.CONFLICT,
        (State.CONFLICT, State.OFFSET),
        State.EXACT,
    ),
    # The code moved and a stub stayed (flashinfer 0.6.7's fp4_quantization.py): ported to the new file.
    "1.8": (
        {MOD: "from .sub.mod import *\n", "demo/sub/mod.py": BASE, OTHER: OTHER_TEXT},
        State.MERGES,
        (State.MERGES, State.MERGES),
        State.EXACT,
    ),
    # Moved, and upstream changed the line next to the patched one there: no merge, a person.
    "1.10": (
        {MOD: "from .sub.mod import *\n", "demo/sub/mod.py": edit(BASE, line_11="line 11 upstream"),
         OTHER: OTHER_TEXT},
        State.CONFLICT,
        (State.CONFLICT, State.CONFLICT),
        State.EXACT,
    ),
    # Gone, with no file of that name anywhere.
    "1.11": ({OTHER: OTHER_TEXT}, State.MISSING_FILE, (State.MISSING_FILE, State.MISSING_FILE), State.EXACT),
    # Fuzz 1 places hunk 1; upstream rewrote the line hunk 2 changes, so the file does not merge.
    "1.9": (
        {MOD: edit(BASE, line_07="LINE 07", line_30="line 30 upstream"), OTHER: OTHER_TEXT},
        State.CONFLICT,
        (State.FUZZY, State.CONFLICT),
        State.EXACT,
    ),
    "2.0": ({MOD: BASE, OTHER: "a\nb fixed\nc\n"}, State.EXACT, (State.EXACT, State.EXACT), State.OBSOLETE),
}


@pytest.fixture
def layout(project: Callable[..., dict[str, Path]], make_wheel: Callable[..., Path]) -> dict[str, Path]:
    """demo 1.0 pinned with the two patches; every other release in the wheelhouse, unpinned."""
    files, *_ = RELEASES["1.0"]
    made = project(
        files,
        patches={"0001-two-hunks.patch": P1, "0002-taken-upstream.patch": P2},
        overlay={"demo/_added.py": "ADDED = True\n"},
    )
    for version, (files, *_) in RELEASES.items():
        if version != "1.0":
            make_wheel(files, version=version)
    return made


def drift_on(layout: dict[str, Path], version: str) -> list[PatchDrift]:
    series = read_series(layout["patches"] / "demo" / "1.0")
    files, origin = RELEASES[version][0], RELEASES["1.0"][0]
    return drift_series(
        series, lambda p: files[p].encode() if p in files else None, sorted(files), "demo", version,
        lambda p: origin[p].encode() if p in origin else None,
    )


# --- each state, from the pure classifier ----------------------------------------------------------


@pytest.mark.parametrize("version", list(RELEASES), ids=[f"{v}-{RELEASES[v][1].value}" for v in RELEASES])
def test_each_state(layout: dict[str, Path], version: str) -> None:
    _, state, hunk_states, other_state = RELEASES[version]
    p1, p2 = drift_on(layout, version)
    assert (p1.state, tuple(h.state for h in p1.hunks), p2.state) == (state, hunk_states, other_state)


def test_offset_is_counted_from_the_header(layout: dict[str, Path]) -> None:
    p1, _ = drift_on(layout, "1.1")
    assert [(h.offset, h.line) for h in p1.hunks] == [(5, 12), (5, 32)]
    assert "applies at offset +5 (line 12)" in p1.reason()


def test_fuzzy_reports_the_line_that_fuzz_ignored(layout: dict[str, Path]) -> None:
    p1, _ = drift_on(layout, "1.9")
    hunk = p1.hunks[0]
    assert (hunk.fuzz, hunk.offset, hunk.line) == (1, 0, 7)
    assert (hunk.mismatch.line, hunk.mismatch.expected, hunk.mismatch.found) == (7, "line 07\n", "LINE 07\n")  # type: ignore[union-attr]
    assert "applies only with fuzz 1" in p1.reason()


def test_conflict_names_the_first_differing_line_and_the_changed_line(layout: dict[str, Path]) -> None:
    p1, _ = drift_on(layout, "1.3")
    hunk = p1.hunks[0]
    assert (hunk.mismatch.line, hunk.mismatch.expected, hunk.mismatch.found) == (
        10,
        "line 10\n",
        "line 10 upstream\n",
    )  # type: ignore[union-attr]
    assert hunk.moved_to is None
    assert "'line 10', is nowhere in the file: upstream rewrote this code" in hunk.describe()


def test_conflict_says_where_upstream_moved_the_expected_line(layout: dict[str, Path]) -> None:
    p1, _ = drift_on(layout, "1.7")
    conflict, moved = p1.hunks
    # Looked for at line 7 (no earlier hunk gave an offset); three lines were added above it.
    assert (conflict.mismatch.line, conflict.mismatch.expected, conflict.mismatch.found) == (
        7,
        "line 07\n",
        "line 04\n",
    )  # type: ignore[union-attr]
    assert (conflict.moved_to, conflict.occurrences) == (10, 1)
    assert "that line is now at line 10" in conflict.describe()
    assert "'line 10', is at line 13" in conflict.note
    assert (moved.state, moved.offset) == (State.OFFSET, 3)


def test_a_moved_file_is_ported_to_its_new_place(layout: dict[str, Path]) -> None:
    p1, _ = drift_on(layout, "1.6")
    assert [h.path for h in p1.hunks] == ["demo/sub/mod.py"] * 2
    assert "upstream moved the code to demo/sub/mod.py" in p1.hunks[0].note
    (image,) = p1.images
    assert image.patch.source == image.patch.target == "demo/sub/mod.py"
    assert "line 10 patched\n" in (image.after or ())


def test_conflict_finds_code_moved_to_a_file_of_the_same_name(layout: dict[str, Path]) -> None:
    p1, _ = drift_on(layout, "1.10")
    assert "'line 10' is in demo/sub/mod.py line 10: upstream moved the code" in p1.hunks[0].note
    assert "'line 30' is in demo/sub/mod.py line 30" in p1.hunks[1].note


def test_missing_file_says_nothing_of_that_name_is_left(layout: dict[str, Path]) -> None:
    p1, _ = drift_on(layout, "1.11")
    assert "no file of that name is left in the wheel" in p1.hunks[0].note


def test_obsolete_comes_from_applied_upstream(layout: dict[str, Path]) -> None:
    _, p2 = drift_on(layout, "2.0")
    assert p2.applied_upstream == "2.0"
    assert [h.state for h in p2.hunks] == [State.UPSTREAM]  # the hunks say why, too
    assert p2.reason().startswith("Applied-Upstream: demo 2.0: drop the patch")
    _, before = drift_on(layout, "1.7")
    assert before.state is State.EXACT


def quantize(name: str, decorator: str = "@flashinfer_api") -> str:
    return (f"{decorator}\ndef {name}(\n    input,\n    global_scale=None,\n    sf_vec_size=16,\n):\n"
            "    return _quantize(input, global_scale, sf_vec_size)\n")


def test_drift_never_calls_a_route_onto_another_function_a_merge(tmp_path: Path) -> None:
    """fp4_quantize and nvfp4_quantize share their parameters; upstream moved fp4_quantize out of the
    file and rewrote the decorators: the route written for fp4_quantize has no place there."""
    old = f"import torch\n\n\n{quantize('fp4_quantize')}\n\n{quantize('nvfp4_quantize')}"
    routed = old.replace("@flashinfer_api\ndef fp4", "# nvfp4-overlay: one opaque op\n@route\n@flashinfer_api\ndef fp4")
    new = f"import torch\nimport os\n\n\n{quantize('nvfp4_quantize', '@flashinfer_api(trace=t)')}"
    body = "".join(difflib.unified_diff(old.splitlines(True), routed.splitlines(True), "a/q.py", "b/q.py", n=3))
    (tmp_path / "0001-route.patch").write_text("Description: route\n\n" + body)
    (tmp_path / "series").write_text("0001-route.patch\n")
    (drift,) = drift_series(read_series(tmp_path), lambda p: new.encode() if p == "q.py" else None, ["q.py"],
                            "demo", "2.0", lambda p: old.encode() if p == "q.py" else None)
    (hunk,) = drift.hunks
    assert (drift.state, hunk.state, hunk.placed) == (State.CONFLICT, State.CONFLICT, "none")
    assert ("no three-way merge: the 2 lines the patch adds above fp4_quantize (at @flashinfer_api): upstream's "
            "file has no fp4_quantize; at that place upstream has nvfp4_quantize") in hunk.note


# --- the command -----------------------------------------------------------------------------------


def test_drift_all_json_markdown_and_exit_code(layout: dict[str, Path], tmp_path: Path) -> None:
    md = tmp_path / "report.md"
    code, out, err = run_cli("drift", "--against", "all", "--markdown", str(md), "--json", *cli_args(layout))
    assert code == 1, err
    doc = json.loads(out)
    cells = {c["release"]: c for c in doc["cells"]}
    def order(v: str) -> tuple[int, ...]:
        return tuple(map(int, v.split(".")))

    assert sorted(cells, key=order) == sorted((v for v in RELEASES if v != "1.0"), key=order)
    for version, (_, state, hunk_states, other_state) in RELEASES.items():
        if version == "1.0":
            continue
        p1, p2 = cells[version]["patches"]
        assert (p1["state"], [h["state"] for h in p1["hunks"]], p2["state"]) == (
            state.value,
            [s.value for s in hunk_states],
            other_state.value,
        ), version
    first = cells["1.3"]["patches"][0]["hunks"][0]["first_difference"]
    assert first == {"line": 10, "expected": "line 10\n", "found": "line 10 upstream\n"}
    assert all(not w["pinned"] and len(w["sha256"]) == 64 for w in doc["wheels"])
    text = md.read_text()
    assert "| 1.0 | `0001-two-hunks.patch` | offset | merges | **conflict** |" in text
    assert "First needs a person at **1.3** (conflict)" in text
    assert doc["merges"] == 3 and doc["cells_needing_a_person"] == 7  # 2.0: obsolete by its header, no person


def test_drift_pinned_is_clean_and_the_table_reads(layout: dict[str, Path]) -> None:
    code, out, err = run_cli("drift", "--against", "pinned", *cli_args(layout))
    assert code == 0, err
    assert out.splitlines()[1].split() == ["1.0", "0001-two-hunks.patch", "exact"]
    assert "no patch needs a person" in out
    code, out, _ = run_cli("drift", "--against", "1.2", "1.3", *cli_args(layout))
    assert code == 1
    assert out.splitlines()[1].split() == ["1.0", "0001-two-hunks.patch", "merges", "CONFLICT"]
    code, out, _ = run_cli("drift", "--against", "1.1", "1.2", *cli_args(layout))
    assert code == 0  # what refresh ports unattended needs no person


def test_drift_says_how_each_hunk_is_placed_in_json_text_and_markdown(layout: dict[str, Path], tmp_path: Path) -> None:
    code, out, err = run_cli("drift", "--against", "1.1", "1.2", "1.6", "--json", *cli_args(layout))
    assert code == 0, err
    cells = {c["release"]: c["patches"][0]["hunks"] for c in json.loads(out)["cells"]}
    assert {v: [(h["placed"], h["moved_from"]) for h in hunks] for v, hunks in cells.items()} == {
        "1.1": [("offset", None), ("offset", None)],
        "1.2": [("merge3", None), ("exact", None)],
        "1.6": [("merge3", "demo/mod.py"), ("merge3", "demo/mod.py")],
    }
    md = tmp_path / "drift.md"
    code, out, _ = run_cli("drift", "--against", "1.1", "1.2", "1.6", "--markdown", str(md), *cli_args(layout))
    runs = ["demo/mod.py hunk 1: offset 1.1, merge3 1.2, merge3 into demo/sub/mod.py 1.6",
            "demo/mod.py hunk 2: offset 1.1, exact 1.2, merge3 into demo/sub/mod.py 1.6"]
    lines = out.splitlines()
    at = lines.index("1.0  0001-two-hunks.patch", lines.index(next(x for x in lines if x.startswith("how each hunk"))))
    assert lines[at + 1 : at + 3] == [f"  {r}" for r in runs]
    text = md.read_text()
    assert "<details><summary>How each hunk is placed</summary>" in text
    assert all(f"- {r}\n" in text for r in runs)


def test_a_series_against_a_release_that_carries_its_own_is_news_not_a_failure(layout: dict[str, Path]) -> None:
    """1.3 gets a series of its own: 1.0's conflict there is news (1.3's series ships there); on 1.9,
    which has none, the same conflict fails the run."""
    wheel = layout["wheelhouse"] / "demo-1.3-py3-none-any.whl"
    own = layout["patches"] / "demo" / "1.3"
    own.mkdir()
    (own / "series").write_text("# nothing to patch here\n")
    (own / "upstream.toml").write_text(
        f'revision = 1\n[[wheel]]\nfilename = "{wheel.name}"\nsha256 = "{hashlib.sha256(wheel.read_bytes()).hexdigest()}"\n')
    code, out, err = run_cli("drift", "--against", "pinned", "1.3", "--json", *cli_args(layout))
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["cells_needing_a_person"], doc["news"], doc["not_needed"]) == (0, 1, 0)
    assert [(c["series"], c["release"], c["news"]) for c in doc["cells"] if c["state"] == "conflict"] == [
        ("1.0", "1.3", True)]
    code, out, _ = run_cli("drift", "--against", "pinned", "1.3", *cli_args(layout))
    assert code == 0
    assert out.splitlines()[-1].startswith("no failure: every series applies to its own release")
    assert [(c["series"], c["release"], c["verdict"]) for c in doc["cells"]] == [
        ("1.0", "1.0", "carried"), ("1.0", "1.3", "news"), ("1.3", "1.3", "carried")]
    assert out.splitlines()[-1].endswith(
        "news, not a failure: 1 of 3 (series, release) cells do not carry to a release that carries its own series")
    assert "need a person" not in out.splitlines()[-1]
    assert "news at 1.3, not a failure (conflict there)" in out
    code, out, _ = run_cli("drift", "--against", "1.3", "1.9", *cli_args(layout))
    assert code == 1
    assert out.splitlines()[-1].startswith("needs a person: 1 of 4 (series, release) cells")
    assert "; news, not a failure: 1 of 4 (series, release) cells do not carry" in out


# --- a release shipped unpatched by design ---------------------------------------------------------

NOTHING_RAW = {"calls": [], "sglang_break": None, "frontier": None}
RAW_CALL = {"calls": [{"function": "fp4_quantize", "module": "flashinfer", "args": {}, "site": "sglang/x.py:1 f",
                       "upstream": "fails"}], "sglang_break": None, "frontier": None}


def sglang_layout(tmp_path: Path, audit: dict[str, dict[str, Any]]) -> dict[str, Path]:
    """sglang 1.0 carried with patch 0001; 1.3 (which conflicts) and 1.9 shipped unpatched by their stacks;
    patches/sglang/audit-regions.json holds `audit` (release -> one region's cell on both GPUs)."""
    patches, wheelhouse = tmp_path / "patches", tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    wheels = {v: write_wheel(wheelhouse, "sglang", v, RELEASES[v][0]) for v in ("1.0", "1.3", "1.9")}
    wheels["demo"] = write_wheel(wheelhouse, "demo", "1.0", RELEASES["1.0"][0])
    for dist, wheel, patch in (("sglang", wheels["1.0"], P1), ("demo", wheels["demo"], None)):
        series = patches / dist / "1.0"
        series.mkdir(parents=True)
        if patch:
            (series / "0001-two-hunks.patch").write_text(patch)
        (series / "series").write_text("0001-two-hunks.patch\n" if patch else "")
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        (series / "upstream.toml").write_text(f'revision = 1\n[[wheel]]\nfilename = "{wheel.name}"\n'
                                              f'sha256 = "{digest}"\n')
    # a stack names at least one release with a series: each ships demo 1.0 (patched) beside its SGLang
    (patches / "stacks.toml").write_text(
        'default = "sglang-1.0"\n[stacks."sglang-1.0"]\nsglang = "1.0"\ndemo = "1.0"\n'
        + "".join(f'[stacks."sglang-{v}"]\nsglang = {{ version = "{v}", patched = false }}\ndemo = "1.0"\n'
                  for v in ("1.3", "1.9")))
    table = {"releases": {v: {"flashinfer": "0.0", "sglang": {"upstream": {"region": {"sm120": cell, "sm100": cell}}}}
                          for v, cell in audit.items()}}
    (patches / "sglang" / "audit-regions.json").write_text(json.dumps(table))
    return {"patches": patches, "overlay": tmp_path / "overlay", "dist": tmp_path / "dist",
            "cache": tmp_path / "cache", "wheelhouse": wheelhouse}


def test_a_series_is_not_needed_on_a_release_shipped_unpatched_by_design(tmp_path: Path) -> None:
    """1.3 ships unpatched and the region audit leaves nothing raw there: 1.0's conflict on it is "not
    needed there", a state of its own (exit 0), said in words of its own, apart from "needs a person"."""
    layout = sglang_layout(tmp_path, {"1.3": NOTHING_RAW})
    code, out, err = run_cli("drift", "--dist", "sglang", "--against", "pinned", "1.3", "--json", *cli_args(layout))
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["cells_needing_a_person"], doc["not_needed"], doc["news"]) == (0, 1, 0)
    (cell,) = [c for c in doc["cells"] if c["release"] == "1.3"]
    assert (cell["state"], cell["verdict"]) == ("conflict", "not-needed-there")
    assert cell["by_design"].startswith("stack sglang-1.3 ships it unpatched and the region audit")
    code, out, _ = run_cli("drift", "--dist", "sglang", "--against", "pinned", "1.3", *cli_args(layout))
    assert code == 0
    assert out.splitlines()[1].split() == ["1.0", "0001-two-hunks.patch", "exact", "not-needed"]
    assert "not needed at 1.3, not a failure (conflict there): shipped unpatched by design (below)" in out
    assert "  sglang==1.3: stack sglang-1.3 ships it unpatched and the region audit" in out
    last = out.splitlines()[-1]
    assert last.startswith("no failure:") and "need a person" not in last and "needs a person" not in last
    assert "not needed there, not a failure: 1 of 2 (series, release) cells do not carry to a release shipped " \
           "unpatched by design (sglang==1.3)" in last
    # --check ports the newest series to newer releases, but not to one shipped unpatched by design
    code, out, err = run_cli("drift", "--dist", "sglang", "--against", "1.3", "--check", "--json", *cli_args(layout))
    assert (code, json.loads(out)["works"]) == (0, {}), err


@pytest.mark.parametrize(("audit", "why"), [
    ({"1.3": RAW_CALL, "1.9": NOTHING_RAW}, "the region audit leaves raw calls in region"),
    ({"1.9": NOTHING_RAW}, "the region audit cannot say"),
], ids=["raw-call-remains", "not-in-the-audit"])
def test_shipped_unpatched_is_by_design_only_where_the_audit_says_nothing_raw_remains(
        tmp_path: Path, audit: dict[str, dict[str, Any]], why: str) -> None:
    """The decision is the data's: a raw call left in the release's regions, or a release the audit has
    not seen, keeps the series' conflict there a failure, and the log says why."""
    layout = sglang_layout(tmp_path, audit)
    code, out, err = run_cli("drift", "--dist", "sglang", "--against", "pinned", "1.3", "--json", *cli_args(layout))
    assert code == 1, err
    doc = json.loads(out)
    assert (doc["cells_needing_a_person"], doc["not_needed"]) == (1, 0)
    assert f"sglang==1.3: stack sglang-1.3 ships it unpatched, yet {why}" in err
    code, out, _ = run_cli("drift", "--dist", "sglang", "--against", "pinned", "1.3", *cli_args(layout))
    assert out.splitlines()[-1].startswith("needs a person: 1 of 2 (series, release) cells")
    assert "first needs a person at 1.3 (conflict)" in out


@pytest.mark.parametrize(
    ("against", "match"),
    [
        (["demo==x.y"], "not a PEP 440 version"),
        (["other==1.0"], "names no distribution carried (series exist for demo); name the distribution: --dist NAME"),
    ],
    ids=["bad-version", "unknown-dist"],
)
def test_drift_bad_arguments_exit_2(layout: dict[str, Path], against: list[str], match: str) -> None:
    code, _, err = run_cli("drift", "--against", *against, *cli_args(layout))
    assert code == 2
    assert match in err


def test_drift_refuses_a_wheel_whose_pin_does_not_match(layout: dict[str, Path]) -> None:
    wheel = layout["wheel"]
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr("demo/extra.py", "x = 1\n")
    code, _, err = run_cli("drift", "--against", "pinned", *cli_args(layout))
    assert code == 3
    assert "does not match" in err


def test_an_unpinned_file_that_changes_is_refused(layout: dict[str, Path]) -> None:
    args = [a for a in cli_args(layout) if a not in ("--wheelhouse", str(layout["wheelhouse"]))]
    cache = layout["cache"] / "wheels"
    cache.mkdir(parents=True)
    shutil.copy(layout["wheelhouse"] / "demo-1.1-py3-none-any.whl", cache)
    assert run_cli("drift", "--against", "1.1", *args)[0] == 0
    write_wheel(cache, "demo", "1.1", {MOD: BASE})  # re-published under the same name
    code, _, err = run_cli("drift", "--against", "1.1", *args)
    assert code == 3
    assert "UNPINNED-SHA256SUMS" in err


# --- refresh ---------------------------------------------------------------------------------------


def test_refresh_ports_an_offset_series_that_then_applies_exactly(layout: dict[str, Path]) -> None:
    code, out, err = run_cli("refresh", "demo", "1.0", "1.1", *cli_args(layout))
    assert code == 0, err
    new = layout["patches"] / "demo" / "1.1"
    upstream = load_upstream(layout["patches"], Target("demo", "1.1"))
    wheel = layout["wheelhouse"] / "demo-1.1-py3-none-any.whl"
    assert [(w.filename, w.sha256) for w in upstream.wheels] == [
        (wheel.name, hashlib.sha256(wheel.read_bytes()).hexdigest())
    ]
    assert upstream.revision == 1
    series = read_series(new)
    assert [p.name for p in series.patches] == ["0001-two-hunks.patch", "0002-taken-upstream.patch"]
    text = (new / "0001-two-hunks.patch").read_text()
    assert text.startswith("Description: change lines 10 and 30\nOrigin: test\n")
    assert f"Last-Update: {datetime.datetime.now(datetime.timezone.utc).date().isoformat()}" in text
    assert "@@ -12,7 +12,7 @@" in text and "@@ -32,7 +32,7 @@" in text
    files = RELEASES["1.1"][0]
    applied = apply_series(series, lambda p: files[p].encode() if p in files else None)
    assert [(h.placement.offset, h.placement.fuzz) for h in applied.hunks] == [(0, 0)] * 3
    # The overlay is one source per distribution: refresh copies nothing, the new release's wheel has it.
    assert sorted(p.relative_to(layout["overlay"]).as_posix() for p in layout["overlay"].rglob("*.py")) == [
        "demo/demo/_added.py"
    ]
    code, out, err = run_cli("build", "demo==1.1", *cli_args(layout))
    assert code == 0, err
    assert "demo-1.1+nvfp4.1-py3-none-any.whl" in out


def test_refresh_ports_by_three_way_merge_and_regenerates_exact_hunks(layout: dict[str, Path]) -> None:
    """1.2 changed a context line: the hunk applies only with fuzz, merge3 carries it over unattended."""
    code, out, err = run_cli("refresh", "demo", "1.0", "1.2", *cli_args(layout))
    assert code == 0, err
    assert "1.0  0001-two-hunks.patch\n  demo/mod.py hunk 1: merge3 1.2\n  demo/mod.py hunk 2: exact 1.2\n" in err
    series = read_series(layout["patches"] / "demo" / "1.2")
    hunk = series.patches[0].files[0].hunks[0]
    assert [line for line in hunk.before] == ["LINE 07\n", "line 08\n", "line 09\n", "line 10\n",
                                              "line 11\n", "line 12\n", "line 13\n"]  # 1.2's own context
    files = RELEASES["1.2"][0]
    applied = apply_series(series, lambda p: files[p].encode() if p in files else None)
    assert [(h.placement.offset, h.placement.fuzz) for h in applied.hunks] == [(0, 0)] * 3
    expected = edit(BASE, line_07="LINE 07", line_10="line 10 patched", line_30="line 30 patched")
    assert applied.files[MOD].decode() == expected


@pytest.mark.parametrize(
    ("version", "extra", "match"),
    [
        ("1.9", [], "hunk 1 (@@ -7,7 +7,7 @@) applies only with fuzz 1"),
        ("1.3", [], "0001-two-hunks.patch: conflict"),
        ("1.11", [], "0001-two-hunks.patch: missing-file"),
        ("1.5", [], "rerun with --drop-upstream"),
        ("1.9", ["--drop-upstream"], "hunk 1 (@@ -7,7 +7,7 @@) applies only with fuzz 1"),
    ],
    ids=[
        "fuzzy",
        "conflict",
        "missing-file",
        "upstream-needs-flag",
        "flag-does-not-excuse-fuzz",
    ],
)
def test_refresh_refuses_and_writes_nothing(
    layout: dict[str, Path], version: str, extra: list[str], match: str
) -> None:
    before_patches = sorted(p.relative_to(layout["patches"]) for p in layout["patches"].rglob("*"))
    before_overlay = sorted(p.relative_to(layout["overlay"]) for p in layout["overlay"].rglob("*"))
    code, out, err = run_cli("refresh", "demo", "1.0", version, *extra, *cli_args(layout))
    assert code == 1
    assert match in err
    assert "0001-two-hunks.patch" in out  # the drift report comes with the refusal
    assert sorted(p.relative_to(layout["patches"]) for p in layout["patches"].rglob("*")) == before_patches
    assert sorted(p.relative_to(layout["overlay"]) for p in layout["overlay"].rglob("*")) == before_overlay


def test_refresh_drop_upstream_drops_hunks_and_patches_and_says_so(layout: dict[str, Path]) -> None:
    code, _, err = run_cli("refresh", "demo", "1.0", "1.5", "--drop-upstream", *cli_args(layout))
    assert code == 0, err
    assert "hunk 1 (@@ -7,7 +7,7 @@) dropped, already upstream in 1.5" in err
    series = read_series(layout["patches"] / "demo" / "1.5")
    (p1, _) = series.patches
    assert [h.header for fp in p1.files for h in fp.hunks] == ["@@ -27,7 +27,7 @@"]


def test_refresh_drops_a_patch_whose_applied_upstream_release_is_out(layout: dict[str, Path]) -> None:
    """The header is the maintainer's word: no flag needed, and the drift of that cell needs no person."""
    _, p2 = drift_on(layout, "2.0")
    assert p2.state is State.OBSOLETE and not p2.state.needs_person
    code, _, err = run_cli("refresh", "demo", "1.0", "2.0", *cli_args(layout))
    assert code == 0, err
    assert "0002-taken-upstream.patch: dropped, Applied-Upstream 2.0 in 2.0" in err
    assert [p.name for p in read_series(layout["patches"] / "demo" / "2.0").patches] == [
        "0001-two-hunks.patch"
    ]
    assert (
        "# 0002-taken-upstream.patch  (dropped by refresh)"
        in (layout["patches"] / "demo" / "2.0" / "series").read_text()
    )


def test_refresh_never_overwrites(layout: dict[str, Path]) -> None:
    assert run_cli("refresh", "demo", "1.0", "1.1", *cli_args(layout))[0] == 0
    code, _, err = run_cli("refresh", "demo", "1.0", "1.1", *cli_args(layout))
    assert code == 2
    assert "already exists" in err


def test_refresh_to_a_release_the_index_does_not_have_names_the_carried_neighbours(
    layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip's own words ('No matching distribution found') are not the message: the release is not there."""
    from nvfp4_overlay.wheel import pip

    tail = "ERROR: No matching distribution found for demo==9.9.9"
    monkeypatch.setattr(pip, "download", lambda *a, **k: pip.Ran(1, "", tail))
    monkeypatch.setattr(pip, "index_versions", lambda dist: (["1.2", "1.1", "1.0"], pip.Ran(0, "", "")))
    args = [a for a in cli_args(layout) if a not in ("--offline", "--wheelhouse", str(layout["wheelhouse"]))]
    code, out, err = run_cli("refresh", "demo", "1.0", "9.9.9", "--json", *args)
    assert code == 2, err
    error = json.loads(out)["error"]
    assert error["message"] == (f"demo==9.9.9: the index has no such release (pip: {tail}); its newest is 1.2; "
                                "the nearest carried: 1.0")
    assert (error["item"], error["found"]) == ("demo==9.9.9", "9.9.9")
    assert not (layout["patches"] / "demo" / "9.9.9").exists()


def test_refresh_offline_to_a_release_not_in_the_cache_says_how_to_fill_it(layout: dict[str, Path]) -> None:
    code, _, err = run_cli("refresh", "demo", "1.0", "9.9.9", *cli_args(layout))
    assert code == 2
    cache = layout["cache"] / "wheels"
    assert (f"demo==9.9.9: no wheel in the wheelhouse or in the cache {cache} (--offline: no pip); fill the cache "
            f"with 'pip download --no-deps --only-binary=:all: --dest {cache} demo==9.9.9', or drop --offline; "
            "the nearest carried: 1.0") in err


def test_a_wheel_whose_name_and_metadata_disagree_is_an_integrity_refusal(layout: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    """demo 1.1's wheel under the name of 1.12: refresh refuses it as integrity (3), not as a port
    that does not behave (1), and drift never calls it exact."""
    made = write_wheel(tmp_path, "demo", "1.1", RELEASES["1.1"][0])
    shutil.copy(made, layout["wheelhouse"] / "demo-1.12-py3-none-any.whl")
    code, out, err = run_cli("refresh", "demo", "1.0", "1.12", "--json", *cli_args(layout))
    assert code == 3, err
    error = json.loads(out)["error"]
    assert error["kind"] == "IntegrityError"
    assert "integrity: not a consistent wheel of demo==1.12, nothing was read from it" in error["message"]
    assert "does not behave" not in error["message"]
    assert not (layout["patches"] / "demo" / "1.12").exists()
    code, out, err = run_cli("drift", "--against", "1.12", *cli_args(layout))
    assert code == 3 and "exact" not in out
    assert "integrity: not a consistent wheel of demo==1.12" in err


# --- properties ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("demo 2.0", "2.0"),
        ("demo==2.0.post1, https://example.invalid/pr/1", "2.0.post1"),
        ("v2.1", "2.1"),
        ("other-dist 2.0", None),
        ("no", None),
        ("commit 1a2b3c4", None),
        ("https://example.invalid/commit/1a2b3c4", None),
    ],
    ids=["name-version", "pep440-and-url", "bare-v", "another-dist", "no", "commit", "url"],
)
def test_applied_upstream_field(field: str, expected: str | None) -> None:
    from nvfp4_overlay.carry.drift import applied_upstream_release
    from nvfp4_overlay.patch.patching import Patch

    patch = Patch("p", Path("p"), "", {"Applied-Upstream": field}, ())
    found = applied_upstream_release(patch, "demo")
    assert (str(found) if found else None) == expected
    # the project's name stands for its -python distribution (patch 0003: "flashinfer 0.7.1")
    found = applied_upstream_release(patch, "demo-python")
    assert (str(found) if found else None) == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(8, 60),
    changes=st.sets(st.integers(3, 56), min_size=1, max_size=4),
    shift=st.integers(0, 25),
)
def test_shifted_release_is_offset_and_refresh_applies_exactly(
    tmp_path: Path, n: int, changes: set[int], shift: int
) -> None:
    """Any diff, on a release with lines added above: every hunk is exact/offset by exactly that much;
    refreshed, it applies with no offset and gives the same file; on its own post-image it is upstream."""
    from nvfp4_overlay.carry.refresh import port_series

    base = [f"base {i}\n" for i in range(n)]
    # Not in the first or last 3 lines: a hunk with less context on one side is anchored to that end
    # of the file (GNU patch), and lines added above it are drift that the build does not take.
    changed = [f"changed {i}\n" if i in changes and 3 <= i < n - 3 else line for i, line in enumerate(base)]
    assume(changed != base)
    where = Path(tempfile.mkdtemp(dir=tmp_path))
    body = "".join(difflib.unified_diff(base, changed, "a/m.py", "b/m.py", n=3))
    (where / "0001-p.patch").write_text("Description: p\n\n" + body)
    (where / "series").write_text("0001-p.patch\n")
    series = read_series(where)
    release = [f"new {i}\n" for i in range(shift)] + base

    def files(lines: list[str]) -> Callable[[str], bytes | None]:
        return lambda p: "".join(lines).encode() if p == "m.py" else None

    (drift,) = drift_series(series, files(release), ["m.py"], "demo", "2.0")
    assert {(h.state, h.offset) for h in drift.hunks} == {(State.OFFSET if shift else State.EXACT, shift)}
    ported = port_series(series, [drift], "2.0", drop_upstream=False, today=datetime.date(2026, 1, 1))
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    ((name, text),) = ported.patches
    (out / name).write_text(text)
    (out / "series").write_text(name + "\n")
    applied = apply_series(read_series(out), files(release))
    assert all((h.placement.offset, h.placement.fuzz) == (0, 0) for h in applied.hunks)
    assert applied.files["m.py"] == "".join(release[:shift] + changed).encode()
    (on_post,) = drift_series(series, files(changed), ["m.py"], "demo", "2.0")
    assert on_post.state is State.UPSTREAM


def test_drift_check_ports_the_newest_series_to_newer_releases_and_writes_nothing(layout: dict[str, Path]) -> None:
    before = sorted(p.relative_to(layout["patches"]) for p in layout["patches"].rglob("*"))
    code, out, err = run_cli("drift", "--against", "1.1", "1.2", "1.9", "--check", "--json", *cli_args(layout))
    doc = json.loads(out)
    works = doc["works"]
    assert works["demo==1.1"]["works"] is True and works["demo==1.2"]["works"] is True  # offset, merges
    assert works["demo==1.9"]["works"] is False  # a real conflict: the port is refused
    assert any("applies only with fuzz 1" in p for p in works["demo==1.9"]["problems"])
    assert code == 1
    assert sorted(p.relative_to(layout["patches"]) for p in layout["patches"].rglob("*")) == before


def test_refresh_dry_run_checks_and_writes_nothing(layout: dict[str, Path]) -> None:
    code, out, err = run_cli("refresh", "demo", "1.0", "1.2", "--dry-run", *cli_args(layout))
    assert code == 0, err
    assert "nothing written" in out
    assert not (layout["patches"] / "demo" / "1.2").exists()


def test_a_release_is_checked_against_the_series_of_it_and_older_ones() -> None:
    """`--against VERSION` ports each series forward, never back: a series newer than the release
    gets no cell (SGLang 0.5.12 against 0.5.8-0.5.11's series, not 0.5.16's), and a release older
    than every series is an argument error naming the oldest."""
    from nvfp4_overlay.carry.matrix import plan_releases
    from nvfp4_overlay.errors import ConfigError

    series = [Target("sglang", v) for v in ("0.5.8", "0.5.11", "0.5.16")]
    plan = plan_releases(["0.5.12"], series, lambda dist: [])
    assert plan == {series[0]: ["0.5.12"], series[1]: ["0.5.12"], series[2]: []}
    assert plan_releases(["0.5.16"], series, lambda dist: [])[series[2]] == ["0.5.16"]
    with pytest.raises(ConfigError, match="the oldest is 0.5.8"):
        plan_releases(["0.5.7"], series, lambda dist: [])
