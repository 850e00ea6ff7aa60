"""Wheel metadata: the dist-info, the local version, RECORD and the embedded provenance."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from email.parser import HeaderParser
from typing import Any

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from .errors import UnsafeArchiveError

PROVENANCE = "NVFP4_OVERLAY.json"


@dataclass(frozen=True)
class DistInfo:
    """Where a wheel keeps its metadata (PEP 427: {name}-{version}.dist-info and .data)."""

    prefix: str  # "flashinfer_python-0.6.1" — the stem both directories share
    name: str
    version: str

    @property
    def dist_info(self) -> str:
        return f"{self.prefix}.dist-info"

    @property
    def data(self) -> str:
        return f"{self.prefix}.data"

    def relabelled(self, version: str) -> DistInfo:
        return DistInfo(f"{self.prefix.rsplit('-', 1)[0]}-{version}", self.name, version)

    def rename(self, member: str, new: DistInfo) -> str:
        """A member's name under `new` (only the .dist-info and .data directories change)."""
        top, sep, rest = member.partition("/")
        if top == self.dist_info:
            return f"{new.dist_info}{sep}{rest}"
        if top == self.data:
            return f"{new.data}{sep}{rest}"
        return member


def find_dist_info(filename: str, names: Iterable[str], metadata: Callable[[str], bytes]) -> DistInfo:
    """The single .dist-info of a wheel, checked against the filename and its own METADATA."""
    where = f"{filename}"
    name, version, _, _ = parse_wheel_filename(filename)
    tops = sorted({n.split("/", 1)[0] for n in names if "/" in n and n.split("/", 1)[0].endswith(".dist-info")})
    if len(tops) != 1:
        msg = f"{where}: expected exactly one top-level .dist-info directory, found {tops or 'none'}"
        raise UnsafeArchiveError(msg)
    prefix = tops[0][: -len(".dist-info")]
    dir_name, _, dir_version = prefix.rpartition("-")
    if canonicalize_name(dir_name) != name or Version(dir_version) != version:
        msg = f"{where}: the filename says {name} {version} but the directory is {tops[0]}"
        raise UnsafeArchiveError(msg)
    headers = HeaderParser().parsestr(metadata(f"{tops[0]}/METADATA").decode("utf-8", "replace"))
    meta_name, meta_version = headers.get("Name", ""), headers.get("Version", "")
    if canonicalize_name(meta_name) != name or meta_version != dir_version:
        msg = f"{where}: METADATA says {meta_name} {meta_version}, the filename {name} {version}"
        raise UnsafeArchiveError(msg)
    return DistInfo(prefix, str(name), dir_version)


def local_filename(filename: str, local_version: str) -> str:
    """The upstream filename with the version replaced; the tags (and any build tag) stay as they are."""
    stem, version, rest = filename.split("-", 2)
    return f"{stem}-{local_version}-{rest}"


def set_version(metadata: bytes, version: str) -> bytes:
    """METADATA with its Version header replaced; the rest of the file, the description too, kept."""
    text = metadata.decode("utf-8")
    head, sep, body = text.partition("\n\n")
    new_head, count = re.subn(r"(?m)^Version: .*$", f"Version: {version}", head, count=1)
    if count != 1:
        msg = "METADATA has no Version header"
        raise UnsafeArchiveError(msg)
    return (new_head + sep + body).encode("utf-8")


def record_hash(data: bytes) -> str:
    """PEP 376 / PEP 427: sha256, urlsafe base64 without padding."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@dataclass(frozen=True)
class RecordRow:
    path: str
    hash: str
    size: str


def parse_record(data: bytes, where: str) -> dict[str, RecordRow]:
    rows: dict[str, RecordRow] = {}
    for row in csv.reader(io.StringIO(data.decode("utf-8"))):
        if not row:
            continue
        if len(row) != 3:
            msg = f"{where}: RECORD row {row!r} does not have three fields"
            raise UnsafeArchiveError(msg)
        rows[row[0]] = RecordRow(*row)
    return rows


def write_record(record_path: str, rows: Iterable[RecordRow]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in sorted(rows, key=lambda r: r.path):
        writer.writerow([row.path, row.hash, row.size])
    writer.writerow([record_path, "", ""])
    return out.getvalue().encode("utf-8")


def provenance(
    *,
    upstream_filename: str,
    upstream_sha256: str,
    local_version: str,
    revision: int,
    patches: Iterable[Mapping[str, Any]],
    overlay: Mapping[str, str],
    tool_version: str,
) -> bytes:
    """NVFP4_OVERLAY.json: what the wheel was built from, enough to check it against the series."""
    document = {
        "tool": "nvfp4-overlay",
        "tool_version": tool_version,
        "version": local_version,
        "revision": revision,
        "upstream": {"filename": upstream_filename, "sha256": upstream_sha256},
        "patches": list(patches),
        "overlay": dict(sorted(overlay.items())),
    }
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

