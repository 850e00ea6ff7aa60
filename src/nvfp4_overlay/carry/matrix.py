"""The drift matrix: which releases each series is checked on, each release fetched and read once."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .. import progress
from ..audit import PublicFunction, api_audit, cuda_audit, load_audit
from ..audit import new_apis as drift_new_apis
from ..errors import ConfigError, FetchError
from ..patch import Series, Target, read_series
from ..wheel import WheelReader, fetch
from . import releases
from .drift import PatchDrift, drift_series
from .releases import ReleaseWheel


class Verdict(str, Enum):
    """What one (series, release) cell asks of a person, from the release's side (a patch's own state,
    on that release, is placement.State)."""

    CARRIED = "carried"  # every patch applies, ports by three-way merge, or is obsolete by its header
    NEEDS_PERSON = "needs-a-person"  # a failure: the series does not carry to a release that needs it
    NEWS = "news"  # it does not carry to a release that carries its own series, which ships there
    NOT_NEEDED = "not-needed-there"  # it does not carry to a release shipped unpatched by design


@dataclass(frozen=True)
class Cell:
    """One series (by its pinned release) on one release of its distribution."""

    series: Target
    release: ReleaseWheel
    patches: tuple[PatchDrift, ...]
    # why a series is not needed on this release (by_design.shipped_unpatched), "" where it may be
    by_design: str = ""

    @property
    def clean(self) -> bool:
        return all(p.state.clean for p in self.patches)

    @property
    def needs_person(self) -> bool:
        """Some patch does not carry over unattended (whether that is a failure: verdict)."""
        return any(p.state.needs_person for p in self.patches)

    @property
    def verdict(self) -> Verdict:
        """A patch that does not carry is a failure only where the series is what ships: not on a
        release that carries its own series (news: `--against pinned` holds that series to its
        wheels), nor on one a stack ships unpatched by design (nothing raw remains there)."""
        if not self.needs_person:
            return Verdict.CARRIED
        if self.by_design:
            return Verdict.NOT_NEEDED
        if self.release.pinned and self.release.target != self.series:
            return Verdict.NEWS
        return Verdict.NEEDS_PERSON

    @property
    def news(self) -> bool:
        return self.verdict is Verdict.NEWS

    @property
    def fails(self) -> bool:
        return self.verdict is Verdict.NEEDS_PERSON


@dataclass
class Matrix:
    cells: list[Cell]
    series: dict[Target, Series]
    skipped: dict[Target, str] = field(default_factory=dict)  # releases pip could not provide, and why
    # releases without a series of their own whose public FlashInfer functions that reach a kernel
    # loader include some the serving-API audit does not classify (drift.new_apis)
    new_apis: dict[Target, tuple[PublicFunction, ...]] = field(default_factory=dict)
    # the same releases' CUDA-version calls the CUDA audit does not list (cuda_audit.new_call_problem)
    new_cuda_calls: dict[Target, tuple[str, ...]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0 when every series applies, or ports by three-way merge, to its own release and to every
        release asked about that has no series of its own and is not shipped unpatched by design, and
        no release without a series adds an API or a CUDA-version call the audits do not classify; 1
        otherwise, or when a release was skipped."""
        clean = not any(c.fails for c in self.cells) and not self.skipped
        return 0 if clean and not any(self.new_apis.values()) and not any(self.new_cuda_calls.values()) else 1


def plan_releases(
    against: Sequence[str], series: Sequence[Target], versions: Callable[[str], Sequence[Version]]
) -> dict[Target, list[str]]:
    """For each series, the releases to check.

    pinned: its own; latest: the newest on the index; all: every release newer than its own;
    VERSION (with one distribution) or DIST==VERSION: that release, for the series of it and of
    older releases (a series is ported forward, never back).
    """
    dists = sorted({t.dist for t in series})
    wanted: dict[Target, set[str]] = {t: set() for t in series}
    for token in against:
        for target in series:
            if token == "pinned":
                wanted[target].add(target.version)
            elif token == "latest" and versions(target.dist):
                wanted[target].add(str(max(versions(target.dist))))
            elif token == "all":
                wanted[target] |= {str(v) for v in versions(target.dist) if v > Version(target.version)}
        if token in ("pinned", "latest", "all"):
            continue
        dist, sep, version = token.rpartition("==")
        dist = canonicalize_name(dist) if sep else (dists[0] if len(dists) == 1 else "")
        if not dist or dist not in dists:
            msg = (
                f"--against {token}: names no distribution carried "
                f"(series exist for {', '.join(dists) or 'nothing: is --patches-dir right?'})"
            )
            raise ConfigError(msg, item=f"--against {token}", expected=f"DIST==VERSION, DIST one of {', '.join(dists)}",
                              found=token, fix="name the distribution: --dist NAME, or DIST==VERSION")
        try:
            version = str(Version(version))
        except InvalidVersion as exc:
            msg = f"--against {token}: {version!r} is not a PEP 440 version, nor pinned, latest or all"
            raise ConfigError(msg, item=f"--against {token}", expected="pinned, latest, all or a PEP 440 version",
                              found=version, fix="name a release as the index does, e.g. 0.7.4") from exc
        # A series is ported forward, never back: a release checks the series of releases up to its own.
        older = [t for t in series if t.dist == dist and Version(t.version) <= Version(version)]
        if not older:
            oldest = min((t for t in series if t.dist == dist), key=lambda t: Version(t.version))
            msg = (f"--against {token}: no {dist} series is of {version} or older (the oldest is {oldest.version}); "
                   f"a series is checked on its own release and later ones")
            raise ConfigError(msg, item=f"--against {token}", expected=f"a release of {oldest.version} or later",
                              found=version, fix=f"name a release of {oldest.version} or later")
        for target in older:
            wanted[target].add(version)
    return {t: sorted(v, key=Version) for t, v in wanted.items()}


def run_drift(
    plan: dict[Target, list[str]], patches_dir: Path, source: fetch.Source, log: Callable[[str], None],
    by_design: Mapping[Target, str] | None = None,
) -> Matrix:
    """Fetch each release once, read only the members the series touch, and classify every series on it.

    by_design: the releases shipped unpatched by design, and why (by_design.shipped_unpatched)."""
    matrix = Matrix([], {t: read_series(patches_dir / t.dist / t.version) for t in plan})
    with ExitStack() as stack:
        opened: dict[Target, tuple[ReleaseWheel, ReleaseFiles] | None] = {}
        origins: dict[Target, tuple[ReleaseWheel, ReleaseFiles] | None] = {}
        done, total = 0, sum(len(versions) for versions in plan.values())
        for target, versions in plan.items():
            for version in versions:
                done += 1
                progress.report(f"[{done}/{total}] {target} on {target.dist} {version}")
                release = Target(target.dist, version)
                if release not in opened:
                    opened[release] = _open_release(patches_dir, release, source, stack, matrix, log)
                    _new_apis(patches_dir, release, opened[release], matrix, log, source.scans_dir)
                found = opened[release]
                if found is None:
                    continue
                if target not in origins:
                    origins[target] = _open_origin(patches_dir, target, source, stack, log)
                origin = origins[target] or opened.get(target)
                wheel, files = found
                patches = drift_series(matrix.series[target], files.read, files.names, target.dist, version,
                                       origin[1].read if origin else None)
                why = (by_design or {}).get(release, "") if release != target else ""
                matrix.cells.append(Cell(target, wheel, tuple(patches), why))
    return matrix


def _new_apis(patches_dir: Path, release: Target, found: tuple[ReleaseWheel, ReleaseFiles] | None, matrix: Matrix,
              log: Callable[[str], None], store: Path) -> None:
    """A flashinfer-python release without a series of its own: its public API the audit does not classify.
    (A carried release's is held to the audit by the tests.)"""
    if found is None or release.dist != "flashinfer-python" or found[0].pinned:
        return
    log(f"{release}: scanning its public functions that reach a kernel loader")
    matrix.new_apis[release] = drift_new_apis(found[1].read, found[1].names, load_audit(patches_dir), store)
    for fn in matrix.new_apis[release]:
        log(f"warning: {api_audit.problem(release.version, fn, patches_dir)}")
    matrix.new_cuda_calls[release] = new_cuda_calls(patches_dir, release.version, found[1].read, found[1].names)
    for problem in matrix.new_cuda_calls[release]:
        log(f"warning: {problem}")


def new_cuda_calls(patches_dir: Path, version: str, read: Callable[[str], bytes | None],
                   names: Sequence[str]) -> tuple[str, ...]:
    """A release's CUDA-version calls that the CUDA audit does not list, each as a refusal to act on
    (a call is new whatever function it sits in)."""
    audit = cuda_audit.load_audit(patches_dir)
    files = {n: data.decode("utf-8", "replace") for n in names
             if n.endswith(".py") and not n.startswith("flashinfer/data/") and (data := read(n)) is not None}
    return tuple(f"{version}: {cuda_audit.new_call_problem(s, audit, patches_dir)}"
                 for s in cuda_audit.unclassified_in(files, audit))


class ReleaseFiles:
    """The members of one release wheel, decompressed only when a series asks for them, once."""

    def __init__(self, reader: WheelReader) -> None:
        self.reader = reader
        self.names = sorted(reader.infos)
        self._read: dict[str, bytes | None] = {}

    def read(self, path: str) -> bytes | None:
        if path not in self._read:
            self._read[path] = self.reader.read(path) if path in self.reader.infos else None
        return self._read[path]


def _open_origin(
    patches_dir: Path, series: Target, source: fetch.Source, stack: ExitStack, log: Callable[[str], None]
) -> tuple[ReleaseWheel, ReleaseFiles] | None:
    """The series' own pinned wheel, the base of the three-way merge; without it, drift merges nothing."""
    try:
        wheel = releases.release_wheel(patches_dir, series, source)
    except FetchError as exc:
        log(f"warning: {series}: no three-way merge ({exc})")
        return None
    return wheel, ReleaseFiles(stack.enter_context(WheelReader(wheel.path)))


def _open_release(
    patches_dir: Path,
    release: Target,
    source: fetch.Source,
    stack: ExitStack,
    matrix: Matrix,
    log: Callable[[str], None],
) -> tuple[ReleaseWheel, ReleaseFiles] | None:
    try:
        wheel = releases.release_wheel(patches_dir, release, source)
    except FetchError as exc:
        log(f"warning: {release}: skipped: {exc}")
        matrix.skipped[release] = str(exc)
        return None
    trust = "pinned in upstream.toml" if wheel.pinned else "unpinned: as the index served it"
    log(f"{release}: {wheel.filename} sha256 {wheel.sha256} ({trust})")
    reader = stack.enter_context(WheelReader(wheel.path))
    releases.check_wheel(wheel, reader)  # a wheel that is not the release it says is refused, never "exact"
    return wheel, ReleaseFiles(reader)
