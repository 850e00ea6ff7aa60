"""Writes the hostile and broken inputs under tests/data/ (run it to regenerate; the bytes are fixed).

    python tests/data/make_fixtures.py

Every wheel is a tiny `demo 1.0` wheel, `good.whl` changed in one way its scenario names; every
patch is `good.patch` changed the same way. test_hardening.py checks that the committed files are
what this script writes, so edit the script, never the files.
"""

from __future__ import annotations

import base64
import hashlib
import io
import stat
import struct
import sys
import warnings
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATE = (1980, 1, 1, 0, 0, 0)
DIST_INFO = "demo-1.0.dist-info"
MOD = "".join(f"value_{i} = {i}\n" for i in range(1, 13))
METADATA = b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\nA demo package.\n"
WHEEL = b"Wheel-Version: 1.0\nGenerator: make_fixtures\nRoot-Is-Purelib: true\nTag: py3-none-any\n"

# A member: (name, data, unix mode with file type, compression).
Member = tuple[str, bytes, int, int]


def member(name: str, data: bytes | str, mode: int = stat.S_IFREG | 0o644, method: int = zipfile.ZIP_DEFLATED) -> Member:
    return (name, data.encode() if isinstance(data, str) else data, mode, method)


def good_members() -> list[Member]:
    return [
        member("demo/__init__.py", "from .mod import value_1\n"),
        member("demo/mod.py", MOD),
        member("demo/data.txt", "unchanged data\n"),
        member(f"{DIST_INFO}/METADATA", METADATA),
        member(f"{DIST_INFO}/WHEEL", WHEEL),
    ]


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def record_of(members: Sequence[Member], dist_info: str = DIST_INFO) -> bytes:
    rows = [f"{name},{record_hash(data)},{len(data)}\n" for name, data, _, _ in members]
    return ("".join(rows) + f"{dist_info}/RECORD,,\n").encode()


def zip_bytes(members: Sequence[Member]) -> bytes:
    """A zip of exactly these members, in this order, with fixed timestamps (the same bytes every run)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name": the duplicate_name fixture means it
        for name, data, mode, method in members:
            info = zipfile.ZipInfo(name, DATE)
            info.create_system = 3
            info.external_attr = mode << 16
            info.compress_type = method
            zf.writestr(info, data)
    return out.getvalue()


def wheel_bytes(members: Sequence[Member] | None = None, *, record: bytes | None = None, dist_info: str = DIST_INFO) -> bytes:
    """A wheel: the members, then RECORD (made from them unless given)."""
    members = list(good_members() if members is None else members)
    record = record_of(members, dist_info) if record is None else record
    return zip_bytes([*members, member(f"{dist_info}/RECORD", record)])


def make_wheel(tmp_path: Path, files: dict[str, bytes | str], name: str = "demo-1.0-py3-none-any.whl") -> Path:
    """A real wheel file of `files` (a dist-info is added unless one is given) for tests."""
    members = [member(n, d) for n, d in sorted(files.items())]
    if not any(n.startswith(f"{DIST_INFO}/") for n in files):
        members += [member(f"{DIST_INFO}/METADATA", METADATA), member(f"{DIST_INFO}/WHEEL", WHEEL)]
    path = tmp_path / name
    path.write_bytes(wheel_bytes(members))
    return path


# --- byte surgery on an archive -------------------------------------------------------------------


def central_headers(data: bytes) -> list[int]:
    """Offsets of the central directory headers (no zip64, no archive comment)."""
    count, _, start = struct.unpack_from("<HII", data, len(data) - 22 + 10)
    offsets = []
    for _ in range(count):
        offsets.append(start)
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, start + 28)
        start += 46 + name_len + extra_len + comment_len
    return offsets


def local_header(data: bytes, index: int) -> int:
    return struct.unpack_from("<I", data, central_headers(data)[index] + 42)[0]


def put(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    buffer = bytearray(data)
    struct.pack_into(fmt, buffer, offset, value)
    return bytes(buffer)


def index_of(members: Sequence[Member], name: str) -> int:
    return [m[0] for m in members].index(name)


def _good() -> bytes:
    return wheel_bytes()


def _replaced(name: str, new: Member) -> list[Member]:
    return [new if m[0] == name else m for m in good_members()]


def _record_rows(edit: Callable[[list[str]], list[str]]) -> bytes:
    rows = record_of(good_members()).decode().splitlines(keepends=True)
    return "".join(edit(rows)).encode()


def _understated() -> bytes:
    """demo/mod.py inflates to 1 MiB, but both of its headers (and RECORD) say 10 bytes."""
    big = member("demo/mod.py", MOD + "#" * (1 << 20))
    members = _replaced("demo/mod.py", big)
    data = wheel_bytes(members, record=record_of(_replaced("demo/mod.py", member("demo/mod.py", MOD[:10]))))
    i = index_of(members, "demo/mod.py")
    data = put(data, central_headers(data)[i] + 24, "<I", 10)
    return put(data, local_header(data, i) + 22, "<I", 10)


def _local_disagrees() -> bytes:
    """The local header of demo/data.txt declares 2 GiB; the central directory, the true 15 bytes."""
    data = _good()
    return put(data, local_header(data, index_of(good_members(), "demo/data.txt")) + 22, "<I", 1 << 31)


def _overlap() -> bytes:
    """demo/__init__.py's data, by both of its headers, run over the next member (Fifield's overlap)."""
    data = _good()
    size = struct.unpack_from("<I", data, central_headers(data)[0] + 20)[0] + 40
    data = put(data, central_headers(data)[0] + 20, "<I", size)
    return put(data, local_header(data, 0) + 18, "<I", size)


def _flags(bits: int) -> bytes:
    data = _good()
    i = index_of(good_members(), "demo/data.txt")
    data = put(data, central_headers(data)[i] + 8, "<H", bits)
    return put(data, local_header(data, i) + 6, "<H", bits)


def _method(method: int) -> bytes:
    data = _good()
    i = index_of(good_members(), "demo/data.txt")
    data = put(data, central_headers(data)[i] + 10, "<H", method)
    return put(data, local_header(data, i) + 8, "<H", method)


def _corrupt(name: str) -> bytes:
    """One byte of the member's compressed data flipped (its CRC-32 no longer holds)."""
    data = _good()
    i = index_of(good_members(), name)
    offset = local_header(data, i)
    name_len, extra_len = struct.unpack_from("<HH", data, offset + 26)
    at = offset + 30 + name_len + extra_len + 3
    return data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1:]


def _with_extra(*extra: Member) -> bytes:
    return wheel_bytes([*good_members(), *extra])


WHEELS: dict[str, Callable[[], bytes]] = {
    "good": _good,
    # integrity
    "hash_mismatch": lambda: wheel_bytes(_replaced("demo/data.txt", member("demo/data.txt", "altered data\n"))),
    "truncated": lambda: _good()[:300],
    "not_a_zip": lambda: b"<html>404 Not Found</html>\n",
    "corrupt_member": lambda: _corrupt("demo/mod.py"),
    "corrupt_unpatched_member": lambda: _corrupt("demo/data.txt"),
    "record_hash_mismatch": lambda: wheel_bytes(
        record=_record_rows(lambda rows: [r.replace(record_hash(MOD.encode()), record_hash(b"other")) for r in rows])),
    "record_hash_mismatch_unpatched": lambda: wheel_bytes(
        record=_record_rows(lambda rows: [r.replace(record_hash(b"unchanged data\n"), record_hash(b"other")) for r in rows])),
    "record_size_mismatch": lambda: wheel_bytes(record=_record_rows(lambda rows: [r.replace(",15\n", ",16\n") for r in rows])),
    "record_missing_row": lambda: wheel_bytes(record=_record_rows(lambda rows: [r for r in rows if "data.txt" not in r])),
    "record_extra_row": lambda: wheel_bytes(record=_record_rows(lambda rows: [*rows, "demo/gone.py,sha256=AAAA,1\n"])),
    "record_malformed": lambda: wheel_bytes(record=_record_rows(lambda rows: [r.replace(",15\n", ",fifteen\n") for r in rows])),
    "record_missing": lambda: zip_bytes(good_members()),
    "metadata_version_mismatch": lambda: wheel_bytes(
        _replaced(f"{DIST_INFO}/METADATA", member(f"{DIST_INFO}/METADATA", METADATA.replace(b"1.0", b"2.0")))),
    "dist_info_name_mismatch": lambda: wheel_bytes(
        [member(n.replace("demo-1.0", "other-1.0"), d) for n, d, _, _ in good_members()], dist_info="other-1.0.dist-info"),
    "two_dist_infos": lambda: _with_extra(member("evil-6.6.dist-info/METADATA", b"Name: evil\nVersion: 6.6\n")),
    "nested_dist_info": lambda: _with_extra(member(f"demo/{DIST_INFO}/METADATA", METADATA)),
    "data_dir_mismatch": lambda: _with_extra(member("evil-6.6.data/scripts/run", b"#!/bin/sh\n")),
    # unsafe members
    "zip_slip": lambda: _with_extra(member("../../evil.py", b"import os\n")),
    "absolute_path": lambda: _with_extra(member("/etc/cron.d/evil", b"* * * * * root sh\n")),
    "backslash": lambda: _with_extra(member("demo\\..\\..\\evil.py", b"x = 1\n")),
    "drive_letter": lambda: _with_extra(member("C:/Windows/evil.py", b"x = 1\n")),
    "symlink": lambda: _with_extra(member("demo/link", b"/etc/passwd", stat.S_IFLNK | 0o777)),
    "device_file": lambda: _with_extra(member("demo/tty", b"", stat.S_IFCHR | 0o666)),
    "duplicate_name": lambda: _with_extra(member("demo/mod.py", MOD + "evil = 1\n")),
    "duplicate_case": lambda: _with_extra(member("demo/MOD.py", MOD)),
    "zip_bomb_ratio": lambda: _with_extra(member("demo/zeros.bin", bytes(2 << 20))),
    "zip_bomb_understated": _understated,
    "zip_bomb_local_header": _local_disagrees,
    "zip_bomb_overlap": _overlap,
    "encrypted": lambda: _flags(0x1),
    "unknown_compression": lambda: _method(99),
}

GOOD_PATCH = """\
Description: change value_6
Origin: other, tests/data/make_fixtures.py
Last-Update: 2026-01-01
---
--- a/demo/mod.py
+++ b/demo/mod.py
@@ -3,7 +3,7 @@
 value_3 = 3
 value_4 = 4
 value_5 = 5
-value_6 = 6
+value_6 = "six"
 value_7 = 7
 value_8 = 8
 value_9 = 9
"""

TWO_HUNKS = """\
Description: two hunks
---
--- a/demo/mod.py
+++ b/demo/mod.py
@@ -8,3 +8,3 @@
 value_8 = 8
-value_9 = 9
+value_9 = "nine"
 value_10 = 10
@@ -2,3 +2,3 @@
 value_2 = 2
-value_3 = 3
+value_3 = "three"
 value_4 = 4
"""


def _retarget(path: str) -> str:
    return GOOD_PATCH.replace("a/demo/mod.py", f"a/{path}").replace("b/demo/mod.py", f"b/{path}")


PATCHES: dict[str, str] = {
    "good": GOOD_PATCH,
    "dotdot_path": _retarget("../../etc/profile"),
    "abs_path": GOOD_PATCH.replace("--- a/demo/mod.py\n+++ b/demo/mod.py", "--- /etc/profile\n+++ /etc/profile"),
    "backslash_path": _retarget("demo\\..\\..\\evil.py"),
    "dist_info": _retarget(f"{DIST_INFO}/METADATA"),
    "record": _retarget(f"{DIST_INFO}/RECORD"),
    "binary": "Description: a binary diff\n---\ndiff --git a/demo/data.bin b/demo/data.bin\n"
              "index 1111111..2222222 100644\nGIT binary patch\nliteral 3\nKcmZ>?WME(b00031\n\nliteral 0\n"
              "HcmV?d00001\n\n",
    "malformed_hunk_header": GOOD_PATCH.replace("@@ -3,7 +3,7 @@", "@@ -3,x +3 @@"),
    "hunk_longer_than_header": GOOD_PATCH.replace("@@ -3,7 +3,7 @@", "@@ -3,5 +3,5 @@"),
    "hunk_shorter_than_header": GOOD_PATCH.replace("@@ -3,7 +3,7 @@", "@@ -3,9 +3,9 @@"),
    "misordered_hunks": TWO_HUNKS,
    "no_hunks": "Description: a mode change only\n---\ndiff --git a/demo/mod.py b/demo/mod.py\n"
                "old mode 100644\nnew mode 100755\n--- a/demo/mod.py\n+++ b/demo/mod.py\n",
    "does_not_apply": GOOD_PATCH.replace(" value_5 = 5\n", " value_5 = 55\n"),
    "missing_file": _retarget("demo/gone.py"),
}


def write(root: Path = HERE) -> list[Path]:
    written = []
    for name, make in WHEELS.items():
        path = root / "wheels" / f"{name}.whl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(make())
        written.append(path)
    for name, text in PATCHES.items():
        path = root / "patches" / f"{name}.patch"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
        written.append(path)
    return written


if __name__ == "__main__":
    paths = write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
    print(f"wrote {len(paths)} fixtures, {sum(p.stat().st_size for p in paths)} bytes")
