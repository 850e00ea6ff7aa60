"""The tool's own wheel: setup.py finds its packages (setuptools' find_packages over src/, which takes a folder
only with an __init__.py), so a folder of modules without one would be left out of the wheel silently: here it
is named. The built wheel's file list was compared when the list stopped being written out by hand."""

from __future__ import annotations

from pathlib import Path

from helpers import ROOT

SRC = ROOT / "src"


def unfound(src: Path) -> list[str]:
    """The folders under src that hold modules but no __init__.py (find_packages passes them by)."""
    folders = {p.parent for p in src.rglob("*.py") if "__pycache__" not in p.parts and p.parent != src}
    return sorted(str(f.relative_to(src)) for f in folders if not (f / "__init__.py").is_file())


def test_every_folder_of_modules_is_a_package_the_wheel_carries() -> None:
    assert 'find_packages("src")' in (ROOT / "setup.py").read_text()
    missing = unfound(SRC)
    assert not missing, f"{missing}: no __init__.py, so setup.py's find_packages leaves them out of the wheel; add one"


def test_a_folder_without_its_init_is_named(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "room").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "room" / "probe.py").write_text("")
    assert unfound(tmp_path) == ["pkg/room"]
