"""Three-way port of one patched file: the old release's upstream and patched file, the new release's file.

A hunk whose context upstream rewrote no longer applies, though what the patch changes may be
untouched; merge3 (breezy's three-way merge, a maintained library) tells the two apart: where only
upstream changed a region, its lines win; where only the patch did, the patch's; where both changed
the same region, it is a conflict a person must resolve. Pure: no I/O.
"""

from __future__ import annotations

import difflib
from collections import Counter
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
        anchored = _insertions_anchored(base, patched, upstream)
        if anchored is not None:
            return Merged(tuple(anchored), ())
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


ANCHOR_REACH = 3  # lines between an addition and the line that places it: a decorator or two
ANCHOR_WINDOW = 12  # how far above its anchor upstream's version of that line may be (a longer signature)


def _insertions_anchored(base: Sequence[str], patched: Sequence[str], upstream: Sequence[str]) -> list[str] | None:
    """A patch that only adds lines, where merge3 found conflicts: each addition where the line it
    was written above now is, anywhere in upstream's file.

    merge3 aligns the files by their common runs, so when upstream rewrote or reordered the code
    around a routed function (0.6.16 gave ``nvfp4_quantize`` a cute-dsl branch and moved functions),
    or the file is another file now (0.6.7 moved ``fp4_quantization.py`` into ``quantization/``),
    the patch's two lines above a ``def`` fall inside a long conflicting region. Each addition is
    placed by an anchor: the first non-blank line after it, within ANCHOR_REACH lines, that occurs
    once in the old file and once in upstream's (``def nvfp4_quantize(``), or failing that the one
    upstream line alike it (``def mxfp4_quantize(a):`` became ``def mxfp4_quantize(``). The addition goes above
    upstream's version of the line it sat on (``@flashinfer_api``, perhaps rewritten into
    ``@flashinfer_api(trace=...)``): the nearest line alike it within ANCHOR_WINDOW lines above the
    anchor and no blank line between (a signature may have grown in between). A patch
    that changes or deletes any line, an addition with no anchor, or two additions at one place
    stay conflicts. No merge library places lines by anchor; the behaviour checks judge the result.
    """
    ops = difflib.SequenceMatcher(None, base, patched, autojunk=False).get_opcodes()
    if any(tag not in ("equal", "insert") for tag, *_ in ops):
        return None
    in_base = Counter(base)
    in_upstream = Counter(upstream)
    where = {line: i for i, line in enumerate(upstream) if in_upstream[line] == 1}
    places: dict[int, list[str]] = {}
    for tag, i1, _, j1, j2 in ops:
        if tag != "insert":
            continue
        reach = [k for k in range(i1, min(i1 + ANCHOR_REACH + 1, len(base))) if base[k].strip() and in_base[base[k]] == 1]
        anchor = next((k for k in reach if base[k] in where), None)
        if anchor is not None:
            found = where[base[anchor]]
        else:  # upstream rewrote the line too (`def mxfp4_quantize(a):` grew parameters): the one line alike it
            anchor, found = next(((k, p) for k in reach if (p := _only_alike(base[k], upstream)) is not None),
                                 (None, -1))
            if anchor is None:
                return None
        # above upstream's version of the line the addition sat on, the nearest one up from the anchor
        at = found if anchor == i1 else _above(base[i1], upstream, found)
        if at is None or at in places:
            return None
        places[at] = list(patched[j1:j2])
    if not places:
        return None
    out = list(upstream)
    for at in sorted(places, reverse=True):
        out[at:at] = places[at]
    return out


def _above(line: str, lines: Sequence[str], anchor: int) -> int | None:
    """The nearest line alike `line` above lines[anchor], in the same block (no blank line between)."""
    for p in range(anchor - 1, max(anchor - 1 - ANCHOR_WINDOW, -1), -1):
        if not lines[p].strip():
            return None
        if _alike([line], lines[p : p + 1]):
            return p
    return None


def _only_alike(line: str, lines: Sequence[str]) -> int | None:
    """The index of the one line of `lines` alike `line` (same first word), or None (none, or several)."""
    word = line.split(maxsplit=1)[0]
    hits = [i for i, other in enumerate(lines) if other.split(maxsplit=1)[:1] == [word] and _alike([line], [other])]
    return hits[0] if len(hits) == 1 else None


def _alike(ours: Sequence[str], theirs: Sequence[str]) -> bool:
    """Upstream's lines are a rewrite of the ones the additions sat beside, not other code: their
    longest common run covers most of the shorter ('@flashinfer_api' in '@flashinfer_api(trace=t)')."""
    a, b = "".join(ours).strip(), "".join(theirs).strip()
    if not a or not b:
        return a == b
    match = difflib.SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b))
    return match.size >= 0.8 * min(len(a), len(b))
