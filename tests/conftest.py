"""Shared fixtures: real upstream wheels unpacked as they are, or patched by the overlay engine."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "patches"
OVERLAY = ROOT / "overlay"


def cache_dir() -> Path:
    return Path(os.environ.get("NVFP4_OVERLAY_CACHE", Path.home() / ".cache" / "nvfp4-overlay"))


WheelTree = Callable[..., Path]


@pytest.fixture(scope="session")
def wheel_tree(tmp_path_factory: pytest.TempPathFactory) -> WheelTree:
    """wheel_tree(dist, version, patched=True) -> a directory holding the wheel's files.

    The directory can be put on sys.path of a subprocess (see run_python). Upstream trees are the
    pinned wheel unpacked as it is; patched trees are unpacked from the wheel the engine builds.
    """
    made: dict[tuple[str, str, bool], Path] = {}

    def get(dist: str, version: str, patched: bool = True) -> Path:
        key = (dist, version, patched)
        if key not in made:
            wheel = _wheel_for(dist, version, patched, tmp_path_factory)
            out = tmp_path_factory.mktemp(f"{dist}-{version}-{'patched' if patched else 'upstream'}")
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(out)
            made[key] = out
        return made[key]

    return get


def _wheel_for(dist: str, version: str, patched: bool, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from nvfp4_overlay import api

    if not patched:
        return api.fetch_upstream(dist, version, patches_dir=PATCHES, cache_dir=cache_dir())
    out = tmp_path_factory.mktemp("dist")
    return api.build_one(dist, version, patches_dir=PATCHES, overlay_dir=OVERLAY, dist_dir=out, cache_dir=cache_dir())


def run_python(code: str, path: Sequence[Path] = (), env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run code in a fresh interpreter with `path` first on sys.path (one wheel version per process)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([*map(str, path), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=timeout)
