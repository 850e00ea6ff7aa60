"""The applier: placement, offsets, fuzz, new/deleted/renamed files, CRLF, missing final newlines."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from nvfp4_overlay.errors import ConfigError, PatchError
from nvfp4_overlay.patch.patching import apply_series
from nvfp4_overlay.patch.series import Series, read_patch, read_series

BASE = "".join(f"line {i}\n" for i in range(1, 21))


def udiff(old: str, new: str, path: str = "pkg/mod.py", header: str = "Description: test\n\n") -> str:
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))
    return header + body


def series_of(tmp_path: Path, *patches: str) -> Series:
    names = []
    for i, text in enumerate(patches, start=1):
        name = f"{i:04d}-p.patch"
        (tmp_path / name).write_bytes(text.encode())
        names.append(name)
    (tmp_path / "series").write_text("# order matters\n" + "\n".join(names) + "\n")
    return read_series(tmp_path)


def apply(tmp_path: Path, files: dict[str, str], *patches: str, fuzz: int = 0) -> tuple[dict[str, str | None], list[int]]:
    series = series_of(tmp_path, *patches)
    stored = {k: v.encode() for k, v in files.items()}
    result = apply_series(series, stored.get, fuzz=fuzz)
    out = {k: (v.decode() if v is not None else None) for k, v in result.files.items()}
    return out, [h.placement.offset for h in result.hunks]


def test_exact(tmp_path: Path) -> None:
    new = BASE.replace("line 10\n", "line ten\n")
    out, offsets = apply(tmp_path, {"pkg/mod.py": BASE}, udiff(BASE, new))
    assert out == {"pkg/mod.py": new}
    assert offsets == [0]


@pytest.mark.parametrize("shift", [3, -4], ids=["moved-down", "moved-up"])
def test_offset_is_found_and_reported(tmp_path: Path, shift: int) -> None:
    new = BASE.replace("line 12\n", "line twelve\n")
    moved = "extra\n" * shift + BASE if shift > 0 else BASE.split("\n", -shift)[-1]
    out, offsets = apply(tmp_path, {"pkg/mod.py": moved}, udiff(BASE, new))
    assert out["pkg/mod.py"] == moved.replace("line 12\n", "line twelve\n")
    assert offsets == [shift]


def test_second_hunk_follows_the_first_offset(tmp_path: Path) -> None:
    new = BASE.replace("line 5\n", "line five\n").replace("line 17\n", "line seventeen\n")
    moved = "a\nb\n" + BASE
    out, offsets = apply(tmp_path, {"pkg/mod.py": moved}, udiff(BASE, new))
    assert out["pkg/mod.py"] == "a\nb\n" + new
    assert offsets == [2, 2]


def test_conflict_names_patch_hunk_file_and_line(tmp_path: Path) -> None:
    new = BASE.replace("line 10\n", "line ten\n")
    upstream = BASE.replace("line 9\n", "line nine (changed upstream)\n")
    with pytest.raises(PatchError, match=r"0001-p\.patch: hunk 1 \(@@ -7,7 \+7,7 @@\) does not apply to pkg/mod\.py: "
                                         r"line 9 differs: expected 'line 9', found 'line nine \(changed upstream\)'; "
                                         r"run 'nvfp4-overlay drift'"):
        apply(tmp_path, {"pkg/mod.py": upstream}, udiff(BASE, new))


def test_errors_carry_the_file_the_item_expected_found_and_the_fix_as_data(tmp_path: Path) -> None:
    """--json reports these fields: a hunk that does not apply, and a patch that does not parse."""
    new = BASE.replace("line 10\n", "line ten\n")
    upstream = BASE.replace("line 9\n", "line nine (changed upstream)\n")
    (tmp_path / "a").mkdir()
    with pytest.raises(PatchError) as applied:
        apply(tmp_path / "a", {"pkg/mod.py": upstream}, udiff(BASE, new))
    assert {k: v for k, v in applied.value.data().items() if k not in ("message", "kind", "exit_code")} == {
        "path": str(tmp_path / "a" / "0001-p.patch"), "item": "pkg/mod.py hunk 1 (@@ -7,7 +7,7 @@) line 9",
        "expected": "line 9\n", "found": "line nine (changed upstream)\n",
        "fix": "run 'nvfp4-overlay drift' to see where upstream moved"}
    broken = tmp_path / "b"
    broken.mkdir()
    (broken / "0001-p.patch").write_text(udiff(BASE, new).replace("@@ -7,7 +7,7 @@", "@@ -7,5 +7,5 @@"))
    with pytest.raises(ConfigError) as read:
        read_patch(broken / "0001-p.patch")
    data = read.value.data()
    assert (data["path"], data["expected"], data["fix"]) == (
        str(broken / "0001-p.patch"), "hunks whose lines match their headers", "regenerate it with 'diff -u' or 'git diff'")
    assert "hunk @@ -7,5 +7,5 @@ holds more lines than its header counts" in data["found"]


def test_fuzz_only_when_asked(tmp_path: Path) -> None:
    new = BASE.replace("line 10\n", "line ten\n")
    upstream = BASE.replace("line 7\n", "line seven\n")  # the first context line moved on
    with pytest.raises(PatchError):
        apply(tmp_path, {"pkg/mod.py": upstream}, udiff(BASE, new))
    out, _ = apply(tmp_path, {"pkg/mod.py": upstream}, udiff(BASE, new), fuzz=1)
    assert out["pkg/mod.py"] == upstream.replace("line 10\n", "line ten\n")


def test_new_and_deleted_files(tmp_path: Path) -> None:
    added = "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n"
    deleted = "--- a/pkg/old.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-gone\n-too\n"
    out, _ = apply(tmp_path, {"pkg/old.py": "gone\ntoo\n"}, added, deleted)
    assert out == {"pkg/new.py": "x = 1\ny = 2\n", "pkg/old.py": None}


def test_new_file_that_exists_is_refused(tmp_path: Path) -> None:
    added = "--- /dev/null\n+++ b/pkg/mod.py\n@@ -0,0 +1 @@\n+x\n"
    with pytest.raises(PatchError, match="creates pkg/mod.py, which upstream already has"):
        apply(tmp_path, {"pkg/mod.py": BASE}, added)


def test_git_rename_with_a_hunk(tmp_path: Path) -> None:
    patch = (
        "Subject: [PATCH] move it\n---\ndiff --git a/pkg/a.py b/pkg/b.py\nsimilarity index 90%\n"
        "rename from pkg/a.py\nrename to pkg/b.py\n--- a/pkg/a.py\n+++ b/pkg/b.py\n"
        "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
    )
    out, _ = apply(tmp_path, {"pkg/a.py": "one\ntwo\nthree\n"}, patch)
    assert out == {"pkg/a.py": None, "pkg/b.py": "one\nTWO\nthree\n"}


def test_crlf_is_kept(tmp_path: Path) -> None:
    old = "a\r\nb\r\nc\r\n"
    new = "a\r\nB\r\nc\r\n"
    out, _ = apply(tmp_path, {"pkg/win.txt": old}, udiff(old, new, "pkg/win.txt"))
    assert out["pkg/win.txt"] == new


@pytest.mark.parametrize(
    ("old", "new"),
    [("a\nb", "a\nb\nc\n"), ("a\nb\n", "a\nc"), ("a\nb", "a\nc")],
    ids=["add-final-newline", "drop-final-newline", "change-last-line-without-newline"],
)
def test_no_newline_at_end_of_file(tmp_path: Path, old: str, new: str) -> None:
    lines = difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a/f.txt", "b/f.txt")
    marked = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    out, _ = apply(tmp_path, {"f.txt": old}, marked)
    assert out["f.txt"] == new


def test_binary_diff_is_refused(tmp_path: Path) -> None:
    patch = "diff --git a/pkg/x.so b/pkg/x.so\nBinary files a/pkg/x.so and b/pkg/x.so differ\n"
    with pytest.raises(ConfigError, match="binary diffs are refused"):
        series_of(tmp_path, patch)


def test_dep3_header_of_diff_u_and_format_patch(tmp_path: Path) -> None:
    dep3 = tmp_path / "dep3.patch"
    dep3.write_text(
        "Description: route fp4_quantize through a custom op\n while dynamo traces\nOrigin: nvfp4-overlay\n"
        "Bug: https://example.invalid/1\nForwarded: no\nApplied-Upstream: sglang 0.5.12\nLast-Update: 2026-11-30\n\n"
        + udiff(BASE, BASE.replace("line 1\n", "line one\n"), header="")
    )
    fields = read_patch(dep3).fields
    assert fields["Description"] == "route fp4_quantize through a custom op\nwhile dynamo traces"
    assert fields["Applied-Upstream"] == "sglang 0.5.12"
    assert fields["Last-Update"] == "2026-11-30"
    git = tmp_path / "git.patch"
    git.write_text(
        "From 0123456789abcdef Mon Sep 17 00:00:00 2001\nFrom: A Dev <a@dev>\nDate: Mon, 30 Nov 2026\n"
        "Subject: [PATCH 1/2] cuda version from torch\n\nBody text.\n---\n pkg/mod.py | 2 +-\n\n"
        + udiff(BASE, BASE.replace("line 1\n", "line one\n"), header="").replace("--- a/", "diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/", 1)
        + "-- \n2.43.0\n\n"
    )
    patch = read_patch(git)
    assert patch.fields["Subject"] == "cuda version from torch"
    assert patch.fields["Author"] == "A Dev <a@dev>"
    assert [f.path for f in patch.files] == ["pkg/mod.py"]


def test_series_lists_problems_and_unlisted_patches(tmp_path: Path) -> None:
    good = udiff(BASE, BASE.replace("line 1\n", "x\n"))
    (tmp_path / "0001-good.patch").write_text(good)
    (tmp_path / "0009-stray.patch").write_text(good)
    (tmp_path / "series").write_text("0001-good.patch\n# 0002-commented.patch\n")
    assert read_series(tmp_path).unlisted == ("0009-stray.patch",)
    (tmp_path / "series").write_text("0001-good.patch\n0002-missing.patch\n0003-gone.patch\n")
    with pytest.raises(ConfigError, match=r"(?s)0002-missing\.patch: listed in the series but .* does not exist.*0003-gone"):
        read_series(tmp_path)


@pytest.mark.parametrize(
    "target",
    ["a/../../etc/passwd", "/etc/passwd", "a/pkg-1.0.dist-info/RECORD", "a/pkg\\mod.py"],
    ids=["dotdot", "absolute", "dist-info", "backslash"],
)
def test_targets_outside_the_wheel_root_are_refused(tmp_path: Path, target: str) -> None:
    patch = f"--- {target}\n+++ {target}\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(ConfigError, match="outside the wheel's package files"):
        series_of(tmp_path, patch)


def test_insertion_after_a_last_line_without_newline_ends_it(tmp_path: Path) -> None:
    """Found by the fuzzer: GNU patch gives 'a\\nb\\n' here, not 'ab\\n'."""
    out, offsets = apply(tmp_path, {"f.txt": "a"}, "--- a/f.txt\n+++ b/f.txt\n@@ -1,0 +2 @@\n+b\n")
    assert out["f.txt"] == "a\nb\n"
    assert offsets == [0]


def test_insertion_after_a_last_line_without_newline_under_fuzz_joins_it(tmp_path: Path) -> None:
    """Found by the fuzzer (test_applier_agrees_with_gnu_patch_with_fuzz): with the context fuzzed
    away, GNU patch 2.7.6 does not end the old last line first: 'a' plus 'b' gives 'ab\\n'."""
    diff = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,3 @@\n a\n+b\n a\n"
    out, offsets = apply(tmp_path, {"f.txt": "a"}, diff, fuzz=1)
    assert out["f.txt"] == "ab\n"
