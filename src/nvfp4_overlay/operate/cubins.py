"""flashinfer-cubin: the trtllm-gen cubins a stack's serving path loads, pinned to its FlashInfer release.

Without it, FlashInfer's cubin loader fetches each cubin over the network at its first use
(flashinfer/jit/cubin_loader.py; offline, the call fails). flashinfer-cubin ships them all for one
release, and FlashInfer refuses one of another release at import (jit/env.py: exact version match).
The pin is the public version of the patched FlashInfer (0.6.8.post1 for 0.6.8.post1+nvfp4.7).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from packaging.version import Version

from ..errors import ConfigError
from ..patch import Stack
from ..wheel import pip
from .install import Step, Tool

# The releases the index holds a flashinfer-cubin of (pip index versions flashinfer-cubin, 2026-12-04:
# 0.4.0-0.6.13): a stack whose FlashInfer is newer fetches its cubins at run time, as upstream does.
PUBLISHED = frozenset(Version(v) for v in (
    "0.4.0 0.4.1 0.5.0 0.5.1 0.5.2 0.5.3 0.6.0 0.6.1 0.6.2 0.6.3 0.6.4 0.6.5 0.6.6 0.6.7 0.6.7.post1 0.6.7.post2 "
    "0.6.7.post3 0.6.8 0.6.8.post1 0.6.9 0.6.10 0.6.10.post1 0.6.11 0.6.11.post1 0.6.11.post2 0.6.11.post3 "
    "0.6.12 0.6.13").split())


def requirement(stack: Stack) -> str | None:
    """flashinfer-cubin==X for the stack's FlashInfer, or None where no such release is published."""
    target = next((t for t in stack.targets if t.dist == "flashinfer-python"), None)
    if target is None or Version(target.version) not in PUBLISHED:
        return None
    return f"flashinfer-cubin=={Version(target.version).public}"


def install_step(stack: Stack, tool: Tool, fleet_index: str | None = None) -> Step | None:
    """pip install --no-deps flashinfer-cubin==X, from the fleet index where one is named (`index --cubins`
    mirrors it there), else from your index."""
    pin = requirement(stack)
    if pin is None:
        return None
    where: list[str] = []
    if fleet_index is not None:
        where = ["--extra-index-url", fleet_index] if tool.uv else ["--index-url", fleet_index]
    source = f"from the index {fleet_index}" if fleet_index else "from your index"
    return Step(f"the trtllm-gen cubins of FlashInfer's release, so that no call fetches them at run time ({pin}, "
                f"about 300 MB, {source})", tuple(tool.command("install") + ["--no-deps", *where, pin]))


def held(stack: Stack, directories: list[Path]) -> Path | None:
    """The stack's flashinfer-cubin wheel in the first of directories that holds one."""
    pin = requirement(stack)
    if pin is None:
        return None
    pattern = f"flashinfer_cubin-{pin.split('==')[1]}-*.whl"
    return next((w for d in directories if d.is_dir() for w in sorted(d.glob(pattern))), None)


def missing_line(stack: Stack, directories: list[Path]) -> str | None:
    """What an air-gapped fleet lacks: the stack's cubin wheel, when none of directories holds it."""
    pin = requirement(stack)
    if pin is None or held(stack, directories) is not None:
        return None
    return (f"{pin} is not in {', '.join(map(str, directories))}: without it the trtllm-gen calls fetch their cubins "
            f"at run time (offline, they fail); bring it into the dist dir and the fleet index with "
            f"'nvfp4-overlay index --cubins' (online, about 300 MB)")


def bring(stack: Stack, dist_dir: Path, cache_dir: Path, *, offline: bool) -> Path | None:
    """The stack's flashinfer-cubin wheel into dist_dir (where `index` mirrors every wheel): from dist_dir or
    the cache, else through pip into the cache; None where its release publishes none."""
    pin = requirement(stack)
    if pin is None:
        return None
    wheels = cache_dir / "wheels"
    found = held(stack, [dist_dir, wheels])
    if found is None and offline:
        msg = missing_line(stack, [dist_dir, wheels]) or pin
        raise ConfigError(msg, path=wheels, item=pin, expected="a wheel of it", found="missing",
                          fix="nvfp4-overlay index --cubins (online)")
    if found is None:
        wheels.mkdir(parents=True, exist_ok=True)
        ran = pip.download(pin, wheels)
        found = held(stack, [wheels])
        if ran.returncode != 0 or found is None:
            msg = f"pip download {pin} failed: {ran.tail}; check your index configuration, or pass --offline"
            raise ConfigError(msg, item=pin, expected="a wheel", found=ran.tail, fix="check the index configuration")
    if found.parent != dist_dir:
        dist_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found, dist_dir / found.name)
        found = dist_dir / found.name
    return found
