"""An installed patched build held to the anchor from outside: its files read as bytes here, never imported or run.

The anchor is the build made again from the pinned upstream wheel with this checkout's series and
overlay (operate/anchor.py), never the provenance installed beside the files. An installer puts a
wheel's members under site-packages by their names (`.data/purelib` and `.data/platlib` there too) and
writes a RECORD of them with rows of its own (INSTALLER, REQUESTED, direct_url.json, scripts outside
site-packages, the bytecode it compiled): so every member the build makes must be installed with its
bytes, and every other row the RECORD keeps from the wheel is one no build of it makes (a `.pth` runs
at every interpreter start). doctor judges what this finds (operate/installed.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from .. import records
from ..errors import Unverified
from ..wheel import PROVENANCE, Source
from . import anchor

ELSEWHERE = ("purelib", "platlib")  # the .data schemes an installer puts under site-packages (PEP 427)


@dataclass(frozen=True)
class Held:
    """What an installed build is, against what the build makes: the files held, and each kind of difference."""

    upstream: str  # the pinned upstream wheel it was derived from
    files: int
    differs: tuple[str, ...]  # installed with other bytes
    missing: tuple[str, ...]  # made by the build, not installed
    unexplained: tuple[str, ...]  # installed from the wheel, made by no build of it
    provenance: tuple[str, ...]  # the installed provenance's keys that are not what the build writes

    @property
    def ok(self) -> bool:
        return not (self.differs or self.missing or self.unexplained or self.provenance)

    def data(self) -> dict[str, Any]:
        return {"upstream": self.upstream, "files": self.files, "ok": self.ok, "differs": list(self.differs),
                "missing": list(self.missing), "unexplained": list(self.unexplained),
                "provenance": list(self.provenance)}


def hold(name: str, version: str, location: Path, patches_dir: Path, overlay_dir: Path, source: Source) -> Held:
    """The installed `name` `version` under `location` (site-packages) against the build; Unverified where the
    anchor cannot be had (operate/anchor.py says when)."""
    dist_info = _dist_info(location, name, version)
    tags = HeaderParser().parsestr(_text(dist_info / "WHEEL")).get_all("Tag") or []
    installed = _provenance(dist_info / PROVENANCE)
    derived = anchor.derive(name, version, [t.strip() for t in tags], patches_dir, overlay_dir, source,
                            fuzz=anchor.fuzz(installed))
    own = f"{dist_info.name}/{PROVENANCE}"  # held field by field: the tool that wrote it may be another release
    differs, missing, held = [], [], 0
    for member, digest in sorted(derived.record.items()):
        path = _installed_path(location, member)
        if path is None or member == own:
            continue
        held += 1
        try:
            found = records.hash_of(path.read_bytes())
        except FileNotFoundError:
            missing.append(member)
            continue
        except OSError:  # a directory in its place, unreadable: not the build's bytes
            found = ""
        if found != digest:
            differs.append(member)
    rows = _record_rows(dist_info / "RECORD")
    unexplained = sorted(n for n in rows if n not in derived.record and n != own and not records.installer_row(n, rows))
    keys = anchor.differing_keys(installed, derived.provenance) if installed is not None else ["the whole file"]
    return Held(derived.upstream, held, tuple(differs), tuple(missing), tuple(unexplained), tuple(keys))


def _dist_info(location: Path, name: str, version: str) -> Path:
    for path in sorted(location.glob("*.dist-info")):
        stem, _, found = path.name.removesuffix(".dist-info").rpartition("-")
        if canonicalize_name(stem) == canonicalize_name(name) and found == version:
            return path
    msg = (f"cannot be verified here: {location} holds no {name}-{version}.dist-info to read the installed "
           f"files from; reinstall the wheel with pip or uv")
    raise Unverified(msg, path=location, item=f"{name} {version}", expected="its .dist-info", found="none",
                     fix="reinstall the wheel")


def _installed_path(location: Path, member: str) -> Path | None:
    """Where an installer put a wheel member: under site-packages by its name; a .data member of another scheme
    (scripts, headers, data) where the installer's scheme says, which is not held here."""
    top, _, rest = member.partition("/")
    if not top.endswith(".data"):
        return location / member
    scheme, _, inner = rest.partition("/")
    return location / inner if scheme in ELSEWHERE else None


def _record_rows(path: Path) -> dict[str, Any]:
    return {row[0]: row for row in records.read(_text(path)) if row[0]}


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _provenance(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(_text(path))
    except ValueError:
        return None
    return document if isinstance(document, dict) else None
