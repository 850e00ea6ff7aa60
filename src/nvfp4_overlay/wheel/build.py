"""Targets built into the dist dir, each wheel pinned, fetched, planned and written; all land, with SHA256SUMS, or none."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from .. import progress
from ..files import LANDING, SHA256SUMS, AtomicWrites, format_sums, read_sums, sweep
from ..patch import HunkResult, OverlayFile, Series, Target, Upstream, load_overlay, load_upstream, read_series
from . import fetch
from .recipe import plan_wheel
from .writer import write_wheel

Log = Callable[[str], None]


@dataclass(frozen=True)
class Options:
    patches_dir: Path
    overlay_dir: Path
    dist_dir: Path
    source: fetch.Source
    fuzz: int = 0
    date_time: tuple[int, ...] = (1980, 1, 1, 0, 0, 0)  # new members' zip time: writer.zip_date_time(SOURCE_DATE_EPOCH)


@dataclass(frozen=True)
class Built:
    target: Target
    upstream_filename: str
    upstream_sha256: str
    wheel: Path
    sha256: str
    hunks: tuple[HunkResult, ...]
    overlay: tuple[str, ...]
    unlisted_patches: tuple[str, ...] = field(default=())


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """A build makes some 15,000 small objects per wheel (its members, RECORD rows, entries) that
    hold no reference cycles; the cyclic collector's passes over them cost 40-50 ms of the 0.55 s
    0.7.4 build (docs/bench.md). Reference counting frees them as before; collection resumes after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def build_targets(targets: Sequence[Target], options: Options, log: Log = lambda _: None) -> list[Built]:
    """Build every target's wheels; the dist dir changes only if all of them succeed."""
    with _no_cycle_collection():
        return _build_targets(targets, options, log)


def _build_targets(targets: Sequence[Target], options: Options, log: Log) -> list[Built]:
    """Each wheel's four steps in turn: the pin (once a target), the fetch, the pure plan, the write.

    The landing (the dist dir's AtomicWrites) is the write's: made at the first wheel's write, it
    holds every wheel of the run, and SHA256SUMS, until all of them are done.
    """
    built: list[Built] = []
    with contextlib.ExitStack() as landing:
        writes: AtomicWrites | None = None
        for number, target in enumerate(targets, start=1):
            progress.report(f"[{number}/{len(targets)}] {target}")
            upstream, series, overlay = _pin(target, options, log)
            for pin in fetch.select_wheels(upstream, options.source):
                log(f"{target}: {pin.filename}")
                progress.report(f"[{number}/{len(targets)}] {target}: building from {pin.filename}")
                with fetch.open_upstream(upstream, pin, options.source) as reader:  # hashed once, on this handle
                    plan = plan_wheel(upstream, pin, reader.infos, reader.read, series, overlay, fuzz=options.fuzz)
                    writes = writes or landing.enter_context(AtomicWrites(options.dist_dir))
                    with writes.open(plan.filename) as out:
                        digest = write_wheel(out, reader, plan.entries, options.date_time)
                _log_offsets(plan.hunks, log)
                built.append(Built(target, pin.filename, pin.sha256, options.dist_dir / plan.filename,
                                   digest, plan.hunks, plan.overlay, series.unlisted))
        writes = writes or landing.enter_context(AtomicWrites(options.dist_dir))  # no wheel: SHA256SUMS all the same
        _write_sums(writes, options.dist_dir, built)
        writes.commit()
    return built


def sweep_leftovers(options: Options) -> list[Path]:
    """What a killed build left (SIGKILL, a power loss; SIGTERM and Ctrl-C remove theirs): its temporaries in the
    dist dir and its download folders in the cache, those no live process holds (files.sweep), nothing else."""
    return [*sweep(options.dist_dir, LANDING), *fetch.sweep_downloads(options.source)]


def _write_sums(writes: AtomicWrites, dist_dir: Path, built: Sequence[Built]) -> None:
    """SHA256SUMS: what this build wrote, and the earlier entries whose wheel is still there."""
    new = {b.wheel.name: b.sha256 for b in built}
    sums = {n: d for n, d in read_sums(dist_dir / SHA256SUMS).items() if (dist_dir / n).exists()}
    with writes.open(SHA256SUMS) as out:
        out.write(format_sums({**sums, **new}))


def _pin(target: Target, options: Options, log: Log) -> tuple[Upstream, Series, tuple[OverlayFile, ...]]:
    """The release's pins (upstream.toml), its series and the overlay files it gets."""
    upstream = load_upstream(options.patches_dir, target)
    series = read_series(upstream.directory)
    for name in series.unlisted:
        log(f"warning: {upstream.directory / name} is not named in the series and is not applied")
    return upstream, series, load_overlay(options.overlay_dir, target)


def _log_offsets(hunks: Sequence[HunkResult], log: Log) -> None:
    """The hunks that landed away from where their patch says, each a line."""
    for hunk in hunks:
        if hunk.placement.offset or hunk.placement.fuzz:
            log(f"  {hunk.patch}: {hunk.path} hunk {hunk.number} {hunk.header} "
                f"at offset {hunk.placement.offset:+d}, fuzz {hunk.placement.fuzz}")


def install_commands(built: Sequence[Built], shipped: Sequence[Target], dist_dir: Path) -> list[str]:
    """The pip commands that install what was just built, whatever else the dist dir holds.

    The releases a stack ships unpatched come from the user's index first (they bring the upstream
    pins); then the patched wheels, by exact version from the dist dir alone, over them.
    """
    commands = [f"pip install {' '.join(str(t) for t in shipped)}"] if shipped else []
    pins = sorted({f"{b.target.dist}=={Version(b.target.version).public}+{_local(b.wheel.name)}" for b in built})
    if pins:
        commands.append(f"pip install --no-deps --no-index --find-links {dist_dir} {' '.join(pins)}")
    return commands


def _local(filename: str) -> str:
    return str(parse_wheel_filename(filename)[1].local)
