"""Wheel metadata: the dist-info, the local version, an upstream RECORD read and held, and the embedded provenance.

RECORD's format is records.py's; what is here is what a bad RECORD means to the build: an upstream wheel
not to trust (names.UNTRUSTED)."""

from __future__ import annotations

import csv
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from email.parser import HeaderParser
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .. import records
from ..errors import UnsafeArchiveError
from .names import UNTRUSTED

PROVENANCE = "NVFP4_OVERLAY.json"


@dataclass(frozen=True)
class DistInfo:
    """Where a wheel keeps its metadata (PEP 427: {name}-{version}.dist-info and .data)."""

    prefix: str  # "flashinfer_python-0.6.1" — the stem both directories share
    name: str
    version: str

    @functools.cached_property  # asked once per member of a 14,705-member wheel
    def dist_info(self) -> str:
        return f"{self.prefix}.dist-info"

    @functools.cached_property
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
    """The single .dist-info of a wheel, checked against the filename and its own METADATA.

    PEP 427: the .dist-info (and any .data) directory sits at the root; one anywhere else would be
    metadata an installer never reads, so such a wheel is refused rather than guessed at.
    """
    where = f"{filename}"
    names = list(names)
    try:
        name, version, _, _ = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion) as exc:
        msg = f"{where}: not a wheel filename ({exc}); {UNTRUSTED}"
        raise UnsafeArchiveError(msg, path=where, expected="a PEP 427 wheel filename", found=str(exc), fix=UNTRUSTED) from exc
    # A .dist-info directory below the root; only a name holding ".dist-info/" can have one (a cheap test first).
    nested = sorted({n for n in names if ".dist-info/" in n and any(p.endswith(".dist-info") for p in n.split("/")[1:-1])})
    if nested:
        msg = f"{where}: .dist-info directory outside the wheel root: {', '.join(nested[:5])}; {UNTRUSTED}"
        raise UnsafeArchiveError(msg, path=where, expected="the .dist-info at the root", found=", ".join(nested[:5]),
                                 fix=UNTRUSTED)
    tops = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")})
    if len(tops) != 1 or f"{tops[0]}/METADATA" not in names:
        found = f"{tops[0]} without METADATA" if len(tops) == 1 else (tops or "none")
        msg = f"{where}: expected exactly one top-level .dist-info directory holding METADATA, found {found}; {UNTRUSTED}"
        raise UnsafeArchiveError(msg, path=where, expected="one .dist-info with METADATA", found=str(found), fix=UNTRUSTED)
    prefix = tops[0][: -len(".dist-info")]
    dir_name, _, dir_version = prefix.rpartition("-")
    if canonicalize_name(dir_name) != name or not _same_version(dir_version, version):
        msg = f"{where}: the filename says {name} {version} but the directory is {tops[0]}; {UNTRUSTED}"
        raise UnsafeArchiveError(msg, path=where, expected=f"{name} {version}", found=tops[0], fix=UNTRUSTED)
    data_dirs = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".data")} - {f"{prefix}.data"})
    if data_dirs:
        msg = f"{where}: {', '.join(data_dirs)} does not match the dist-info {tops[0]} (PEP 427 wants {prefix}.data); {UNTRUSTED}"
        raise UnsafeArchiveError(msg, path=where, expected=f"{prefix}.data", found=", ".join(data_dirs), fix=UNTRUSTED)
    headers = HeaderParser().parsestr(metadata(f"{tops[0]}/METADATA").decode("utf-8", "replace"))
    meta_name, meta_version = headers.get("Name", ""), headers.get("Version", "")
    if canonicalize_name(meta_name) != name or meta_version != dir_version:
        msg = f"{where}: METADATA says {meta_name} {meta_version}, the filename {name} {version}; {UNTRUSTED}"
        raise UnsafeArchiveError(msg, path=where, expected=f"{name} {version}", found=f"{meta_name} {meta_version}",
                                 fix=UNTRUSTED)
    return DistInfo(prefix, str(name), dir_version)


def _same_version(text: str, version: Version) -> bool:
    try:
        return Version(text) == version
    except InvalidVersion:
        return False


def local_filename(filename: str, local_version: str) -> str:
    """The upstream filename with the version replaced; the tags (and any build tag) stay as they are."""
    stem, _upstream_version, rest = filename.split("-", 2)
    return f"{stem}-{local_version}-{rest}"


def set_version(metadata: bytes, version: str) -> bytes:
    """METADATA with its Version header replaced; the rest of the file, the description too, kept."""
    text = metadata.decode("utf-8")
    head, sep, body = text.partition("\n\n")
    new_head, count = re.subn(r"(?m)^Version: .*$", f"Version: {version}", head, count=1)
    if count != 1:
        msg = "METADATA has no Version header"
        raise UnsafeArchiveError(msg, item="METADATA", expected="a Version header", found="none", fix=UNTRUSTED)
    return (new_head + sep + body).encode("utf-8")


def parse_record(data: bytes, where: str) -> dict[str, records.Row]:
    """RECORD's rows by path; every malformed row is reported at once (as installer's validation does)."""
    try:
        rows, problems = records.parse(data)
    except (UnicodeDecodeError, csv.Error) as exc:
        msg = f"{where}: not a CSV file of UTF-8 text ({exc}); {UNTRUSTED}"
        raise UnsafeArchiveError(msg, path=where, expected="CSV in UTF-8", found=str(exc), fix=UNTRUSTED) from exc
    if problems:
        msg = f"{where}: malformed RECORD ({UNTRUSTED}):\n  " + "\n  ".join(problems[:20])
        raise UnsafeArchiveError(msg, path=where, expected="PEP 376 RECORD rows", found="; ".join(problems[:20]),
                                 fix=UNTRUSTED)
    return rows


def checked_read(read: Callable[[str], bytes], record: Mapping[str, records.Row], where: str) -> Callable[[str], bytes]:
    """`read`, checking each member's bytes against its RECORD row before anything uses them.

    The build decompresses only what it patches; unchanged members are copied raw with their
    upstream rows, and `verify` hashes every member of the result (see README, reliability).
    """

    def checked(name: str) -> bytes:
        data = read(name)
        row = record.get(name)
        if row is None or not row.hash:
            msg = f"{where}: {name} is not in its RECORD (or has no hash); {UNTRUSTED}"
            raise UnsafeArchiveError(msg, path=where, item=name, expected="a RECORD row with a hash", found="none",
                                     fix=UNTRUSTED)
        if not row.matches(data):
            found = records.hash_of(data)
            msg = (
                f"{where}: {name} is {found} ({len(data)} bytes), its RECORD says {row.hash} "
                f"({row.size} bytes): corrupt or altered; {UNTRUSTED}"
            )
            raise UnsafeArchiveError(msg, path=where, item=name, expected=row.hash, found=found, fix=UNTRUSTED)
        return data

    return checked


def provenance(
    *,
    upstream_filename: str,
    upstream_sha256: str,
    local_version: str,
    revision: int,
    patches: Iterable[Mapping[str, Any]],
    overlay: Mapping[str, str],
    patched: Mapping[str, str],
    carried: Mapping[str, Any],
    tool_version: str,
) -> bytes:
    """NVFP4_OVERLAY.json: what the wheel was built from, enough to check it against the series, and
    every member without the upstream wheel: the sha256 of each overlay file and each member the build
    rewrote (`patched`: the series' files, METADATA), and of the RECORD rows it carried over from
    upstream unchanged (`upstream.record`: their count and records.rows_sha256)."""
    document = {
        "tool": "nvfp4-overlay",
        "tool_version": tool_version,
        "version": local_version,
        "revision": revision,
        "upstream": {"filename": upstream_filename, "sha256": upstream_sha256, "record": dict(carried)},
        "patches": list(patches),
        "overlay": dict(sorted(overlay.items())),
        "patched": dict(sorted(patched.items())),
    }
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()



