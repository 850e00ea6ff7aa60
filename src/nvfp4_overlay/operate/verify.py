"""verify: a built wheel's every member explained (overlay, series, upstream), its RECORD and its provenance.

RECORD alone proves nothing: whoever can write the wheel can rewrite a row to match an edited member.
So each member is held to what the build would write. With the pinned upstream wheel in the cache
(or --wheelhouse), the build is planned again from it (`recipe.plan_wheel`: the series applied, the
overlay added) and every member must carry the bytes of that plan's RECORD row: a patched file the
series' result, an overlay file the checkout's overlay, every other member upstream's own RECORD row.
Without it, each member is held to the digests the provenance carries (the overlay's and the patched
files' sha256, and the sha256 of the RECORD rows carried over from upstream): that catches an edit
that leaves the provenance alone; a wheel's SHA256SUMS entry (install --run, index) and the cached
upstream wheel catch one that rewrites the provenance too (docs/reliability.md).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion

from ..errors import ConfigError, NotInCache, OverlayError
from ..files import SHA256SUMS, read_sums, sha256_bytes, sha256_file
from ..patch import OverlayFile, Series, Target, Upstream, load_overlay, load_upstream, overlay_root, read_series
from ..probes.doctor.doctor_files import record_rows_sha256
from ..wheel import PROVENANCE, DistInfo, NewMember, WheelReader, find_dist_info, parse_record, record_hash

if TYPE_CHECKING:
    from ..wheel import Source


@dataclass(frozen=True)
class MemberProblem:
    """A member the build does not explain: what it is, what it should be, what it is, and the fix."""

    member: str
    kind: str  # overlay | patched | upstream | unexplained | missing
    expected: str
    found: str
    fix: str

    def __str__(self) -> str:
        return f"{self.member} ({_KINDS[self.kind]}): should be {self.expected}, is {self.found}; {self.fix}"

    def data(self) -> dict[str, str]:
        return {"member": self.member, "kind": self.kind, "expected": self.expected, "found": self.found, "fix": self.fix}


_KINDS = {
    "overlay": "an overlay file",
    "patched": "a file the series or the relabelling rewrites",
    "upstream": "upstream's, unchanged by the series",
    "unexplained": "neither upstream's, nor the series', nor the overlay's",
    "missing": "missing from the wheel",
}


@dataclass
class Verdict:
    wheel: Path
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provenance: dict[str, Any] | None = None
    members: list[MemberProblem] = field(default_factory=list)
    checked_against: str | None = None  # "upstream" (the plan made again) or "provenance" (its digests)

    @property
    def ok(self) -> bool:
        return not self.problems

    def refuse(self, problem: MemberProblem) -> None:
        self.members.append(problem)
        self.problems.append(str(problem))


@dataclass(frozen=True)
class _Checkout:
    """The series, pin and overlay the provenance names, as this checkout holds them (they agree)."""

    upstream: Upstream
    series: Series
    overlay: tuple[OverlayFile, ...]


def verify_wheel(path: Path, patches_dir: Path, overlay_dir: Path, source: Source | None = None) -> Verdict:
    """The verdict on one wheel; a path that is no wheel file is a bad argument (exit 2), not an integrity failure.

    `source`: where the pinned upstream wheel may be found (its cache, a wheelhouse; never downloaded).
    """
    _check_argument(path)
    from . import cubins, jit_verify  # a flashinfer_jit_cache wheel has checks of its own, a cubin mirror its pin

    if jit_verify.is_cache_wheel(path):
        return jit_verify.verify_cache_wheel(path)
    if cubins.is_mirror(path):
        return cubins.verify_mirror(path, patches_dir)
    verdict = Verdict(path)
    _check_sums(path, verdict)
    try:
        with WheelReader(path) as reader:
            info = find_dist_info(path.name, reader.names, reader.read)
            rows, digests = _check_record(reader, info.dist_info, verdict)
            name = f"{info.dist_info}/{PROVENANCE}"
            if name not in reader.infos:
                verdict.problems.append(f"{name} is missing: not a wheel built by nvfp4-overlay")
                return verdict
            verdict.provenance = json.loads(reader.read(name))
    except (OverlayError, ValueError) as exc:  # unsafe or corrupt archives, malformed RECORD or JSON
        verdict.problems.append(str(exc))
        return verdict
    checkout = _check_provenance(verdict, info.name, info.version, patches_dir, overlay_dir)
    expected = _planned(verdict, checkout, source) if checkout is not None else None
    if expected is not None:
        verdict.checked_against = "upstream"
        _explain_by_plan(verdict, info, digests, *expected)
    else:
        verdict.checked_against = "provenance"
        _explain_by_provenance(verdict, info, rows, digests)
    return verdict


def _check_argument(path: Path) -> None:
    if not path.is_file():
        found = "a directory" if path.is_dir() else "missing"
        msg = f"{path}: {found}, not a wheel file; name a wheel that build wrote, e.g. dist/*.whl"
        raise ConfigError(msg, path=path, item="WHEEL", expected="a wheel file", found=found,
                          fix="name a wheel that build wrote")
    try:
        parse_wheel_filename(path.name)
    except (InvalidWheelFilename, InvalidVersion) as exc:
        msg = (f"{path}: not a wheel (a wheel is named NAME-VERSION-TAGS.whl: {exc}); name a wheel that build "
               f"wrote, e.g. dist/*.whl")
        raise ConfigError(msg, path=path, item="WHEEL", expected="a wheel file (NAME-VERSION-TAGS.whl)",
                          found="not a wheel", fix="name a wheel that build wrote, e.g. dist/*.whl") from exc


def _check_sums(path: Path, verdict: Verdict) -> None:
    """A wheel beside a SHA256SUMS (the build's list of what it wrote) must be listed there, with its digest."""
    sums = path.parent / SHA256SUMS
    listed = read_sums(sums).get(path.name)
    if listed is None and sums.is_file():
        verdict.problems.append(f"{path.name}: {sums} does not list it: the build did not write this file here; "
                                f"rebuild it and find out where this one came from")
    elif listed is not None and (found := sha256_file(path)) != listed:
        verdict.problems.append(f"{path.name}: sha256 {found}, {path.parent / SHA256SUMS} says {listed}: the file "
                                f"changed after the build wrote it; rebuild it and find out who changed it")


def _check_record(reader: WheelReader, dist_info: str,
                  verdict: Verdict) -> tuple[dict[str, tuple[str, str, str]], dict[str, str]]:
    """RECORD's rows, and each member's own digest (as RECORD writes it); every disagreement a problem."""
    record_name = f"{dist_info}/RECORD"
    if record_name not in reader.infos:
        verdict.problems.append(f"{record_name} is missing")
        return {}, {}
    parsed = parse_record(reader.read(record_name), f"{reader.path}: {record_name}")
    rows = {n: (r.path, r.hash, r.size) for n, r in parsed.items() if n != record_name}
    digests: dict[str, str] = {}
    for name in reader.names:
        if name == record_name:
            continue
        data = reader.read(name)
        digests[name] = record_hash(data)
        row = parsed.pop(name, None)
        if row is None:
            verdict.problems.append(f"{name} is in the archive but not in RECORD")
        elif row.hash != digests[name] or (row.size and int(row.size) != len(data)):
            verdict.problems.append(f"{name}: RECORD says {row.hash} ({row.size} bytes), the file is {digests[name]} ({len(data)} bytes)")
    parsed.pop(record_name, None)
    verdict.problems += [f"{name} is in RECORD but not in the archive" for name in sorted(parsed)]
    return rows, digests


def _check_provenance(verdict: Verdict, name: str, version: str, patches_dir: Path, overlay_dir: Path) -> _Checkout | None:
    """The provenance against the series it names; the checkout's series, when they agree."""
    doc = verdict.provenance or {}
    problems = len(verdict.problems)
    if doc.get("version") != version:
        verdict.problems.append(f"provenance names version {doc.get('version')!r}, the wheel is {version}")
    target = Target(name, _upstream_version(doc))
    try:
        upstream = load_upstream(patches_dir, target)
        series = read_series(upstream.directory)
        overlay = load_overlay(overlay_dir, target)
    except ConfigError as exc:
        verdict.notes.append(f"the series of {target} is not here to compare with ({exc})")
        return None
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
    return _Checkout(upstream, series, overlay) if len(verdict.problems) == problems else None


def _upstream_version(doc: dict[str, Any]) -> str:
    try:
        return str(parse_wheel_filename(doc.get("upstream", {}).get("filename", ""))[1])
    except (InvalidWheelFilename, InvalidVersion, AttributeError):
        return "0"


# --- every member explained ------------------------------------------------------------------------


def _rebuild_fix(info: DistInfo, doc: dict[str, Any]) -> str:
    return (f"rebuild the wheel ('nvfp4-overlay build {info.name}=={_upstream_version(doc)}') and find out who "
            f"changed this copy")


def _planned(verdict: Verdict, checkout: _Checkout,
             source: Source | None) -> tuple[dict[str, str], dict[str, str]] | None:
    """The RECORD the build would write from the cached upstream wheel ({member: hash}), and each member's kind."""
    from ..wheel import (
        fetch,  # the build machinery, only when a cache was named
        plan_wheel,
    )

    if source is None:
        return None
    doc = verdict.provenance or {}
    filename = doc.get("upstream", {}).get("filename")
    pin = next((w for w in checkout.upstream.wheels if w.filename == filename), None)
    fuzz = max((h.get("fuzz", 0) for p in doc.get("patches", []) for h in p.get("hunks", [])), default=0)
    if pin is None:
        return None
    try:
        with fetch.open_upstream(checkout.upstream, pin, source) as reader:
            plan = plan_wheel(checkout.upstream, pin, reader.infos, reader.read, checkout.series, checkout.overlay,
                              fuzz=fuzz)
    except NotInCache:
        return None
    except OverlayError as exc:  # a cached copy that is not the pin (removed), a series that no longer applies
        verdict.notes.append(f"{filename}: the wheel could not be planned again from it ({exc.message.splitlines()[0]})")
        return None
    (record,) = [e for e in plan.entries if isinstance(e, NewMember) and e.name.endswith(".dist-info/RECORD")]
    expected = {n: r.hash for n, r in parse_record(record.data, "the planned RECORD").items() if r.hash}
    kinds = {name: "overlay" for name in plan.overlay}
    kinds.update({name: "patched" for name in doc.get("patched", {})})
    kinds.update({h.path: "patched" for h in plan.hunks})
    verdict.notes.append(f"every member held to {filename} (cached, sha256 checked) with the series applied again")
    return expected, kinds


def _explain_by_plan(verdict: Verdict, info: DistInfo, digests: dict[str, str], expected: dict[str, str],
                     kinds: dict[str, str]) -> None:
    doc = verdict.provenance or {}
    fix = _rebuild_fix(info, doc)
    provenance = f"{info.dist_info}/{PROVENANCE}"  # checked field by field above (its tool_version may differ)
    for name, found in sorted(digests.items()):
        kind = kinds.get(name, "upstream")
        if name == provenance:
            continue
        if name not in expected:
            verdict.refuse(MemberProblem(name, "unexplained", f"absent: {doc.get('upstream', {}).get('filename')} "
                                         "has no such member and neither the series nor the overlay adds it",
                                         found, fix))
        elif expected[name] != found:
            verdict.refuse(MemberProblem(name, kind, expected[name], found, fix))
    for name in sorted(set(expected) - set(digests) - {provenance}):
        verdict.refuse(MemberProblem(name, "missing", expected[name], "absent", fix))


def _explain_by_provenance(verdict: Verdict, info: DistInfo, rows: dict[str, tuple[str, str, str]],
                           digests: dict[str, str]) -> None:
    doc = verdict.provenance or {}
    if not doc:
        return
    fix = _rebuild_fix(info, doc)
    up = doc.get("upstream", {})
    carried, patched, overlay = up.get("record"), doc.get("patched"), doc.get("overlay", {})
    if not isinstance(carried, dict) or not isinstance(patched, dict):
        verdict.problems.append(
            f"the provenance carries no digests of the patched files and upstream's RECORD rows (an older build), "
            f"and {up.get('filename')} is not in the cache to plan the wheel again: its members cannot be explained; "
            f"rebuild it, or put that file in the cache ('nvfp4-overlay build {info.name}=={_upstream_version(doc)}' "
            f"downloads it) and verify again")
        return
    verdict.notes.append(f"the members are held to the digests the provenance carries ({up.get('filename')} is not "
                         f"in the cache, or the series here differs); with it in the cache ('nvfp4-overlay build' "
                         f"puts it there) verify plans the wheel again and holds every member to upstream's RECORD")
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
    found_digest = record_rows_sha256([*rest, *((n, digests[n], "") for n in extra)])
    if (len(rest) + len(extra), found_digest) != (carried.get("rows"), carried.get("sha256")):
        verdict.refuse(MemberProblem(
            f"the {len(rest) + len(extra)} members carried over from upstream", "upstream",
            f"{carried.get('rows')} RECORD rows of sha256 {carried.get('sha256')}",
            f"{len(rest) + len(extra)} rows of sha256 {found_digest}",
            f"put {up.get('filename')} in the cache ('nvfp4-overlay build {info.name}=={_upstream_version(doc)}' "
            f"downloads it) and verify again to name the member; {fix}"))


def _as_record_hash(hexdigest: str) -> str:
    try:
        raw = bytes.fromhex(hexdigest)
    except (TypeError, ValueError):
        return f"sha256 {hexdigest!r}"
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
