"""stacks.toml and upstream.toml, read into frozen dataclasses; every problem collected before raising."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..errors import ConfigError
from ..formats import read_toml

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class UpstreamWheel:
    """One pinned upstream file: its name and the digest it must have."""

    filename: str
    sha256: str


@dataclass(frozen=True)
class Target:
    """A distribution at an upstream version: what a series is written against."""

    dist: str
    version: str

    def __str__(self) -> str:
        return f"{self.dist}=={self.version}"


@dataclass(frozen=True)
class Upstream:
    """patches/<dist>/<version>/upstream.toml: the series revision and the pinned wheels."""

    target: Target
    revision: int
    wheels: tuple[UpstreamWheel, ...]
    directory: Path
    overlay_revision: int | None = None  # patches/<dist>/overlay.toml's revision (None: the project has none)

    @property
    def local_version(self) -> str:
        return local_version(self.target.version, self.overlay_revision, self.revision)


def local_version(version: str, overlay_revision: int | None, revision: int) -> str:
    """The patched wheel's PEP 440 version: +nvfp4.<overlay>.<series>, a function of the two revisions.

    PEP 440 compares local segments numerically one by one, so a bump of either sorts above what it
    replaces for pip and uv, and the overlay's first number (above every +nvfp4.N published before it
    was recorded) sorts above every label of the old one-number scheme. A project without
    overlay.toml (a test's) keeps that old scheme, +nvfp4.<series>.
    """
    if overlay_revision is None:
        return f"{version}+nvfp4.{revision}"
    return f"{version}+nvfp4.{overlay_revision}.{revision}"


OVERLAY_REVISION = "overlay.toml"  # patches/<dist>/overlay.toml: the shared overlay's revision, one per dist


def load_overlay_revision(patches_dir: Path, dist: str) -> int | None:
    """patches/<dist>/overlay.toml's revision (every release's label carries it), or None without the file."""
    path = patches_dir / canonicalize_name(dist) / OVERLAY_REVISION
    if not path.is_file():
        return None
    revision = _read_toml(path).get("revision")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
        msg = f"{path}: revision = {revision!r} must be a positive integer"
        raise ConfigError(msg, path=path, item="revision", expected="a positive integer", found=repr(revision),
                          fix=f"restore it from git ('git checkout -- {path}')")
    return revision


@dataclass(frozen=True)
class Stack:
    """A named set of targets that are installed together (an SGLang release and its FlashInfer pin).

    `upstream` are the releases the stack ships unpatched: installed from the index as they are
    (SGLang 0.5.12 and later make their own FlashInfer calls opaque, or trace none the patched
    FlashInfer leaves open).
    """

    name: str
    targets: tuple[Target, ...]
    upstream: tuple[Target, ...] = ()


@dataclass(frozen=True)
class Stacks:
    default: str
    stacks: tuple[Stack, ...]

    def get(self, name: str, path: Path, *, or_all: bool = False) -> Stack:
        """The stack of that name; or_all: the caller also takes 'all' (build), and the error says so."""
        for stack in self.stacks:
            if stack.name == name:
                return stack
        known = [s.name for s in self.ordered()]
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        msg = f"{path}: no stack named {name!r}"
        raise ConfigError(msg, path=path, item=name, expected="a stack from 'nvfp4-overlay list'", found=name,
                          fix=f"{hint}known stacks: {', '.join(known)}" + (" (or 'all')" if or_all else ""))

    def ordered(self) -> list[Stack]:
        """By family, then release: sglang-0.5.8 before sglang-0.5.10, not string order."""
        return sorted(self.stacks, key=stack_order)


def stack_order(stack: Stack) -> tuple[str, Version]:
    family, _, version = stack.name.rpartition("-")
    try:
        return family, Version(version)
    except InvalidVersion:
        return stack.name, Version("0")


def _read_toml(path: Path) -> dict[str, Any]:
    return read_toml(path, missing="is --patches-dir pointing at the project's patches/ folder? pass --patches-dir "
                                   "naming the patches/ folder")


def _raise_all(path: Path, problems: list[str]) -> None:
    if problems:
        msg = f"{path}: " + ("; ".join(problems) if len(problems) == 1 else "\n  " + "\n  ".join(problems))
        raise ConfigError(msg, path=path, found="; ".join(problems), fix=f"edit {path}")


def load_stacks(patches_dir: Path) -> Stacks:
    path = patches_dir / "stacks.toml"
    data = _read_toml(path)
    problems: list[str] = []
    stacks: list[Stack] = []
    for name, table in sorted(data.get("stacks", {}).items()):
        if not isinstance(table, dict) or not table:
            problems.append(f"[stacks.{name!r}] must map distribution names to versions")
            continue
        targets: list[Target] = []
        upstream: list[Target] = []
        for dist, value in sorted(table.items()):
            shipped_as_is = isinstance(value, dict) and value.get("patched") is False
            version = value.get("version") if isinstance(value, dict) else value
            if isinstance(value, dict) and (set(value) != {"version", "patched"} or not shipped_as_is):
                problems.append(f"[stacks.{name!r}] {dist} = {value!r}: a table must be "
                                f'{{ version = "X", patched = false }} (a release shipped unpatched)')
                continue
            if not isinstance(version, str) or not _is_version(version):
                problems.append(f"[stacks.{name!r}] {dist} = {value!r} is not a PEP 440 version")
                continue
            (upstream if shipped_as_is else targets).append(Target(canonicalize_name(dist), version))
        if not targets:
            problems.append(f"[stacks.{name!r}] patches nothing: name at least one release with a series")
        stacks.append(Stack(name, tuple(targets), tuple(upstream)))
    default = data.get("default")
    if not isinstance(default, str) or default not in {s.name for s in stacks}:
        problems.append(f"default = {default!r} must name one of the [stacks.*] tables")
    _raise_all(path, problems)
    assert isinstance(default, str)
    return Stacks(default, tuple(stacks))


def load_upstream(patches_dir: Path, target: Target) -> Upstream:
    directory = patches_dir / target.dist / target.version
    path = directory / "upstream.toml"
    if not path.exists():
        _no_series(patches_dir, target, path)
    data = _read_toml(path)
    problems: list[str] = []
    revision = data.get("revision")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
        problems.append(f"revision = {revision!r} must be a positive integer")
    wheels: list[UpstreamWheel] = []
    for i, table in enumerate(data.get("wheel", []), start=1):
        filename, sha256 = table.get("filename"), table.get("sha256")
        where = f"[[wheel]] #{i}"
        if not isinstance(filename, str):
            problems.append(f"{where}: filename is missing")
            continue
        if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
            problems.append(f"{where} ({filename}): sha256 must be 64 lowercase hex digits, found {sha256!r}")
        problem = _wheel_name_problem(filename, target)
        if problem:
            problems.append(f"{where}: {problem}")
        wheels.append(UpstreamWheel(filename, str(sha256)))
    if not wheels and not problems:
        problems.append("no [[wheel]] entries: list every upstream wheel with its filename and sha256")
    names = [w.filename for w in wheels]
    problems += [f"{n} is listed twice" for n in sorted({n for n in names if names.count(n) > 1})]
    _raise_all(path, problems)
    assert isinstance(revision, int)
    return Upstream(target, revision, tuple(wheels), directory, load_overlay_revision(patches_dir, target.dist))


def _no_series(patches_dir: Path, target: Target, path: Path) -> None:
    """A target with no series: the carried releases nearest it, or the distribution the user meant."""
    carried = all_targets(patches_dir)
    dists = sorted({t.dist for t in carried})
    if target.dist not in dists:
        close = difflib.get_close_matches(target.dist, dists, n=1, cutoff=0.5) or [
            d for d in dists if d.startswith(target.dist)][:1]
        msg = (f"{target}: no distribution named {target.dist!r} is carried ({path.parent.parent} not found); "
               f"carried: {', '.join(dists) or 'none'}")
        raise ConfigError(msg, path=path.parent.parent, item=target.dist, expected="one of " + ", ".join(dists),
                          found=target.dist, fix=f"did you mean {close[0]}=={target.version}?" if close
                          else "name a carried distribution")
    near = nearest(target.version, [t.version for t in carried if t.dist == target.dist])
    below = [v for v in near if _is_version(target.version) and Version(v) < Version(target.version)]
    source = below[-1] if below else near[0]
    msg = f"{target} has no series ({path} not found)"
    raise ConfigError(msg, path=path, item=str(target), expected="a carried release", found=target.version,
                      fix=f"build one of the nearest carried ({', '.join(near)}), or port a series with "
                          f"'nvfp4-overlay refresh {target.dist} {source} {target.version}'")


def _wheel_name_problem(filename: str, target: Target) -> str | None:
    try:
        name, version, _, _ = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        return f"{filename!r} is not a wheel filename ({exc})"
    if name != target.dist or version != Version(target.version):
        return f"{filename} is not a wheel of {target} (directory name and filename disagree)"
    return None


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def resolve_targets(stacks: Stacks, stack: str | None, requested: Sequence[str], where: Path) -> list[Target]:
    """TARGETs `dist==version` if given, else the named stack's (the default stack if none)."""
    if requested:
        targets = []
        for text in requested:
            dist, sep, version = text.partition("==")
            if not sep or not dist or not version:
                msg = f"target {text!r}: not DIST==VERSION"
                raise ConfigError(msg, item=text, expected="DIST==VERSION", found=text,
                                  fix="name it as DIST==VERSION, e.g. flashinfer-python==0.6.1")
            if not _is_version(version):
                msg = f"target {text!r}: {version!r} is not a release version (PEP 440)"
                raise ConfigError(msg, item=text, expected="DIST==VERSION", found=version,
                                  fix="name it as DIST==VERSION, e.g. flashinfer-python==0.6.1")
            targets.append(Target(canonicalize_name(dist), version))
        return targets
    if stack == "all":
        return sorted({t for s in stacks.stacks for t in s.targets}, key=lambda t: (t.dist, Version(t.version)))
    return list(stacks.get(stack or stacks.default, where, or_all=True).targets)


def nearest(version: str, carried: Sequence[str], count: int = 3) -> list[str]:
    """The carried releases closest to version (two below it, one above, where there are), by version."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        return sorted(carried, key=Version)[-count:]
    ordered = sorted(carried, key=Version)
    below = [v for v in ordered if Version(v) < wanted][-2:]
    above = [v for v in ordered if Version(v) > wanted][:2]
    return sorted([*below[-(count - min(len(above), 1)):], *above][:count], key=Version)


def all_targets(patches_dir: Path) -> list[Target]:
    """Every series directory under patches/, as targets sorted by distribution and version."""
    found = [
        Target(canonicalize_name(d.parent.name), d.name)
        for d in patches_dir.glob("*/*")
        if (d / "upstream.toml").is_file()
    ]
    return sorted(found, key=lambda t: (t.dist, Version(t.version)))


@dataclass(frozen=True)
class OverlayFile:
    path: str  # relative to the wheel root, posix
    data: bytes
    mode: int


def overlay_root(overlay_dir: Path, dist: str) -> Path:
    """overlay/<dist>/: the files the releases of dist get (docs/design.md, "Carrying")."""
    return overlay_dir / canonicalize_name(dist)


OVERLAY_RELEASES = "releases.toml"  # overlay/<dist>/releases.toml: a rule, never a file of the wheel


def load_overlay(overlay_dir: Path, target: Target) -> tuple[OverlayFile, ...]:
    """overlay/<dist>/...: whole files added to the wheel root of the release, in path order.

    One source per distribution: the code adapts to the release it lands in by what it reads there
    (signatures, module paths), so no release has a copy of its own. A file goes into every release
    unless overlay/<dist>/releases.toml names it with the releases (a PEP 440 specifier) it belongs to.
    """
    root = overlay_root(overlay_dir, target.dist)
    if not root.is_dir():
        return ()
    files = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            msg = f"{path}: overlay files must be regular files, not symlinks"
            raise ConfigError(msg, path=path, expected="a regular file", found="a symlink", fix="copy the file in")
        if path.is_file() and "__pycache__" not in path.parts and path != root / OVERLAY_RELEASES:
            mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            files.append(OverlayFile(path.relative_to(root).as_posix(), path.read_bytes(), mode))
    rules = _overlay_rules(root, {f.path for f in files})
    version = Version(target.version)
    return tuple(f for f in files if f.path not in rules or rules[f.path].contains(version, prereleases=True))


def _overlay_rules(root: Path, present: set[str]) -> dict[str, SpecifierSet]:
    """overlay/<dist>/releases.toml: overlay file -> the releases that get it (every problem collected)."""
    path = root / OVERLAY_RELEASES
    if not path.is_file():
        return {}
    data = read_toml(path)
    rules: dict[str, SpecifierSet] = {}
    problems = [f"[{key}]: unknown table; each rule is a [files.\"<path under {root.name}/>\"] table"
                for key, value in data.items() if key != "files" or not isinstance(value, dict)]
    files = data.get("files")
    for name, rule in (files if isinstance(files, dict) else {}).items():
        rule = rule if isinstance(rule, dict) else {}
        if name not in present:
            problems.append(f"[files.{name!r}] names no file under {root}: add the file or remove the entry")
        if not isinstance(rule.get("why"), str) or not rule["why"]:
            problems.append(f"[files.{name!r}] needs why = \"...\": which patch uses the file")
        try:
            rules[name] = SpecifierSet(str(rule["releases"]))
        except (KeyError, InvalidSpecifier):
            problems.append(f"[files.{name!r}] releases = {rule.get('releases')!r} is not a PEP 440 specifier; "
                            f"write one such as releases = \"<0.5.12\"")
    if problems:
        msg = f"{path}:\n  " + "\n  ".join(problems)
        raise ConfigError(msg, path=path, item=problems[0], expected="[files.\"<path>\"] releases = \"<spec>\", why",
                          found=f"{len(problems)} problem(s)", fix="name an existing overlay file, its releases and why")
    return rules
