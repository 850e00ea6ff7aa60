"""What the tests share besides fixtures: the checkout's paths, real upstream wheels, small wheels, a child Python.

conftest.py holds the fixtures; test modules import these from here (``from helpers import PATCHES``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "patches"
OVERLAY = ROOT / "overlay"

# `make test` runs every carried release on the cheap checks and the releases that a stack pins on
# all of them; `make test-releases` (NVFP4_OVERLAY_FULL=1) runs every release on all of them.
FULL = os.environ.get("NVFP4_OVERLAY_FULL") == "1"


def pinned_releases(dist: str) -> set[str]:
    """The releases of dist that some stack installs: what operators run."""
    from nvfp4_overlay.manifest import load_stacks

    return {t.version for s in load_stacks(PATCHES).stacks for t in s.targets if t.dist == dist}


def cache_dir() -> Path:
    return Path(os.environ.get("NVFP4_OVERLAY_CACHE", Path.home() / ".cache" / "nvfp4-overlay"))


def fetch_upstream(dist: str, version: str, *, patches_dir: Path, cache_dir: Path, offline: bool = False) -> Path:
    """The verified upstream wheel of dist==version that fits this interpreter."""
    from nvfp4_overlay import fetch
    from nvfp4_overlay.manifest import Target, load_upstream

    upstream = load_upstream(patches_dir, Target(dist, version))
    source = fetch.Source(cache_dir, offline=offline)
    (pin,) = fetch.select_wheels(upstream, source)
    return fetch.upstream_wheel(upstream, pin, source)


def build_one(dist: str, version: str, *, patches_dir: Path, overlay_dir: Path, dist_dir: Path, cache_dir: Path) -> Path:
    """Build dist==version for this interpreter into dist_dir and return the wheel's path."""
    from nvfp4_overlay import fetch, wheels
    from nvfp4_overlay.manifest import Target

    options = wheels.Options(patches_dir, overlay_dir, dist_dir, fetch.Source(cache_dir))
    (built,) = wheels.build_targets([Target(dist, version)], options)
    return built.wheel


def run_python(code: str, path: Sequence[Path] = (), env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run code in a fresh interpreter with `path` first on sys.path (one wheel version per process)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([*map(str, path), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=timeout)


def write_wheel(path: Path, name: str, version: str, files: dict[str, bytes | str], *, tag: str = "py3-none-any",
                record: bool = True, extra_metadata: str = "") -> Path:
    """A real (small) wheel: the files, a dist-info with METADATA, WHEEL and a correct RECORD."""
    from nvfp4_overlay.metadata import record_hash

    stem = name.replace("-", "_")
    dist_info = f"{stem}-{version}.dist-info"
    members = {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}
    members[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{extra_metadata}\nA description.\n".encode()
    members[f"{dist_info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    if record:
        rows = [f"{n},{record_hash(d)},{len(d)}" for n, d in members.items()]
        members[f"{dist_info}/RECORD"] = ("\n".join([*rows, f"{dist_info}/RECORD,,"]) + "\n").encode()
    wheel = path / f"{stem}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return wheel


def cli_args(layout: dict[str, Path], *extra: str) -> list[str]:
    """Common options pointing the CLI at a `project` layout, offline."""
    return ["--patches-dir", str(layout["patches"]), "--overlay-dir", str(layout["overlay"]),
            "--dist-dir", str(layout["dist"]), "--cache-dir", str(layout["cache"]),
            "--wheelhouse", str(layout["wheelhouse"]), "--offline", *extra]


def data_args(layout: dict[str, Path]) -> list[str]:
    """The options of a command that reads only the project's data (verify): --patches-dir, --overlay-dir."""
    return ["--patches-dir", str(layout["patches"]), "--overlay-dir", str(layout["overlay"])]
