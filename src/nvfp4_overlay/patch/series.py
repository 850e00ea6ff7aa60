"""A patch series read from its directory and checked: the series file, each patch parsed with unidiff, DEP-3.

Every problem of a series is collected before one error is raised, so one run shows them all. The
values it makes (Series, Patch, FilePatch, Hunk) are what patch/patching.py applies, in memory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path, PurePosixPath

from unidiff.errors import UnidiffParseError
from unidiff.patch import Hunk as UnidiffHunk
from unidiff.patch import PatchedFile, PatchSet

from ..errors import ConfigError

# DEP-3 fields the provenance keeps; git format-patch's Subject stands in for Description.
DEP3_FIELDS = ("Description", "Subject", "Origin", "Bug", "Forwarded", "Author", "Applied-Upstream", "Last-Update")
_FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):[ \t]?(.*)$")
_DIFF_START = re.compile(r"^(diff --git |--- |Index: )")
_DEP3_NAMES = {name.lower(): name for name in DEP3_FIELDS} | {"from": "Author"}
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_PATCH_GLOBS = ("*.patch", "*.diff")
_DEV_NULL = "/dev/null"
_REGENERATE = "regenerate it with 'diff -u' or 'git diff'"

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
            msg = f"{series_file}: not found, but {directory} holds {', '.join(unlisted)}"
            raise ConfigError(msg, path=series_file, expected="a series file naming the patches",
                              found=", ".join(unlisted), fix=f"list {', '.join(unlisted)} in {series_file}")
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
        raise ConfigError(msg, path=series_file, expected="every listed patch present and well formed",
                          found="; ".join(sorted(set(problems))), fix="correct the series or the patches named")
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
        msg = f"{path}: not a unified diff that parses ({exc})"
        raise ConfigError(msg, path=path, expected="a unified diff", found=str(exc), fix=_REGENERATE) from exc
    files = tuple(_file_patch(path, pf) for pf in patchset)
    if not files:
        msg = f"{path}: holds no diff"
        raise ConfigError(msg, path=path, expected="a unified diff", found="no diff",
                          fix="remove it from the series, or regenerate it")
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
        msg = f"{path}: " + "\n  ".join(["malformed unified diff:", *problems[:20]])
        raise ConfigError(msg, path=path, expected="hunks whose lines match their headers",
                          found="; ".join(problems[:20]), fix=_REGENERATE)


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
        msg = f"{where}: binary diffs are refused"
        raise ConfigError(msg, path=path, item=pf.path, expected="a text diff", found="a binary diff",
                          fix="ship the file in overlay/ instead")
    # Only /dev/null adds or deletes a file (git's "new file mode" sets it too): unidiff also calls a
    # lone "@@ -0,0" hunk an added file, but that is an insertion into an empty file, as GNU patch reads it.
    source = None if pf.source_file == _DEV_NULL else _strip(pf.source_file, path, pf.path)
    target = None if pf.target_file == _DEV_NULL else _strip(pf.target_file, path, pf.path)
    hunks = tuple(_hunk(path, pf.path, i, h) for i, h in enumerate(pf, start=1))
    if not hunks and source is not None and source == target:
        msg = f"{where}: changes no line (a mode change, or a hunk that did not parse)"
        raise ConfigError(msg, path=path, item=pf.path, expected="a hunk", found="no line changed", fix=_REGENERATE)
    for number, (first, second) in enumerate(pairwise(hunks), start=2):
        if second.expected_index < first.expected_index + len(first.before):
            msg = f"{where}: hunk {number} ({second.header}) starts before hunk {number - 1} ends"
            raise ConfigError(msg, path=path, item=f"{pf.path} hunk {number} ({second.header})",
                              expected=f"a start after line {first.expected_index + len(first.before)}",
                              found=f"line {second.expected_index + 1}", fix=_REGENERATE)
    return FilePatch(source, target, hunks)


def _strip(name: str, path: Path, member: str) -> str:
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
            f"{path}: {member}: target {name!r} is outside the wheel's package files (absolute, '..', a backslash, "
            f"or the .dist-info, which the build writes itself)")
        raise ConfigError(msg, path=path, item=member, expected="a/<path in the wheel>", found=name,
                          fix="regenerate it with paths 'a/<path in the wheel>'")
    return text


def _hunk(path: Path, member: str, number: int, h: UnidiffHunk) -> Hunk:
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
            f"{path}: {member}: hunk {number} ({header}) holds {len(before)} old and {len(after)} new lines, "
            f"not what its header says")
        raise ConfigError(msg, path=path, item=f"{member} hunk {number} ({header})",
                          expected=f"{h.source_length} old and {h.target_length} new lines",
                          found=f"{len(before)} old and {len(after)} new", fix=_REGENERATE)
    leading = next((i for i, k in enumerate(kinds) if k != " "), len(kinds))
    trailing = next((i for i, k in enumerate(reversed(kinds)) if k != " "), len(kinds))
    return Hunk(header, h.source_start, h.source_length, h.target_start, tuple(before), tuple(after), leading, trailing)


