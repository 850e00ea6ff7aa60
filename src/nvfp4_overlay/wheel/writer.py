"""The write: a planned wheel's members into an archive, unchanged ones copied raw from the upstream file."""

from __future__ import annotations

import hashlib
import stat
import struct
import time
import zipfile
import zlib
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO

from ..errors import UnsafeArchiveError
from .archive import LOCAL_HEADER, UTF8_FLAG, WheelReader
from .recipe import Entry, NewMember

_CENTRAL_HEADER = struct.Struct("<4sBBHHHHHIIIHHHHHII")
_END = struct.Struct("<4sHHHHIIH")


def zip_date_time(epoch: int) -> tuple[int, int, int, int, int, int]:
    """A zip timestamp from a SOURCE_DATE_EPOCH; zip cannot hold dates before 1980."""
    t = time.gmtime(max(epoch, 315532800))
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


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
        flags = UTF8_FLAG if not entry.name.isascii() else 0
        header = LOCAL_HEADER.pack(b"PK\x03\x04", 20, flags, method, dos_time, dos_date, crc, csize, size, len(name), 0) + name
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
