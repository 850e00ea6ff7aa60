"""refresh: a series ported to a new release, only where every hunk applies exactly or at an offset.

The new patches are regenerated from the release's own pre- and post-images (difflib, 3 lines of
context), so their line numbers and context are the release's; a fuzzy placement is never baked in.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .. import files
from ..audit import api_audit, api_rules, new_apis, routes
from ..errors import ConfigError, PatchError, Refused
from ..oracle import behaviour
from ..patch import (
    Series,
    Target,
    Upstream,
    UpstreamWheel,
    apply_series,
    decode,
    load_upstream,
    read_series,
    split_lines,
)
from ..wheel import WheelReader, fetch
from . import releases, report
from .drift import BROKEN, PatchDrift, State, drift_series
from .matrix import Cell, Matrix, ReleaseFiles
from .releases import ReleaseWheel

_DIFF_START = re.compile(r"^(diff --git |--- |\+\+\+ |Index: |---$)")
_LAST_UPDATE = re.compile(r"^Last-Update:.*$", re.MULTILINE)


@dataclass(frozen=True)
class Ported:
    """The new series in memory: patch texts in series order, and what was dropped and why."""

    patches: tuple[tuple[str, str], ...]  # (file name, text)
    dropped: tuple[str, ...]  # sentences for the user and the series file


def port_series(
    series: Series, drifts: Sequence[PatchDrift], version: str, *, drop_upstream: bool, today: date
) -> Ported:
    """Regenerate every patch on the release, or refuse with every reason at once. Pure: no I/O."""
    problems = []
    for drift in drifts:
        has_upstream_hunks = any(h.state is State.UPSTREAM for h in drift.hunks)
        if drift.state in BROKEN:
            problems.append(f"{drift.name}: {drift.state.value}: {drift.reason()}")
        elif drift.state is State.INERT:  # applies, and would do nothing: never ported unattended
            problems.append(f"{drift.name}: inert: {drift.reason()}")
        elif has_upstream_hunks and drift.state is not State.OBSOLETE and not drop_upstream:
            problems.append(
                f"{drift.name}: {drift.state.value}: {drift.reason()}; rerun with --drop-upstream to drop it")
    if problems:
        msg = (
            "refresh refused, nothing written (a hunk that neither applies nor merges, or a patch that would no "
            "longer act, needs a person):\n  "
            + "\n  ".join(problems)
        )
        raise Refused(msg, path=series.directory, item=version, expected="every hunk exact, offset or merges",
                      found="; ".join(problems), fix="port the hunks named by hand (or --drop-upstream where upstream)")
    patches: list[tuple[str, str]] = []
    dropped = []
    for drift in drifts:
        upstream_hunks = [h for h in drift.hunks if h.state is State.UPSTREAM]
        body = "" if drift.state is State.OBSOLETE else _diff(drift)
        if not body:
            why = (
                f"Applied-Upstream {drift.applied_upstream}"
                if drift.state is State.OBSOLETE
                else "every hunk is upstream")
            dropped.append(f"{drift.name}: dropped, {why} in {version}")
            continue
        dropped += [
            f"{drift.name}: {h.path} hunk {h.number} ({h.header}) dropped, already upstream in {version}"
            for h in upstream_hunks
        ]
        patches.append((drift.name, _header(decode(drift.patch.path.read_bytes()), today) + body))
    if not patches:
        msg = (
            f"refresh refused, nothing written: no patch is left to port to {version} ({'; '.join(dropped)})")
        raise Refused(msg, path=series.directory, item=version, expected="a patch left to port",
                      found="; ".join(dropped), fix=f"{version} needs no series of its own: ship it unpatched")
    return Ported(tuple(patches), tuple(dropped))


def with_routes(ported: Ported, overlay_dir: Path, wheel: ReleaseWheel) -> Ported:
    """The port with its route patch (routes.PATCH, if it has one) as `nvfp4-overlay routes` writes it
    for the release: a routed entry point the old release lacked is routed too, placed by its name."""
    if routes.PATCH not in {name for name, _ in ported.patches}:
        return ported
    with WheelReader(wheel.path) as reader:
        texts = api_audit.scan_wheel_files({n: reader.read(n) for n in reader.infos if api_audit.scanned(n)})
    text = routes.route_patch(texts, routes.routed_names(overlay_dir))
    patches = tuple((name, text if name == routes.PATCH else old) for name, old in ported.patches)
    return Ported(patches, ported.dropped)


def exact_after_routes(staged: Path, wheel: ReleaseWheel, today: date) -> None:
    """Each staged patch that now applies at an offset (the route patch written anew routes more entry
    points in a file it touches) regenerated against the files as the patches before it leave them."""
    series = read_series(staged)
    with WheelReader(wheel.path) as reader:
        files: dict[str, bytes | None] = {}

        def read(path: str) -> bytes | None:
            return files[path] if path in files else (reader.read(path) if path in reader.infos else None)

        for patch in series.patches:
            applied = apply_series(dataclasses.replace(series, patches=(patch,)), read)
            if any(h.placement.offset for h in applied.hunks):
                body: list[str] = []
                for fp in patch.files:
                    before, after = split_lines(decode(read(fp.path) or b"")), split_lines(decode(applied.files[fp.path] or b""))
                    body += difflib.unified_diff(before, after, f"a/{fp.path}", f"b/{fp.path}", n=3)
                patch.path.write_bytes((_header(decode(patch.path.read_bytes()), today) + "".join(body)).encode(
                    "utf-8", "surrogateescape"))
            files.update(applied.files)


def _header(text: str, today: date) -> str:
    """The DEP-3 header as it was (a git diffstat, stale now, is cut), with Last-Update set to today."""
    kept = []
    for line in split_lines(text):
        if _DIFF_START.match(line):
            break
        kept.append(line)
    header = "".join(kept).rstrip("\n")
    stamp = f"Last-Update: {today.isoformat()}"
    header = (
        _LAST_UPDATE.sub(stamp, header) if _LAST_UPDATE.search(header) else f"{header}\n{stamp}".lstrip("\n")
    )
    return header + "\n\n"


def _diff(drift: PatchDrift) -> str:
    """Unified diffs, -p1 names, from the pre- and post-image of every file the patch touches."""
    out = []
    for image in drift.images:
        before, after = list(image.before or ()), list(image.after or ())
        if before == after and image.patch.source == image.patch.target:
            continue  # every hunk of this file is upstream
        source = f"a/{image.patch.source}" if image.patch.source else "/dev/null"
        target = f"b/{image.patch.target}" if image.patch.target else "/dev/null"
        for line in difflib.unified_diff(before, after, source, target, n=3):
            # difflib leaves a last line without its newline as it is; diff -u marks it
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def series_text(old: Series, ported: Ported, source: Target, version: str, today: date) -> str:
    """The old series file in its order and with its comments, less the dropped patches.

    One "refreshed from" line: the one this refresh writes (a chain of refreshes keeps no history
    here; git has it), and the old release's name in the comments becomes the new one's.
    """
    kept = {name for name, _ in ported.patches}
    lines = [
        f"# refreshed from {source.dist} {source.version} by 'nvfp4-overlay refresh' on {today.isoformat()}\n"
    ]
    for line in split_lines(decode((old.directory / "series").read_bytes())):
        if line.startswith("# refreshed from "):
            continue
        entry = line.split("#", 1)[0].strip()
        name = entry.split()[0] if entry else ""
        if not name:
            lines.append(line.replace(f"{source.dist} {source.version}:", f"{source.dist} {version}:"))
            continue
        lines.append(line if name in kept else f"# {line.rstrip()}  (dropped by refresh)\n")
    return "".join(lines)


def upstream_text(wheels: Sequence[ReleaseWheel], command: str) -> str:
    rows = [
        f'\n[[wheel]]\nfilename = "{w.filename}"\nsha256 = "{w.sha256}"\n'
        for w in sorted(wheels, key=lambda w: w.filename)
    ]
    return (
        "# The upstream wheels this series applies to; every file is checked against its sha256.\n"
        f"# Written by '{command}'.\n"
        "# The sha256 are those the index served (pip checked them): check them before you trust them.\n"
        "revision = 1  # this series' revision, the label's second number (+nvfp4.<overlay>.<revision>, the overlay's in ../overlay.toml); bump it whenever this series changes\n"
        + "".join(rows)
    )


# --- a refresh, start to end ------------------------------------------------------------------------


@dataclass(frozen=True)
class Refreshed:
    """A series written to patches/DIST/TO."""

    directory: Path | None  # None: a dry run, checked and not written
    ported: Ported
    wheels: tuple[ReleaseWheel, ...]
    report: Matrix | None = None  # the drift of the old series on the release: how each hunk was placed


@dataclass(frozen=True)
class Request:
    """One refresh, as the command line asks it (the CLI builds it, as build's Options): port dist's
    from_version series to to_version, reading the checkout's patches_dir and overlay_dir and the wheels
    from source. drop_upstream drops hunks upstream already has; dry_run checks everything and writes
    nothing; quick runs the patched ladder's first case of each entry point only."""

    patches_dir: Path
    overlay_dir: Path
    source: fetch.Source
    dist: str
    from_version: str
    to_version: str
    drop_upstream: bool = False
    dry_run: bool = False
    quick: bool = False


def refresh(request: Request, *, log: Callable[[str], None]) -> Refreshed:
    """Port the request's series to its release, check it by behaviour, and write it; or raise Refused,
    writing nothing. A refusal carries the drift report (refused.report) that says which hunk needs a
    person and why."""
    patches_dir, overlay_dir, source_wheels = request.patches_dir, request.overlay_dir, request.source
    dist = canonicalize_name(request.dist)
    source, target = Target(dist, request.from_version), Target(dist, _version(request.to_version))
    old = load_upstream(patches_dir, source)
    series = read_series(old.directory)
    dest = patches_dir / dist / target.version
    if dest.exists():
        msg = f"{dest}: already exists, and refresh never overwrites a series"
        raise ConfigError(msg, path=dest, item=str(target), expected="no series yet", found="a series",
                          fix="remove it first if it is stale, or refresh to another release")
    # 1. The new release's wheels, each checked to be the release it says; the old one, the merge's base.
    wheels = _release_wheels(patches_dir, old, target, source_wheels, log)
    origin = releases.release_wheel(patches_dir, source, source_wheels)
    # 2. Every hunk placed on the release (drift), and said how.
    drifts, matrix = _drift_everywhere(series, source, target, wheels, origin.path)
    for line in report.placement_lines(matrix)[1:-1]:
        log(line)
    today = datetime.now(timezone.utc).date()
    try:
        # 2b. The release's public API: a new function that reaches a kernel loader needs a person first.
        _no_new_api(patches_dir, overlay_dir, target, wheels[0], matrix, log, source_wheels.scans_dir)
        # 3. The patches regenerated exact against the release, or the refusal with every reason.
        ported = port_series(series, drifts, target.version, drop_upstream=request.drop_upstream, today=today)
        # 3b. The route patch written anew from the release: every entry point the overlay routes that it defines.
        ported = with_routes(ported, overlay_dir, wheels[0])
        with tempfile.TemporaryDirectory(prefix="nvfp4-refresh-") as tmp:
            # 4. Behaviour before text: the ported series is built and held to upstream before it is written.
            staged = Path(tmp) / "patches" / dist / target.version
            stage_series(staged, ported, series_text(series, ported, source, target.version, today),
                         upstream_text(wheels, f"nvfp4-overlay refresh {dist} {source.version} {target.version}"))
            exact_after_routes(staged, wheels[0], today)
            _check_exact(read_series(staged), wheels)
            log(f"{target}: building the ported series and checking its behaviour against upstream")
            _behaves(target, Path(tmp), overlay_dir, source_wheels, patches_dir, dest, request.quick)
            # 5. Written with one rename, unless a dry run.
            if not request.dry_run:
                install_series(staged, dest)
    except Refused as exc:  # the refusal made again with the drift report that says which hunk and why
        raise exc.with_report(matrix) from exc
    if request.dry_run:
        return Refreshed(None, ported, tuple(wheels), matrix)
    load_upstream(patches_dir, target)  # the file it wrote reads back
    return Refreshed(dest, ported, tuple(wheels), matrix)


def _release_wheels(patches_dir: Path, old: Upstream, target: Target, source: fetch.Source,
                    log: Callable[[str], None]) -> list[ReleaseWheel]:
    wheels = releases.release_wheels(target, [w.filename for w in old.wheels], source,
                                     releases.carried_versions(patches_dir, target.dist))
    for w in wheels:
        log(f"{target}: {w.filename} sha256 {w.sha256} (unpinned: as the index served it)")
    if all(_pure(w) for w in old.wheels) and not all(_pure(w) for w in wheels):
        log(f"warning: {old.target} ships one pure wheel, {target} platform wheels: only {len(wheels)} of them "
            f"were fetched; ask for the others with --python-version/--platform, or add them to upstream.toml")
    return wheels


def _behaves(target: Target, tmp: Path, overlay_dir: Path, source: fetch.Source, audit: Path, dest: Path,
             quick: bool = False) -> None:
    """behaviour.check_series on the staged series, or Refused with its problems."""
    problems = behaviour.check_series(target, tmp / "patches", overlay_dir, source, tmp / "work", audit=audit,
                                      quick=quick)
    if problems:
        msg = ("refresh refused, nothing written: the ported series applies, but does not behave:\n  "
               + "\n  ".join(problems))
        refused = Refused(msg, path=dest, item=str(target), expected="the behaviour of upstream",
                          found="; ".join(problems),
                          fix="change the overlay or the series so that upstream's behaviour holds", problems=problems)
        raise refused


def _no_new_api(patches_dir: Path, overlay_dir: Path, target: Target, wheel: ReleaseWheel, matrix: Matrix,
                log: Callable[[str], None], store: Path | None = None) -> None:
    """Refused, before anything is built, when the release has public FlashInfer functions that reach a
    kernel loader and the serving-API audit does not classify: a port cannot be judged without them.

    A function the overlay already routes (its entries.py names it) is not new: the route patch gets its
    route and the behaviour checks hold it, and `make audit-api` records it once the series is written
    (the audit is made from the carried releases, so it cannot know a release that is not carried yet)."""
    if target.dist != "flashinfer-python":
        return
    log(f"{target}: scanning its public functions that reach a kernel loader")
    routed = routes.routed_names(overlay_dir)
    with WheelReader(wheel.path) as reader:
        found = tuple(fn for fn in new_apis(lambda n: reader.read(n) if n in reader.infos else None,
                                            sorted(reader.infos), api_audit.load_audit(patches_dir), store)
                      if not api_rules.is_routed(fn.key, routed))
    matrix.new_apis[target] = found
    if found:
        problems = [api_audit.problem(target.version, fn, patches_dir) for fn in found]
        msg = ("refresh refused, nothing written: the release adds public API that the serving-API audit does not "
               "classify (the behaviour checks need it routed or declared out of scope first):\n  " + "\n  ".join(problems))
        refused = Refused(msg, path=patches_dir / "flashinfer-python" / api_audit.AUDIT, item=str(target),
                          expected="every public function that reaches a kernel loader classified",
                          found=", ".join(fn.key for fn in found),
                          fix="route each (overlay entries.py) or declare it out of scope in the audit, then refresh "
                              "again",
                          problems=problems)
        raise refused


def _pure(wheel: UpstreamWheel | ReleaseWheel) -> bool:
    return all(tag.platform == "any" for tag in parse_wheel_filename(wheel.filename)[3])


def _version(text: str) -> str:
    try:
        return str(Version(text))
    except InvalidVersion as exc:
        msg = f"refresh: TO_VERSION {text!r} is not a PEP 440 version"
        raise ConfigError(msg, item="TO_VERSION", expected="a PEP 440 version", found=text,
                          fix="name the release as the index does, e.g. 0.7.4") from exc


def _drift_everywhere(
    series: Series, source: Target, target: Target, wheels: Sequence[ReleaseWheel], origin: Path
) -> tuple[list[PatchDrift], Matrix]:
    """Drift on every wheel of the release; the files a series touches must be the same in all of them.

    `origin` is the old release's pinned wheel, the base of the three-way merge.
    """
    results: list[list[PatchDrift]] = []
    with WheelReader(origin) as old:
        base = ReleaseFiles(old)
        for wheel in wheels:
            with WheelReader(wheel.path) as reader:
                releases.check_wheel(wheel, reader)  # before drift reads it: a wheel that is not what it says
                files = ReleaseFiles(reader)
                results.append(
                    drift_series(series, files.read, files.names, target.dist, target.version, base.read)
                )
    for wheel, other in zip(wheels[1:], results[1:], strict=True):
        if [p.images for p in other] != [p.images for p in results[0]]:
            msg = (
                f"{wheel.filename}: the files the series touches differ from those in {wheels[0].filename}; "
                f"one series cannot serve both")
            raise PatchError(msg, path=wheel.path, item=wheel.filename, expected=f"the files of {wheels[0].filename}",
                             found="other files", fix="port the series by hand, one per wheel")
    return results[0], Matrix([Cell(source, wheels[0], tuple(results[0]))], {source: series})


def stage_series(staged: Path, ported: Ported, series: str, upstream: str) -> None:
    """The ported series' files, in a directory of their own (the build and the checks read it there)."""
    staged.mkdir(parents=True)
    for name, text in ported.patches:
        (staged / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    (staged / "series").write_text(series)
    (staged / "upstream.toml").write_text(upstream)


def install_series(staged: Path, dest: Path) -> None:
    """Copy the checked series beside dest under a temporary name, then rename it into place."""
    temp = files.staging_dir(dest)
    try:
        for path in sorted(staged.iterdir()):
            shutil.copyfile(path, temp / path.name)
        files.replace_dir(temp, dest)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _check_exact(series: Series, wheels: Sequence[ReleaseWheel]) -> None:
    """The regenerated series must apply to every wheel with no offset and no fuzz."""
    for wheel in wheels:
        with WheelReader(wheel.path) as reader:
            applied = apply_series(series, lambda p: reader.read(p) if p in reader.infos else None)
        moved = [h for h in applied.hunks if h.placement.offset or h.placement.fuzz]
        if moved:
            msg = (
                f"{wheel.filename}: the refreshed series applies at an offset ({moved[0]}); a bug in refresh")
            raise PatchError(msg, path=wheel.path, item=f"{moved[0].path} hunk {moved[0].number}",
                             expected="offset 0, fuzz 0", found=f"offset {moved[0].placement.offset}",
                             fix="report it: refresh must regenerate exact hunks")
