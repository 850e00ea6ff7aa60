"""Shared fixtures: real upstream wheels unpacked as they are, or patched by the overlay engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import OVERLAY, PATCHES, build_one, cache_dir, fetch_upstream, write_wheel

from nvfp4_overlay import behaviour

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


