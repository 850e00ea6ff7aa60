"""records.py, RECORD's one home: the encoding against known digests, rows read as the standard library's own
reader reads them, every malformed row at once, the match rules of PEP 427, and installed files hashed again."""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

import pytest

from nvfp4_overlay import records

EMPTY = "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"  # sha256 of no bytes, as pip writes it in RECORD


def test_the_encoding_is_urlsafe_base64_without_padding() -> None:
    assert records.hash_of(b"") == EMPTY
    assert records.from_hex(hashlib.sha256(b"").hexdigest()) == EMPTY
    assert records.from_hex("not hex") is None and records.from_hex(None) is None
    # 0xfb 0xff encode to "-_" in the urlsafe alphabet ("+/" in the standard one), and no "=" closes it
    assert records.encode(b"\xfb\xff", "sha256") == "sha256=-_8"


@pytest.mark.parametrize(("row", "data", "same"), [
    (records.Row("a", records.hash_of(b"x"), "1"), b"x", True),
    (records.Row("a", records.hash_of(b"x"), ""), b"x", True),  # no size: the hash alone
    (records.Row("a", records.hash_of(b"x"), "2"), b"x", False),  # the size disagrees
    (records.Row("a", records.hash_of(b"x") + "=", "1"), b"x", True),  # padding is not part of the digest
    (records.Row("a", records.encode(hashlib.sha512(b"x").digest(), "sha512"), "1"), b"x", True),
    (records.Row("a", records.encode(hashlib.md5(b"x").digest(), "md5"), "1"), b"x", False),  # PEP 427: too weak
    (records.Row("a", records.encode(hashlib.sha1(b"x").digest(), "sha1"), "1"), b"x", False),
    (records.Row("a", "shake_128=AAAA", "1"), b"x", False),  # no fixed length: not a RECORD hash
    (records.Row("a", "nosuch=AAAA", "1"), b"x", False),
    (records.Row("a", "", ""), b"x", False),  # a row without a hash vouches for nothing
], ids=["sha256", "no-size", "size", "padded", "sha512", "md5", "sha1", "shake", "unknown", "no-hash"])
def test_a_row_matches_by_pep_427s_rules(row: records.Row, data: bytes, same: bool, tmp_path: Path) -> None:
    assert row.matches(data) is same
    (tmp_path / "a").write_bytes(data)
    assert row.matches_file(tmp_path / "a") is same


def test_rows_are_read_as_the_standard_library_reads_an_installed_record(tmp_path: Path) -> None:
    """What this tool writes, read back by records.parse and by importlib.metadata (an installed RECORD)."""
    info = tmp_path / "demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
    rows = [records.Row("demo/__init__.py", records.hash_of(b"x = 1\n"), "6"),
            records.Row("demo/a file, quoted.py", records.hash_of(b""), "0"),
            records.Row(f"{info.name}/METADATA", records.hash_of((info / "METADATA").read_bytes()), "")]
    written = records.write(f"{info.name}/RECORD", rows)
    (info / "RECORD").write_bytes(written)
    parsed, problems = records.parse(written)
    assert problems == []
    theirs = {str(f): (f.hash and f"{f.hash.mode}={f.hash.value}" or "", "" if f.size is None else str(f.size))
              for f in metadata.PathDistribution(info).files or ()}
    assert {n: (r.hash, r.size) for n, r in parsed.items()} == theirs
    assert written.decode().splitlines()[-1] == f"{info.name}/RECORD,,"  # its own row last, with no hash
    assert [r[0] for r in records.read(written.decode())] == sorted(r.path for r in rows) + [f"{info.name}/RECORD"]


def test_every_malformed_row_is_named_at_once() -> None:
    text = (b"a,sha256=AAAA,1\n"
            b"b,sha256=AAAA\n"
            b"a,sha256=AAAA,1\n"
            b"c,sha256:AAAA,1\n"
            b"d,sha256=AAAA,ten\n")
    rows, problems = records.parse(text)
    assert list(rows) == ["a"]
    assert problems == ["row 2 ['b', 'sha256=AAAA'] does not have three fields", "row 3: a is listed twice",
                        "row 4: c has hash 'sha256:AAAA', not 'sha256=<urlsafe base64>'",
                        "row 5: d has size 'ten', not a number of bytes"]


def test_the_rows_digest_is_the_sorted_rows_as_a_record_writes_them() -> None:
    rows = [("b", records.hash_of(b"b"), "1"), ("a", records.hash_of(b"a"), "1")]
    expected = hashlib.sha256(f"a,{rows[1][1]},1\nb,{rows[0][1]},1\n".encode()).hexdigest()
    assert records.rows_sha256(rows) == records.rows_sha256(reversed(rows)) == expected


@pytest.mark.parametrize(("name", "ours"), [
    ("demo-1.0.dist-info/INSTALLER", True), ("demo-1.0.dist-info/direct_url.json", True),
    ("../../bin/demo", True), ("demo/__pycache__/mod.cpython-312.pyc", True),
    ("demo/__pycache__/other.cpython-312.pyc", False),  # no mod of that name: the wheel brought it
    ("demo-1.0.dist-info/METADATA", False), ("demo/mod.py", False), ("evil.pth", False),
])
def test_the_rows_an_installer_adds(name: str, ours: bool) -> None:
    assert records.installer_row(name, {"demo/mod.py": ()}) is ours


def test_installed_files_are_hashed_again(tmp_path: Path) -> None:
    files = {"same.py": b"same\n", "edited.py": b"before\n", "gone.py": b"gone\n", "dir.py": b"file\n", "big.so": b"\0" * 3_000_000}
    rows = [records.Row(n, records.hash_of(d), str(len(d))) for n, d in files.items()] + [records.Row("RECORD", "", "")]
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "edited.py").write_bytes(b"after!\n")  # the same size, other bytes
    (tmp_path / "gone.py").unlink()
    (tmp_path / "dir.py").unlink()
    (tmp_path / "dir.py").mkdir()
    checked = records.check_files(rows, tmp_path)
    assert checked.data() == {"files": 5, "matching": 2, "modified": ["dir.py", "edited.py"], "missing": ["gone.py"]}


def test_an_installed_distribution_matches_the_record_its_installer_wrote() -> None:
    """A real install (this interpreter's pytest, put there by pip or uv): every file with a hash matches."""
    dist = metadata.distribution("pytest")
    rows = [records.Row(*r) for r in records.read(dist.read_text("RECORD") or "") if len(r) == 3]
    checked = records.check_files(rows, Path(str(dist.locate_file(""))))
    assert checked.files > 50 and checked.data()["modified"] == [] and checked.missing == [], checked.data()
    assert checked.matching == checked.files
