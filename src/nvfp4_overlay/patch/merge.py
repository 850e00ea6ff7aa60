"""Three-way port of one patched file, and the one rule for the lines a patch adds: by the function's name.

A hunk whose context upstream rewrote no longer applies, though what the patch changes may be
untouched; merge3 (breezy's three-way merge, a maintained library) tells the two apart: where only
upstream changed a region, its lines win; where only the patch did, the patch's; where both changed
the same region, it is a conflict a person must resolve.

merge3 aligns lines, not code: it can put a decorator the patch wrote for ``fp4_quantize`` above
``nvfp4_quantize`` when upstream removed the one and the two shared their parameter lines. So every
insertion (the lines a patch only adds) is held to one rule, whatever placed it: it sits above the
function or class of the same qualified name as in the old release (``Class.method``), above the
same decorator, or it is a conflict that names both. Where merge3 finds conflicts (or breaks that
rule) and the patch only adds lines, the rule places them itself: above the decorator of that name,
or the ``def``, of upstream's function of that name. No merge library places lines by the code they
belong to; the behaviour checks then judge the result. Pure: no I/O.
"""

from __future__ import annotations

import ast
import difflib
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import merge3

MERGE3 = "merge3"  # Merged.how: merge3 placed every line
BY_NAME = "by-name"  # the insertions were placed above the functions of their name


@dataclass(frozen=True)
class Conflict:
    """A region both the patch and upstream changed, or an insertion with no place: where, and why."""

    base_line: int  # 1-based line of the old upstream file where the region (or insertion) starts
    base: tuple[str, ...]
    patched: tuple[str, ...]
    upstream: tuple[str, ...]
    why: str = ""  # the sentence, where the three texts alone do not say it

    def describe(self) -> str:
        if self.why:
            return self.why
        last = self.base_line + max(len(self.base), 1) - 1
        where = f"line {self.base_line}" if last == self.base_line else f"lines {self.base_line}-{last}"
        now = repr(self.upstream[0].strip()) if self.upstream else "nothing (deleted)"
        return f"the patch and upstream both change {where} of the old release (upstream has {now} there)"


@dataclass(frozen=True)
class Merged:
    """The new release's file with the patch's changes, or the conflicts that stand in the way."""

    lines: tuple[str, ...] | None
    conflicts: tuple[Conflict, ...]
    how: str = MERGE3  # MERGE3 or BY_NAME


@dataclass(frozen=True)
class _Insertion:
    at: int  # 0-based line of the old file the lines go above
    start: int  # 0-based line of the patched file where they are
    lines: tuple[str, ...]


def three_way(base: Sequence[str], patched: Sequence[str], upstream: Sequence[str]) -> Merged:
    """Carry the change from `base` to `patched` over to `upstream` (all lists of lines with ends)."""
    out, landed, found = _merge3(base, patched, upstream)
    insertions, only_adds = _insertions(base, patched)
    wrong = {} if found else _misplaced(base, insertions, out, landed)
    if not found and not wrong:
        return Merged(tuple(out), ())
    if not only_adds:
        return Merged(None, tuple(found) or tuple(_conflict(base, ins, why) for ins, why in wrong.items()))
    placed = _by_name(base, insertions, upstream, {ins.at: why for ins, why in wrong.items()})
    if isinstance(placed, tuple):
        return Merged(None, placed)
    return Merged(tuple(placed), (), BY_NAME)


def _merge3(
    base: Sequence[str], patched: Sequence[str], upstream: Sequence[str]
) -> tuple[list[str], dict[int, int], list[Conflict]]:
    """merge3's result, where each line of the patched file it took landed, and its conflicts."""
    out: list[str] = []
    landed: dict[int, int] = {}  # line of patched -> line of out
    found: list[Conflict] = []
    for region in merge3.Merge3(list(base), list(patched), list(upstream)).merge_regions():
        kind = region[0]
        if kind == "unchanged":
            out += base[region[1] : region[2]]
        elif kind in ("a", "same"):
            landed.update((j, len(out) + j - region[1]) for j in range(region[1], region[2]))
            out += patched[region[1] : region[2]]
        elif kind == "b":
            out += upstream[region[1] : region[2]]
        else:  # ("conflict", zstart, zend, astart, aend, bstart, bend)
            _, zs, ze, as_, ae, bs, be = cast("tuple[str, int, int, int, int, int, int]", region)
            found.append(Conflict(zs + 1, tuple(base[zs:ze]), tuple(patched[as_:ae]), tuple(upstream[bs:be])))
    return out, landed, found


def _insertions(base: Sequence[str], patched: Sequence[str]) -> tuple[list[_Insertion], bool]:
    """The runs of lines the patch only adds, and whether that is all it does."""
    ops = difflib.SequenceMatcher(None, base, patched, autojunk=False).get_opcodes()
    found = [_Insertion(i1, j1, tuple(patched[j1:j2])) for tag, i1, _, j1, j2 in ops if tag == "insert"]
    return found, all(tag in ("equal", "insert") for tag, *_ in ops)


# --- where code is: functions by qualified name --------------------------------------------------------


@dataclass(frozen=True)
class _Def:
    """A function or class: its qualified name, its header (each decorator's first line and name, then
    the def line as "def"), 0-based."""

    name: str
    header: tuple[tuple[int, str], ...]


def _is_overload(d: _Def) -> bool:
    """A typing.overload stub: no body of its own, the name's definition is the def after it."""
    return any(name in ("overload", "typing.overload") for _, name in d.header)


def _defs(lines: Sequence[str]) -> tuple[_Def, ...] | None:
    return _parsed("".join(lines))


@functools.lru_cache(maxsize=128)  # the old release's and upstream's files recur across a drift matrix
def _parsed(text: str) -> tuple[_Def, ...] | None:
    """Every def and class of a Python file, or None when it does not parse (not Python, or newer)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    found: list[_Def] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                decorators = tuple((d.lineno - 1, _decorator(d)) for d in child.decorator_list)
                found.append(_Def(prefix + child.name, (*decorators, (child.lineno - 1, "def"))))
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)  # a def under `if` or `try` keeps its scope's name

    walk(tree, "")
    return tuple(found)


def _decorator(node: ast.expr) -> str:
    """A decorator by what it calls: `@flashinfer_api(trace=t)` and `@flashinfer_api` are one."""
    target = node.func if isinstance(node, ast.Call) else node
    return ast.unparse(target)


@dataclass(frozen=True)
class _Place:
    """What the lines at a place sit above: a decorator (or "def") of a function, or no function."""

    owner: _Def | None
    element: int = 0  # index into owner.header
    first: int = 0  # 0-based line of that element

    def describe(self) -> str:
        if self.owner is None:
            return "no function"
        name = self.owner.header[self.element][1]
        return f"{self.owner.name}" + ("" if name == "def" else f" (at @{name})")

    def same(self, other: _Place) -> bool:
        if self.owner is None or other.owner is None:
            return self.owner is other.owner
        return (self.owner.name, self.owner.header[self.element][1]) == (
            other.owner.name, other.owner.header[other.element][1])


def _place(defs: Sequence[_Def], lines: Sequence[str], at: int) -> _Place:
    """What lines put above lines[at] sit above: past blank and comment lines, a function's header."""
    k = at
    while k < len(lines) and (not lines[k].strip() or lines[k].lstrip().startswith("#")):
        k += 1
    for d in defs:
        if d.header[0][0] <= k <= d.header[-1][0]:
            element = next(i for i, (line, _) in enumerate(d.header) if line >= k)
            return _Place(d, element, d.header[element][0])
    return _Place(None)


# --- the rule ----------------------------------------------------------------------------------------


def _misplaced(base: Sequence[str], insertions: Sequence[_Insertion], out: Sequence[str],
               landed: dict[int, int]) -> dict[_Insertion, str]:
    """The insertions merge3 put above another function than the one they were written for, and where."""
    base_defs = _defs(base)
    if base_defs is None or not insertions:
        return {}  # not Python: there are no functions to hold the lines to
    out_defs = _defs(out)
    wrong = {}
    for ins in insertions:
        last = landed.get(ins.start + len(ins.lines) - 1)
        if last is None:
            continue  # upstream has these lines itself
        now = _place(out_defs, out, last + 1) if out_defs is not None else None
        if now is None or not _place(base_defs, base, ins.at).same(now):
            wrong[ins] = "merge3 would place the insertion " + ("where the merged file does not parse" if now is None
                                                else f"above {now.describe()}")
    return wrong


def _by_name(base: Sequence[str], insertions: Sequence[_Insertion], upstream: Sequence[str],
             merge3_says: dict[int, str]) -> list[str] | tuple[Conflict, ...]:
    """Each insertion above upstream's version of what it sat above; or every reason it cannot be."""
    base_defs, up_defs = _defs(base), _defs(upstream)
    places: dict[int, tuple[str, ...]] = {}
    problems: list[Conflict] = []
    for ins in insertions:
        was = _place(base_defs or (), base, ins.at)
        at, why = _new_place(ins, was, base, upstream, up_defs)
        if at is not None and at in places:
            at, why = None, "another insertion goes to the same place in upstream's file"
        if at is None:
            landing = merge3_says.get(ins.at) or _landing(base, upstream, up_defs, ins.at, was)
            problems.append(_conflict(base, ins, "; ".join(filter(None, [why, landing]))))
            continue
        places[at] = ins.lines
    if problems:
        return tuple(problems)
    out = list(upstream)
    for at in sorted(places, reverse=True):
        out[at:at] = places[at]
    return out


def _new_place(ins: _Insertion, was: _Place, base: Sequence[str], upstream: Sequence[str],
               up_defs: tuple[_Def, ...] | None) -> tuple[int | None, str]:
    """The line of upstream's file the insertion goes above, or None and why."""
    if was.owner is None:
        return None, "they sit above no function, so only a three-way merge can place them"
    if up_defs is None:
        return None, "upstream's file does not parse as Python here, so no function can be found in it"
    # typing.overload stubs (single_decode_with_kv_cache's return_lse overloads) are no definition
    same = [d for d in up_defs if d.name == was.owner.name and not _is_overload(d)]
    if not same:
        return None, f"upstream's file has no {was.owner.name}"
    if len(same) > 1:
        return None, f"upstream's file defines {was.owner.name} {len(same)} times"
    element = was.owner.header[was.element][1]
    hits = [line for line, name in same[0].header if name == element]
    if len(hits) != 1:
        what = "def" if element == "def" else f"@{element}"
        return None, f"upstream's {was.owner.name} has {len(hits) or 'no'} {what} to put them above"
    at = hits[0]
    gap = list(base[ins.at : was.first])  # blank or comment lines between the insertion and its line
    if gap and list(upstream[at - len(gap) : at]) == gap:
        at -= len(gap)
    return at, ""


def _landing(base: Sequence[str], upstream: Sequence[str], up_defs: tuple[_Def, ...] | None, at: int,
             was: _Place) -> str:
    """Another function upstream has where the old line `at` was (by the lines around it), named."""
    if up_defs is None:
        return ""
    for tag, i1, i2, j1, _ in difflib.SequenceMatcher(None, base, upstream, autojunk=False).get_opcodes():
        if i1 <= at < i2 or i1 == i2 == at:
            now = _place(up_defs, upstream, j1 + (at - i1 if tag == "equal" else 0))
            if now.owner is not None and (was.owner is None or now.owner.name != was.owner.name):
                return f"at that place upstream has {now.describe()}"
            return ""
    return ""


def _conflict(base: Sequence[str], ins: _Insertion, why: str) -> Conflict:
    was = _place(_defs(base) or (), base, ins.at)
    what = "the line" if len(ins.lines) == 1 else f"the {len(ins.lines)} lines"
    where = f"above {was.describe()}" if was.owner is not None else f"at line {ins.at + 1}"
    return Conflict(ins.at + 1, (), ins.lines, (), f"{what} the patch adds {where}: {why}")
