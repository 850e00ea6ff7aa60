"""Rolling back, the inverse of install: what an environment has of this tool's builds, and the commands that
put upstream back (pure: the environment is read by the caller, as doctor's probe reports it).

rollback_targets reads the environment first: it puts back the upstream release of each patched build
installed there, the release that build names, and nothing else; a stack named that the environment
does not run is refused unless the operator asks to switch releases. The steps:

1. what install added that upstream has not: the flashinfer-jit-cache wheel `install --gpu` put in
   (it requires the patched FlashInfer exactly, so `pip check` fails once that is replaced; an
   upstream JIT cache install replaced is not known here, and is not brought back); with a switch,
   a flashinfer-cubin of another release where the new stack pins none (FlashInfer refuses a cubin
   of another release at import);
2. the upstream releases by the sha256 upstream.toml pins for them, in pip's and uv's hash-checking
   mode, reinstalled over the patched builds: `===` (PEP 440 arbitrary equality) matches the version
   string itself, where `==0.6.8.post1` also matches the installed `0.6.8.post1+nvfp4.9.7` (pip then
   answers "already satisfied", or picks a patched build from an index that holds one), and the
   hashes refuse any other file an index serves under that name;
3. with --switch-release, the new stack's upstream releases with their whole dependency tree, as
   install's upstream step installs them: the releases of step 2 are installed and satisfy it, so
   the resolver keeps them and brings only what they need (its hashed cubin goes first, as install's);
4. `pip check`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..errors import ConfigError
from ..patch import Stack, Target, load_upstream
from ..wheel import cubin_pins
from .install import Step, Tool

PATCHED = ("flashinfer-python", "sglang")  # the distributions this tool builds, each from a series
JIT_CACHE = "flashinfer-jit-cache"  # `jit-cache`'s wheel, which `install --gpu` adds
READS = (*PATCHED, JIT_CACHE, cubin_pins.DIST)  # what rollback reads of an environment


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
    built = [i for i in installed if i.dist in PATCHED]
    if stack is None:
        return [Target(i.dist, i.release) for i in built if i.patched]
    if switch_release:
        return list(stack.targets)
    have = {i.dist: i for i in built}
    other = [t for t in stack.targets if t.dist in have and have[t.dist].release != t.version]
    if other or not any(t.dist in have for t in stack.targets):
        runs = ", ".join(map(str, built)) or "neither flashinfer-python nor sglang"
        wants = ", ".join(map(str, stack.targets))
        msg = f"--stack {stack.name}: {where} runs {runs}, not that stack's {wants}"
        raise ConfigError(msg, item="--stack", expected=wants, found=runs,
                          fix="leave out --stack (rollback then puts back the upstream releases of what is "
                              f"installed), or add --switch-release to install {wants} in their place")
    return [t for t in stack.targets if t.dist in have and have[t.dist].patched]


def leftovers(installed: Sequence[Installed], switch: Stack | None, patches_dir: Path) -> list[Installed]:
    """What step 1 removes: this tool's JIT cache (any JIT cache of another FlashInfer release, with a switch)
    and, with a switch to a stack whose FlashInfer release pins no flashinfer-cubin, a cubin of another release."""
    flashinfer = next((t.version for t in switch.targets if t.dist == "flashinfer-python"), None) if switch else None
    pinned_cubin = switch is not None and cubin_pins.pin_for(switch, patches_dir) is not None
    gone = []
    for i in installed:
        other_release = flashinfer is not None and _public(i.release) != _public(flashinfer)
        if i.dist == JIT_CACHE and (i.patched or other_release):
            gone.append(i)
        elif i.dist == cubin_pins.DIST and other_release and not pinned_cubin:  # a pinned one replaces it
            gone.append(i)
    return gone


def _public(version: str) -> str:
    try:
        return Version(version).public
    except InvalidVersion:
        return version


def hashed(targets: Sequence[Target], patches_dir: Path) -> str:
    """The requirements text of step 2: each target `===` its release, with the sha256 of every wheel of it that
    upstream.toml pins (one for each platform it names; pip and uv take the file that matches any)."""
    lines = []
    for target in targets:
        try:
            upstream = load_upstream(patches_dir, target)
        except ConfigError as exc:
            msg = (f"rollback: {target} has no pins in {patches_dir} ({exc.message}); the upstream wheels are "
                   f"reinstalled only by the sha256 their series pins")
            raise ConfigError(msg, path=patches_dir, item=str(target), expected="its upstream.toml",
                              found="missing",
                              fix="run rollback from the checkout whose series built that release, or reinstall "
                                  "it by hand") from exc
        digests = " ".join(f"--hash=sha256:{w.sha256}" for w in upstream.wheels)
        lines.append(f"{target.dist}==={target.version} {digests}")
    return "\n".join(lines)


def rollback_steps(name: str, targets: Sequence[Target], pins: str, tool: Tool, *, remove: Sequence[Installed] = (),
                   switch: Stack | None = None) -> list[Step]:
    """Steps 1-4 of the module's docstring (the cubin step of a switch is the caller's: operate/cubins.py)."""
    steps = []
    if remove:
        names = [i.dist for i in remove]
        steps.append(Step(f"what install added that upstream does not have ({', '.join(map(str, remove))}): "
                          f"built for the patched builds or another release, it goes with them",
                          tuple(tool.command("uninstall") + ([] if tool.uv else ["-y"]) + names)))
    if targets:
        exact = ", ".join(f"{t.dist}==={t.version}" for t in targets)
        steps.append(Step(f"{name}: the upstream releases ({exact}) from your index, by the sha256 upstream.toml "
                          f"pins for their wheels, in place of the patched builds",
                          tuple(tool.command("install") + [tool.reinstall, "--no-deps", "--require-hashes", "-r",
                                                           "/dev/stdin"]),
                          stdin=pins))
    if switch is not None:
        releases = [f"{t.dist}==={t.version}" for t in (*switch.targets, *switch.upstream)]
        steps.append(Step(f"stack {switch.name}: the dependency tree of its upstream releases, from your index, as "
                          f"install's first step brings it (the releases installed above satisfy it and stay)",
                          tuple(tool.command("install") + releases)))
    return [*steps, tool.check()]
