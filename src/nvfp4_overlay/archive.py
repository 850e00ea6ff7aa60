"""Wheel archives: safe reading of members, and writing with unchanged members copied raw."""

from __future__ import annotations

import os
import stat
import struct
import tempfile
import time
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

from .errors import UnsafeArchiveError

CHUNK = 1 << 20
MAX_MEMBER_SIZE = 4 << 30  # no member of a real FlashInfer or SGLang wheel comes near 4 GiB
MAX_RATIO = 200  # deflate tops out near 1032:1; upstream members stay far below 200:1 above 1 MiB
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
    """A zip opened for reading, whose every member was checked to stay inside the wheel root."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO = path.open("rb")
        try:
            self._zip = zipfile.ZipFile(self._file)
            self.infos = {info.filename: info for info in _checked_infos(path, self._zip)}
        except zipfile.BadZipFile as exc:
            self._file.close()
            msg = f"{path}: not a readable zip archive ({exc}); delete it and download it again"
            raise UnsafeArchiveError(msg) from exc
        except BaseException:
            self._file.close()
            raise

    def __enter__(self) -> WheelReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()
        self._file.close()

    @property
    def names(self) -> list[str]:
        return list(self.infos)

    def read(self, name: str) -> bytes:
        """Decompress one member; zipfile checks its CRC-32 as it reads."""
        try:
            return self._zip.read(self.infos[name])
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            msg = f"{self.path}: member {name} is corrupt ({exc}); delete the file and download it again"
            raise UnsafeArchiveError(msg) from exc

    def raw_chunks(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """The member's compressed bytes as stored, read in chunks (never the whole archive in memory)."""
        self._file.seek(info.header_offset)
        header = self._file.read(_LOCAL_HEADER.size)
        if len(header) != _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
            msg = f"{self.path}: member {info.filename} has no local header where the directory says"
            raise UnsafeArchiveError(msg)
        fields = _LOCAL_HEADER.unpack(header)
        name = self._file.read(fields[9])
        self._file.seek(fields[10], os.SEEK_CUR)
        if name.decode("utf-8" if fields[2] & _UTF8_FLAG else "cp437") != info.orig_filename:
            msg = f"{self.path}: member {info.filename} is named differently in its local header"
            raise UnsafeArchiveError(msg)
        left = info.compress_size
        while left:
            chunk = self._file.read(min(CHUNK, left))
            if not chunk:
                msg = f"{self.path}: member {info.filename} is truncated; delete the file and download it again"
                raise UnsafeArchiveError(msg)
            left -= len(chunk)
            yield chunk


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
        raise UnsafeArchiveError(msg)
    return iter(i for i in zf.infolist() if not i.is_dir())


def member_problem(info: zipfile.ZipInfo, seen: set[str]) -> str | None:
    """Why a member may not be read from a wheel, or None (PEP 427 members are relative posix paths)."""
    name = info.filename
    parts = PurePosixPath(name).parts
    mode = info.external_attr >> 16
    if name.startswith("/") or (parts and ":" in parts[0]):
        return "absolute path or drive letter"
    if "\\" in name:
        return "backslash in the name"
    if ".." in parts or "." in name.split("/"):
        return "'..' or '.' in the path"
    if "\x00" in name or not parts:
        return "empty or NUL in the name"
    if info.flag_bits & 0x1:
        return "encrypted"
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


def write_wheel(out: IO[bytes], reader: WheelReader, entries: Iterable[Entry], date_time: tuple[int, ...]) -> None:
    central: list[bytes] = []
    for entry in entries:
        offset = out.tell()
        if isinstance(entry, NewMember):
            compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
            data = compressor.compress(entry.data) + compressor.flush()
            crc, size, method = zlib.crc32(entry.data), len(entry.data), zipfile.ZIP_DEFLATED
            dos_time, dos_date = _dos(date_time)
            attr = (stat.S_IFREG | entry.mode) << 16
            chunks: Iterable[bytes] = (data,)
            csize = len(data)
        else:
            src = entry.source
            crc, size, method, csize = src.CRC, src.file_size, src.compress_type, src.compress_size
            dos_time, dos_date = _dos(src.date_time)
            attr = src.external_attr or (stat.S_IFREG | 0o644) << 16
            chunks = reader.raw_chunks(src)
        name = entry.name.encode()
        flags = _UTF8_FLAG if not entry.name.isascii() else 0
        out.write(_LOCAL_HEADER.pack(b"PK\x03\x04", 20, flags, method, dos_time, dos_date, crc, csize, size, len(name), 0))
        out.write(name)
        for chunk in chunks:
            out.write(chunk)
        central.append(
            _CENTRAL_HEADER.pack(
                b"PK\x01\x02", 20, 3, 20, flags, method, dos_time, dos_date, crc, csize, size,
                len(name), 0, 0, 0, 0, attr, offset,
            )
            + name
        )
        if offset > 0xFFFFFFFF or csize > 0xFFFFFFFF or len(central) > 0xFFFF:
            msg = f"{reader.path}: the patched wheel would need zip64 (over 4 GiB or 65,535 members)"
            raise UnsafeArchiveError(msg)
    start = out.tell()
    for record in central:
        out.write(record)
    out.write(_END.pack(b"PK\x05\x06", 0, 0, len(central), len(central), out.tell() - start, start, 0))


def _dos(date_time: tuple[int, ...]) -> tuple[int, int]:
    year, month, day, hour, minute, second = date_time[:6]
    return (hour << 11) | (minute << 5) | (second // 2), ((max(year, 1980) - 1980) << 9) | (month << 5) | day



class AtomicWrites:
    """Files written under temporary names and renamed into place only when every one is done.

    A build of several targets either changes the dist dir completely or not at all.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._pending: list[tuple[Path, Path]] = []

    def __enter__(self) -> AtomicWrites:
        return self

    def open(self, name: str) -> IO[bytes]:
        self.directory.mkdir(parents=True, exist_ok=True)
        handle = tempfile.NamedTemporaryFile(dir=self.directory, prefix=f".{name}.", suffix=".tmp", delete=False)
        self._pending.append((Path(handle.name), self.directory / name))
        return handle

    def commit(self) -> None:
        for temp, final in self._pending:
            os.replace(temp, final)
        self._pending.clear()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        for temp, _ in self._pending:  # not committed: an error happened, leave the directory as it was
            temp.unlink(missing_ok=True)
        self._pending.clear()
