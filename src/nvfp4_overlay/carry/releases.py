"""Upstream releases for drift and refresh: what the index lists, and one verified wheel per release.

A release with an upstream.toml is fetched through fetch.upstream_wheel (checked against its pin). A
release without one has no pin: pip downloads it (pip checks the digest the index publishes), the
sha256 seen is recorded in the cache's UNPINNED-SHA256SUMS, and a later run that finds a different
file under that name refuses it (trust on first use). Drift against an unpinned release trusts the index.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .. import files, progress
from ..errors import ConfigError, FetchError, HashMismatchError, IntegrityError, UnsafeArchiveError
from ..patch import Target, Upstream, UpstreamWheel, load_upstream, nearest
from ..wheel import WheelReader, fetch, metadata, pip

SEEN = "UNPINNED-SHA256SUMS"


@dataclass(frozen=True)
class ReleaseWheel:
    """One upstream wheel of a release, on disk, with the sha256 it was checked against (or seen with)."""

    target: Target
    filename: str
    sha256: str
    path: Path
    pinned: bool  # True: matched upstream.toml; False: as the index served it


# --- which releases exist --------------------------------------------------------------------------


def index_versions(dist: str, source: fetch.Source, patches_dir: Path) -> list[Version]:
    """Every release of dist, oldest first: pip's view of the index, or what is local when --offline."""
    if source.offline:
        return local_versions(dist, source, patches_dir)
    listed, ran = pip.index_versions(dist)
    if listed:
        return sorted(_versions(listed))
    msg = (
        f"{dist}: pip could not list the releases on the index (exit {ran.returncode}): {ran.tail}")
    raise FetchError(msg, item=dist, expected="pip index versions listing the releases", found=ran.tail,
                     fix="check pip's index configuration, or name the releases: --against VERSION ... (with "
                         "--offline)")


def local_versions(dist: str, source: fetch.Source, patches_dir: Path) -> list[Version]:
    """Releases with a series in patches/ or a wheel in the wheelhouse or the cache."""
    found = {Version(d.name) for d in (patches_dir / dist).glob("*") if (d / "upstream.toml").is_file()}
    found |= {version for _, version, _ in _local_wheels(dist, source)}
    return sorted(found)


def _versions(texts: Iterable[str]) -> set[Version]:
    found = set()
    for text in texts:
        try:
            found.add(Version(text.strip()))
        except InvalidVersion:
            continue  # a legacy version pip still lists; no series is written against one
    return found


# --- one wheel of a release ------------------------------------------------------------------------


def release_wheel(patches_dir: Path, target: Target, source: fetch.Source) -> ReleaseWheel:
    """A wheel of the release to read source files from: the one fitting this interpreter if any."""
    if (patches_dir / target.dist / target.version / "upstream.toml").is_file():
        upstream = load_upstream(patches_dir, target)
        pin = _fitting(upstream, source) or upstream.wheels[0]
        return ReleaseWheel(
            target, pin.filename, pin.sha256, fetch.upstream_wheel(upstream, pin, source), True
        )
    local = [
        (path, version)
        for path, version, _ in _local_wheels(target.dist, source)
        if version == Version(target.version)
    ]
    if local:
        stand_in = _stand_in(target, [p.name for p, _ in local], source)
        chosen = _fitting(stand_in, source) or stand_in.wheels[0]
        path = next(p for p, _ in local if p.name == chosen.filename)
        return _seen(target, path, source)
    if source.offline:
        raise _missing_offline(target, source, carried_versions(patches_dir, target.dist))
    return _seen(target, _pip_download(target, source, [], carried_versions(patches_dir, target.dist))[0], source)


def release_wheels(target: Target, like: Sequence[str], source: fetch.Source,
                   carried: Sequence[str] = ()) -> list[ReleaseWheel]:
    """Every wheel of the release for the interpreters and platforms of `like` (the old release's files).

    pip has no "list the files" command, so each old (python, platform) pair is asked for in turn; a
    pure old release asks once. A platform the new release adds and the old one lacked is not found.
    With --offline, or when the wheelhouse holds the release, the local files are the whole release.
    """
    wanted = Version(target.version)
    local = [(p, where) for p, version, where in _local_wheels(target.dist, source) if version == wanted]
    in_wheelhouse = [p for p, where in local if where == "wheelhouse"]
    found = {p.name: p for p in in_wheelhouse} or {p.name: p for p, _ in local}
    if not source.offline and not in_wheelhouse:
        asks = [
            fetch._tag_args(old) for old in like if _renamed(old, target.version) not in found
        ]  # build's options
        python = ["--python-version", source.python_version] if source.python_version else []
        asks += [[*python, "--platform", platform] for platform in source.platforms]
        for ask in asks:
            for path in _pip_download(target, source, ask, carried):
                found[path.name] = path
    if not found:
        raise _missing_offline(target, source, carried)
    return [_seen(target, found[name], source) for name in sorted(found)]


def _renamed(filename: str, version: str) -> str:
    """The old release's wheel filename with the new version: the file pip would give for its tags."""
    parts = filename[: -len(".whl")].split("-")
    return f"{parts[0]}-{version}-{'-'.join(parts[-3:])}.whl"


def _fitting(upstream: Upstream, source: fetch.Source) -> UpstreamWheel | None:
    try:
        return fetch.select_wheels(upstream, dataclasses.replace(source, all_platforms=False))[0]
    except ConfigError:
        return None  # no wheel for this interpreter; the .py files drift reads are the same in every one


def _stand_in(target: Target, filenames: Sequence[str], source: fetch.Source) -> Upstream:
    """An Upstream listing unpinned files, so that fetch.select_wheels can rank them."""
    wheels = tuple(UpstreamWheel(name, "") for name in sorted(filenames))
    return Upstream(target, 1, wheels, source.wheels_dir)


def _local_wheels(dist: str, source: fetch.Source) -> list[tuple[Path, Version, str]]:
    """(path, version, where) of every wheel of dist in the wheelhouse, then the cache."""
    found = []
    places = [(source.wheelhouse, "wheelhouse")] if source.wheelhouse else []
    for folder, where in [*places, (source.wheels_dir, "cache")]:
        if folder is None or not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.whl")):
            try:
                name, version, _, _ = parse_wheel_filename(path.name)
            except InvalidWheelFilename:
                continue
            if name == canonicalize_name(dist):
                found.append((path, version, where))
    return found


def carried_versions(patches_dir: Path, dist: str) -> list[str]:
    """The releases of dist that have a series."""
    return [d.name for d in (patches_dir / dist).glob("*") if (d / "upstream.toml").is_file()]


def _missing_offline(target: Target, source: fetch.Source, carried: Sequence[str]) -> ConfigError:
    fill = (f"pip download --no-deps --only-binary=:all: --dest {source.wheels_dir} "
            f"{target.dist}=={target.version}")
    near = f"; the nearest carried: {', '.join(nearest(target.version, carried))}" if carried else ""
    msg = f"{target}: no wheel in the wheelhouse or in the cache {source.wheels_dir} (--offline: no pip)"
    return ConfigError(msg, path=source.wheels_dir, item=str(target), expected="a wheel of the release",
                       found="none", fix=f"fill the cache with '{fill}', or drop --offline{near}")


def _no_such_release(target: Target, carried: Sequence[str], ran: pip.Ran) -> ConfigError | None:
    """When pip downloads nothing: a release the index does not list is the user's input, not the network."""
    listed, _ = pip.index_versions(target.dist)
    if not listed or Version(target.version) in _versions(listed):
        return None
    newest = max(_versions(listed))
    near = ", ".join(nearest(target.version, carried)) or "none"
    msg = (f"{target}: the index has no such release (pip: {ran.tail.splitlines()[-1] if ran.tail else 'nothing'}); "
           f"its newest is {newest}; the nearest carried: {near}")
    return ConfigError(msg, item=str(target), expected="a release the index lists", found=target.version,
                       fix="name a release the index lists")


def _pip_download(target: Target, source: fetch.Source, tag_args: Sequence[str],
                  carried: Sequence[str] = ()) -> list[Path]:
    source.wheels_dir.mkdir(parents=True, exist_ok=True)
    progress.report(f"downloading {target} through pip")
    with tempfile.TemporaryDirectory(dir=source.cache_dir, prefix=".download-") as tmp:
        ran = pip.download(f"{target.dist}=={target.version}", Path(tmp), tag_args)
        got = sorted(Path(tmp).glob("*.whl"))
        if not got:
            unknown = _no_such_release(target, carried, ran)
            if unknown is not None:
                raise unknown
            msg = f"{target}: pip provided no wheel (exit {ran.returncode}): {ran.tail}"
            raise FetchError(msg, item=str(target), expected="a wheel from pip download", found=ran.tail,
                             fix="check pip's index configuration and the network, or use --wheelhouse")
        paths = []
        for path in got:
            _record_seen(source, path.name, files.sha256_file(path), replace=True)
            os.replace(path, source.wheels_dir / path.name)
            paths.append(source.wheels_dir / path.name)
    return paths


def check_wheel(wheel: ReleaseWheel, reader: WheelReader) -> None:
    """Its file name, .dist-info and METADATA name one release, this one: else an integrity refusal."""
    try:
        found = metadata.find_dist_info(wheel.filename, reader.names, reader.read)
    except UnsafeArchiveError as exc:
        msg = (f"{wheel.path}: integrity: not a consistent wheel of {wheel.target}, nothing was read from it "
               f"({exc.message})")
        raise IntegrityError(msg, path=wheel.path, item=wheel.filename, expected=str(wheel.target),
                             found=exc.message,
                             fix="check where this file came from; delete it and fetch it again") from exc
    if canonicalize_name(found.name) != wheel.target.dist or Version(found.version) != Version(wheel.target.version):
        msg = f"{wheel.path}: integrity: it is {found.name} {found.version}, not {wheel.target}; nothing was read from it"
        raise IntegrityError(msg, path=wheel.path, item=wheel.filename, expected=str(wheel.target),
                             found=f"{found.name}=={found.version}", fix="check where this file came from")


# --- trust on first use for unpinned files ----------------------------------------------------------


def _seen(target: Target, path: Path, source: fetch.Source) -> ReleaseWheel:
    digest = files.sha256_file(path)
    _record_seen(source, path.name, digest, replace=False)
    return ReleaseWheel(target, path.name, digest, path, False)


def _record_seen(source: fetch.Source, filename: str, digest: str, *, replace: bool) -> None:
    """Remember the sha256 an unpinned file had; refuse a later file of that name that differs."""
    book = source.wheels_dir / SEEN
    seen = files.read_sums(book)
    if not replace and seen.get(filename, digest) != digest:
        msg = (
            f"{filename}: sha256 {digest} differs from {seen[filename]} recorded in {book} when it was "
            f"first downloaded")
        raise HashMismatchError(msg, path=book, item=filename, expected=seen[filename], found=digest,
                                fix="if upstream re-published the file, check why; then delete both and rerun")
    if seen.get(filename) == digest:
        return
    seen[filename] = digest
    files.replace_file(book, files.format_sums(seen))
