"""Where one file's hunks land on a release, and how: each hunk's state, and the functions that place them.

A file the build applies whole is classified by the build's own patching.apply_hunks, so "exact" and
"offset" here mean exactly "the build applies it, there". Where it refuses, each hunk is placed on its
own with patching.locate (the same GNU-patch search): forward, reversed (upstream), then with fuzz,
which is only tried to say how far off a hunk is, never accepted. Where a hunk does not apply, the
file is merged three ways (patch/merge.py), into a file of the same name if upstream moved the code. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from . import conflicts
from .merge import MERGE3, three_way
from .patching import Mismatch, Placement, apply_hunks, first_mismatch, locate
from .series import FilePatch, Hunk

FUZZ_LIMIT = 2  # GNU patch's default; more than that ignores most of a 3-line context

Read = Callable[[str], "bytes | None"]


class State(str, Enum):
    """A hunk's or a patch's state on a release, from harmless to needing the most work."""

    EXACT = "exact"
    OFFSET = "offset"
    UPSTREAM = "upstream"
    PARTLY_UPSTREAM = "partly-upstream"
    OBSOLETE = "obsolete"
    MERGES = "merges"
    FUZZY = "fuzzy"
    CONFLICT = "conflict"
    MISSING_FILE = "missing-file"
    # every hunk applies, and a def the patch decorates is not what its name resolves to (audit/inert.py)
    INERT = "inert"

    @property
    def rank(self) -> int:
        return list(State).index(self)

    @property
    def clean(self) -> bool:
        """The build applies it as it is (offsets are allowed and reported)."""
        return self in (State.EXACT, State.OFFSET)

    @property
    def needs_person(self) -> bool:
        """Neither the build nor refresh carries it over unattended. Hunks found upstream by their text
        need a person to drop them; a patch whose own Applied-Upstream release is out (obsolete)
        does not: its header is the maintainer's word, and refresh drops it and says so."""
        return self not in (State.EXACT, State.OFFSET, State.MERGES, State.OBSOLETE)


BROKEN = (State.FUZZY, State.CONFLICT, State.MISSING_FILE)


@dataclass(frozen=True)
class HunkDrift:
    path: str
    number: int  # 1-based within its file
    header: str
    state: State
    offset: int | None = None  # lines from the header's position (exact, offset, fuzzy, upstream)
    fuzz: int = 0
    line: int | None = None  # 1-based line of the release's file where the hunk (or its post-image) starts
    mismatch: Mismatch | None = None  # fuzzy, conflict: the first line that differs
    moved_to: int | None = None  # conflict: nearest line where the expected line now is
    occurrences: int = 0  # conflict: how often the expected line occurs in the file
    note: str = ""
    how: str = ""  # merges: merge.MERGE3 or merge.BY_NAME
    moved_from: str | None = None  # merges: the file the hunk was written for, where upstream moved the code

    @property
    def placed(self) -> str:
        """How the hunk lands: exact, offset (the build's applier), merge3 or by-name (the three-way merge,
        or the functions' names), upstream (its post-image is there), fuzz (only with fuzz: refused), none."""
        if self.state is State.MERGES:
            return self.how or MERGE3
        return _PLACED.get(self.state, "none")

    def describe(self) -> str:
        """One sentence a person can act on."""
        where = f"{self.path} hunk {self.number} ({self.header})"
        if self.state is State.OFFSET:
            return f"{where} applies at offset {self.offset:+d} (line {self.line})"
        if self.state is State.UPSTREAM:
            return f"{where} is already upstream: its post-image is at line {self.line}"
        if self.state is State.MERGES:
            return f"{where} ports by three-way merge, {self.placed} ({self.note}); 'nvfp4-overlay refresh' writes it"
        if self.state is State.MISSING_FILE:
            return f"{where}: {self.path} is not in the wheel{'; ' + self.note if self.note else ''}"
        if self.state in (State.FUZZY, State.CONFLICT) and self.mismatch:
            how = (
                f"applies only with fuzz {self.fuzz} at line {self.line}"
                if self.state is State.FUZZY
                else "does not apply"
            )
            text = f"{where} {how}: {_differs(self.mismatch)}"
            if self.moved_to is not None:
                text += f"; that line is now at line {self.moved_to}" + (
                    f" ({self.occurrences} occurrences)" if self.occurrences > 1 else ""
                )
            elif self.state is State.CONFLICT and (self.mismatch.expected or "").strip():
                text += "; it is nowhere else with its neighbours from the hunk"
            return text + (f"; {self.note}" if self.note else "")
        return f"{where} {self.state.value}{'; ' + self.note if self.note else ''}"


_PLACED = {State.EXACT: "exact", State.OFFSET: "offset", State.UPSTREAM: "upstream", State.FUZZY: "fuzz"}


def _differs(m: Mismatch) -> str:
    if m.expected is None:
        return f"line {m.line}: the hunk is anchored to the file's start or end, which moved"
    if m.found is None:
        return f"line {m.line} is past the end of the file (expected {m.expected.rstrip()!r})"
    return f"line {m.line} differs: expected {m.expected.rstrip()!r}, found {m.found.rstrip()!r}"


def merge_file(
    fp: FilePatch, old: list[str], new: list[str], before: list[str], after: list[str] | None,
    found: list[HunkDrift],
) -> tuple[list[str] | None, list[HunkDrift]]:
    """Where hunks do not apply, the three-way merge: "merges", or the conflicts it found, hunk by hunk."""
    if all(h.state.clean or h.state is State.UPSTREAM for h in found):
        return after, found
    merged = three_way(old, new, before)
    if merged.lines is not None:
        note = "upstream changed only lines the patch leaves alone"
        return list(merged.lines), [
            replace(h, state=State.MERGES, note=note, how=merged.how) if h.state in (State.FUZZY, State.CONFLICT)
            else h
            for h in found
        ]
    out = list(found)
    for conflict in merged.conflicts:
        for i, (h, hunk) in enumerate(zip(out, fp.hunks, strict=True)):
            start, end = hunk.expected_index, hunk.expected_index + len(hunk.before)
            if h.state in (State.FUZZY, State.CONFLICT) and start <= conflict.base_line - 1 <= end:
                why = f"no three-way merge: {conflict.describe()}"
                out[i] = replace(h, note=f"{h.note}; {why}" if h.note else why)
                break
    return after, out


def moved_elsewhere(
    fp: FilePatch, old: list[str], new: list[str], found: list[HunkDrift], names: Sequence[str],
    lines_of: Callable[[str], list[str] | None],
) -> tuple[FilePatch, list[str], list[str], list[HunkDrift]] | None:
    """Where upstream moved a file's code to a file of the same name (0.6.7 moved fp4_quantization.py
    into quantization/, leaving a stub), the one such file the old change merges into cleanly."""
    if fp.source != fp.target or all(h.state.clean or h.state is State.UPSTREAM or h.state is State.MERGES
                                     for h in found):
        return None
    merges = []
    for other in conflicts.others(fp.path, names):
        theirs = lines_of(other)
        if theirs is None:
            continue
        merged = three_way(old, new, theirs)
        if merged.lines is not None and list(merged.lines) != theirs:
            merges.append((other, theirs, list(merged.lines), merged.how))
    if len(merges) != 1:
        return None
    other, theirs, after, how = merges[0]
    note = f"upstream moved the code to {other}; the three-way merge ports the change there"
    return (FilePatch(other, other, fp.hunks), theirs, after,
            [replace(h, path=other, state=State.MERGES, note=note, how=how, moved_from=fp.path) for h in found])


def drift_file(
    fp: FilePatch, lines: list[str] | None, names: Sequence[str], read: Read
) -> tuple[list[str] | None, list[HunkDrift]]:
    """(the file after the hunks that apply, each hunk's drift)."""
    if fp.source is None:
        return _drift_new_file(fp, lines)
    if lines is None:
        state = State.UPSTREAM if fp.target is None else State.MISSING_FILE
        note = "" if fp.target is None else conflicts.same_name(fp.source, names)
        return None, [
            HunkDrift(fp.path, i, h.header, state, note=note) for i, h in enumerate(fp.hunks, start=1)
        ]
    # Where the build applies the whole file, its own applier says how: the same placements, the same
    # post-image. Only a file with a hunk it refuses goes hunk by hunk, to say what each one needs.
    built, placements = apply_hunks(list(lines), fp.hunks)
    if len(placements) == len(fp.hunks) and all(isinstance(p, Placement) for p in placements):
        found = [
            HunkDrift(
                fp.path,
                number,
                hunk.header,
                State.OFFSET if p.offset else State.EXACT,
                p.offset,
                line=p.index + 1,
            )
            for number, (hunk, p) in enumerate(zip(fp.hunks, placements, strict=True), start=1)
            if isinstance(p, Placement)
        ]
        return (None if fp.target is None and not built else built), found
    out, found = _drift_hunks(fp, lines)
    for i, (drift, hunk) in enumerate(zip(found, fp.hunks, strict=True)):
        hint = (
            conflicts.elsewhere(hunk, lines, fp.path, names, read) if drift.state is State.CONFLICT else None
        )
        if hint:
            joint = ": " if hint.startswith("upstream rewrote") else "; "
            found[i] = replace(drift, note=f"{drift.note}{joint}{hint}" if drift.note else hint)
    return (None if fp.target is None and not out else out), found


def _drift_hunks(fp: FilePatch, lines: list[str]) -> tuple[list[str], list[HunkDrift]]:
    """Each hunk on its own: the ones that apply (or apply with fuzz) are applied, as the build would,
    with context lines taken from the release; upstream ones are left as they are; conflicts skipped."""
    out: list[str] = []
    cursor = delta = 0
    found = []
    for number, hunk in enumerate(fp.hunks, start=1):
        reach = max(cursor - hunk.leading_context, 0)  # contexts of neighbouring hunks may share lines
        drift, placement = _drift_hunk(fp.path, number, hunk, lines, reach, delta)
        found.append(drift)
        if placement is None:
            continue
        size = len(hunk.after) if drift.state is State.UPSTREAM else len(hunk.before)
        start = placement.index + hunk.leading_context
        end = placement.index + size - hunk.trailing_context
        if start < cursor:
            found[-1] = replace(drift, state=State.CONFLICT, note="it overlaps the hunk before it")
            continue
        if drift.state is State.UPSTREAM:
            out += lines[cursor:end]
            delta = placement.index - hunk.expected_index + len(hunk.after) - len(hunk.before)
        else:
            added = list(hunk.after[hunk.leading_context : len(hunk.after) - hunk.trailing_context])
            if added and not added[-1].endswith("\n") and end < len(lines):
                added[-1] += "\n"  # as the build does: only a file's last line may lack its newline
            out += lines[cursor:start] + added
            delta = placement.offset
        cursor = end
    out += lines[cursor:]
    return out, found


def _drift_hunk(
    path: str, number: int, hunk: Hunk, lines: list[str], cursor: int, delta: int
) -> tuple[HunkDrift, Placement | None]:
    here = locate(lines, hunk, lower=cursor, delta=delta)
    if here is not None:
        state = State.EXACT if here.offset == 0 else State.OFFSET
        return HunkDrift(path, number, hunk.header, state, here.offset, line=here.index + 1), here
    back = locate(lines, hunk.reversed(), lower=cursor, delta=delta)
    if back is not None:
        return HunkDrift(path, number, hunk.header, State.UPSTREAM, back.offset, line=back.index + 1), back
    fuzzy = locate(lines, hunk, lower=cursor, delta=delta, max_fuzz=FUZZ_LIMIT)
    if fuzzy is not None:
        mismatch = first_mismatch(lines, hunk, fuzzy.offset)
        return HunkDrift(
            path, number, hunk.header, State.FUZZY, fuzzy.offset, fuzzy.fuzz, fuzzy.index + 1, mismatch
        ), fuzzy
    mismatch = first_mismatch(lines, hunk, delta)
    moved_to, occurrences = conflicts.moved(lines, hunk, mismatch, delta)
    drift = HunkDrift(
        path,
        number,
        hunk.header,
        State.CONFLICT,
        mismatch=mismatch,
        moved_to=moved_to,
        occurrences=occurrences,
        note=conflicts.changed_line(lines, hunk),
    )
    return drift, None


def _drift_new_file(fp: FilePatch, lines: list[str] | None) -> tuple[list[str] | None, list[HunkDrift]]:
    post = [line for hunk in fp.hunks for line in hunk.after]
    if lines is None:
        return post, [
            HunkDrift(fp.path, i, h.header, State.EXACT, 0, line=1) for i, h in enumerate(fp.hunks, start=1)
        ]
    if lines == post:
        return lines, [
            HunkDrift(fp.path, i, h.header, State.UPSTREAM, 0, line=1)
            for i, h in enumerate(fp.hunks, start=1)
        ]
    differ = next(
        (i for i, (a, b) in enumerate(zip(post, lines, strict=False)) if a != b), min(len(post), len(lines))
    )
    mismatch = Mismatch(
        differ + 1,
        post[differ] if differ < len(post) else None,
        lines[differ] if differ < len(lines) else None,
    )
    note = "the patch creates this file, and upstream now ships a different one"
    return lines, [
        HunkDrift(fp.path, i, h.header, State.CONFLICT, mismatch=mismatch, note=note)
        for i, h in enumerate(fp.hunks, start=1)
    ]
