"""Patch series: reading them (unidiff, DEP-3) and applying their hunks to file contents in memory."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import unidiff

from .errors import ConfigError, PatchError

# DEP-3 fields the provenance keeps; git format-patch's Subject stands in for Description.
DEP3_FIELDS = ("Description", "Subject", "Origin", "Bug", "Forwarded", "Author", "Applied-Upstream", "Last-Update")
_FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):[ \t]?(.*)$")
_DIFF_START = re.compile(r"^(diff --git |--- |Index: )")
_DEP3_NAMES = {name.lower(): name for name in DEP3_FIELDS} | {"from": "Author"}


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

    def touched_paths(self) -> set[str]:
        """Paths the series reads from the upstream wheel (a patch may read what an earlier one wrote)."""
        return {fp.source for p in self.patches for fp in p.files if fp.source}


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
        unlisted = tuple(sorted(p.name for p in directory.glob("*.patch")))
        if unlisted:
            msg = f"{series_file}: not found, but {directory} holds {', '.join(unlisted)}; list them in a series file"
            raise ConfigError(msg)
        return Series(directory, ())
    names = []
    for line in decode(series_file.read_bytes()).splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            names.append(entry.split()[0])  # quilt allows "-p1" after the name; -p1 is all we take
    problems: list[str] = []
    patches: list[Patch] = []
    for name in names:
        path = directory / name
        if "/" in name or "\\" in name or name.startswith("."):
            problems.append(f"{name}: patch names are plain file names in {directory}")
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
    unlisted = tuple(sorted(p.name for p in directory.glob("*.patch") if p.name not in names))
    return Series(directory, tuple(patches), unlisted)


def read_patch(path: Path) -> Patch:
    data = path.read_bytes()
    text = decode(data)
    lines = split_lines(text)
    try:
        patchset = unidiff.PatchSet(lines)
    except unidiff.UnidiffParseError as exc:
        msg = f"{path}: not a unified diff that parses ({exc}); regenerate it with 'diff -u' or 'git diff'"
        raise ConfigError(msg) from exc
    files = tuple(_file_patch(path, pf) for pf in patchset)
    if not files:
        msg = f"{path}: holds no diff; remove it from the series or regenerate it"
        raise ConfigError(msg)
    return Patch(path.name, path, hashlib.sha256(data).hexdigest(), parse_dep3(lines), files)


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


def _file_patch(path: Path, pf: unidiff.PatchedFile) -> FilePatch:
    where = f"{path}: {pf.path}"
    if pf.is_binary_file:
        msg = f"{where}: binary diffs are refused; ship the file in overlay/ instead"
        raise ConfigError(msg)
    source = None if pf.is_added_file else _strip(pf.source_file, where)
    target = None if pf.is_removed_file else _strip(pf.target_file, where)
    hunks = tuple(_hunk(where, i, h) for i, h in enumerate(pf, start=1))
    return FilePatch(source, target, hunks)


def _strip(name: str, where: str) -> str:
    """-p1: drop the a/ or b/ prefix; refuse anything that leaves the wheel root or edits its RECORD."""
    name = name.split("\t", 1)[0]
    parts = PurePosixPath(name).parts
    rel = PurePosixPath(*parts[1:]) if len(parts) > 1 else PurePosixPath(name)
    text = str(rel)
    bad = (
        name.startswith("/") and name != "/dev/null"
        or "\\" in name or ".." in rel.parts or ":" in (rel.parts[0] if rel.parts else "")
        or any(p.endswith(".dist-info") for p in rel.parts)
    )
    if bad or not rel.parts:
        msg = (
            f"{where}: target {name!r} is outside the wheel's package files (absolute, '..', a backslash, "
            f"or the .dist-info, which the build writes itself); paths are 'a/<path in the wheel>'"
        )
        raise ConfigError(msg)
    return text


def _hunk(where: str, number: int, h: unidiff.Hunk) -> Hunk:
    header = f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@"
    before: list[str] = []
    after: list[str] = []
    kinds: list[str] = []
    for line in h:
        if line.line_type == "\\":  # "\ No newline at end of file" belongs to the line before it
            if kinds and kinds[-1] in " -":
                before[-1] = before[-1][:-1] if before[-1].endswith("\n") else before[-1]
            if kinds and kinds[-1] in " +":
                after[-1] = after[-1][:-1] if after[-1].endswith("\n") else after[-1]
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
# GNU patch's placement, written here because no well-kept Python library applies hunks with offsets:
# try the header's line shifted by the offset of the file's previous hunk, then +1, -1, +2, -2 ...,
# never before the end of the previous hunk; with fuzz F, ignore up to F outer context lines.


def locate(lines: Sequence[str], hunk: Hunk, *, lower: int = 0, delta: int = 0, max_fuzz: int = 0) -> Placement | None:
    for fuzz in range(max_fuzz + 1):
        cut_lead = min(fuzz, hunk.leading_context)
        cut_trail = min(fuzz, hunk.trailing_context)
        pattern = hunk.before[cut_lead: len(hunk.before) - cut_trail]
        guess = hunk.expected_index + delta + cut_lead
        for index in _candidates(hunk, fuzz, guess, lower, len(lines) - len(pattern)):
            if all(lines[index + i] == p for i, p in enumerate(pattern)):
                return Placement(index - cut_lead, index - cut_lead - hunk.expected_index, fuzz)
    return None


def _candidates(hunk: Hunk, fuzz: int, guess: int, lower: int, upper: int) -> list[int]:
    # Less leading than trailing context means the diff saw the start of the file; less trailing,
    # its end (GNU patch anchors such hunks the same way unless fuzz is allowed).
    if fuzz == 0 and hunk.leading_context < hunk.trailing_context:
        return [0] if lower == 0 and 0 <= upper else []
    if fuzz == 0 and hunk.trailing_context < hunk.leading_context:
        return [upper] if upper >= lower else []
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
    """Apply hunks in order; the result list holds a Placement per hunk, or the first Mismatch."""
    out: list[str] = []
    cursor = 0
    delta = 0
    results: list[Placement | Mismatch] = []
    for hunk in hunks:
        placement = locate(lines, hunk, lower=cursor, delta=delta, max_fuzz=max_fuzz)
        if placement is None:
            results.append(first_mismatch(lines, hunk, delta))
            return lines, results
        cut_lead = min(placement.fuzz, hunk.leading_context)
        cut_trail = min(placement.fuzz, hunk.trailing_context)
        start = placement.index + cut_lead
        out += lines[cursor:start]
        out += hunk.after[cut_lead: len(hunk.after) - cut_trail]
        cursor = start + len(hunk.before) - cut_lead - cut_trail
        delta = placement.offset
        results.append(placement)
    out += lines[cursor:]
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
