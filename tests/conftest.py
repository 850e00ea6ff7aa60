"""Shared fixtures: real upstream wheels unpacked as they are, or patched by the overlay engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import ReleaseOracle, WheelTree, wheel_trees, write_wheel


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the long units first: the network tests (a minute and more on the index), then the
    xdist groups (a release's whole ladder, a synthetic release's build), then the rest in file order.

    xdist hands out work in collection order, so a long unit collected late runs alone at the end while
    the other workers sit idle. A plain `pytest -p no:xdist` keeps file order (modules stay together).
    """
    if not hasattr(config, "workerinput"):
        return

    def rank(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("network") else 1 if item.get_closest_marker("xdist_group") else 2
    items.sort(key=rank)


@pytest.fixture(scope="session")
def wheel_tree(tmp_path_factory: pytest.TempPathFactory) -> WheelTree:
    """wheel_tree(dist, version, patched=True) -> a directory holding the wheel's Python files (helpers.wheel_trees)."""
    return wheel_trees(tmp_path_factory.mktemp("trees"))


@pytest.fixture(scope="session")
def release_oracle(wheel_tree: WheelTree, tmp_path_factory: pytest.TempPathFactory) -> ReleaseOracle:
    return ReleaseOracle(wheel_tree, tmp_path_factory.mktemp("toolkits"))


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


