"""Three-way port of one patched file: the old release's upstream and patched file, the new release's file.

A hunk whose context upstream rewrote no longer applies, though what the patch changes may be
untouched; merge3 (breezy's three-way merge, a maintained library) tells the two apart: where only
upstream changed a region, its lines win; where only the patch did, the patch's; where both changed
the same region, it is a conflict a person must resolve. Pure: no I/O.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import merge3


@dataclass(frozen=True)
class Conflict:
    """A region both the patch and upstream changed: its place and text in each of the three files."""

    base_line: int  # 1-based line of the old upstream file where the region starts
    base: tuple[str, ...]
    patched: tuple[str, ...]
    upstream: tuple[str, ...]

    def describe(self) -> str:
        last = self.base_line + max(len(self.base), 1) - 1
        where = f"line {self.base_line}" if last == self.base_line else f"lines {self.base_line}-{last}"
        now = repr(self.upstream[0].strip()) if self.upstream else "nothing (deleted)"
        return f"the patch and upstream both change {where} of the old release (upstream has {now} there)"


@dataclass(frozen=True)
class Merged:
    """The new release's file with the patch's changes, or the conflicts that stand in the way."""

    lines: tuple[str, ...] | None
    conflicts: tuple[Conflict, ...]


def three_way(base: Sequence[str], patched: Sequence[str], upstream: Sequence[str]) -> Merged:
    """Carry the change from `base` to `patched` over to `upstream` (all lists of lines with ends)."""
    out: list[str] = []
    found: list[Conflict] = []
    m = merge3.Merge3(list(base), list(patched), list(upstream))
    for region in m.merge_regions():
        kind = region[0]
        if kind == "unchanged":
            out += base[region[1] : region[2]]
        elif kind in ("a", "same"):
            out += patched[region[1] : region[2]]
        elif kind == "b":
            out += upstream[region[1] : region[2]]
        else:  # ("conflict", zstart, zend, astart, aend, bstart, bend)
            _, zs, ze, as_, ae, bs, be = cast("tuple[str, int, int, int, int, int, int]", region)
            beside = _insertion_beside(base[zs:ze], patched[as_:ae], upstream[bs:be])
            if beside is not None:
                out += beside
                continue
            found.append(Conflict(zs + 1, tuple(base[zs:ze]), tuple(patched[as_:ae]), tuple(upstream[bs:be])))
    if found:
        return Merged(None, tuple(found))
    return Merged(tuple(out), ())


def _insertion_beside(base: Sequence[str], patched: Sequence[str], upstream: Sequence[str]) -> list[str] | None:
    """The patch only added lines before (or after) a region upstream rewrote: both changes.

    merge3 calls any two changes that touch a conflict, so a decorator the patch puts above
    ``@flashinfer_api`` conflicts with upstream turning that line into ``@flashinfer_api(trace=...)``.
    No merge library resolves this case. The added lines belong to the region's lines they were
    written against: lines added before the region go before the last lines of upstream's version
    of it (the region ends at a line all three files share, such as ``def fp4_quantize(``, and
    upstream may have put a whole new function in front), lines added after it go after the first.
    A region upstream deleted stays a conflict: the additions would land beside whatever comes
    next. The behaviour checks then judge the result.
    """
    n = len(base)
    if not n or not upstream or len(patched) <= n:
        return None
    keep = min(n, len(upstream))
    if list(patched[-n:]) == list(base) and _alike(base[-keep:], upstream[len(upstream) - keep :]):
        return [*upstream[: len(upstream) - keep], *patched[:-n], *upstream[len(upstream) - keep :]]
    if list(patched[:n]) == list(base) and _alike(base[:keep], upstream[:keep]):
        return [*upstream[:keep], *patched[n:], *upstream[keep:]]
    return None


def _alike(ours: Sequence[str], theirs: Sequence[str]) -> bool:
    """Upstream's lines are a rewrite of the ones the additions sat beside, not other code: their
    longest common run covers most of the shorter ('@flashinfer_api' in '@flashinfer_api(trace=t)')."""
    a, b = "".join(ours).strip(), "".join(theirs).strip()
    if not a or not b:
        return a == b
    match = difflib.SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b))
    return match.size >= 0.8 * min(len(a), len(b))
