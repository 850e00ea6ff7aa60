"""Why a hunk does not apply: where its lines went, in the same file or in a file of the same name."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .patching import Mismatch
from .series import Hunk, decode, split_lines

Read = Callable[[str], "bytes | None"]


def moved(lines: Sequence[str], hunk: Hunk, mismatch: Mismatch, delta: int) -> tuple[int | None, int]:
    """Where the expected line now is (1-based, nearest first) and how often: only where it still has
    one of its neighbours from the hunk, so that a `try:` elsewhere is not taken for it. A blank
    expected line is found through the next non-blank line of the hunk."""
    at = mismatch.line - 1 - (hunk.expected_index + delta)
    if mismatch.expected is None or not 0 <= at < len(hunk.before):
        return None, 0
    stand_in = next((i for i in range(at, len(hunk.before)) if hunk.before[i].strip()), None)
    if stand_in is None:
        return None, 0
    hits = [
        n - (stand_in - at) + 1
        for n, line in enumerate(lines)
        if line == hunk.before[stand_in] and _neighbour_matches(lines, n, hunk.before, stand_in)
    ]
    hits = [n for n in hits if n != mismatch.line]
    if not hits:
        return None, 0
    return min(hits, key=lambda n: (abs(n - mismatch.line), n)), len(hits)


def _neighbour_matches(lines: Sequence[str], n: int, before: Sequence[str], i: int) -> bool:
    if len(before) == 1:
        return True
    previous = i > 0 and n > 0 and lines[n - 1] == before[i - 1] and bool(before[i - 1].strip())
    following = (
        i + 1 < len(before)
        and n + 1 < len(lines)
        and lines[n + 1] == before[i + 1]
        and bool(before[i + 1].strip())
    )
    return previous or following


def changed_line(lines: Sequence[str], hunk: Hunk) -> str:
    """Where the first line the hunk removes or replaces is now: the line that matters most."""
    removed = hunk.before[hunk.leading_context : len(hunk.before) - hunk.trailing_context]
    if not removed:
        return ""
    first = removed[0]
    hits = [n + 1 for n, line in enumerate(lines) if line == first]
    text = first.strip()
    if not hits:
        return f"the line it changes, {text!r}, is nowhere in the file"
    where = ", ".join(map(str, hits[:3])) + (" ..." if len(hits) > 3 else "")
    return f"the line it changes, {text!r}, is at line {where}"


def same_name(path: str, names: Sequence[str]) -> str:
    """For a missing file: the files of the same name that the release has instead."""
    found = others(path, names)
    if not found:
        return "no file of that name is left in the wheel"
    return f"upstream moved it? a file of that name is at {', '.join(found[:3])}"


def others(path: str, names: Sequence[str]) -> list[str]:
    """Other members with the same file name (fp4_quantization.py moved to quantization/ in 0.6.7)."""
    base = _file_name(path)
    return sorted(n for n in names if n.endswith(base) and _file_name(n) == base and n != path)


def _file_name(member: str) -> str:
    """PurePosixPath(member).name without a path object: others() runs over every member of a wheel for
    each conflict (make drift built 10 million paths there, a third of its time)."""
    return member.rstrip("/").rpartition("/")[2]


def elsewhere(hunk: Hunk, lines: Sequence[str], path: str, names: Sequence[str], read: Read) -> str | None:
    """For a conflict: the same-named files that hold the line that is gone from this one (moved code).

    The line looked for is the first one the hunk removes, or for a pure addition its first context
    line. None when that line is still in the file (or there is none to look for).
    """
    removed = hunk.before[hunk.leading_context : len(hunk.before) - hunk.trailing_context]
    probe = removed[0] if removed else next((line for line in hunk.before if line.strip()), None)
    if probe is None or probe in lines:
        return None
    hits = []
    for other in others(path, names):
        data = read(other)
        found = split_lines(decode(data)) if data is not None else []
        if probe in found:
            hits.append(f"{other} line {found.index(probe) + 1}")
    if hits:
        return f"{probe.strip()!r} is in {', '.join(hits[:3])}: upstream moved the code"
    return "upstream rewrote this code" if removed else None
