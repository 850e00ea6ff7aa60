"""Upstream wheels: found in a wheelhouse or the cache, or downloaded by pip; never opened unverified."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag, compatible_tags, cpython_tags, sys_tags
from packaging.utils import parse_wheel_filename

from .. import progress
from ..errors import ConfigError, FetchError, HashMismatchError, NotInCache, UnsafeArchiveError
from ..files import DOWNLOAD, held_temporary, sweep
from ..patch import Upstream, UpstreamWheel
from . import pip
from .archive import WheelReader


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

    @property
    def scans_dir(self) -> Path:
        """The serving-API scans of releases' texts (api_audit.scan), kept under their inputs."""
        return self.cache_dir / "api-scan"


def default_cache_dir() -> Path:
    return Path(os.environ.get("NVFP4_OVERLAY_CACHE") or Path.home() / ".cache" / "nvfp4-overlay")


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
            f"and platform (pinned: {names})")
        raise ConfigError(msg, path=upstream.directory / "upstream.toml", item=str(upstream.target),
                          expected="a wheel for this interpreter", found=names,
                          fix="pass --all-platforms or --python-version/--platform")
    return [best[1]]


def _wanted_tags(source: Source) -> list[Tag]:
    if not source.python_version and not source.platforms:
        return list(sys_tags())
    version = tuple(int(p) for p in (source.python_version or f"{sys.version_info[0]}.{sys.version_info[1]}").split("."))
    platforms = list(source.platforms) or None
    return [*cpython_tags(version, platforms=platforms), *compatible_tags(version, platforms=platforms)]


def open_upstream(upstream: Upstream, wheel: UpstreamWheel, source: Source) -> WheelReader:
    """The pinned wheel, open: its sha256 is checked on the very handle the build then reads.

    So each input is hashed once, and what was hashed is what is read (no time-of-check gap).
    From the wheelhouse first, then the cache (a copy that fails its pin is removed: the next
    run downloads it again), then pip.
    """
    if source.wheelhouse is not None:
        path = source.wheelhouse / wheel.filename
        if path.is_file():
            return _open_checked(path, wheel, remove=False)
    cached = source.wheels_dir / wheel.filename
    if cached.is_file():
        return _open_checked(cached, wheel, remove=True)
    if source.offline or source.wheelhouse is not None:  # docs/design.md: a wheelhouse means no network
        where = f"in {source.wheelhouse} or " if source.wheelhouse else "in "
        why = "--offline forbids pip" if source.offline else "--wheelhouse means no network"
        fill = f"nvfp4-overlay build {upstream.target}"
        msg = f"{wheel.filename}: not found {where}the cache {source.wheels_dir}, and {why}"
        raise NotInCache(msg, path=source.wheels_dir, item=wheel.filename, expected="the pinned wheel",
                         found="missing",
                         fix=f"fill the cache with '{fill}' once with network access (pip downloads it there), or put "
                             "the file in a --wheelhouse")
    return _download(upstream, wheel, source)


def upstream_wheel(upstream: Upstream, wheel: UpstreamWheel, source: Source) -> Path:
    """A local path to the pinned wheel, its sha256 checked (for readers that take a path)."""
    with open_upstream(upstream, wheel, source) as reader:
        return reader.path


def _open_checked(path: Path, wheel: UpstreamWheel, *, remove: bool, origin: str = "") -> WheelReader:
    """Refuse a file whose digest is not the pinned one, before anything is decompressed or copied
    from it (the reader checks its directory while the digest runs; a mismatch outranks the rest).

    With `remove`, the file is deleted (a bad cache entry, or a download that must not be kept).
    """
    try:
        return WheelReader(path, sha256=wheel.sha256)
    except (UnsafeArchiveError, ConfigError) as exc:  # empty, not a zip, unreadable: a bad file like any other
        if not remove:
            raise
        path.unlink(missing_ok=True)
        what, gone = ((f"{wheel.filename} as pip downloaded it", "it was not kept") if origin == "download" else
                      (str(path), "the cached copy was removed, the next run downloads it again"))
        msg = f"{what}: not the pinned wheel ({exc.found}); {gone}"
        raise type(exc)(msg, path=path, item=wheel.filename, expected=wheel.sha256, found=exc.found, fix=gone) from None
    except HashMismatchError as exc:
        if remove:
            path.unlink(missing_ok=True)
        if origin == "download":
            what, gone = f"{wheel.filename} as pip downloaded it", "; it was not kept"
        elif remove:
            what, gone = str(path), "; the cached copy was removed, the next run downloads it again"
        else:
            what, gone = str(path), "; replace the file in the wheelhouse with the pinned one"
        msg = (
            f"{what}: sha256 {exc.found} does not match {wheel.sha256} pinned in upstream.toml{gone}")
        raise HashMismatchError(msg, path=path, expected=wheel.sha256, found=exc.found,
                                fix="if upstream re-published the file, check why before changing the pin") from None


def _download(upstream: Upstream, wheel: UpstreamWheel, source: Source) -> WheelReader:
    source.wheels_dir.mkdir(parents=True, exist_ok=True)
    progress.report(f"downloading {wheel.filename} through pip")
    # In the cache, so that the rename into wheels/ stays on one file system; held while it lives, so that a
    # later build sweeps it only if this process was killed before it could remove it (sweep_downloads).
    tmp, lock = held_temporary(source.cache_dir, ".download-", folder=True)
    try:
        ran = pip.download(f"{upstream.target.dist}=={upstream.target.version}", tmp, _tag_args(wheel.filename))
        got = tmp / wheel.filename
        if not got.is_file():
            msg = (
                f"{wheel.filename}: pip did not provide it (exit {ran.returncode}): {ran.tail}")
            raise FetchError(msg, item=wheel.filename, found=f"pip exit {ran.returncode}: {ran.tail}",
                             fix="check pip's index configuration, or pass --wheelhouse DIR holding the file")
        reader = _open_checked(got, wheel, remove=True, origin="download")
        cached = source.wheels_dir / wheel.filename
        os.replace(got, cached)  # the open handle follows the file
        reader.path = cached
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if lock is not None:
            os.close(lock)
    return reader


def sweep_downloads(source: Source) -> list[Path]:
    """The download folders a killed build left in the cache (files.sweep: none a live process holds)."""
    return sweep(source.cache_dir, DOWNLOAD)


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

