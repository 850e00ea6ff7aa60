"""Patch series: reading them (unidiff, DEP-3) and applying their hunks to file contents in memory."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path, PurePosixPath

from unidiff.errors import UnidiffParseError
from unidiff.patch import Hunk as UnidiffHunk
from unidiff.patch import PatchedFile, PatchSet

from .errors import ConfigError, PatchError

# DEP-3 fields the provenance keeps; git format-patch's Subject stands in for Description.
DEP3_FIELDS = ("Description", "Subject", "Origin", "Bug", "Forwarded", "Author", "Applied-Upstream", "Last-Update")
_FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):[ \t]?(.*)$")
_DIFF_START = re.compile(r"^(diff --git |--- |Index: )")
_DEP3_NAMES = {name.lower(): name for name in DEP3_FIELDS} | {"from": "Author"}
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_PATCH_GLOBS = ("*.patch", "*.diff")
_DEV_NULL = "/dev/null"


@dataclass(frozen=True)
class Hunk:
    """One hunk, as lines with their endings ("\\ No newline at end of file" already folded in)."""

    header: str  # "@@ -a,b +c,d @@", the way a person finds it in the patch
    source_start: int
    source_length: int
    target_start: int
    before: tuple[str, ...]  # context and removed lines: what the file must hold
    after: tuple[str, ...]  # context and added lines: what it holds afterwards
    leading_context: int
    trailing_context: int

    def reversed(self) -> Hunk:
        """The hunk that undoes this one: it locates where the post-image already is."""
        return Hunk(
            self.header, self.target_start, len(self.after), self.source_start,
            self.after, self.before, self.leading_context, self.trailing_context,
        )

    @property
    def expected_index(self) -> int:
        """0-based line where `before` starts, by the header (a pure insertion goes after source_start)."""
        return self.source_start if self.source_length == 0 else self.source_start - 1


@dataclass(frozen=True)
class FilePatch:
    """The hunks for one file; source None adds the file, target None deletes it."""

    source: str | None
    target: str | None
    hunks: tuple[Hunk, ...]

    @property
    def path(self) -> str:
        return self.target or self.source or ""


@dataclass(frozen=True)
class Patch:
    name: str
    path: Path
    sha256: str
    fields: Mapping[str, str]
    files: tuple[FilePatch, ...]


@dataclass(frozen=True)
class Series:
    directory: Path
    patches: tuple[Patch, ...]
    unlisted: tuple[str, ...] = ()  # *.patch files in the directory that the series does not name


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


def split_lines(text: str) -> list[str]:
    """Lines with their endings; only "\\n" ends a line (str.splitlines would also split at \\f, \\x1c)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


# --- reading -------------------------------------------------------------------------------------


def read_series(directory: Path) -> Series:
    """Read `series` and every patch it names; every problem in the series is reported at once."""
    series_file = directory / "series"
    if not series_file.exists():
        unlisted = _patch_files(directory)
        if unlisted:
            msg = f"{series_file}: not found, but {directory} holds {', '.join(unlisted)}; list them in a series file"
            raise ConfigError(msg)
        return Series(directory, ())
    names = []
    problems: list[str] = []
    for number, line in enumerate(decode(series_file.read_bytes()).splitlines(), start=1):
        entry = line.split("#", 1)[0].split()
        if entry:
            names.append(entry[0])  # quilt allows "-p1" after the name; -p1 is all we take
            if entry[1:] not in ([], ["-p1"]):
                problems.append(f"line {number}: {' '.join(entry[1:])!r} after {entry[0]}: only -p1 patches are taken")
    patches: list[Patch] = []
    for name in names:
        path = directory / name
        if "/" in name or "\\" in name or name.startswith("."):
            problems.append(f"{name}: patch names are plain file names; move the patch into {directory} and list its name")
        elif names.count(name) > 1:
            problems.append(f"{name}: listed more than once")
        elif not path.is_file():
            problems.append(f"{name}: listed in the series but {path} does not exist")
        else:
            try:
                patches.append(read_patch(path))
            except ConfigError as exc:
                problems.append(str(exc))
    if problems:
        msg = f"{series_file}: " + "\n  ".join(["the series cannot be read:", *sorted(set(problems))])
        raise ConfigError(msg)
    unlisted = tuple(n for n in _patch_files(directory) if n not in names)
    return Series(directory, tuple(patches), unlisted)


def _patch_files(directory: Path) -> tuple[str, ...]:
    return tuple(sorted({p.name for pattern in _PATCH_GLOBS for p in directory.glob(pattern)}))


def read_patch(path: Path) -> Patch:
    data = path.read_bytes()
    text = decode(data)
    lines = split_lines(text)
    _check_hunk_lines(path, lines)
    try:
        patchset = PatchSet(lines)
    except (UnidiffParseError, ValueError, IndexError, AttributeError) as exc:
        msg = f"{path}: not a unified diff that parses ({exc}); regenerate it with 'diff -u' or 'git diff'"
        raise ConfigError(msg) from exc
    files = tuple(_file_patch(path, pf) for pf in patchset)
    if not files:
        msg = f"{path}: holds no diff; remove it from the series or regenerate it"
        raise ConfigError(msg)
    return Patch(path.name, path, hashlib.sha256(data).hexdigest(), parse_dep3(lines), files)


def _check_hunk_lines(path: Path, lines: Sequence[str]) -> None:
    """Refuse what unidiff passes over in silence: an '@@' line that is not a hunk header (it skips
    the hunk), and body lines beyond the counts a header gives (it drops them); GNU patch refuses both."""
    problems: list[str] = []
    old = new = 0
    header = ""
    ended = False  # the line before completed a hunk
    for number, line in enumerate(lines, start=1):
        kind = line[:1] if line not in ("\n", "\r\n") else " "  # an empty line is empty context
        if old > 0 or new > 0:
            old -= kind in " -"
            new -= kind in " +"
            if kind not in " -+\\" or old < 0 or new < 0:
                problems.append(f"line {number}: hunk {header} holds other lines than its header counts")
                old = new = 0
            ended = old == 0 and new == 0
            continue
        match = _HUNK_HEADER.match(line)
        if match:
            header = match.group(0)
            old = 1 if match.group(2) is None else int(match.group(2))
            new = 1 if match.group(4) is None else int(match.group(4))
        elif line.startswith("@@"):
            problems.append(f"line {number}: malformed hunk header {line.rstrip()!r}")
        elif ended and kind in " -+" and not line.startswith("--- ") and line.rstrip("\r\n") not in ("--", "-- ", "---"):
            problems.append(f"line {number}: hunk {header} holds more lines than its header counts")
        ended = ended and kind == "\\"
    if problems:
        msg = f"{path}: " + "\n  ".join(["malformed unified diff; regenerate it with 'diff -u' or 'git diff':", *problems[:20]])
        raise ConfigError(msg)


def parse_dep3(lines: Sequence[str]) -> dict[str, str]:
    """DEP-3 fields of the header (the text before the first diff); continuation lines are folded."""
    fields: dict[str, str] = {}
    current: str | None = None
    for line in lines:
        text = line.rstrip("\r\n")
        if _DIFF_START.match(line) or text == "---":
            break
        match = _FIELD.match(text)
        if match:
            key = _DEP3_NAMES.get(match.group(1).lower(), match.group(1))
            current = key if key not in fields else None  # a repeated field: the first one wins
            if current:
                fields[key] = match.group(2).strip()
        elif text[:1] in (" ", "\t") and current and text.strip():
            fields[current] += "\n" + text.strip()
        else:
            current = None
    if "Subject" in fields:  # git format-patch: "[PATCH 2/3] summary"
        fields["Subject"] = re.sub(r"^\[PATCH[^\]]*\]\s*", "", fields["Subject"])
    return {k: v for k, v in fields.items() if k in DEP3_FIELDS}


def _file_patch(path: Path, pf: PatchedFile) -> FilePatch:
    where = f"{path}: {pf.path}"
    if pf.is_binary_file:
        msg = f"{where}: binary diffs are refused; ship the file in overlay/ instead"
        raise ConfigError(msg)
    # Only /dev/null adds or deletes a file (git's "new file mode" sets it too): unidiff also calls a
    # lone "@@ -0,0" hunk an added file, but that is an insertion into an empty file, as GNU patch reads it.
    source = None if pf.source_file == _DEV_NULL else _strip(pf.source_file, where)
    target = None if pf.target_file == _DEV_NULL else _strip(pf.target_file, where)
    hunks = tuple(_hunk(where, i, h) for i, h in enumerate(pf, start=1))
    if not hunks and source is not None and source == target:
        msg = f"{where}: changes no line (a mode change, or a hunk that did not parse); regenerate the patch"
        raise ConfigError(msg)
    for number, (first, second) in enumerate(pairwise(hunks), start=2):
        if second.expected_index < first.expected_index + len(first.before):
            msg = f"{where}: hunk {number} ({second.header}) starts before hunk {number - 1} ends; regenerate the patch"
            raise ConfigError(msg)
    return FilePatch(source, target, hunks)


def _strip(name: str, where: str) -> str:
    """-p1: drop the a/ or b/ prefix; refuse anything that leaves the wheel root or edits its RECORD."""
    name = name.split("\t", 1)[0]
    parts = PurePosixPath(name).parts
    rel = PurePosixPath(*parts[1:]) if len(parts) > 1 else PurePosixPath(name)
    text = str(rel)
    bad = (
        name.startswith("/")  # /dev/null too: unidiff says added or removed whenever it is /dev/null
        or "\\" in name or "\x00" in name or ".." in rel.parts or ":" in (rel.parts[0] if rel.parts else "")
        or any(p.endswith(".dist-info") for p in rel.parts)
    )
    if bad or not rel.parts:
        msg = (
            f"{where}: target {name!r} is outside the wheel's package files (absolute, '..', a backslash, "
            f"or the .dist-info, which the build writes itself); regenerate it with paths 'a/<path in the wheel>'"
        )
        raise ConfigError(msg)
    return text


def _hunk(where: str, number: int, h: UnidiffHunk) -> Hunk:
    header = f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@"
    before: list[str] = []
    after: list[str] = []
    kinds: list[str] = []
    for line in h:
        if line.line_type == "\\":  # "\ No newline at end of file" belongs to the line before it
            if kinds and kinds[-1] in " -":
                before[-1] = before[-1].removesuffix("\n")
            if kinds and kinds[-1] in " +":
                after[-1] = after[-1].removesuffix("\n")
            continue
        if line.line_type in " -":
            before.append(line.value)
        if line.line_type in " +":
            after.append(line.value)
        kinds.append(line.line_type)
    if len(before) != h.source_length or len(after) != h.target_length:
        msg = (
            f"{where}: hunk {number} ({header}) holds {len(before)} old and {len(after)} new lines, "
            f"not what its header says; regenerate the patch"
        )
        raise ConfigError(msg)
    leading = next((i for i, k in enumerate(kinds) if k != " "), len(kinds))
    trailing = next((i for i, k in enumerate(reversed(kinds)) if k != " "), len(kinds))
    return Hunk(header, h.source_start, h.source_length, h.target_start, tuple(before), tuple(after), leading, trailing)


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
            raise PatchError(msg)
        original = ""
    else:
        data = current(fp.source)
        if data is None:
            msg = (
                f"{where}: {fp.source} is not in the wheel (moved or removed upstream); "
                f"run 'nvfp4-overlay drift' to see where upstream moved"
            )
            raise PatchError(msg)
        original = decode(data)
    lines, results = apply_hunks(split_lines(original), fp.hunks, fuzz)
    for number, (hunk, res) in enumerate(zip(fp.hunks, results), start=1):
        if isinstance(res, Mismatch):
            raise PatchError(conflict_message(patch, fp, number, hunk, res))
        result.hunks.append(HunkResult(patch.name, fp.path, number, hunk.header, res))
    if fp.source is not None and fp.source != fp.target:
        result.files[fp.source] = None
    if fp.target is None:
        if lines:
            msg = f"{where}: deletes {fp.source}, but upstream's file holds more than the patch removes"
            raise PatchError(msg)
        return
    if fp.source != fp.target and fp.source is not None and current(fp.target) is not None:
        msg = f"{where}: renames {fp.source} onto {fp.target}, which already exists"
        raise PatchError(msg)
    result.files[fp.target] = encode("".join(lines))


def conflict_message(patch: Patch, fp: FilePatch, number: int, hunk: Hunk, mismatch: Mismatch) -> str:
    if mismatch.found is None and mismatch.expected is not None:
        differs = f"line {mismatch.line} is past the end of the file (expected {mismatch.expected.rstrip()!r})"
    else:
        differs = (
            f"line {mismatch.line} differs: expected {(mismatch.expected or '').rstrip()!r}, "
            f"found {(mismatch.found or '').rstrip()!r}"
        )
    return (
        f"{patch.path}: hunk {number} ({hunk.header}) does not apply to {fp.source}: {differs}; "
        f"run 'nvfp4-overlay drift' to see where upstream moved"
    )
