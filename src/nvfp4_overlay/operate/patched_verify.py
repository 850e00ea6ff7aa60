"""verify of a patched wheel: held member by member to the build made again from the pinned upstream wheel.

RECORD, the provenance's digests and a SHA256SUMS line prove nothing alone: whoever can write the
wheel can rewrite them all to match an edit. So a wheel is `ok` only when every member equals what
this checkout's build makes from the wheel upstream.toml pins (operate/anchor.py: fetched as build
fetches it, its sha256 checked, the series applied, the overlay added): a patched file the series'
result, an overlay file the checkout's overlay, every other member upstream's own, the provenance
what the build writes, and nothing else (a `.pth`, an entry point, any dist-info file the build does
not make is refused by name). Where that upstream wheel cannot be had (--offline, no index) or this
checkout builds another label, the verdict is "cannot be verified here" (exit 4, never 0); what can
be told without it still refuses (exit 3): a member that contradicts the wheel's own provenance, an
overlay file that is not the checkout's, a provenance naming another series or pin (docs/reliability.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion

from .. import records
from ..errors import ConfigError, OverlayError, Unverified
from ..files import sha256_bytes
from ..patch import Target, load_overlay, load_upstream, overlay_root, read_series
from ..wheel import PROVENANCE, DistInfo, Source, WheelReader, find_dist_info
from . import anchor
from .verdict import MemberProblem, Sums, Verdict, check_record, check_sums


def verify_patched(path: Path, patches_dir: Path, overlay_dir: Path, source: Source, *, sums: Sums) -> Verdict:
    """The verdict on a wheel this tool built from a pinned upstream wheel (verify.verify_wheel hands it over).

    `source`: where the pinned upstream wheel is found (the wheelhouse, the cache, then pip unless offline);
    `sums`: what the SHA256SUMS of its folder must say of it (verdict.Sums).
    """
    verdict = Verdict(path)
    check_sums(path, verdict, sums)
    try:
        with WheelReader(path) as reader:
            info = find_dist_info(path.name, reader.names, reader.read)
            rows, digests = check_record(reader, info.dist_info, verdict)
            name = f"{info.dist_info}/{PROVENANCE}"
            if name not in reader.infos:
                verdict.problems.append(f"{name} is missing: not a wheel built by nvfp4-overlay")
                return verdict
            verdict.provenance = json.loads(reader.read(name))
    except (OverlayError, ValueError) as exc:  # unsafe or corrupt archives, malformed RECORD or JSON
        verdict.problems.append(str(exc))
        return verdict
    doc = verdict.provenance or {}
    if doc.get("version") != info.version:  # the wheel contradicts itself: relabelled after the build
        verdict.problems.append(f"provenance names version {doc.get('version')!r}, the wheel is {info.version}")
    _check_claims(verdict, info.name, patches_dir, overlay_dir)  # says why, where the wheel names another series
    try:
        derived = anchor.derive(info.name, info.version, _tags(path), patches_dir, overlay_dir, source, fuzz=anchor.fuzz(doc))
    except Unverified as exc:
        verdict.unverified = exc.message
        _explain_by_provenance(verdict, info, rows, digests)
        return verdict
    verdict.checked_against = "upstream"
    verdict.notes.append(f"every member held to {derived.upstream} (sha256 checked) with this checkout's series "
                         f"and overlay applied again")
    _explain_by_plan(verdict, info, digests, derived)
    return verdict


def _tags(path: Path) -> list[str]:
    return sorted(str(t) for t in parse_wheel_filename(path.name)[3])


def _check_claims(verdict: Verdict, name: str, patches_dir: Path, overlay_dir: Path) -> None:
    """What the provenance claims against this checkout, where it builds the same label (a wheel of another
    label is another checkout's: nothing here to compare with): the pin, the series, the overlay. It says why
    a wheel differs; without the anchor it refuses what needs no upstream wheel (the overlay is the checkout's)."""
    doc = verdict.provenance or {}
    target = Target(name, _upstream_version(doc))
    try:
        upstream = load_upstream(patches_dir, target)
        series = read_series(upstream.directory)
        overlay = load_overlay(overlay_dir, target)
    except ConfigError:
        return
    if doc.get("version") != upstream.local_version or doc.get("revision") != upstream.revision:
        return
    pins = {w.filename: w.sha256 for w in upstream.wheels}
    up = doc.get("upstream", {})
    if pins.get(up.get("filename")) != up.get("sha256"):
        verdict.problems.append(f"built from {up.get('filename')} ({up.get('sha256')}), which upstream.toml does not pin")
    built = [(p.get("name"), p.get("sha256")) for p in doc.get("patches", [])]
    series_now = [(p.name, p.sha256) for p in series.patches]
    if built != series_now:
        verdict.problems.append(f"built with patches {built}, the series at {upstream.directory} is {series_now}; rebuild")
    overlay_now = {f.path: sha256_bytes(f.data) for f in overlay}
    claimed: dict[str, Any] = doc["overlay"] if isinstance(doc.get("overlay"), dict) else {}
    differ = sorted(n for n in {*claimed, *overlay_now} if claimed.get(n) != overlay_now.get(n))
    if differ:
        verdict.problems.append(f"overlay files differ from {overlay_root(overlay_dir, target.dist)} "
                                f"({', '.join(differ[:5])}{' and more' if len(differ) > 5 else ''}); rebuild")


def _upstream_version(doc: dict[str, Any]) -> str:
    try:
        return str(parse_wheel_filename(doc.get("upstream", {}).get("filename", ""))[1])
    except (InvalidWheelFilename, InvalidVersion, AttributeError):
        return "0"


# --- every member explained ------------------------------------------------------------------------


def _rebuild_fix(info: DistInfo, doc: dict[str, Any]) -> str:
    return (f"rebuild the wheel ('nvfp4-overlay build {info.name}=={_upstream_version(doc)}') and find out who "
            f"changed this copy")


def _explain_by_plan(verdict: Verdict, info: DistInfo, digests: dict[str, str], derived: anchor.Derived) -> None:
    """Every member against the build made again: its bytes, nothing more, nothing less, the provenance too."""
    doc = verdict.provenance or {}
    fix = _rebuild_fix(info, doc)
    provenance = f"{info.dist_info}/{PROVENANCE}"
    for name, found in sorted(digests.items()):
        if name == provenance:  # held field by field: the tool that wrote it may be another release
            continue
        if name not in derived.record:
            verdict.refuse(MemberProblem(name, "unexplained", f"absent: {derived.upstream} has no such member and "
                                         "neither the series nor the overlay adds it", found, fix))
        elif derived.record[name] != found:
            verdict.refuse(MemberProblem(name, derived.kind(name), derived.record[name], found, fix))
    for name in sorted(set(derived.record) - set(digests) - {provenance}):
        verdict.refuse(MemberProblem(name, "missing", derived.record[name], "absent", fix))
    differ = anchor.differing_keys(doc, derived.provenance) if provenance in digests else []
    if differ:
        verdict.refuse(MemberProblem(provenance, "provenance", f"what the build writes ({', '.join(differ)} as "
                                     f"derived from {derived.upstream})", f"other {', '.join(differ)}", fix))


def _explain_by_provenance(verdict: Verdict, info: DistInfo, rows: dict[str, tuple[str, str, str]],
                           digests: dict[str, str]) -> None:
    """Without the anchor, a diagnosis: each member against the digests its own provenance carries. A member
    that contradicts them was edited after the build (refused); agreeing proves nothing."""
    doc = verdict.provenance or {}
    if not doc:
        return
    fix = _rebuild_fix(info, doc)
    up = doc.get("upstream", {})
    carried, patched, overlay = up.get("record"), doc.get("patched"), doc.get("overlay", {})
    if not isinstance(carried, dict) or not isinstance(patched, dict):
        verdict.notes.append(
            f"the provenance carries no digests of the patched files and upstream's RECORD rows (an older build), "
            f"and {up.get('filename')} cannot be had to plan the wheel again: its members cannot be explained; "
            f"rebuild it, or verify again where that file can be had")
        return
    verdict.notes.append(f"without {up.get('filename')}, the members were held to the digests the wheel's own "
                         f"provenance carries: that names an edit the provenance does not know of, and vouches for "
                         f"nothing (a rewriter rewrites the provenance too)")
    made = {f"{info.dist_info}/RECORD", f"{info.dist_info}/{PROVENANCE}"}
    for kind, table in (("overlay", overlay), ("patched", patched)):
        for name, sha in sorted(table.items()):
            made.add(name)
            found = digests.get(name)
            if found is None:
                verdict.refuse(MemberProblem(name, "missing", _as_record_hash(sha), "absent", fix))
            elif found != _as_record_hash(sha):
                verdict.refuse(MemberProblem(name, kind, _as_record_hash(sha), found, fix))
    rest = [rows[n] for n in sorted(rows) if n not in made]
    extra = sorted(n for n in digests if n not in rows and n not in made)
    found_digest = records.rows_sha256([*rest, *((n, digests[n], "") for n in extra)])
    if (len(rest) + len(extra), found_digest) != (carried.get("rows"), carried.get("sha256")):
        verdict.refuse(MemberProblem(
            f"the {len(rest) + len(extra)} members carried over from upstream", "upstream",
            f"{carried.get('rows')} RECORD rows of sha256 {carried.get('sha256')}",
            f"{len(rest) + len(extra)} rows of sha256 {found_digest}",
            f"verify again where {up.get('filename')} can be had (without --offline verify downloads it) to name the "
            f"member; {fix}"))


def _as_record_hash(hexdigest: str) -> str:
    return records.from_hex(hexdigest) or f"sha256 {hexdigest!r}"
