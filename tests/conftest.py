"""Shared fixtures: real upstream wheels unpacked as they are, or patched by the overlay engine."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from nvfp4_overlay import behaviour

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


WheelTree = Callable[..., Path]


@pytest.fixture(scope="session")
def wheel_tree(tmp_path_factory: pytest.TempPathFactory) -> WheelTree:
    """wheel_tree(dist, version, patched=True) -> a directory holding the wheel's Python files.

    The directory can be put on sys.path of a subprocess (see run_python). Upstream trees are the
    pinned wheel unpacked as it is; patched trees are unpacked from the wheel the engine builds.
    Only the members a test can read are unpacked: the .py files and the dist-info, not the C++
    sources, vendored CUTLASS and cubins under flashinfer/data/ (0.7.4: 717 MB unpacked, 30 MB so).
    """
    made: dict[tuple[str, str, bool], Path] = {}

    def get(dist: str, version: str, patched: bool = True) -> Path:
        key = (dist, version, patched)
        if key not in made:
            wheel = _wheel_for(dist, version, patched, tmp_path_factory)
            out = tmp_path_factory.mktemp(f"{dist}-{version}-{'patched' if patched else 'upstream'}")
            made[key] = behaviour.unpack(wheel, out)
        return made[key]

    return get


def _wheel_for(dist: str, version: str, patched: bool, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not patched:
        return fetch_upstream(dist, version, patches_dir=PATCHES, cache_dir=cache_dir())
    out = tmp_path_factory.mktemp("dist")
    return build_one(dist, version, patches_dir=PATCHES, overlay_dir=OVERLAY, dist_dir=out, cache_dir=cache_dir())


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


@pytest.fixture
def make_wheel(tmp_path: Path) -> Callable[..., Path]:
    """make_wheel(files, name='demo', version='1.0') -> a wheel in tmp_path/upstream."""
    def make(files: dict[str, bytes | str], name: str = "demo", version: str = "1.0", **kw: object) -> Path:
        where = tmp_path / "upstream"
        where.mkdir(exist_ok=True)
        return write_wheel(where, name, version, files, **kw)  # type: ignore[arg-type]
    return make


@pytest.fixture
def project(tmp_path: Path, make_wheel: Callable[..., Path]) -> Callable[..., dict[str, Path]]:
    """project(files, patches={name: text}, overlay={path: text}) -> a patches/overlay/wheelhouse layout.

    The series pins the wheel made from `files` (demo 1.0) by its real sha256.
    """
    import hashlib

    def make(files: dict[str, bytes | str], patches: dict[str, str] | None = None,
             overlay: dict[str, str] | None = None, revision: int = 1, series: str | None = None) -> dict[str, Path]:
        wheel = make_wheel(files)
        patches_dir = tmp_path / "patches"
        series_dir = patches_dir / "demo" / "1.0"
        series_dir.mkdir(parents=True, exist_ok=True)
        (patches_dir / "stacks.toml").write_text('default = "demo"\n[stacks.demo]\ndemo = "1.0"\n')
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        (series_dir / "upstream.toml").write_text(
            f'revision = {revision}\n[[wheel]]\nfilename = "{wheel.name}"\nsha256 = "{digest}"\n')
        for name, text in (patches or {}).items():
            (series_dir / name).write_bytes(text.encode())
        (series_dir / "series").write_text(series if series is not None else "".join(f"{n}\n" for n in patches or {}))
        overlay_dir = tmp_path / "overlay"
        for rel, text in (overlay or {}).items():
            target = overlay_dir / "demo" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        return {"patches": patches_dir, "overlay": overlay_dir, "wheelhouse": wheel.parent,
                "dist": tmp_path / "dist", "cache": tmp_path / "cache", "wheel": wheel}
    return make


def cli_args(layout: dict[str, Path], *extra: str) -> list[str]:
    """Common options pointing the CLI at a `project` layout, offline."""
    return ["--patches-dir", str(layout["patches"]), "--overlay-dir", str(layout["overlay"]),
            "--dist-dir", str(layout["dist"]), "--cache-dir", str(layout["cache"]),
            "--wheelhouse", str(layout["wheelhouse"]), "--offline", *extra]
