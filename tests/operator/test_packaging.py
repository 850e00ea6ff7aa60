"""The project's own sdist and wheel: `python -m build` makes both, and the wheel carries the series."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from helpers import ROOT


def test_wheel_carries_patches_and_overlay_and_its_cli_works_anywhere(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], check=True, capture_output=True)
    (wheel,) = out.glob("nvfp4_overlay-*.whl")
    assert len(list(out.glob("nvfp4_overlay-*.tar.gz"))) == 1
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "patches", "overlay"],
                             capture_output=True, text=True, check=True).stdout.split()
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert not [n for n in names if "__pycache__" in n]
    assert tracked and {f"nvfp4_overlay/{t}" for t in tracked} <= names
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    str(wheel)], check=True)
    env = {**os.environ, "PYTHONPATH": str(site)}
    listing = subprocess.run([str(site / "bin" / "nvfp4-overlay"), "list"], cwd=tmp_path, env=env,
                             capture_output=True, text=True)
    assert listing.returncode == 0, listing.stderr
    assert "sglang-0.5.11 (default)" in listing.stdout
