"""verify: a built wheel's RECORD against its bytes, and its provenance against the series it names."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import parse_wheel_filename

from .archive import WheelReader
from .errors import ConfigError, OverlayError
from .files import sha256_bytes
from .manifest import Target, load_overlay, load_upstream, overlay_root
from .metadata import PROVENANCE, find_dist_info, parse_record, record_hash
from .patching import read_series


@dataclass
class Verdict:
    wheel: Path
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provenance: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_wheel(path: Path, patches_dir: Path, overlay_dir: Path) -> Verdict:
    """The verdict on one wheel; a path that is no file is a bad argument (exit 2), not an integrity failure."""
    if not path.is_file():
        found = "a directory" if path.is_dir() else "missing"
        msg = f"{path}: {found}, not a wheel file; name a wheel that build wrote, e.g. dist/*.whl"
        raise ConfigError(msg, path=path, item="WHEEL", expected="a wheel file", found=found,
                          fix="name a wheel that build wrote")
    verdict = Verdict(path)
    try:
        with WheelReader(path) as reader:
            info = find_dist_info(path.name, reader.names, reader.read)
            _check_record(reader, info.dist_info, verdict)
            name = f"{info.dist_info}/{PROVENANCE}"
            if name not in reader.infos:
                verdict.problems.append(f"{name} is missing: not a wheel built by nvfp4-overlay")
                return verdict
            verdict.provenance = json.loads(reader.read(name))
    except (OverlayError, ValueError) as exc:  # unsafe or corrupt archives, malformed RECORD or JSON
        verdict.problems.append(str(exc))
        return verdict
    _check_provenance(verdict, info.name, info.version, patches_dir, overlay_dir)
    return verdict


def _check_record(reader: WheelReader, dist_info: str, verdict: Verdict) -> None:
    record_name = f"{dist_info}/RECORD"
    if record_name not in reader.infos:
        verdict.problems.append(f"{record_name} is missing")
        return
    rows = parse_record(reader.read(record_name), f"{reader.path}: {record_name}")
    for name in reader.names:
        if name == record_name:
            continue
        row = rows.pop(name, None)
        if row is None:
            verdict.problems.append(f"{name} is in the archive but not in RECORD")
            continue
        data = reader.read(name)
        if row.hash != record_hash(data) or (row.size and int(row.size) != len(data)):
            verdict.problems.append(f"{name}: RECORD says {row.hash} ({row.size} bytes), the file is {record_hash(data)} ({len(data)} bytes)")
    rows.pop(record_name, None)
    verdict.problems += [f"{name} is in RECORD but not in the archive" for name in sorted(rows)]


def _check_provenance(verdict: Verdict, name: str, version: str, patches_dir: Path, overlay_dir: Path) -> None:
    doc = verdict.provenance or {}
    if doc.get("version") != version:
        verdict.problems.append(f"provenance names version {doc.get('version')!r}, the wheel is {version}")
    upstream_version = str(parse_wheel_filename(doc.get("upstream", {}).get("filename", "x-0-py3-none-any.whl"))[1])
    target = Target(name, upstream_version)
    try:
        upstream = load_upstream(patches_dir, target)
        series = read_series(upstream.directory)
        overlay = load_overlay(overlay_dir, target)
    except ConfigError as exc:
        verdict.notes.append(f"the series of {target} is not here to compare with ({exc})")
        return
    pins = {w.filename: w.sha256 for w in upstream.wheels}
    up = doc.get("upstream", {})
    if pins.get(up.get("filename")) != up.get("sha256"):
        verdict.problems.append(f"built from {up.get('filename')} ({up.get('sha256')}), which upstream.toml does not pin")
    if doc.get("revision") != upstream.revision or doc.get("version") != upstream.local_version:  # the label: both revisions
        verdict.problems.append(f"built at revision {doc.get('revision')} as {doc.get('version')}, upstream.toml is at "
                                f"revision {upstream.revision} and the overlay's revision makes it {upstream.local_version}")
    built = [(p.get("name"), p.get("sha256")) for p in doc.get("patches", [])]
    series_now = [(p.name, p.sha256) for p in series.patches]
    if built != series_now:
        verdict.problems.append(f"built with patches {built}, the series at {upstream.directory} is {series_now}; rebuild")
    overlay_now = {f.path: sha256_bytes(f.data) for f in overlay}
    if doc.get("overlay") != overlay_now:
        verdict.problems.append(f"overlay files differ from {overlay_root(overlay_dir, target.dist)}; rebuild")
