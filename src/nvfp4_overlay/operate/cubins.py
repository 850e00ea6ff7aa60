"""flashinfer-cubin: the trtllm-gen cubins a stack's serving path loads, pinned to its FlashInfer release.

Without it, FlashInfer's cubin loader fetches each cubin over the network at its first use
(flashinfer/jit/cubin_loader.py; offline, the call fails). flashinfer-cubin ships them all for one
release, and FlashInfer refuses one of another release at import (jit/env.py: exact version match).
The pin is the public version of the patched FlashInfer (0.6.8.post1 for 0.6.8.post1+nvfp4.7) and
the sha256 of that exact file (patches/flashinfer-cubin/upstream-pins.toml, wheel/cubin_pins.py):
install hands it to pip's hash-checking mode, `index --cubins` checks the file it mirrors.

The hashed step comes before the stack's upstream step: SGLang requires flashinfer-cubin of the same
release, so a resolver installing SGLang first would fetch it unchecked, and a hashed line after that
only finds it "already satisfied" (pip) or "checked" (uv): neither checks an installed distribution
against --hash, only a file it downloads. Installed first, and reinstalled where a copy is already
there (--force-reinstall, uv's --reinstall), the file is the pinned one, and the upstream step finds
the requirement satisfied and keeps it (tests/operator/test_install.py, with pip and uv, an index
serving another file of that name and version).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion

from ..errors import ConfigError, HashMismatchError
from ..patch import Stack
from ..wheel import cubin_pins, pip
from .install import Step, Tool
from .verdict import Verdict


def requirement(stack: Stack, patches_dir: Path) -> str | None:
    """flashinfer-cubin==X for the stack's FlashInfer, or None where no file of it is pinned (none published)."""
    pin = cubin_pins.pin_for(stack, patches_dir)
    return None if pin is None else pin.requirement


def install_step(stack: Stack, tool: Tool, patches_dir: Path, fleet_index: str | None = None) -> Step | None:
    """pip install --force-reinstall --no-deps --require-hashes of the pinned file, from the fleet index where
    one is named (`index --cubins` mirrors it there), else from your index; pip takes --hash only in a
    requirements file, which the step gives it on stdin. It goes first (first_of): see the module's docstring."""
    pin = cubin_pins.pin_for(stack, patches_dir)
    if pin is None:
        return None
    where: list[str] = []
    if fleet_index is not None:
        where = ["--extra-index-url", fleet_index] if tool.uv else ["--index-url", fleet_index]
    source = f"from the index {fleet_index}" if fleet_index else "from your index"
    return Step(f"the trtllm-gen cubins of FlashInfer's release, so that no call fetches them at run time "
                f"({pin.requirement}, about 300 MB, {source}), first: the file is downloaded and checked against "
                f"its pinned sha256 even where a copy is installed, and the next step, whose SGLang requires it, "
                f"finds it installed and fetches no other",
                tuple(tool.command("install") + [tool.reinstall, "--no-deps", *where, "--require-hashes", "-r",
                                                 "/dev/stdin"]),
                stdin=pin.hashed)


def first_of(steps: list[Step], stack: Stack, tool: Tool, patches_dir: Path, fleet_index: str | None = None) -> list[Step]:
    """The stack's steps with the hashed cubin step before all of them (none where its release has no pin)."""
    step = install_step(stack, tool, patches_dir, fleet_index)
    return steps if step is None else [step, *steps]


def held(stack: Stack, patches_dir: Path, directories: list[Path]) -> Path | None:
    """The stack's pinned flashinfer-cubin file in the first of directories that holds one (not yet checked)."""
    pin = cubin_pins.pin_for(stack, patches_dir)
    if pin is None:
        return None
    return next((d / pin.filename for d in directories if (d / pin.filename).is_file()), None)


def missing_line(stack: Stack, patches_dir: Path, directories: list[Path]) -> str | None:
    """What an air-gapped fleet lacks: the stack's cubin wheel, when none of directories holds it."""
    pin = cubin_pins.pin_for(stack, patches_dir)
    if pin is None or held(stack, patches_dir, directories) is not None:
        return None
    return (f"{pin.requirement} is not in {', '.join(map(str, directories))}: without it the trtllm-gen calls fetch "
            f"their cubins at run time (offline, they fail); bring it into the dist dir and the fleet index with "
            f"'nvfp4-overlay index --cubins' (online, about 300 MB)")


def bring(stack: Stack, patches_dir: Path, dist_dir: Path, cache_dir: Path, *, offline: bool) -> Path | None:
    """The stack's flashinfer-cubin wheel into dist_dir (where `index` mirrors every wheel), checked against its
    pin (HashMismatchError, exit 3, naming the file and the fix): from dist_dir or the cache, else through pip
    into the cache; None where its release has no pin."""
    pin = cubin_pins.pin_for(stack, patches_dir)
    if pin is None:
        return None
    wheels = cache_dir / "wheels"
    found = held(stack, patches_dir, [dist_dir, wheels])
    if found is None and offline:
        msg = missing_line(stack, patches_dir, [dist_dir, wheels]) or pin.requirement
        raise ConfigError(msg, path=wheels, item=pin.requirement, expected="a wheel of it", found="missing",
                          fix="nvfp4-overlay index --cubins (online)")
    if found is None:
        found = _download(pin, wheels)
    cubin_pins.check(found, pin)
    if found.parent != dist_dir:
        dist_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found, dist_dir / found.name)
        found = dist_dir / found.name
    return found


def _download(pin: cubin_pins.CubinPin, wheels: Path) -> Path:
    wheels.mkdir(parents=True, exist_ok=True)
    ran = pip.download(pin.requirement, wheels)
    if ran.returncode != 0 or not (wheels / pin.filename).is_file():
        msg = f"pip download {pin.requirement} failed: {ran.tail}; check your index configuration, or pass --offline"
        raise ConfigError(msg, item=pin.requirement, expected=pin.filename, found=ran.tail,
                          fix="check the index configuration")
    return wheels / pin.filename


def is_mirror(path: Path) -> bool:
    """Whether path is named as a flashinfer-cubin wheel, what `index --cubins` brings into the dist dir."""
    try:
        return str(parse_wheel_filename(path.name)[0]) == cubin_pins.DIST
    except (InvalidWheelFilename, InvalidVersion):
        return False


def verify_mirror(path: Path, patches_dir: Path) -> Verdict:
    """verify of a flashinfer-cubin wheel in the dist dir: no build of this tool (no provenance, not in
    SHA256SUMS), but upstream's file mirrored for the fleet, so held to its pin alone: ok where its sha256 is
    the one upstream-pins.toml pins for that file name, refused (exit 3) where it differs or none is pinned."""
    verdict = Verdict(path, checked_against="pin")
    pins = patches_dir / cubin_pins.PINS
    pin = next((p for p in cubin_pins.load_pins(patches_dir).values() if p.filename == path.name), None)
    if pin is None:
        verdict.problems.append(f"{path.name}: {pins} pins no flashinfer-cubin file of that name, so it is not one "
                                f"'index --cubins' brings; find out where it came from and remove it")
        return verdict
    try:
        cubin_pins.check(path, pin)
    except HashMismatchError as exc:
        verdict.problems.append(exc.message)
    else:
        verdict.notes.append(f"the pinned {pin.requirement} that 'index --cubins' mirrors: its sha256 is the one {pins} "
                             f"pins (upstream's file, not a build of this tool)")
    return verdict
