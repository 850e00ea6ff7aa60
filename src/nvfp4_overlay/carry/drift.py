"""Drift: every hunk of every series placed on other upstream releases, and classified.

A series is drifted patch by patch, each seeing what the earlier ones made of a file; each file's
hunks are placed by patch/placement.py (the build's applier, each hunk on its own, the three-way merge).
A patch whose own Applied-Upstream release is out is obsolete, whatever its hunks say.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..audit import inert
from ..patch import (
    BROKEN,
    FilePatch,
    HunkDrift,
    Patch,
    Placement,
    Read,
    Series,
    State,
    apply_hunks,
    decode,
    drift_file,
    merge_file,
    moved_elsewhere,
    split_lines,
)

__all__ = ["BROKEN", "FileImage", "HunkDrift", "PatchDrift", "State", "applied_upstream_release", "drift_series",
           "inert_decorations"]


@dataclass(frozen=True)
class FileImage:
    """One file of one patch on the release: before and after the hunks that apply (None: absent)."""

    patch: FilePatch
    before: tuple[str, ...] | None
    after: tuple[str, ...] | None


@dataclass(frozen=True)
class PatchDrift:
    patch: Patch
    state: State
    hunks: tuple[HunkDrift, ...]
    applied_upstream: str | None = None  # the release the DEP-3 header names, when it parses
    images: tuple[FileImage, ...] = field(default=(), compare=False, repr=False)
    inert: tuple[str, ...] = ()  # State.INERT: each decorated def its module re-binds, as a sentence

    @property
    def name(self) -> str:
        return self.patch.name

    def reason(self) -> str:
        parts = [h.describe() for h in self.hunks if not h.state.clean]
        if self.state is State.OBSOLETE:
            parts.insert(
                0, f"Applied-Upstream: {self.patch.fields.get('Applied-Upstream', '')}: drop the patch"
            )
        if self.state is State.INERT:
            parts = list(self.inert)
        if self.state is State.OFFSET and not parts:
            parts = [h.describe() for h in self.hunks if h.state is State.OFFSET]
        return "; ".join(parts)


# --- one series on one release ---------------------------------------------------------------------



def drift_series(
    series: Series, read: Read, names: Sequence[str], dist: str, version: str, origin: Read | None = None
) -> list[PatchDrift]:
    """Classify every hunk of the series on a release whose files `read` returns (None: absent).

    Patches see what the earlier patches made of a file; hunks that do not apply are left out of it.
    `names` are every member of the release, to say where a missing file went. `origin` reads the
    files of the series' own release: where a hunk does not apply, the file is merged three ways
    (merge.three_way) and the hunk "merges" when no region conflicts. Pure: no I/O.
    """
    current: dict[str, list[str] | None] = {}
    base = _Origin(origin)

    def lines_of(path: str) -> list[str] | None:
        if path not in current:
            data = read(path)
            current[path] = None if data is None else split_lines(decode(data))
        return current[path]

    results = []
    for patch in series.patches:
        hunks: list[HunkDrift] = []
        images = []
        for fp in patch.files:
            before = lines_of(fp.source) if fp.source else lines_of(fp.path)
            old, new = base.images(fp)
            after, found = drift_file(fp, before, names, read)
            if old is not None and new is not None and before is not None and fp.target is not None:
                after, found = merge_file(fp, old, new, before, after, found)
            moved = moved_elsewhere(fp, old, new, found, names, lines_of) if old is not None and new is not None else None
            if moved is not None:  # the code now lives in a file of the same name elsewhere: port it there
                fp, before, after, found = moved
            hunks += found
            if fp.source and fp.source != fp.path:
                current[fp.source] = None
            current[fp.path] = after
            images.append(
                FileImage(
                    fp, None if before is None else tuple(before), None if after is None else tuple(after)
                )
            )
        applied_upstream = applied_upstream_release(patch, dist)
        obsolete = applied_upstream is not None and Version(version) >= applied_upstream
        state = State.OBSOLETE if obsolete else patch_state(hunks)
        inert = inert_decorations(images, version) if state in (State.EXACT, State.OFFSET, State.MERGES) else ()
        results.append(
            PatchDrift(
                patch, State.INERT if inert else state, tuple(hunks),
                str(applied_upstream) if applied_upstream else None, tuple(images), inert,
            )
        )
    return results


def inert_decorations(images: Sequence[FileImage], version: str) -> tuple[str, ...]:
    """The defs a patch decorates that their module re-binds on the release (audit/inert.py): the patch
    applies and does nothing there. A state of its own, State.INERT; needs a person."""
    found = [i for image in images if image.after is not None and image.patch.path.endswith(".py")
             for i in inert.rebound(image.patch.path, "".join(image.after))]
    return tuple(i.describe(version) for i in found)


class _Origin:
    """The series' own release, file by file, before and after each patch (the merge's base and ours)."""

    def __init__(self, read: Read | None) -> None:
        self.read = read
        self.current: dict[str, list[str] | None] = {}

    def images(self, fp: FilePatch) -> tuple[list[str] | None, list[str] | None]:
        if self.read is None or fp.source is None:
            return None, None
        if fp.source not in self.current:
            data = self.read(fp.source)
            self.current[fp.source] = None if data is None else split_lines(decode(data))
        old = self.current[fp.source]
        if old is None:
            return None, None
        new, placements = apply_hunks(list(old), fp.hunks)
        if not all(isinstance(p, Placement) and p.offset == 0 for p in placements) or len(placements) < len(fp.hunks):
            return None, None  # not exact on its own release: nothing to merge from
        self.current[fp.path] = new
        return old, new


def patch_state(hunks: Sequence[HunkDrift]) -> State:
    states = {h.state for h in hunks}
    broken = [s for s in states if s in BROKEN]
    if broken:
        return max(broken, key=lambda s: s.rank)
    if State.MERGES in states:
        return State.MERGES
    if State.UPSTREAM in states:
        return State.UPSTREAM if states == {State.UPSTREAM} else State.PARTLY_UPSTREAM
    return State.OFFSET if State.OFFSET in states else State.EXACT


_APPLIED = re.compile(
    r"^\s*(?:(?P<name>[A-Za-z][A-Za-z0-9._-]*?)(?:\s+|\s*[=@]+\s*|-)v?)?v?(?P<version>\d[0-9A-Za-z.+!-]*)"
)


def applied_upstream_release(patch: Patch, dist: str) -> Version | None:
    """The release named by `Applied-Upstream: [dist] VERSION[, ...]`, if it is this dist's."""
    text = patch.fields.get("Applied-Upstream", "")
    match = _APPLIED.match(text)
    if not match:
        return None  # "no", a URL, a commit: nothing to compare releases with
    name = match.group("name")
    # The project's own name counts as the distribution's: "flashinfer 0.7.1" for flashinfer-python.
    if name and canonicalize_name(name) not in (canonicalize_name(dist), canonicalize_name(dist).removesuffix("-python")):
        return None
    try:
        return Version(match.group("version").rstrip(".,;"))
    except InvalidVersion:
        return None


