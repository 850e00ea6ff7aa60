"""The build recipe: an upstream wheel, a series and overlay files in; a relabelled patched wheel out."""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import __version__, records
from ..errors import ConfigError, UnsafeArchiveError
from ..patch import Applied, HunkResult, OverlayFile, Patch, Series, Upstream, UpstreamWheel, apply_series
from .metadata import (
    PROVENANCE,
    DistInfo,
    checked_read,
    find_dist_info,
    local_filename,
    parse_record,
    provenance,
    set_version,
)
from .names import UNTRUSTED, name_problem

Read = Callable[[str], bytes]  # a member of the open upstream wheel, decompressed (the fetch's WheelReader.read)


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


@dataclass(frozen=True)
class Plan:
    """Everything one output wheel needs, decided before a byte of it is written."""

    filename: str
    entries: tuple[Entry, ...]
    hunks: tuple[HunkResult, ...]
    overlay: tuple[str, ...]


def plan_wheel(
    upstream: Upstream,
    pin: UpstreamWheel,
    infos: Mapping[str, zipfile.ZipInfo],
    read: Read,
    series: Series,
    overlay: Sequence[OverlayFile],
    *,
    fuzz: int = 0,
) -> Plan:
    """The patched wheel, decided in memory from the upstream wheel's members (`infos`, and `read`, which
    decompresses one): no I/O but those reads, and only the members the series touches are read."""
    # 1. The dist-info, checked against the filename and METADATA; RECORD, checked against the archive.
    old = find_dist_info(pin.filename, infos, read)
    new = old.relabelled(upstream.local_version)
    record = parse_record(read(f"{old.dist_info}/RECORD"), f"{pin.filename}: {old.dist_info}/RECORD")
    checked = checked_read(read, record, pin.filename)  # what the build decompresses, it hashes
    checked(f"{old.dist_info}/METADATA")  # the requirements the patched wheel keeps are upstream's own
    # 2. The series, applied in memory to the members it touches (and only those are decompressed).
    applied = apply_series(series, lambda path: checked(path) if path in infos else None, fuzz=fuzz)
    # 3. The overlay: new files only; replacing an upstream file is a patch's job.
    changed = _with_overlay(applied, overlay, infos, upstream)
    # 4. Unchanged members keep their bytes and RECORD rows; the dist-info moves to the new version.
    copied, rows = _carried_over(infos, old, new, changed, record, pin.filename)
    carried = {"rows": len(rows), "sha256": records.rows_sha256((r.path, r.hash, r.size) for r in rows)}
    made = _made_members(old, new, infos, read, changed, upstream, pin, series, overlay, applied, carried)
    rows += [records.Row(m.name, records.hash_of(m.data), str(len(m.data))) for m in made]
    record_path = f"{new.dist_info}/RECORD"
    made.append(NewMember(record_path, records.write(record_path, rows)))
    # 5. Sorted members, the dist-info last and RECORD last of all: the same inputs, the same bytes.
    entries = sorted([*copied, *made], key=lambda e: (e.name.startswith(new.dist_info + "/"), e.name == record_path, e.name))
    _check_names(entries, pin.filename)
    return Plan(local_filename(pin.filename, upstream.local_version), tuple(entries), tuple(applied.hunks), tuple(f.path for f in overlay))


def _check_names(entries: Sequence[Entry], filename: str) -> None:
    """The build never writes a wheel its own reader would refuse (names that differ only in case too)."""
    seen: set[str] = set()
    for entry in entries:
        # A member carried under its own name passed the same check when the reader opened the wheel.
        fresh = not isinstance(entry, CopiedMember) or entry.name != entry.source.filename
        problem = (fresh and name_problem(entry.name)) or ("a second member of this name" if entry.name.lower() in seen else None)
        if problem:
            msg = f"{filename}: the patched wheel would hold {entry.name!r} ({problem}); fix the patch or overlay that adds it"
            raise ConfigError(msg, item=entry.name, found=problem, fix="fix the patch or overlay that adds it")
        seen.add(entry.name.lower())


def _with_overlay(applied: Applied, overlay: Sequence[OverlayFile], infos: Mapping[str, zipfile.ZipInfo],
                  upstream: Upstream) -> dict[str, bytes | None]:
    changed = dict(applied.files)
    present = {n for n in infos if changed.get(n, b"") is not None} | {n for n, d in changed.items() if d is not None}
    kept = {n.lower() for n in present}  # names that differ only in case collide on macOS and Windows
    for item in overlay:
        problem = name_problem(item.path)
        if problem:
            msg = f"overlay/{upstream.target.dist}/{item.path}: {problem}; rename the file"
            raise ConfigError(msg, path=f"overlay/{upstream.target.dist}/{item.path}", found=problem, fix="rename the file")
        if item.path.lower() in kept:
            msg = (
                f"overlay/{upstream.target.dist}/{item.path}: would overwrite "
                f"upstream's {item.path}; change that file with a patch in the series instead"
            )
            raise ConfigError(msg, path=f"overlay/{upstream.target.dist}/{item.path}", item=item.path,
                              found="an upstream file of that name", fix="change that file with a patch instead")
        if item.path.split("/", 1)[0].endswith((".dist-info", ".data")):
            msg = (
                f"overlay/{upstream.target.dist}/{item.path}: the overlay may not add "
                f"metadata (the build writes the dist-info); remove the file"
            )
            raise ConfigError(msg, path=f"overlay/{upstream.target.dist}/{item.path}", found="a dist-info file",
                              fix="remove the file")
        changed[item.path] = item.data
    return changed


def _carried_over(
    infos: Mapping[str, zipfile.ZipInfo], old: DistInfo, new: DistInfo, changed: Mapping[str, bytes | None],
    record: Mapping[str, records.Row], filename: str,
) -> tuple[list[Entry], list[records.Row]]:
    rewritten = {f"{old.dist_info}/{n}" for n in ("RECORD", "METADATA", PROVENANCE)}
    signatures = f"{old.dist_info}/RECORD."
    copied: list[Entry] = []
    rows: list[records.Row] = []
    for name, info in infos.items():
        if name in changed or name in rewritten or name.startswith(signatures):
            continue  # RECORD.jws / RECORD.p7s sign the upstream RECORD, which no longer holds
        row = record.get(name)
        if row is None or not row.hash:
            msg = f"{filename}: {name} is not in its RECORD (or has no hash); {UNTRUSTED}"
            raise UnsafeArchiveError(msg, path=filename, item=name, expected="a RECORD row with a hash",
                                     found="none", fix=UNTRUSTED)
        if row.size and int(row.size) != info.file_size:
            msg = f"{filename}: RECORD says {name} holds {row.size} bytes, the archive {info.file_size}; {UNTRUSTED}"
            raise UnsafeArchiveError(msg, path=filename, item=name, expected=f"{row.size} bytes",
                                     found=f"{info.file_size} bytes", fix=UNTRUSTED)
        new_name = old.rename(name, new)
        copied.append(CopiedMember(new_name, info))
        same = new_name == name and row.size  # the row as upstream wrote it: checked above, kept
        rows.append(row if same else records.Row(new_name, row.hash, str(info.file_size)))
    absent = sorted(set(record) - set(infos))
    if absent:
        msg = f"{filename}: RECORD lists {', '.join(absent[:5])}, which the archive does not hold; {UNTRUSTED}"
        raise UnsafeArchiveError(msg, path=filename, item=", ".join(absent[:5]), found="missing", fix=UNTRUSTED)
    return copied, rows


def _made_members(
    old: DistInfo, new: DistInfo, infos: Mapping[str, zipfile.ZipInfo], read: Read, changed: Mapping[str, bytes | None],
    upstream: Upstream, pin: UpstreamWheel, series: Series, overlay: Sequence[OverlayFile], applied: Applied,
    carried: Mapping[str, Any],
) -> list[NewMember]:
    made = []
    for path, data in sorted(changed.items()):
        if data is not None:
            info = infos.get(path)
            mode = (info.external_attr >> 16) & 0o777 if info and info.external_attr else 0o644
            mode = next((f.mode for f in overlay if f.path == path), mode)
            made.append(NewMember(old.rename(path, new), data, mode or 0o644))
    metadata = set_version(read(f"{old.dist_info}/METADATA"), upstream.local_version)
    made.append(NewMember(f"{new.dist_info}/METADATA", metadata))
    extra = {f.path for f in overlay}
    patched = {m.name: _sha256(m.data) for m in made if m.name not in extra}  # the series' files, METADATA
    document = provenance(
        upstream_filename=pin.filename,
        upstream_sha256=pin.sha256,
        local_version=upstream.local_version,
        revision=upstream.revision,
        patches=[_patch_record(p, applied) for p in series.patches],
        overlay={f.path: _sha256(f.data) for f in overlay},
        patched=patched,
        carried=carried,
        tool_version=__version__,
    )
    made.append(NewMember(f"{new.dist_info}/{PROVENANCE}", document))
    return made


def _patch_record(patch: Patch, applied: Applied) -> dict[str, Any]:
    hunks = [
        {"file": h.path, "hunk": h.number, "header": h.header, "offset": h.placement.offset, "fuzz": h.placement.fuzz}
        for h in applied.hunks
        if h.patch == patch.name
    ]
    return {"name": patch.name, "sha256": patch.sha256, "fields": dict(patch.fields), "hunks": hunks}


def _sha256(data: bytes) -> str:
    """hex sha256, as files.sha256_bytes: the landing's module (files.py) is the write's, so the plan hashes here."""
    return hashlib.sha256(data).hexdigest()
