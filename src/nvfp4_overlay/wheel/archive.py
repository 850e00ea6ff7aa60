"""Wheel archives read safely: an upstream wheel opened, its digest and every member checked, then read."""

from __future__ import annotations

import hashlib
import mmap
import stat
import struct
import threading
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import ConfigError, HashMismatchError, UnsafeArchiveError
from ..files import CHUNK
from .names import UNTRUSTED, name_problem

MAX_MEMBER_SIZE = 4 << 30  # no member of a real FlashInfer or SGLang wheel comes near 4 GiB
MAX_RATIO = 200  # deflate tops out near 1032:1; upstream members stay far below 200:1 above 1 MiB
MAX_TOTAL_SIZE = 16 << 30  # flashinfer-python 0.7.4, the largest pinned wheel, unpacks to 716 MB
# Methods zipfile can decompress (stored, deflated, bzip2, lzma); anything else could not be checked.
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)
_DATA_DESCRIPTOR = 0x8
LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
UTF8_FLAG = 0x800
_BAD_TYPES = (stat.S_IFLNK, stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK)


class WheelReader:
    """A zip opened for reading, whose every member was checked to stay inside the wheel root.

    With `sha256`, the digest is taken from the very file handle the members are then read from,
    so a file swapped after fetch checked it is refused too (pip's --require-hashes, at the reader).
    """

    def __init__(self, path: Path, *, sha256: str | None = None) -> None:
        self.path = path
        try:
            self._file: BinaryIO = path.open("rb")
        except OSError as exc:
            msg = f"{path}: cannot be read ({exc.strerror})"
            raise ConfigError(msg, path=path, expected="a readable file", found=exc.strerror,
                              fix="check the path and its permissions") from exc
        try:
            # One read-only map of the open file: the digest, the header checks and the raw copies
            # all slice it, where seek+read cost two system calls per member (29,000 for 0.7.4).
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:  # an empty file cannot be mapped
            self._file.close()
            msg = f"{path}: not a readable zip archive ({exc})"
            raise UnsafeArchiveError(msg, path=path, expected="a zip archive", found=str(exc),
                                     fix="delete it and download it again") from exc
        # With a pin, the digest is taken on a thread of its own (hashlib drops the GIL) while this
        # thread parses and checks the central directory and the local headers; the constructor
        # returns, or refuses, only once it matched, so nothing is decompressed or copied from a
        # file that is not the pinned one, and a mismatch outranks any other finding about it.
        digest: _Digest | None = None
        try:
            if sha256 is not None:
                digest = _Digest(self._map)
            self._zip = zipfile.ZipFile(self._file)
            self.infos = {info.filename: info for info in _checked_infos(path, self._zip)}
            self._data_start = _checked_extents(path, self._map, self._zip)
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as exc:
            self._release(digest, sha256)
            if isinstance(exc, UnsafeArchiveError):
                raise
            msg = f"{path}: not a readable zip archive ({exc})"
            raise UnsafeArchiveError(msg, path=path, expected="a zip archive", found=str(exc),
                                     fix="delete it and download it again") from exc
        except BaseException:
            self._release(digest, sha256)
            raise
        if digest is not None:
            try:
                _check_sha256(path, digest.hexdigest(), sha256 or "")
            except BaseException:
                self.close()
                raise

    def __enter__(self) -> WheelReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()
        self._release()

    def _release(self, digest: _Digest | None = None, sha256: str | None = None) -> None:
        """Close the map and the file; with a digest still running, wait for it first (it reads the
        map) and refuse a file that is not the pinned one as such (HashMismatchError)."""
        if digest is not None:
            actual = digest.hexdigest()
            if actual != sha256:
                self._release()
                _check_sha256(self.path, actual, sha256 or "")
        try:
            self._map.close()
        except BufferError:  # a caller still holds a slice of a raw copy; the map goes with it
            pass
        self._file.close()

    @property
    def names(self) -> list[str]:
        return list(self.infos)

    def read(self, name: str) -> bytes:
        """Decompress one member; zipfile stops at the declared size and checks the CRC-32 as it reads."""
        info = self.infos.get(name)
        if info is None:
            msg = f"{self.path}: has no member {name}; the wheel is malformed"
            raise UnsafeArchiveError(msg, path=self.path, item=name, found="missing",
                                     fix="delete it and download it again")
        try:
            return self._zip.read(info)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError) as exc:
            msg = f"{self.path}: member {name} is corrupt ({exc})"
            raise UnsafeArchiveError(msg, path=self.path, item=name, found=str(exc),
                                     fix="delete the file and download it again") from exc

    def local_header(self, info: zipfile.ZipInfo) -> bytes:
        """The member's local header as the input holds it (checked against the central directory at open)."""
        return self._map[info.header_offset : self._data_start[info.filename]]

    def data_end(self, info: zipfile.ZipInfo) -> int:
        return self._data_start[info.filename] + info.compress_size

    def view(self, start: int, end: int) -> memoryview:
        """A slice of the input's map, no copy; the caller releases it before the reader closes."""
        return memoryview(self._map)[start:end]

    def raw_chunks(self, info: zipfile.ZipInfo) -> Iterator[memoryview]:
        """The member's compressed bytes as stored, in slices of the map (never copied whole).

        Its local header and extent were checked against the central directory when the archive
        was opened, so the slices stay inside the file.
        """
        start = self._data_start[info.filename]
        end = start + info.compress_size
        view = memoryview(self._map)
        try:
            for at in range(start, end, CHUNK):
                yield view[at : min(at + CHUNK, end)]
        finally:
            view.release()


def _checked_infos(path: Path, zf: zipfile.ZipFile) -> Iterator[zipfile.ZipInfo]:
    seen: set[str] = set()
    problems: list[str] = []
    for info in zf.infolist():
        problem = member_problem(info, seen)
        if problem:
            problems.append(f"{info.filename!r}: {problem}")
        seen.add(info.filename.lower())
    if problems:
        shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        msg = f"{path}: unsafe archive, refused before extracting anything:\n  {shown}"
        raise UnsafeArchiveError(msg, path=path, expected="safe member names", found="; ".join(problems[:20]),
                                 fix=UNTRUSTED)
    total = sum(i.file_size for i in zf.infolist())
    if total > MAX_TOTAL_SIZE:
        msg = f"{path}: members declare {total} bytes in all, above the {MAX_TOTAL_SIZE} limit (a zip bomb?)"
        raise UnsafeArchiveError(msg, path=path, expected=f"at most {MAX_TOTAL_SIZE} bytes", found=f"{total} bytes",
                                 fix=UNTRUSTED)
    return iter(i for i in zf.infolist() if not i.is_dir())


class _Digest:
    """sha256 of the whole map, on a thread of its own: one call, during which hashlib drops the GIL."""

    def __init__(self, data: mmap.mmap) -> None:
        self._found: list[str] = []
        self._thread = threading.Thread(target=lambda: self._found.append(hashlib.sha256(data).hexdigest()),
                                        name="wheel-sha256", daemon=True)
        self._thread.start()

    def hexdigest(self) -> str:
        self._thread.join()
        return self._found[0] if self._found else ""  # a digest that failed (no memory) matches no pin


def _check_sha256(path: Path, actual: str, expected: str) -> None:
    if actual != expected:
        msg = (
            f"{path}: sha256 {actual} does not match {expected} pinned in upstream.toml "
            f"(the file changed after it was fetched)")
        raise HashMismatchError(msg, path=path, expected=expected, found=actual, fix="delete it and build again")


def _checked_extents(path: Path, data: mmap.mmap, zf: zipfile.ZipFile) -> dict[str, int]:
    """Where each member's data starts, after checking its local header against the central directory.

    A zip bomb that lies about sizes in one of the two headers, or members whose data overlap
    (D. Fifield's non-recursive bomb) or run into the central directory, is refused here.
    """
    starts: dict[str, int] = {}
    problems: list[str] = []
    ordered = sorted(zf.infolist(), key=lambda i: i.header_offset)
    limits = [i.header_offset for i in ordered[1:]] + [getattr(zf, "start_dir", len(data))]
    for info, limit in zip(ordered, limits):
        at = info.header_offset
        if at + LOCAL_HEADER.size > len(data) or data[at : at + 4] != b"PK\x03\x04":
            problems.append(f"{info.filename!r}: no local header where the central directory says")
            continue
        _, _, flags, method, _, _, crc, csize, size, name_len, extra_len = LOCAL_HEADER.unpack_from(data, at)
        at += LOCAL_HEADER.size
        name = data[at : at + name_len].decode("utf-8" if flags & UTF8_FLAG else "cp437", "replace")
        start = at + name_len + extra_len
        if name != info.orig_filename:
            problems.append(f"{info.filename!r}: named {name!r} in its local header")
        elif method != info.compress_type:
            problems.append(f"{info.filename!r}: compression method {method} in its local header, {info.compress_type} in the directory")
        elif not flags & _DATA_DESCRIPTOR and (crc, csize, size) != (info.CRC, info.compress_size, info.file_size) and 0xFFFFFFFF not in (csize, size):
            problems.append(
                f"{info.filename!r}: its local header declares {size} bytes ({csize} compressed), "
                f"the central directory {info.file_size} ({info.compress_size}) (a zip bomb?)")
        elif start + info.compress_size > limit:
            problems.append(f"{info.filename!r}: its data overlap the next member or the central directory (a zip bomb?)")
        starts[info.filename] = start
    if problems:
        shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        msg = f"{path}: corrupt or unsafe archive, refused before extracting anything:\n  {shown}"
        raise UnsafeArchiveError(msg, path=path, expected="members that do not overlap", found="; ".join(problems[:20]),
                                 fix=UNTRUSTED)
    return starts


def member_problem(info: zipfile.ZipInfo, seen: set[str]) -> str | None:
    """Why a member may not be read from a wheel, or None (PEP 427 members are relative posix paths)."""
    name = info.filename
    mode = info.external_attr >> 16
    problem = name_problem(name)
    if problem:
        return problem
    if info.flag_bits & 0x1:
        return "encrypted"
    if info.compress_type not in _METHODS:
        return f"compression method {info.compress_type}, which zipfile cannot check"
    if mode and stat.S_IFMT(mode) in _BAD_TYPES:
        return "a symlink or device file"
    if name.lower() in seen:
        return "duplicate name"
    if info.file_size > MAX_MEMBER_SIZE:
        return f"declares {info.file_size} bytes, above the {MAX_MEMBER_SIZE} limit (a zip bomb?)"
    if info.file_size > CHUNK and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        return f"compression ratio above {MAX_RATIO}:1 (a zip bomb?)"
    return None
