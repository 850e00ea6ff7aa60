"""RECORD (PEP 376, PEP 427): the hash encoding, the row, reading and writing, the rows' digest, and the check.

The one place that knows the format (pypa/installer's records.py is the model): the build writes
RECORD with it (wheel/), verify and doctor read and check it (operate/), and doctor's probes check an
installed RECORD inside the examined interpreter (probes/doctor/), which may have nothing but the
standard library and this package on its path, from Python 3.8 on. So this module imports the
standard library alone and runs on 3.8 (tests/unit/test_layers.py holds what the probes import to
that). What a problem means (an untrusted upstream wheel, an edited install) is its caller's to say.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ALGORITHM = "sha256"  # what this tool writes; PEP 427 accepts no weaker one
WEAK = ("md5", "sha1")
CHUNK = 1 << 20
WELL_FORMED = re.compile(r"[a-z0-9_]+=[A-Za-z0-9_-]+=*")  # PEP 376: algorithm=urlsafe-base64 digest
# What an installer writes into RECORD beside the wheel's own rows (pip, uv; PEP 376, 610, 627).
INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD", "uv_cache.json")


def encode(digest: bytes, algorithm: str = ALGORITHM) -> str:
    """A digest as a RECORD row carries it: the algorithm, "=", urlsafe base64 without padding (PEP 376, 427)."""
    return f"{algorithm}={_base64(digest)}"


def hash_of(data: bytes) -> str:
    """The hash a RECORD row written by this tool carries for data."""
    return encode(hashlib.sha256(data).digest())


def from_hex(hexdigest: Any) -> str | None:
    """A sha256 hex digest (a provenance's, SHA256SUMS') as RECORD writes it; None where it is no hex digest."""
    try:
        return encode(bytes.fromhex(hexdigest))
    except (TypeError, ValueError):
        return None


def _base64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@dataclass(frozen=True)
class Row:
    """One row: the member's path, its hash ("" for RECORD's own row) and its size in bytes ("" where unknown)."""

    path: str
    hash: str
    size: str

    def matches(self, data: bytes) -> bool:
        """Whether data is what the row vouches for: a hash no weaker than sha256 (PEP 427), and the size if given."""
        digest = self._digest()
        if digest is None or (self.size and int(self.size) != len(data)):
            return False
        digest.update(data)
        return _base64(digest.digest()) == self._value()

    def matches_file(self, path: Path) -> bool:
        """matches() for a file on disk, read in chunks (an installed module can be hundreds of MB);
        FileNotFoundError where it is missing, OSError where it cannot be read."""
        digest = self._digest()
        with path.open("rb") as handle:
            if digest is None or (self.size and int(self.size) != os.fstat(handle.fileno()).st_size):
                return False
            for chunk in iter(lambda: handle.read(CHUNK), b""):
                digest.update(chunk)
        return _base64(digest.digest()) == self._value()

    def _digest(self) -> Any:
        """A fresh hash object of the row's algorithm; None for no hash, a weak, unknown or variable-length one."""
        algorithm = self.hash.partition("=")[0]
        if (not self._value() or algorithm not in hashlib.algorithms_guaranteed or algorithm in WEAK
                or algorithm.startswith("shake_")):
            return None
        return hashlib.new(algorithm)

    def _value(self) -> str:
        return self.hash.partition("=")[2].rstrip("=")


# --- reading and writing -------------------------------------------------------------------------


def read(text: str) -> list[list[str]]:
    """RECORD's rows as its CSV holds them, nothing checked (an installed RECORD is read so, to name every row)."""
    return [row for row in csv.reader(io.StringIO(text)) if row]


def parse(data: bytes) -> tuple[dict[str, Row], list[str]]:
    """RECORD's rows by path, and every malformed row (as installer's validation collects them): three fields,
    each path once, a hash that is 'algorithm=urlsafe base64', a size that is a number of bytes.
    UnicodeDecodeError or csv.Error where it is no CSV of UTF-8 text."""
    rows: dict[str, Row] = {}
    problems: list[str] = []
    for number, row in enumerate(csv.reader(io.StringIO(data.decode("utf-8"))), start=1):
        if not row:
            continue
        if len(row) != 3:
            problems.append(f"row {number} {row!r} does not have three fields")
        elif row[0] in rows:
            problems.append(f"row {number}: {row[0]} is listed twice")
        elif row[1] and not WELL_FORMED.fullmatch(row[1]):
            problems.append(f"row {number}: {row[0]} has hash {row[1]!r}, not 'sha256=<urlsafe base64>'")
        elif row[2] and not row[2].isdigit():
            problems.append(f"row {number}: {row[0]} has size {row[2]!r}, not a number of bytes")
        else:
            rows[row[0]] = Row(*row)
    return rows, problems


def write(record_path: str, rows: Iterable[Row]) -> bytes:
    """RECORD as this tool writes it: rows sorted by path, "\\n" line ends, its own row last with no hash."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows((row.path, row.hash, row.size) for row in sorted(rows, key=lambda r: r.path))
    writer.writerow([record_path, "", ""])
    return out.getvalue().encode("utf-8")


def rows_sha256(rows: Iterable[Sequence[str]]) -> str:
    """The sha256 of rows (path, hash, size) as a RECORD writes them: csv, sorted, "\\n" ends.

    The build records it in the provenance for the members it carries over from upstream unchanged;
    verify and doctor compute it again from the RECORD they read.
    """
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(sorted(tuple(row) for row in rows))
    return hashlib.sha256(out.getvalue().encode()).hexdigest()


# --- an installed RECORD -------------------------------------------------------------------------


def installer_row(name: str, rows: Mapping[str, Any]) -> bool:
    """A row the installer wrote, not the wheel: its own dist-info files, scripts outside site-packages,
    bytecode it compiled from a .py file of the same distribution."""
    head, _, tail = name.rpartition("/")
    if name.startswith(("../", "/")) or (head.endswith(".dist-info") and tail in INSTALLER_FILES):
        return True
    if head.endswith("__pycache__") and tail.endswith(".pyc"):
        source = f"{head[: -len('__pycache__')]}{tail.split('.', 1)[0]}.py"
        return source in rows
    return False


@dataclass
class Checked:
    """Installed files against the RECORD they were installed with: how many rows with a hash, how many match,
    and which differ (or cannot be read) and which are missing."""

    files: int = 0
    matching: int = 0
    modified: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def data(self) -> dict[str, Any]:
        return {"files": self.files, "matching": self.matching, "modified": sorted(self.modified),
                "missing": sorted(self.missing)}


def check_files(rows: Iterable[Row], root: Path) -> Checked:
    """Every row with a hash, its file (under root, where the installer put it) hashed again."""
    checked = Checked()
    for row in rows:
        if not row.hash:
            continue
        checked.files += 1
        try:
            same = row.matches_file(root / row.path)
        except FileNotFoundError:
            checked.missing.append(row.path)
            continue
        except (OSError, ValueError):  # unreadable, a directory in its place: not the bytes it vouches for
            same = False
        if same:
            checked.matching += 1
        else:
            checked.modified.append(row.path)
    return checked
