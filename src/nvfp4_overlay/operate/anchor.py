"""The anchor: a patched wheel as this checkout's build makes it from the pinned upstream wheel.

A wheel can rewrite everything it says about itself: its RECORD, its provenance's digests, the
SHA256SUMS line beside it. It cannot rewrite the sha256 that this checkout's upstream.toml pins,
nor this checkout's series and overlay. So verify and doctor hold a wheel's members (an install's
files) to the plan made again from those (`recipe.plan_wheel`; the build is reproducible, so member
for member, byte for byte). The upstream wheel is found as the build finds it (the wheelhouse, the
cache, then pip), its sha256 checked on the handle that is read. Where it cannot be had, or this
checkout does not build that wheel, the answer is Unverified (exit 4): never a pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..errors import ConfigError, FetchError, HashMismatchError, OverlayError, Unverified
from ..patch import Target, Upstream, UpstreamWheel, load_overlay, load_upstream, read_series
from ..wheel import PROVENANCE, NewMember, Source, WheelReader, fetch, parse_record, plan_wheel

SELF_DESCRIBED = ("tool_version",)  # what the provenance may say differently (the tool that wrote it)


@dataclass(frozen=True)
class Derived:
    """One wheel as the build writes it: each member's RECORD hash, which members it made, its provenance."""

    upstream: str  # the pinned upstream wheel's filename
    record: dict[str, str]  # member -> its hash as the build's RECORD writes it (RECORD itself aside)
    kinds: dict[str, str]  # member -> "overlay" or "patched"; every other member is upstream's, renamed at most
    provenance: dict[str, Any]  # NVFP4_OVERLAY.json as the build writes it

    def kind(self, member: str) -> str:
        return self.kinds.get(member, "upstream")


def derive(name: str, version: str, tags: Iterable[str], patches_dir: Path, overlay_dir: Path, source: Source,
           *, fuzz: int = 0) -> Derived:
    """The wheel `name` `version` (with those tags) as this checkout builds it; Unverified if it cannot."""
    upstream, pin = pinned(name, version, tags, patches_dir)
    what = f"{pin.filename} (pinned in {upstream.directory / 'upstream.toml'})"
    try:
        series, overlay = read_series(upstream.directory), load_overlay(overlay_dir, upstream.target)
        with _opened(upstream, pin, source) as reader:
            plan = plan_wheel(upstream, pin, reader.infos, reader.read, series, overlay, fuzz=fuzz)
    except Unverified:
        raise
    except OverlayError as exc:  # a series that no longer applies, an overlay this checkout cannot add
        msg = (f"cannot be verified here: this checkout cannot build {version} from {what}: "
               f"{exc.message.splitlines()[0]}")
        raise Unverified(msg, path=upstream.directory, item=version, expected=f"{version} built from {pin.filename}",
                         found=exc.message.splitlines()[0],
                         fix="fix the checkout, or verify with the checkout that built it") from exc
    made = {e.name: e.data for e in plan.entries if isinstance(e, NewMember)}
    record_name = next(n for n in made if n.endswith(".dist-info/RECORD"))
    record = {n: r.hash for n, r in parse_record(made[record_name], "the planned RECORD").items() if r.hash}
    document = json.loads(made[record_name.replace("/RECORD", f"/{PROVENANCE}")])
    kinds = {name: "patched" for name in document.get("patched", {})}
    kinds.update({h.path: "patched" for h in plan.hunks})
    kinds.update({name: "overlay" for name in plan.overlay})
    return Derived(pin.filename, record, kinds, document)


def pinned(name: str, version: str, tags: Iterable[str], patches_dir: Path) -> tuple[Upstream, UpstreamWheel]:
    """The series and the pinned upstream wheel this checkout builds `name` `version` from; Unverified where it
    carries none, builds another label, or pins no wheel of those tags."""
    try:
        target = Target(canonicalize_name(name), Version(version).public)
        upstream = load_upstream(patches_dir, target)
    except (ConfigError, InvalidVersion) as exc:
        msg = (f"cannot be verified here: {patches_dir} carries no series of {name} {version} to build it from "
               f"({str(exc).splitlines()[0]})")
        raise Unverified(msg, path=patches_dir, item=f"{name} {version}", expected="a series of that release",
                         found="none", fix="verify it with the checkout that built it") from exc
    if version != upstream.local_version:
        msg = (f"cannot be verified here: it is labelled {version}, and this checkout builds {target} as "
               f"{upstream.local_version} ({upstream.directory / 'upstream.toml'} and the overlay's revision)")
        raise Unverified(msg, path=upstream.directory / "upstream.toml", item=version,
                         expected=upstream.local_version, found=version,
                         fix=f"verify it with the checkout that built {version}, or rebuild it here "
                             f"('nvfp4-overlay build {target}')")
    wanted = set(tags)
    pin = next((w for w in upstream.wheels if {str(t) for t in _tags(w.filename)} == wanted), None)
    if pin is None:
        names = ", ".join(w.filename for w in upstream.wheels)
        msg = (f"cannot be verified here: {upstream.directory / 'upstream.toml'} pins no wheel of {target} tagged "
               f"{'.'.join(sorted(wanted)) or 'nothing'} (pinned: {names}); it is not a wheel this checkout builds")
        raise Unverified(msg, path=upstream.directory / "upstream.toml", item=str(target),
                         expected=f"a pin tagged {'.'.join(sorted(wanted))}", found=names,
                         fix="verify it with the checkout that built it")
    return upstream, pin


def _tags(filename: str) -> frozenset[Any]:
    try:
        return parse_wheel_filename(filename)[3]
    except (InvalidWheelFilename, InvalidVersion):
        return frozenset()


def _opened(upstream: Upstream, pin: UpstreamWheel, source: Source) -> WheelReader:
    """The pinned upstream wheel, open and its sha256 checked, found as the build finds it; Unverified where it
    cannot be had (--offline or a wheelhouse without it, pip without it, a copy that is not the pin)."""
    try:
        return fetch.open_upstream(upstream, pin, source)
    except (FetchError, HashMismatchError) as exc:
        first = exc.message.splitlines()[0].split(";")[0]
        if isinstance(exc, HashMismatchError):  # a cached copy is removed by then; a wheelhouse's is not
            how = "put the pinned file where that one was (a cached copy was removed: run it again to fetch it)"
        elif source.offline or source.wheelhouse:
            how = ("run it without --offline (pip downloads it into the cache, as build does), or name a "
                   "--wheelhouse that holds it")
        else:
            how = "check pip's index configuration, or name a --wheelhouse that holds it"
        msg = f"cannot be verified here: nothing else vouches for its members than the pinned {first}"
        raise Unverified(msg, path=source.wheels_dir, item=pin.filename, expected=f"{pin.filename} (sha256 {pin.sha256})",
                         found=first, fix=how) from exc


def fuzz(provenance: dict[str, Any] | None) -> int:
    """The fuzz the build was allowed, as its hunks record it: a parameter of the plan, not a digest."""
    patches = (provenance or {}).get("patches", [])
    hunks = [h for p in patches if isinstance(p, dict) for h in p.get("hunks", []) if isinstance(h, dict)]
    return max((int(h["fuzz"]) for h in hunks if isinstance(h.get("fuzz"), int) and 0 <= h["fuzz"] <= 3), default=0)


def differing_keys(found: dict[str, Any], derived: dict[str, Any]) -> list[str]:
    """The provenance's top-level keys that differ from what the build writes (the tool's version aside)."""
    keys = (set(found) | set(derived)) - set(SELF_DESCRIBED)
    return sorted(k for k in keys if found.get(k) != derived.get(k))
