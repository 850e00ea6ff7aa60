"""A refresh that proposes itself: each new upstream release ported, checked, and proposed for review.

For each flashinfer-python release newer than every carried one, `refresh` ports the series of the
nearest carried release below it (so a patch such as 0003 comes along while it still applies) and
runs the behaviour checks; the new series becomes a pull request whose body is the report (how each
hunk was placed, what was dropped, the wheels, the checks). For each SGLang release newer than every
stack, its flashinfer-python pin is read from the wheel's METADATA (Requires-Dist) and a stack that
ships it unpatched with the pinned series is proposed, after the checks of that series. A refused
port, or a pin no series carries, becomes an issue with the report instead. `forge` (github.GitHub,
or a test's) is where proposals go; everything else here is the library's own work.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path
from typing import Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..errors import IntegrityError, Refused
from ..oracle import behaviour
from ..patch import Target, load_stacks
from ..wheel import WheelReader, fetch, metadata
from . import releases, report
from .github import Proposal
from .refresh import Refreshed, Request, refresh

SERIES_DIST = "flashinfer-python"  # ported release by release
STACK_DIST = "sglang"  # a new release becomes a stack over its flashinfer-python pin
BODY_LIMIT = 60_000  # GitHub refuses bodies over 65,536 characters


class Forge(Protocol):
    def existing(self, proposal: Proposal) -> str | None: ...

    def open(self, proposal: Proposal) -> str: ...


@dataclass
class Outcome:
    """One new release and what became of it: the proposal, and where it went (None: already there)."""

    release: Target
    proposal: Proposal
    url: str | None = None
    already: str | None = None


@dataclass
class _Run:
    patches_dir: Path  # a copy of the project's patches/: refresh writes there, the project's stays as it is
    prefix: str  # the project's patches/ as a path in the repository
    overlay_dir: Path
    source: fetch.Source
    log: Callable[[str], None]
    quick: bool = False  # refresh --quick
    ported: dict[str, Refreshed] = field(default_factory=dict)  # flashinfer-python releases ported now
    waiting: set[Target] = field(default_factory=set)  # releases whose proposal is already open


_Maker = Callable[[_Run, Target, Sequence[Version]], "Outcome | None"]


def propose(patches_dir: Path, overlay_dir: Path, source: fetch.Source, forge: Forge, *,
            root: Path | None = None, log: Callable[[str], None] = lambda _: None,
            quick: bool = False) -> list[Outcome]:
    """Port, check and propose every new release, unless the forge already has its proposal.

    Paths in a proposal are relative to `root`, the repository (by default patches_dir's parent).
    Nothing is written to patches_dir: the ports are made in a copy of it, and proposed from there.
    quick: refresh's behaviour checks with the patched ladder's first case of each entry point.
    """
    with tempfile.TemporaryDirectory(prefix="nvfp4-propose-") as tmp:
        work = Path(tmp) / "patches"
        shutil.copytree(patches_dir, work)
        run = _Run(work, _prefix(patches_dir, root or patches_dir.resolve().parent), overlay_dir, source, log,
                   quick=quick)
        carried = sorted(map(Version, releases.carried_versions(work, SERIES_DIST)))
        stacked = sorted({Version(t.version) for s in load_stacks(work).stacks
                          for t in (*s.targets, *s.upstream) if t.dist == STACK_DIST})
        todo: list[tuple[Target, _Maker]] = [(t, _series_release) for t in _newer(run, SERIES_DIST, carried)]
        todo += [(t, _stack_release) for t in _newer(run, STACK_DIST, stacked)]
        outcomes = []
        for target, make in todo:
            already = next((w for stub in _stubs(target) if (w := forge.existing(stub))), None)
            if already is not None:
                run.waiting.add(target)
                outcomes.append(Outcome(target, _stubs(target)[0], already=already))
                log(f"{target}: already proposed ({already})")
                continue
            outcome = make(run, target, carried)
            if outcome is not None:
                outcome.url = forge.open(outcome.proposal)
                outcomes.append(outcome)
                log(f"{target}: {outcome.proposal.kind} {outcome.url}")
    return outcomes


def _stubs(target: Target) -> tuple[Proposal, Proposal]:
    """The pull request and the issue a release can become, by the names that find them again."""
    what = "refresh" if target.dist == SERIES_DIST else "stack"
    issue = ("the port needs a person" if target.dist == SERIES_DIST else "no stack proposed")
    return (Proposal("pull", "", "", f"nvfp4-overlay/{what}-{target.dist}-{target.version}"),
            Proposal("issue", f"{target.dist} {target.version}: {issue}", ""))


def _newer(run: _Run, dist: str, carried: Sequence[Version]) -> list[Target]:
    newest = max(carried, default=None)
    found = releases.index_versions(dist, run.source, run.patches_dir)
    return [Target(dist, str(v)) for v in found if newest is None or v > newest]


# --- a flashinfer-python release: refresh from the nearest carried one -------------------------------


def _series_release(run: _Run, target: Target, carried: Sequence[Version]) -> Outcome | None:
    below = [v for v in carried if v < Version(target.version)]
    start = Target(target.dist, str(max(below)))
    command = f"nvfp4-overlay refresh {target.dist} {start.version} {target.version} --drop-upstream"
    run.log(f"{target}: {command}")
    try:
        done = refresh(Request(run.patches_dir, run.overlay_dir, run.source, target.dist, start.version,
                               target.version, drop_upstream=True, quick=run.quick), log=run.log)
    except (Refused, IntegrityError) as exc:
        matrix = getattr(exc, "report", None)
        body = _body(f"`{command}` refused the port: nothing was written.", str(exc),
                     report.markdown(matrix) if matrix is not None else "")
        return Outcome(target, dataclasses.replace(_stubs(target)[1], body=body))
    run.ported[target.version] = done
    assert done.directory is not None and done.report is not None
    checks = "no problem: " + ", ".join(_CHECKS)
    body = _body(f"`{command}` ported the {start.version} series to {target.version}, and the behaviour "
                 f"checks found {checks}.", _dropped(done), report.markdown(done.report))
    files = _files(run, done.directory)
    title = f"{target.dist} {target.version}: the {start.version} series, ported by refresh"
    return Outcome(target, dataclasses.replace(_stubs(target)[0], title=title, body=body, files=files))


_CHECKS = ("the build", "every CUDA-version call site classified by the audit", "the CUDA-version grid against "
           "upstream", "the trace ladder of every routed entry point on SM120 and SM100")


def _dropped(done: Refreshed) -> str:
    if not done.ported.dropped:
        return ""
    return "Dropped:\n\n" + "\n".join(f"- {line}" for line in done.ported.dropped)


# --- an SGLang release: a stack over its pin ----------------------------------------------------------


def _stack_release(run: _Run, target: Target, carried: Sequence[Version]) -> Outcome | None:
    wheel = releases.release_wheel(run.patches_dir, target, run.source)
    with WheelReader(wheel.path) as reader:
        releases.check_wheel(wheel, reader)
        info = metadata.find_dist_info(wheel.filename, reader.names, reader.read)
        requires = HeaderParser().parsestr(reader.read(f"{info.dist_info}/METADATA").decode("utf-8", "replace"))
    pin = pinned_release(requires.get_all("Requires-Dist") or [], SERIES_DIST)
    pull, issue = _stubs(target)
    where = f"{wheel.filename} (sha256 {wheel.sha256}, as the index served it)"
    if pin is None:
        why = f"{where} pins no single {SERIES_DIST} release (Requires-Dist == X): a stack needs one."
        return Outcome(target, dataclasses.replace(issue, body=_body(why)))
    if Target(SERIES_DIST, pin) in run.waiting:
        run.log(f"{target}: waits for the proposal of its pin {SERIES_DIST}=={pin} (open already)")
        return None
    fresh = run.ported.get(pin)
    if fresh is None and Version(pin) not in carried:
        why = f"{where} pins {SERIES_DIST}=={pin}, which no series carries and this run did not port."
        return Outcome(target, dataclasses.replace(issue, body=_body(why)))
    problems = [] if fresh is not None else _check(run, Target(SERIES_DIST, pin))
    if problems:
        why = f"{where} pins {SERIES_DIST}=={pin}, whose series does not behave:"
        return Outcome(target, dataclasses.replace(issue, body=_body(why, "\n".join(f"- {p}" for p in problems))))
    stacks = run.patches_dir / "stacks.toml"
    text = with_stack(stacks.read_text(), target.version, pin)
    files = {_relative(run, stacks): text.encode()}
    if fresh is not None and fresh.directory is not None:
        files |= _files(run, fresh.directory)
    said = (f"{where} pins {SERIES_DIST}=={pin} (Requires-Dist). The stack ships SGLang {target.version} unpatched "
            f"over the patched {pin}; " + ("this run ported that series (its report is below)." if fresh else
                                          f"the behaviour checks of the {pin} series found no problem: "
                                          + ", ".join(_CHECKS) + "."))
    reports = [report.markdown(fresh.report)] if fresh is not None and fresh.report is not None else []
    body = _body(said, "Whether SGLang itself calls a raw FlashInfer entry point inside compiled code is not "
                       "checked here: audit it before merging.", *reports)
    title = f"{target.dist} {target.version}: a stack over flashinfer-python {pin}"
    return Outcome(target, dataclasses.replace(pull, title=title, body=body, files=files))


def pinned_release(requires: Sequence[str], dist: str) -> str | None:
    """The one release of dist that Requires-Dist pins with ==, outside extras; None if none or several."""
    found = set()
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != dist or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        pins = [s.version for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
        found |= set(pins) if len(pins) == 1 else {"?"}
    return found.pop() if len(found) == 1 and "?" not in found else None


def with_stack(text: str, version: str, pin: str) -> str:
    """stacks.toml with a stack for SGLang `version` (unpatched) over flashinfer-python `pin`, after the
    last SGLang stack, the file's comments and order kept."""
    block = (f'[stacks."sglang-{version}"]\nsglang = {{ version = "{version}", patched = false }}\n'
             f'{SERIES_DIST} = "{pin}"\n')
    lines = text.splitlines(keepends=True)
    heads = [i for i, line in enumerate(lines) if line.startswith('[stacks."sglang-')]
    if not heads:
        return text.rstrip("\n") + "\n\n" + block
    end = next((i for i in range(heads[-1], len(lines)) if not lines[i].strip()), len(lines))
    tail = "".join(lines[end:])
    return "".join(lines[:end]).rstrip("\n") + "\n\n" + block + ("\n" + tail.lstrip("\n") if tail.strip() else "")


def _check(run: _Run, target: Target) -> list[str]:
    run.log(f"{target}: the behaviour checks of its series")
    with tempfile.TemporaryDirectory(prefix="nvfp4-propose-") as tmp:
        return behaviour.check_series(target, run.patches_dir, run.overlay_dir, run.source, Path(tmp),
                                      audit=run.patches_dir)


# --- what goes to the forge --------------------------------------------------------------------------


def _files(run: _Run, directory: Path) -> dict[str, bytes]:
    return {_relative(run, p): p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _relative(run: _Run, path: Path) -> str:
    return f"{run.prefix}/{path.relative_to(run.patches_dir).as_posix()}"


def _prefix(patches_dir: Path, root: Path) -> str:
    try:
        return patches_dir.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return "patches"  # the copy the package carries: the repository's is patches/


def _body(*parts: str) -> str:
    text = "\n\n".join(p.strip() for p in parts if p.strip())
    text += "\n\n_Written by `nvfp4-overlay propose` (.github/workflows/refresh.yml)._\n"
    return text if len(text) <= BODY_LIMIT else text[: BODY_LIMIT - 40] + "\n\n... (cut: see the workflow's log)\n"


def document(outcomes: Sequence[Outcome]) -> dict[str, object]:
    return {"proposals": [{"release": str(o.release), "kind": o.proposal.kind, "title": o.proposal.title,
                           "branch": o.proposal.branch or None, "files": sorted(o.proposal.files or {}),
                           "url": o.url, "already": o.already} for o in outcomes]}


def text(outcomes: Sequence[Outcome], dry_run: bool) -> str:
    if not outcomes:
        return "no upstream release is newer than the carried ones: nothing to propose"
    lines = []
    for o in outcomes:
        where = o.url or (f"already proposed ({o.already})" if o.already else "")
        lines.append(f"{o.release}: {o.proposal.kind}: {o.proposal.title}" + (f" -> {where}" if where else ""))
        if dry_run:
            lines += ["", o.proposal.body, ""]
    return "\n".join(lines)


class Printed:
    """A forge that opens nothing (--dry-run): every proposal is new, and says where it would go."""

    def existing(self, proposal: Proposal) -> str | None:
        return None

    def open(self, proposal: Proposal) -> str:
        return f"(dry run: {'branch ' + proposal.branch if proposal.pull else 'an issue'})"

