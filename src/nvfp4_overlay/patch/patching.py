"""Applying a series' hunks to file contents in memory, with GNU patch's placement. Pure: no I/O.

patch/series.py reads and checks a series; this module applies it to the files a callable returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import PatchError
from .series import FilePatch, Hunk, Patch, Series, decode, encode, read_patch, read_series, split_lines

# Callers that apply a series also read it: the reading half is re-exported here for them.
__all__ = [
    "Applied", "FilePatch", "Hunk", "HunkResult", "Mismatch", "Patch", "Placement", "Series", "apply_hunks",
    "apply_series", "conflict_message", "decode", "encode", "first_mismatch", "locate", "read_patch",
    "read_series", "split_lines",
]


@dataclass(frozen=True)
class Placement:
    index: int  # 0-based line where the hunk's `before` was found
    offset: int  # lines from where its header says
    fuzz: int  # context lines ignored to find it


@dataclass(frozen=True)
class Mismatch:
    """Why a hunk does not apply: the first line at the expected place that differs from the patch."""

    line: int  # 1-based line in the file
    expected: str | None
    found: str | None


@dataclass(frozen=True)
class HunkResult:
    patch: str
    path: str
    number: int  # 1-based within its file
    header: str
    placement: Placement


@dataclass
class Applied:
    """Result of applying a series: new contents (None = deleted) of every path it touched."""

    files: dict[str, bytes | None]
    hunks: list[HunkResult] = field(default_factory=list)


# --- applying ------------------------------------------------------------------------------------
# GNU patch's placement (locate_hunk in GNU patch 2.7, the /usr/bin/patch the fuzz tests compare with),
# written here because no well-kept Python library applies hunks with offsets: try the header's line
# shifted by the offset of the file's previous hunk, then +1, -1, +2, -2 ...; a hunk with less
# leading than trailing context can only match at the start of the file, one with less trailing
# context only at its end; with fuzz F, up to F outer context lines are not compared.


def locate(
    lines: Sequence[str], hunk: Hunk, *, lower: int = 0, delta: int = 0, max_fuzz: int = 0, frozen: int | None = None
) -> Placement | None:
    """Where the hunk's `before` starts in `lines`, or None.

    `lower` is the lowest index it may start at. `frozen`, when given, is GNU patch's last_frozen_line
    instead: the lines before it are written, so the hunk starts at or after it; the trailing context
    of the previous hunk is not frozen, and this hunk's leading context may share those lines.
    """
    guess = hunk.expected_index + delta
    if not hunk.before:  # GNU patch: "null range matches always", where the header and the offset so far say
        return Placement(min(guess, len(lines)), delta, 0) if guess >= (lower if frozen is None else frozen) else None
    low = lower if frozen is None else frozen
    for fuzz in range(min(max_fuzz, max(hunk.leading_context, hunk.trailing_context)) + 1):
        prefix_fuzz, suffix_fuzz = _fuzz(hunk, fuzz)
        if prefix_fuzz < 0 and hunk.source_start <= 1 and frozen is not None and frozen > hunk.leading_context:
            continue  # anchored at the start of the file, which an earlier hunk already wrote
        upper = len(lines) - len(hunk.before) + max(suffix_fuzz, 0)
        first, last = max(prefix_fuzz, 0), len(hunk.before) - max(suffix_fuzz, 0)
        for index in _candidates(hunk, fuzz, guess, max(low, 0), upper):
            if all(lines[index + i] == hunk.before[i] for i in range(first, last)):
                return Placement(index, index - hunk.expected_index, fuzz)
    return None


def _fuzz(hunk: Hunk, fuzz: int) -> tuple[int, int]:
    """GNU patch's prefix_fuzz and suffix_fuzz: outer context lines not compared (negative: anchored)."""
    context = max(hunk.leading_context, hunk.trailing_context)
    return fuzz + hunk.leading_context - context, fuzz + hunk.trailing_context - context


def _candidates(hunk: Hunk, fuzz: int, guess: int, lower: int, upper: int) -> list[int]:
    # Less leading than trailing context means the diff saw the start of the file (when the header
    # says line 1); less trailing, its end. Fuzz beyond the difference lifts the anchor.
    prefix_fuzz, suffix_fuzz = _fuzz(hunk, fuzz)
    if prefix_fuzz < 0 and hunk.source_start <= 1:
        return [0] if lower <= 0 <= upper else []
    if suffix_fuzz < 0:
        return [upper] if lower <= upper else []
    found = []
    for step in range(max(guess - lower, upper - guess) + 1):
        for index in ((guess + step, guess - step) if step else (guess,)):
            if lower <= index <= upper:
                found.append(index)
    return found


def first_mismatch(lines: Sequence[str], hunk: Hunk, delta: int = 0) -> Mismatch:
    start = hunk.expected_index + delta
    for i, expected in enumerate(hunk.before):
        found = lines[start + i] if 0 <= start + i < len(lines) else None
        if found != expected:
            return Mismatch(start + i + 1, expected, found)
    return Mismatch(start + 1, None, None)


def apply_hunks(lines: list[str], hunks: Sequence[Hunk], max_fuzz: int = 0) -> tuple[list[str], list[Placement | Mismatch]]:
    """Apply hunks in order; the result list holds a Placement per hunk, or the first Mismatch.

    As GNU patch does, a hunk's context lines come from the file and its trailing context is not
    yet written (`frozen`), so the next hunk's leading context may share those lines.
    """
    out: list[str] = []
    frozen = 0  # lines[:frozen] are in `out` already
    delta = 0
    results: list[Placement | Mismatch] = []
    for hunk in hunks:
        placement = locate(lines, hunk, delta=delta, max_fuzz=max_fuzz, frozen=frozen)
        start = placement.index + hunk.leading_context if placement else 0
        if placement is None or start < frozen:  # GNU patch: "misordered hunks! output would be garbled"
            results.append(first_mismatch(lines, hunk, delta))
            return lines, results
        out += lines[frozen:start]
        added = list(hunk.after[hunk.leading_context: len(hunk.after) - hunk.trailing_context])
        frozen = placement.index + len(hunk.before) - hunk.trailing_context
        if added and not added[-1].endswith("\n") and frozen < len(lines):
            added[-1] += "\n"  # as GNU patch does: only the file's last line may lack its newline
        if added and out and not out[-1].endswith("\n") and not placement.fuzz:
            # Lines inserted after a last line that had no newline: GNU patch ends it, except where
            # fuzz dropped the context next to it (then it writes "ab\n" for "a" plus "b\n").
            out[-1] += "\n"
        out += added
        delta = placement.offset
        results.append(placement)
    out += lines[frozen:]
    return out, results


def apply_series(series: Series, read: Callable[[str], bytes | None], *, fuzz: int = 0) -> Applied:
    """Apply every patch in order to the files `read` returns (None: no such file). Pure: no I/O."""
    result = Applied({})

    def current(path: str) -> bytes | None:
        return result.files[path] if path in result.files else read(path)

    for patch in series.patches:
        for fp in patch.files:
            _apply_file(patch, fp, current, result, fuzz)
    return result


def _apply_file(patch: Patch, fp: FilePatch, current: Callable[[str], bytes | None], result: Applied, fuzz: int) -> None:
    where = f"{patch.path}"
    if fp.source is None:
        if current(fp.path) is not None:
            msg = f"{where}: creates {fp.path}, which upstream already has; the patch should modify it instead"
            raise PatchError(msg, path=patch.path, item=fp.path, expected="no such file upstream",
                             found="upstream has it", fix="regenerate the patch against upstream's file")
        original = ""
    else:
        data = current(fp.source)
        if data is None:
            msg = (
                f"{where}: {fp.source} is not in the wheel (moved or removed upstream)")
            raise PatchError(msg, path=patch.path, item=fp.source, expected="the file in the wheel",
                             found="no such member", fix=_DRIFT)
        original = decode(data)
    lines, results = apply_hunks(split_lines(original), fp.hunks, fuzz)
    for number, (hunk, res) in enumerate(zip(fp.hunks, results), start=1):
        if isinstance(res, Mismatch):
            raise PatchError(conflict_message(patch, fp, number, hunk, res), path=patch.path,
                             item=f"{fp.source} hunk {number} ({hunk.header}) line {res.line}",
                             expected=res.expected, found=res.found, fix=_DRIFT)
        result.hunks.append(HunkResult(patch.name, fp.path, number, hunk.header, res))
    if fp.source is not None and fp.source != fp.target:
        result.files[fp.source] = None
    if fp.target is None:
        if lines:
            msg = f"{where}: deletes {fp.source}, but upstream's file holds more than the patch removes"
            raise PatchError(msg, path=patch.path, item=fp.source, expected="only the lines the patch removes",
                             found=f"{len(lines)} more lines", fix="regenerate the patch against upstream's file")
        return
    if fp.source != fp.target and fp.source is not None and current(fp.target) is not None:
        msg = f"{where}: renames {fp.source} onto {fp.target}, which already exists"
        raise PatchError(msg, path=patch.path, item=fp.target, expected="no file of that name",
                         found="upstream has it", fix="regenerate the patch against upstream's files")
    result.files[fp.target] = encode("".join(lines))


_DRIFT = "run 'nvfp4-overlay drift' to see where upstream moved"


def conflict_message(patch: Patch, fp: FilePatch, number: int, hunk: Hunk, mismatch: Mismatch) -> str:
    if mismatch.found is None and mismatch.expected is not None:
        differs = f"line {mismatch.line} is past the end of the file (expected {mismatch.expected.rstrip()!r})"
    else:
        differs = (
            f"line {mismatch.line} differs: expected {(mismatch.expected or '').rstrip()!r}, "
            f"found {(mismatch.found or '').rstrip()!r}")
    return f"{patch.path}: hunk {number} ({hunk.header}) does not apply to {fp.source}: {differs}"
