"""Files on disk: sha256 digests, SHA256SUMS lists, and writes that land whole or not at all.

Every other module that writes a file or a directory it must not leave half-written goes
through here: the dist dir (a build of several wheels changes it completely or not at all), the
cache's UNPINNED-SHA256SUMS and download folders, the static index, a refreshed series.

A temporary that AtomicWrites or a download makes is held by an exclusive flock(2) on a descriptor of
its own for as long as it lives; the kernel drops the lock when its process ends, however it ends. So
a temporary no process holds is one a killed process left (SIGKILL, a power loss: SIGTERM and Ctrl-C
remove theirs on the way out), and sweep removes exactly those, of its own naming pattern only.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, BinaryIO

CHUNK = 1 << 20
SHA256SUMS = "SHA256SUMS"  # the dist dir's list of what the builds wrote


# --- digests -----------------------------------------------------------------------------------


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_handle(handle: BinaryIO) -> str:
    """The digest of an open file, read from its start (the caller then reads the same bytes)."""
    handle.seek(0)
    digest = hashlib.sha256()
    while chunk := handle.read(CHUNK):
        digest.update(chunk)
    handle.seek(0)
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    with path.open("rb") as handle:
        return sha256_handle(handle)


def short_digest(value: Any) -> str:
    """A JSON value as the behaviour checks compare it: 16 hex digits of its canonical JSON's sha256."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


# --- SHA256SUMS, as sha256sum writes it ------------------------------------------------------------


def read_sums(path: Path) -> dict[str, str]:
    """name -> digest from a `sha256sum` file; a missing file is an empty list."""
    if not path.is_file():
        return {}
    sums = {}
    for line in path.read_text().splitlines():
        digest, _, name = line.partition("  ")
        if name:
            sums[name.strip()] = digest
    return sums


def format_sums(sums: Mapping[str, str]) -> bytes:
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(sums.items())).encode()


# --- writes that land whole --------------------------------------------------------------------


def replace_file(path: Path, data: bytes) -> None:
    """Write data beside path under a temporary name, then rename it over path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(temp, 0o666 & ~_umask())  # mkstemp makes 0600 files
        os.replace(temp, path)
    except BaseException as exc:
        Path(temp).unlink(missing_ok=True)
        named = _naming(exc, path)
        if named is exc:
            raise
        raise named from exc


def replace_dir(staged: Path, target: Path) -> None:
    """Put a finished directory in target's place: the old one is moved aside first, removed after.

    staged must be on target's file system (make it with staging_dir(target)).
    """
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.replace(target, old)
    os.replace(staged, target)
    shutil.rmtree(old, ignore_errors=True)


def staging_dir(target: Path) -> Path:
    """A new empty directory beside target (mode 0755), for replace_dir."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    staged.chmod(0o755)  # mkdtemp makes it private; what lands here is read by others
    return staged


# --- temporaries held while they live, and swept once their process is gone ----------------------------

# tempfile's names: the prefix, 8 characters of [a-z0-9_] (tempfile._RandomNameSequence), the suffix.
_RANDOM = r"[a-z0-9_]{8}"
LANDING = re.compile(rf"\.(?:.+\.whl|{SHA256SUMS})\.{_RANDOM}\.tmp")  # AtomicWrites' names in a dist dir
DOWNLOAD = re.compile(rf"\.download-{_RANDOM}")  # a download's folder in the cache (wheel/fetch.py)


def held_temporary(directory: Path, prefix: str, suffix: str = "", *, folder: bool = False) -> tuple[Path, int | None]:
    """A new temporary file (mode 0600) or folder in directory, and the descriptor that holds its lock (close it
    once the temporary is gone or renamed; None where the file system takes no flock, and then sweep takes
    none either). Made again where a sweep took it between its making and its lock."""
    while True:
        if folder:
            path = Path(tempfile.mkdtemp(dir=directory, prefix=prefix, suffix=suffix))
        else:
            fd, name = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=suffix)
            os.close(fd)
            path = Path(name)
        try:
            lock = _lock(path)
        except BlockingIOError:
            continue  # a sweep holds it this instant, and removes it
        except FileNotFoundError:
            continue  # a sweep removed it already
        if lock is None or _names(path, lock):
            return path, lock
        os.close(lock)  # a sweep removed it after its lock was taken and before ours


def sweep(directory: Path, pattern: re.Pattern[str]) -> list[Path]:
    """Remove the temporaries in directory whose name fullmatches pattern and whose lock no process holds
    (their process is gone); return what was removed. Nothing else is touched, also not an unheld file of
    that name on a file system without flock (its lock cannot be taken, so it is kept)."""
    removed: list[Path] = []
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for entry in entries:
        if not pattern.fullmatch(entry.name) or entry.is_symlink():
            continue
        path = Path(entry.path)
        try:
            lock = _lock(path)
        except OSError:  # held by a live process, gone, or unreadable: not ours to judge
            continue
        if lock is None:
            continue
        try:
            if _names(path, lock):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(path)
                else:
                    path.unlink()
                removed.append(path)
        except OSError:  # not removable here (permissions): left, as a sweep never fails the command
            pass
        finally:
            os.close(lock)
    return removed


def _lock(path: Path) -> int | None:
    """A descriptor of path holding its exclusive lock; BlockingIOError where another holds it, None where the
    file system takes no flock(2)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            return None
        raise
    return fd


def _names(path: Path, fd: int) -> bool:
    """Whether path still names the file fd has open (flock's lock-file check: a sweep may have removed it)."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


class AtomicWrites:
    """Files written under temporary names and renamed into place only when every one is done.

    A build of several targets either changes the dist dir completely or not at all. Each temporary is
    held (held_temporary) until it is renamed or removed, so that a later build sweeps it only if this
    process died before it could (sweep(directory, LANDING)).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._pending: list[tuple[Path, Path]] = []
        self._locks: list[int] = []
        self._made: list[Path] = []  # directories this object created, removed again if nothing lands

    def __enter__(self) -> AtomicWrites:
        return self

    def open(self, name: str) -> IO[bytes]:
        if not self.directory.is_dir():
            missing = [d for d in (self.directory, *self.directory.parents) if not d.exists()]
            self.directory.mkdir(parents=True, exist_ok=True)
            self._made += missing  # deepest first, the order rmdir needs
        try:
            temp, lock = held_temporary(self.directory, f".{name}.", ".tmp")
        except OSError as exc:  # read-only, not ours: name the directory, not the temporary name it refused
            raise OSError(exc.errno, exc.strerror, str(self.directory)) from exc
        self._pending.append((temp, self.directory / name))
        self._locks += [] if lock is None else [lock]
        return temp.open("wb", buffering=CHUNK)  # plain buffered file: NamedTemporaryFile wraps every write

    def commit(self) -> None:
        mode = 0o666 & ~_umask()  # mkstemp makes 0600 files; a wheel is read by whoever installs it
        for temp, final in self._pending:
            os.chmod(temp, mode)
            os.replace(temp, final)
        self._pending.clear()
        self._made.clear()
        self._release()

    def _release(self) -> None:
        for lock in self._locks:
            os.close(lock)
        self._locks.clear()

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        writing = self._pending[-1][1] if self._pending else self.directory
        for temp, _ in self._pending:  # not committed: an error happened, leave the directory as it was
            temp.unlink(missing_ok=True)
        self._pending.clear()
        self._release()
        for directory in self._made:
            try:
                directory.rmdir()
            except OSError:
                break
        self._made.clear()
        if exc is not None and (named := _naming(exc, writing)) is not exc:
            raise named from exc


def _naming(exc: BaseException, path: Path) -> BaseException:
    """A write's OSError (ENOSPC, EDQUOT, EIO: write() and close() name no file) with the file it was writing,
    so that the message can say where; any other exception as it is."""
    if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
        return OSError(exc.errno, exc.strerror, str(path))
    return exc


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
