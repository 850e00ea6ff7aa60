"""The commands that put a stack into a serving environment, or take it out again, with pip or uv (pure).

Installing is two steps, so that no resolver ever has to choose between two indexes for one project:
first the stack's upstream releases from the user's own index, with their whole dependency tree
(torch, CUDA libraries: what SGLang and FlashInfer pin); then the patched wheels over them with
--no-deps, from the dist dir alone (--no-index) or from the fleet's index. The patched wheels keep
upstream's Requires-Dist, so what the first step resolved satisfies them and `pip check` stays clean.
For uv the fleet index goes in --extra-index-url: uv searches it before any other index and, by its
default first-index strategy, takes each project from the first index that has it; the pins are
local versions (`+nvfp4.N`) that no public index can hold, so they come from the fleet alone, and
--index-strategy unsafe-best-match is neither needed nor wanted.

Rolling back reads the environment first (rollback_targets): it puts back the upstream release of each
patched build installed there, the release that build names, and nothing else; a stack named that the
environment does not run is refused unless the operator asks to switch releases.
It reinstalls the exact upstream releases: `===` (PEP 440 arbitrary equality) matches the
version string itself, where `==0.6.8.post1` also matches the installed `0.6.8.post1+nvfp4.3` (pip
then answers "already satisfied", or picks a patched build from an index that holds one).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..errors import ConfigError
from ..patch import Stack, Target


@dataclass(frozen=True)
class Step:
    """One command of the sequence, and why it is there."""

    why: str
    argv: tuple[str, ...]
    stdin: str | None = None  # a requirements file the command reads from /dev/stdin (pip's --hash lives only there)

    @property
    def shell(self) -> str:
        if self.stdin is None:
            return shlex.join(self.argv)
        return f"printf '%s\\n' {shlex.quote(self.stdin)} | {shlex.join(self.argv)}"


@dataclass(frozen=True)
class Tool:
    """pip or uv, aimed at one environment's interpreter (None: whatever `pip` / `uv` finds)."""

    uv: bool = False
    python: str | None = None

    def command(self, verb: str) -> list[str]:
        if self.uv:
            return ["uv", "pip", verb, *(["--python", self.python] if self.python else [])]
        return [self.python, "-m", "pip", verb] if self.python else ["pip", verb]

    def check(self) -> Step:
        return Step("check that every installed distribution's requirements are met", tuple(self.command("check")))


def install_steps(stack: Stack, local_versions: dict[Target, str], tool: Tool, *, dist_dir: Path | None = None,
                  fleet_index: str | None = None) -> list[Step]:
    """Upstream releases with their dependencies from the user's index, the patched wheels over them, a check."""
    upstream = [str(t) for t in (*stack.targets, *stack.upstream)]
    pins = [f"{t.dist}=={local_versions[t]}" for t in stack.targets]
    if fleet_index is not None:
        where = ["--extra-index-url", fleet_index] if tool.uv else ["--index-url", fleet_index]
        source = f"from the index {fleet_index}"
    else:
        assert dist_dir is not None
        where, source = ["--no-index", "--find-links", str(dist_dir)], f"from {dist_dir} alone"
    return [
        Step(f"stack {stack.name}: its upstream releases and their whole dependency tree, from your index",
             tuple(tool.command("install") + upstream)),
        Step(f"the patched wheels over them, {source}; their dependencies are upstream's, already installed",
             tuple(tool.command("install") + ["--no-deps", *where] + pins)),
        tool.check(),
    ]


def rollback_steps(stack: Stack, tool: Tool) -> list[Step]:
    """The exact upstream releases back in place of the patched ones (=== refuses every +nvfp4.N build)."""
    exact = [f"{t.dist}==={t.version}" for t in stack.targets]
    reinstall = "--reinstall" if tool.uv else "--force-reinstall"
    return [
        Step(f"stack {stack.name}: the upstream releases, exactly, from your index, in place of the patched builds",
             tuple(tool.command("install") + [reinstall, "--no-deps"] + exact)),
        tool.check(),
    ]


@dataclass(frozen=True)
class Installed:
    """A distribution as an environment has it: the version installed, and the upstream release under it."""

    dist: str
    version: str  # "0.7.2+nvfp4.6"
    release: str  # "0.7.2": what its provenance names as built from, else the public version
    patched: bool  # a build of this tool (a provenance, or a +nvfp4.N label)

    def __str__(self) -> str:
        return f"{self.dist} {self.version}"


def installed_from_facts(facts: dict[str, dict[str, object]]) -> list[Installed]:
    """probes/doctor/doctor_files.py's facts about each distribution, as Installed (the ones installed)."""
    found = []
    for dist, fact in sorted(facts.items()):
        if not fact.get("installed"):
            continue
        version = str(fact.get("version"))
        provenance = fact.get("provenance")
        upstream = provenance.get("upstream", {}) if isinstance(provenance, dict) else {}
        try:
            release = str(parse_wheel_filename(str(upstream.get("filename")))[1]) if upstream else Version(version).public
            local = Version(version).local or ""
        except (InvalidWheelFilename, InvalidVersion):
            release, local = version, ""
        found.append(Installed(dist, version, release, provenance is not None or local.startswith("nvfp4")))
    return found


def rollback_targets(installed: Sequence[Installed], stack: Stack | None, *, switch_release: bool = False,
                     where: str = "the environment") -> list[Target]:
    """What rollback puts back: without a stack, the upstream release of every patched build installed; with
    one, its releases that are installed patched, refused (exit 2) where the environment runs other releases,
    unless switch_release (then the stack's releases, whatever is installed)."""
    if stack is None:
        return [Target(i.dist, i.release) for i in installed if i.patched]
    if switch_release:
        return list(stack.targets)
    have = {i.dist: i for i in installed}
    other = [t for t in stack.targets if t.dist in have and have[t.dist].release != t.version]
    if other or not any(t.dist in have for t in stack.targets):
        runs = ", ".join(map(str, installed)) or "neither flashinfer-python nor sglang"
        wants = ", ".join(map(str, stack.targets))
        msg = (f"--stack {stack.name}: {where} runs {runs}, not that stack's {wants}; rollback without --stack "
               f"puts back the upstream releases of what is installed, or add --switch-release to install {wants} "
               f"in their place")
        raise ConfigError(msg, item="--stack", expected=wants, found=runs,
                          fix="leave out --stack, or add --switch-release to change releases")
    return [t for t in stack.targets if t.dist in have and have[t.dist].patched]


def missing_wheels(dist_dir: Path, stems: Sequence[tuple[str, str]]) -> list[str]:
    """The (wheel stem, local version) pairs the dist dir holds no wheel of, as glob patterns."""
    patterns = [f"{stem}-{version}-*.whl" for stem, version in stems]
    return [p for p in patterns if not any(dist_dir.glob(p))]
