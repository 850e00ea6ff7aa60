"""Property-based tests (hypothesis): the applier against difflib and GNU patch, and the archive round trip.

`make test` runs a small profile (FUZZ_EXAMPLES, default 200 per property); `make fuzz` runs 10,000.
Run with --hypothesis-show-statistics to see how many cases ran.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from nvfp4_overlay.errors import PatchError
from nvfp4_overlay.operate import Sums, verify_wheel
from nvfp4_overlay.patch.patching import Series, apply_series, decode, encode, read_patch
from nvfp4_overlay.records import rows_sha256
from nvfp4_overlay.wheel.archive import WheelReader
from nvfp4_overlay.wheel.fetch import Source
from nvfp4_overlay.wheel.recipe import CopiedMember
from nvfp4_overlay.wheel.writer import write_wheel, zip_date_time

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
import make_fixtures

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GNU_PATCH = shutil.which("patch")
needs_gnu_patch = pytest.mark.skipif(GNU_PATCH is None, reason="GNU patch is not installed")
_GNU_OFFSET = re.compile(r"^Hunk #(\d+) succeeded at \d+(?: with fuzz \d+)? \(offset (-?\d+) lines?\)", re.MULTILINE)

# Lines from a small vocabulary, so that files repeat lines and a hunk can match in several places;
# some look like diff syntax once prefixed ("--- a/f", "@@ ...", "\ ...") to trip a careless parser.
WORDS = ["a", "b", "c", "", "x = 1", "    pass", "-- a/f.txt", "++ b/f.txt", "@@ -1 +1 @@", "\\ No newline", "-", "+"]
LINE = st.one_of(st.sampled_from(WORDS), st.text(alphabet="defgh \t", min_size=1, max_size=4))
REPETITIVE = st.sampled_from(["a", "a", "a", "b"])  # a file of near-identical lines: every hunk matches often
ENDINGS = st.sampled_from(["\n", "\r\n"])


@st.composite
def line_list(draw: st.DrawFn, max_size: int = 25) -> list[tuple[str, str]]:
    """Lines as (content, ending) pairs; the file's convention is LF, CRLF or mixed."""
    style = draw(st.sampled_from(["lf", "crlf", "mixed"]))
    contents = draw(st.lists(draw(st.sampled_from([LINE, LINE, REPETITIVE])), max_size=max_size))
    if style == "mixed":
        return [(c, draw(ENDINGS)) for c in contents]
    return [(c, "\n" if style == "lf" else "\r\n") for c in contents]


def join(lines: list[tuple[str, str]], final_newline: bool) -> list[str]:
    out = [c + e for c, e in lines]
    if out and not final_newline:
        out[-1] = lines[-1][0]  # an empty last line without its newline is no line at all
    return [line for line in out if line]


@st.composite
def edit_case(draw: st.DrawFn) -> tuple[list[str], list[str], int]:
    """(old lines, new lines, context): 1-4 random edits (insert, delete, change), anywhere, near each other too."""
    base = draw(line_list())
    target = list(base)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(target)))
        removed = draw(st.integers(0, min(3, len(target) - at)))
        ending = target[at - 1][1] if at else "\n"
        target[at:at + removed] = [(c, draw(st.sampled_from([ending, "\n", "\r\n"]))) for c in draw(st.lists(LINE, max_size=3))]
    old = join(base, draw(st.booleans()))
    new = join(target, draw(st.booleans()))
    assume(old != new)
    return old, new, draw(st.sampled_from([3, 3, 2, 1, 0]))


def unified_diff(old: list[str], new: list[str], context: int) -> str:
    """difflib's diff, with the "\\ No newline at end of file" markers difflib leaves out."""
    out = []
    for line in difflib.unified_diff(old, new, "a/f.txt", "b/f.txt", n=context):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "Description: generated\n---\n" + "".join(out)


def hunk_count(diff: str) -> int:
    return len(re.findall(r"^@@ ", diff, re.MULTILINE))


def ours(original: str, diff: str, fuzz: int = 0) -> tuple[str | None, list[int]]:
    """The applier: the patched text (None if a hunk does not apply) and each hunk's offset."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "0001-generated.patch"
        path.write_bytes(encode(diff))
        series = Series(Path(tmp), (read_patch(path),))
    try:
        applied = apply_series(series, {"f.txt": encode(original)}.get, fuzz=fuzz)
    except PatchError:
        return None, []
    data = applied.files["f.txt"]
    return (decode(data) if data is not None else ""), [h.placement.offset for h in applied.hunks]


def gnu(original: str, diff: str, fuzz: int = 0) -> tuple[str | None, list[int]]:
    """GNU patch --fuzz=N on the same input: its output and the offsets it prints."""
    with tempfile.TemporaryDirectory() as tmp:
        source, output, patch = Path(tmp) / "f.txt", Path(tmp) / "out.txt", Path(tmp) / "p.diff"
        source.write_bytes(encode(original))
        patch.write_bytes(encode(diff))
        done = subprocess.run(
            [str(GNU_PATCH), f"--fuzz={fuzz}", "--force", "--no-backup-if-mismatch", "--reject-file=-",
             "-o", str(output), str(source), "-i", str(patch)],
            capture_output=True, cwd=tmp, check=False,
        )
        if done.returncode != 0:
            return None, []
        offsets = [0] * hunk_count(diff)
        for number, offset in _GNU_OFFSET.findall(decode(done.stdout)):
            offsets[int(number) - 1] = int(offset)
        return (decode(output.read_bytes()) if output.exists() else ""), offsets


@st.composite
def drifted(draw: st.DrawFn) -> tuple[list[str], list[str], int, list[str]]:
    """An edit case and upstream's file moved on: lines inserted at the start, or inserted or
    removed anywhere (between hunks they shift them; inside one, GNU patch should refuse it)."""
    old, new, context = draw(edit_case())
    moved = list(old)
    ending = "\r\n" if old and old[0].endswith("\r\n") else "\n"
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["insert at start", "insert", "insert", "remove"]))
        at = 0 if kind == "insert at start" else draw(st.integers(0, len(moved)))
        if kind == "remove":
            del moved[at:at + draw(st.integers(1, 2))]
            continue
        if at == len(moved) and moved and not moved[-1].endswith("\n"):
            at -= 1  # keep the file's last line last: a line after it would need a newline it lacks
        moved[at:at] = [c + ending for c in draw(st.lists(LINE, min_size=1, max_size=4))]
    return old, new, context, moved


@FUZZ
@given(edit_case())
def test_applier_makes_the_target_exactly(case: tuple[list[str], list[str], int]) -> None:
    old, new, context = case
    diff = unified_diff(old, new, context)
    result, offsets = ours("".join(old), diff)
    assert result == "".join(new), diff
    assert offsets == [0] * hunk_count(diff)


@needs_gnu_patch
@FUZZ
@given(drifted())
def test_applier_agrees_with_gnu_patch_on_a_moved_file(case: tuple[list[str], list[str], int, list[str]]) -> None:
    old, new, context, moved = case
    diff = unified_diff(old, new, context)
    assert gnu("".join(old), diff) == ("".join(new), [0] * hunk_count(diff))  # the harness reads GNU patch right
    theirs = gnu("".join(moved), diff)
    mine = ours("".join(moved), diff)
    offsets = theirs[1]
    event("GNU patch: refused" if theirs[0] is None else "GNU patch: offsets " + (
        "differ between hunks" if len(set(offsets)) > 1 else "all 0" if not any(offsets) else "all equal, not 0"))
    if theirs[0] is not None:
        assert mine == theirs, f"GNU patch applied it at offsets {theirs[1]}; the applier: {mine[1]}\n{diff}"
    else:
        assert mine[0] is None, f"GNU patch refused it; the applier applied it at offsets {mine[1]}\n{diff}"


# --- the archive: read and written back unchanged ------------------------------------------------

NAME_PART = st.text(alphabet="abcXYZ_09-é", min_size=1, max_size=8)
MEMBERS = st.lists(
    st.tuples(
        st.lists(NAME_PART, min_size=1, max_size=3).map(lambda parts: "demo/" + "/".join(parts) + ".py"),
        st.binary(max_size=3000) | st.text(max_size=2000).map(str.encode),
        st.sampled_from([0o644, 0o755]),
        st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]),
    ),
    max_size=12,
    unique_by=lambda m: m[0].lower(),
)


@FUZZ
@given(MEMBERS)
def test_wheel_written_back_unchanged_verifies(members: list[tuple[str, bytes, int, int]]) -> None:
    listed = [make_fixtures.member(n, d, 0o100000 | mode, method) for n, d, mode, method in members]
    listed = [*make_fixtures.good_members(), *listed]
    # As the build writes it: no overlay, nothing patched, every member carried over (its RECORD rows' digest).
    rows = [(n, make_fixtures.record_hash(d), str(len(d))) for n, d, _, _ in listed]
    provenance = json.dumps({"version": "1.0", "overlay": {}, "patched": {}, "upstream": {
        "filename": "demo-1.0-py3-none-any.whl", "record": {"rows": len(rows), "sha256": rows_sha256(rows)}}}).encode()
    listed += [make_fixtures.member(f"{make_fixtures.DIST_INFO}/NVFP4_OVERLAY.json", provenance)]
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "in" / "demo-1.0-py3-none-any.whl"
        source.parent.mkdir()
        source.write_bytes(make_fixtures.wheel_bytes(listed))
        copy = Path(tmp) / "demo-1.0-py3-none-any.whl"
        with WheelReader(source) as reader, copy.open("wb") as out:
            write_wheel(out, reader, [CopiedMember(n, i) for n, i in reader.infos.items()], zip_date_time(0))
        verdict = verify_wheel(copy, Path(tmp) / "no-patches", Path(tmp) / "no-overlay",
                               Source(Path(tmp) / "cache", offline=True), sums=Sums.BESIDE)
        assert not verdict.problems, verdict.problems  # archive, RECORD and the provenance's digests all agree
        assert verdict.unverified is not None and "carries no series" in verdict.unverified  # no pin to derive it from
        with zipfile.ZipFile(source) as a, zipfile.ZipFile(copy) as b:
            assert [i.filename for i in a.infolist()] == [i.filename for i in b.infolist()]
            for x, y in zip(a.infolist(), b.infolist()):
                assert a.read(x) == b.read(y)
                assert (x.external_attr >> 16, x.compress_type, x.CRC) == (y.external_attr >> 16, y.compress_type, y.CRC)
            assert b.testzip() is None


@needs_gnu_patch
@FUZZ
@given(drifted(), st.integers(1, 2))
def test_applier_agrees_with_gnu_patch_with_fuzz(case: tuple[list[str], list[str], int, list[str]], fuzz: int) -> None:
    """--fuzz N: the same lines ignored, the same placement (GNU patch's prefix and suffix fuzz)."""
    old, new, context, moved = case
    diff = unified_diff(old, new, context)
    theirs = gnu("".join(moved), diff, fuzz)
    mine = ours("".join(moved), diff, fuzz)
    if theirs[0] is not None:
        assert mine == theirs, f"GNU patch applied it at offsets {theirs[1]}; the applier: {mine[1]}\n{diff}"
    else:
        assert mine[0] is None, f"GNU patch refused it; the applier applied it at offsets {mine[1]}\n{diff}"


@needs_gnu_patch
@pytest.mark.parametrize("removed, offsets", [
    ([8], [0, -1]), ([7, 8], [0, -2]), ([5, 6, 7, 8], [0, -4]), ([5, 6, 7, 8, 9], None),
], ids=["gap-shrinks", "contexts-share-a-line", "contexts-share-three", "changes-would-overlap"])
def test_next_hunk_may_share_the_previous_trailing_context(removed: list[int], offsets: list[int] | None) -> None:
    """GNU patch writes a hunk's trailing context only when the next hunk needs the lines: the next
    hunk's leading context may match the same lines (found by the fuzz test; the applier was stricter)."""
    old = ["a\n"] * 20
    new = list(old)
    new[4], new[12] = "B\n", "C\n"
    diff = unified_diff(old, new, 3)
    moved = "".join(line for i, line in enumerate(old) if i not in removed)
    theirs, mine = gnu(moved, diff), ours(moved, diff)
    assert mine == theirs
    assert mine[1][-2:] == offsets if offsets else mine[0] is None


@needs_gnu_patch
def test_gnu_offset_parser_reads_real_output() -> None:
    """The harness reads GNU patch's own messages: offsets up and down, one line and several."""
    old = [f"{i}\n" for i in range(40)]
    new = list(old)
    new[5], new[30] = "five\n", "thirty\n"
    diff = unified_diff(old, new, 3)
    moved = ["x\n", "y\n", "z\n", *old[:20], *old[21:]]  # +3 before hunk 1, +2 before hunk 2
    assert gnu("".join(moved), diff)[1] == [3, 2]
    one_line = ["x\n", *old]
    assert gnu("".join(one_line), diff)[1] == [1, 1]  # GNU patch writes "(offset 1 line)"
    fewer = old[2:]  # the two lines above hunk 1's context
    assert gnu("".join(fewer), diff)[1] == [-2, -2]
    assert _GNU_OFFSET.findall("Hunk #2 succeeded at 9 (offset -1 line).") == [("2", "-1")]
