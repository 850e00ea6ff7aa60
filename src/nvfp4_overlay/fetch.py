"""Upstream wheels: found in a wheelhouse or the cache, or downloaded by pip; never opened unverified."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag, compatible_tags, cpython_tags, sys_tags
from packaging.utils import parse_wheel_filename

from . import progress
from .errors import ConfigError, FetchError, HashMismatchError
from .manifest import Upstream, UpstreamWheel


@dataclass(frozen=True)
class Source:
    """Where upstream wheels come from, and for which platform."""

    cache_dir: Path
    wheelhouse: Path | None = None
    offline: bool = False
    all_platforms: bool = False
    python_version: str | None = None  # "3.12", as pip's --python-version takes it
    platforms: tuple[str, ...] = ()  # as pip's --platform takes them

    @property
    def wheels_dir(self) -> Path:
        return self.cache_dir / "wheels"


def default_cache_dir() -> Path:
    return Path(os.environ.get("NVFP4_OVERLAY_CACHE") or Path.home() / ".cache" / "nvfp4-overlay")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def select_wheels(upstream: Upstream, source: Source) -> list[UpstreamWheel]:
    """The pinned wheels to build: all of them, or the one that fits the interpreter and platform."""
    if source.all_platforms:
        return list(upstream.wheels)
    ranked = {tag: i for i, tag in enumerate(_wanted_tags(source))}
    best: tuple[int, UpstreamWheel] | None = None
    for wheel in upstream.wheels:
        ranks = [ranked[t] for t in parse_wheel_filename(wheel.filename)[3] if t in ranked]
        if ranks and (best is None or min(ranks) < best[0]):
            best = (min(ranks), wheel)
    if best is None:
        names = ", ".join(w.filename for w in upstream.wheels)
        msg = (
            f"{upstream.directory / 'upstream.toml'}: no wheel of {upstream.target} fits this interpreter "
            f"and platform (pinned: {names}); pass --all-platforms or --python-version/--platform"
        )
        raise ConfigError(msg)
    return [best[1]]


def _wanted_tags(source: Source) -> list[Tag]:
    if not source.python_version and not source.platforms:
        return list(sys_tags())
    version = tuple(int(p) for p in (source.python_version or f"{sys.version_info[0]}.{sys.version_info[1]}").split("."))
    platforms = list(source.platforms) or None
    return [*cpython_tags(version, platforms=platforms), *compatible_tags(version, platforms=platforms)]


def upstream_wheel(upstream: Upstream, wheel: UpstreamWheel, source: Source) -> Path:
    """A local path to the pinned wheel whose sha256 has been checked, downloading it if need be."""
    if source.wheelhouse is not None:
        path = source.wheelhouse / wheel.filename
        if path.is_file():
            check_sha256(path, wheel, remove=False)
            return path
    cached = source.wheels_dir / wheel.filename
    if cached.is_file():
        check_sha256(cached, wheel, remove=True)
        return cached
    if source.offline or source.wheelhouse is not None:  # DESIGN.md: a wheelhouse means no network
        where = f"in {source.wheelhouse} or " if source.wheelhouse else "in "
        why = "--offline forbids pip" if source.offline else "--wheelhouse means no network; put it there"
        msg = f"{wheel.filename}: not found {where}the cache {source.wheels_dir}, and {why}"
        raise FetchError(msg)
    return _download(upstream, wheel, source)


def check_sha256(path: Path, wheel: UpstreamWheel, *, remove: bool, origin: str = "") -> None:
    """Refuse a file whose digest is not the pinned one, before anything opens it as a zip.

    With `remove`, the file is deleted (a bad cache entry, or a download that must not be kept).
    """
    actual = file_sha256(path)
    if actual != wheel.sha256:
        if remove:
            path.unlink(missing_ok=True)
        if origin == "download":
            what, gone = f"{wheel.filename} as pip downloaded it", "; it was not kept"
        elif remove:
            what, gone = str(path), "; the cached copy was removed, the next run downloads it again"
        else:
            what, gone = str(path), "; replace the file in the wheelhouse with the pinned one"
        msg = (
            f"{what}: sha256 {actual} does not match {wheel.sha256} pinned in upstream.toml{gone}. "
            f"If upstream re-published the file, check why before changing the pin"
        )
        raise HashMismatchError(msg)


def _download(upstream: Upstream, wheel: UpstreamWheel, source: Source) -> Path:
    source.wheels_dir.mkdir(parents=True, exist_ok=True)
    progress.report(f"downloading {wheel.filename} through pip")
    with tempfile.TemporaryDirectory(dir=source.cache_dir, prefix=".download-") as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--dest", tmp, *_tag_args(wheel.filename), f"{upstream.target.dist}=={upstream.target.version}"]
        done = subprocess.run(command, capture_output=True, text=True)
        got = Path(tmp) / wheel.filename
        if not got.is_file():
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            msg = (
                f"{wheel.filename}: pip did not provide it (exit {done.returncode}): {tail}\n"
                f"Check pip's index configuration, or pass --wheelhouse DIR holding the file"
            )
            raise FetchError(msg)
        check_sha256(got, wheel, remove=True, origin="download")
        cached = source.wheels_dir / wheel.filename
        os.replace(got, cached)
    return cached


def _tag_args(filename: str) -> list[str]:
    """pip options that make it pick exactly this wheel (pure wheels need none)."""
    tags = parse_wheel_filename(filename)[3]
    if all(t.platform == "any" for t in tags):
        return []
    args: list[str] = []
    for tag in sorted(tags, key=str):
        if tag.interpreter.startswith("cp") and "--python-version" not in args:
            args += ["--python-version", f"{tag.interpreter[2]}.{tag.interpreter[3:]}", "--implementation", "cp"]
        args += ["--platform", tag.platform, "--abi", tag.abi]
    return args

