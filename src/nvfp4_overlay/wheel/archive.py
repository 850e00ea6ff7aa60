"""Wheel archives: safe reading of members, and writing with unchanged members copied raw."""

from __future__ import annotations

import hashlib
import mmap
import stat
import struct
import threading
import time
import zipfile
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from ..errors import ConfigError, HashMismatchError, UnsafeArchiveError
from ..files import CHUNK

MAX_MEMBER_SIZE = 4 << 30  # no member of a real FlashInfer or SGLang wheel comes near 4 GiB
MAX_RATIO = 200  # deflate tops out near 1032:1; upstream members stay far below 200:1 above 1 MiB
MAX_TOTAL_SIZE = 16 << 30  # flashinfer-python 0.7.4, the largest pinned wheel, unpacks to 716 MB
# Methods zipfile can decompress (stored, deflated, bzip2, lzma); anything else could not be checked.
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)
_DATA_DESCRIPTOR = 0x8
UNTRUSTED = "pin another file in upstream.toml and check where this one came from"
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_CENTRAL_HEADER = struct.Struct("<4sBBHHHHHIIIHHHHHII")
_END = struct.Struct("<4sHHHHIIH")
_UTF8_FLAG = 0x800
_BAD_TYPES = (stat.S_IFLNK, stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK)


@dataclass(frozen=True)
class NewMember:
    """A member whose bytes the build made: written deflated, with the build's timestamp."""

    name: str
    data: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class CopiedMember:
    """An upstream member carried over unchanged (perhaps under a new name): its bytes are copied raw."""

    name: str
    source: zipfile.ZipInfo


Entry = NewMember | CopiedMember


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
            msg = f"{path}: cannot be read ({exc.strerror}); check the path"
            raise ConfigError(msg, path=path, expected="a readable file", found=exc.strerror,
                              fix="check the path and its permissions") from exc
        try:
            # One read-only map of the open file: the digest, the header checks and the raw copies
            # all slice it, where seek+read cost two system calls per member (29,000 for 0.7.4).
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:  # an empty file cannot be mapped
            self._file.close()
            msg = f"{path}: not a readable zip archive ({exc}); delete it and download it again"
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
            msg = f"{path}: not a readable zip archive ({exc}); delete it and download it again"
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
            msg = f"{self.path}: has no member {name}; the wheel is malformed (delete it and download it again)"
            raise UnsafeArchiveError(msg, path=self.path, item=name, found="missing",
                                     fix="delete it and download it again")
        try:
            return self._zip.read(info)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError) as exc:
            msg = f"{self.path}: member {name} is corrupt ({exc}); delete the file and download it again"
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
        msg = f"{path}: unsafe archive, refused before extracting anything ({UNTRUSTED}):\n  {shown}"
        raise UnsafeArchiveError(msg, path=path, expected="safe member names", found="; ".join(problems[:20]),
                                 fix=UNTRUSTED)
    total = sum(i.file_size for i in zf.infolist())
    if total > MAX_TOTAL_SIZE:
        msg = f"{path}: members declare {total} bytes in all, above the {MAX_TOTAL_SIZE} limit (a zip bomb?); {UNTRUSTED}"
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
            f"(the file changed after it was fetched); delete it and build again"
        )
        raise HashMismatchError(msg, path=path, expected=expected, found=actual)


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
        if at + _LOCAL_HEADER.size > len(data) or data[at : at + 4] != b"PK\x03\x04":
            problems.append(f"{info.filename!r}: no local header where the central directory says")
            continue
        _, _, flags, method, _, _, crc, csize, size, name_len, extra_len = _LOCAL_HEADER.unpack_from(data, at)
        at += _LOCAL_HEADER.size
        name = data[at : at + name_len].decode("utf-8" if flags & _UTF8_FLAG else "cp437", "replace")
        start = at + name_len + extra_len
        if name != info.orig_filename:
            problems.append(f"{info.filename!r}: named {name!r} in its local header")
        elif method != info.compress_type:
            problems.append(f"{info.filename!r}: compression method {method} in its local header, {info.compress_type} in the directory")
        elif not flags & _DATA_DESCRIPTOR and (crc, csize, size) != (info.CRC, info.compress_size, info.file_size) and 0xFFFFFFFF not in (csize, size):
            problems.append(
                f"{info.filename!r}: its local header declares {size} bytes ({csize} compressed), "
                f"the central directory {info.file_size} ({info.compress_size}) (a zip bomb?)"
            )
        elif start + info.compress_size > limit:
            problems.append(f"{info.filename!r}: its data overlap the next member or the central directory (a zip bomb?)")
        starts[info.filename] = start
    if problems:
        shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        msg = f"{path}: corrupt or unsafe archive, refused before extracting anything ({UNTRUSTED}):\n  {shown}"
        raise UnsafeArchiveError(msg, path=path, expected="members that do not overlap", found="; ".join(problems[:20]),
                                 fix=UNTRUSTED)
    return starts


def name_problem(name: str) -> str | None:
    """Why a name may not be a wheel member, or None (PEP 427 members are relative posix paths)."""
    # PurePosixPath(name).parts for any name that reaches a use of it, at a sixth of the cost: pathlib
    # took a third of a 14,705-member build's CPU (bench/run.py). Leading '/' returns first.
    parts = tuple(p for p in name.split("/") if p and p != ".")
    if name.startswith("/") or (parts and ":" in parts[0]):
        return "absolute path or drive letter"
    if "\\" in name:
        return "backslash in the name"
    if ".." in parts or "." in name.split("/"):
        return "'..' or '.' in the path"
    if "\x00" in name or not parts or "" in name.rstrip("/").split("/"):
        return "empty component or NUL in the name"
    return None


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


def zip_date_time(epoch: int) -> tuple[int, int, int, int, int, int]:
    """A zip timestamp from a SOURCE_DATE_EPOCH; zip cannot hold dates before 1980."""
    t = time.gmtime(max(epoch, 315532800))
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


# --- writing ------------------------------------------------------------------------------------
# zipfile has no public way to copy a member without recompressing it, so the writer is by hand
# (APPNOTE 6.3.x, no zip64: a wheel with more than 65,535 members or 4 GiB is refused).


def write_wheel(out: IO[bytes], reader: WheelReader, entries: Iterable[Entry], date_time: tuple[int, ...]) -> str:
    """Write the archive to `out` and return its sha256 (hashed as it is written, never read back)."""
    with _Sink(out) as sink:
        return _lay_out(sink, reader, entries, date_time)


def _lay_out(sink: _Sink, reader: WheelReader, entries: Iterable[Entry], date_time: tuple[int, ...]) -> str:
    put = sink.put
    central: list[bytes] = []
    for entry in entries:
        start = sink.offset
        if isinstance(entry, NewMember):
            compressor = zlib.compressobj(6, zlib.DEFLATED, -15)  # zlib's default level
            data = compressor.compress(entry.data) + compressor.flush()
            crc, size, method = zlib.crc32(entry.data), len(entry.data), zipfile.ZIP_DEFLATED
            dos_time, dos_date = _dos(date_time)
            attr = (stat.S_IFREG | entry.mode) << 16
            chunks: Iterable[bytes | memoryview] = (data,)
            csize = len(data)
        else:
            src = entry.source
            crc, size, method, csize = src.CRC, src.file_size, src.compress_type, src.compress_size
            dos_time, dos_date = _dos(src.date_time)
            attr = src.external_attr or (stat.S_IFREG | 0o644) << 16
            chunks = ()
        name = entry.name.encode()
        flags = _UTF8_FLAG if not entry.name.isascii() else 0
        header = _LOCAL_HEADER.pack(b"PK\x03\x04", 20, flags, method, dos_time, dos_date, crc, csize, size, len(name), 0) + name
        if isinstance(entry, NewMember):
            put(header)
            for chunk in chunks:
                put(chunk)
        elif reader.local_header(src) == header:  # the input's own bytes, header and data: one range of its map
            sink.put_range(reader, src.header_offset, reader.data_end(src))
        else:
            put(header)
            for chunk in reader.raw_chunks(src):
                put(chunk)
        central.append(
            _CENTRAL_HEADER.pack(
                b"PK\x01\x02", 20, 3, 20, flags, method, dos_time, dos_date, crc, csize, size,
                len(name), 0, 0, 0, 0, attr, start,
            )
            + name
        )
        if start > 0xFFFFFFFF or csize > 0xFFFFFFFF or len(central) > 0xFFFF:
            msg = f"{reader.path}: the patched wheel would need zip64 (over 4 GiB or 65,535 members)"
            raise UnsafeArchiveError(msg, path=reader.path, expected="under 4 GiB and 65,535 members",
                                     found="larger", fix="report it: zip64 output is not written")
    directory = b"".join(central)
    put(directory + _END.pack(b"PK\x05\x06", 0, 0, len(central), len(central), len(directory), sink.offset, 0))
    return sink.finish()


class _Sink:
    """Writes and hashes the archive on one worker thread, in order, while the loop lays out what follows.

    Most members are copied as the input holds them, header and data, and in the input's order: such
    a run of members is one range of the input's map, written and hashed as one slice, no copy. The
    other pieces (new headers, changed members, the central directory) are small; they are joined
    into blocks of BLOCK bytes, since one write and one digest update each cost more in call overhead
    than the bytes. The write and the hash both release the GIL. At most two batches are in flight.
    """

    BLOCK = 8 << 20

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._digest = hashlib.sha256()
        self._batch: list[bytes | memoryview] = []
        self._small: list[bytes | memoryview] = []  # pieces not yet joined into the batch
        self._size = 0
        self._range: tuple[WheelReader, int, int] | None = None  # the run of the input being extended
        self.offset = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wheel-writer")
        self._pending: deque[tuple[Future[None], list[bytes | memoryview]]] = deque()

    def put(self, data: bytes | memoryview) -> None:
        self._end_range()
        self._small.append(data)
        self._size += len(data)
        self.offset += len(data)
        if self._size >= self.BLOCK:
            self._flush()

    def put_range(self, reader: WheelReader, start: int, end: int) -> None:
        """Bytes [start, end) of the input, as they are: joined to the run before them if it ends at start."""
        if self._range is not None and self._range[0] is reader and self._range[2] == start:
            self._range = (reader, self._range[1], end)
        else:
            self._end_range()
            self._range = (reader, start, end)
        self.offset += end - start

    def _end_range(self) -> None:
        if self._range is None:
            return
        reader, start, end = self._range
        self._range = None
        self._join_small()
        self._batch.append(reader.view(start, end))
        self._size += end - start
        if self._size >= self.BLOCK:
            self._flush()

    def _join_small(self) -> None:
        if self._small:
            self._batch.append(b"".join(self._small))  # small pieces: a copy costs less than their calls
            self._small.clear()

    def _flush(self) -> None:
        self._end_range()
        self._join_small()
        batch, self._batch, self._size = self._batch, [], 0
        while len(self._pending) >= 2:
            self._wait(self._pending.popleft())
        self._pending.append((self._pool.submit(self._write, batch), batch))

    def _write(self, batch: list[bytes | memoryview]) -> None:
        for piece in batch:
            self._out.write(piece)
            self._digest.update(piece)

    @staticmethod
    def _wait(pending: tuple[Future[None], list[bytes | memoryview]]) -> None:
        future, batch = pending
        try:
            future.result()  # a write error surfaces here, as it would inline
        finally:
            for piece in batch:  # the input's map can close only once no slice of it is held
                if isinstance(piece, memoryview):
                    piece.release()

    def finish(self) -> str:
        self._flush()
        while self._pending:
            self._wait(self._pending.popleft())
        return self._digest.hexdigest()

    def __enter__(self) -> _Sink:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        while self._pending:
            future, batch = self._pending.popleft()
            for piece in batch:
                if isinstance(piece, memoryview):
                    piece.release()
        if self._range is not None:
            self._range = None


def _dos(date_time: tuple[int, ...]) -> tuple[int, int]:
    year, month, day, hour, minute, second = date_time[:6]
    return (hour << 11) | (minute << 5) | (second // 2), ((max(year, 1980) - 1980) << 9) | (month << 5) | day
