"""TEMPORARY stand-in until the engine lands: GNU patch over an unpacked wheel. Same signatures."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name


def fetch_upstream(dist: str, version: str, *, patches_dir: Path, cache_dir: Path) -> Path:
    stem = canonicalize_name(dist).replace("-", "_")
    found = sorted((cache_dir / "wheels").glob(f"{stem}-{version}-*.whl"))
    fits = [w for w in found if "none-any" in w.name or ("cp311" in w.name and "x86_64" in w.name)]
    if not fits:
        raise FileNotFoundError(f"no cached wheel for {dist}=={version} in {cache_dir}/wheels")
    return fits[0]


def build_one(dist: str, version: str, *, patches_dir: Path, overlay_dir: Path, dist_dir: Path, cache_dir: Path) -> Path:
    upstream = fetch_upstream(dist, version, patches_dir=patches_dir, cache_dir=cache_dir)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with zipfile.ZipFile(upstream) as zf:
            zf.extractall(root)
        series_dir = patches_dir / dist / version
        series = series_dir / "series"
        if series.exists():
            for line in series.read_text().splitlines():
                name = line.split("#", 1)[0].strip()
                if name:
                    subprocess.run(["patch", "-p1", "--fuzz=0", "--batch", "-d", str(root), "-i", str(series_dir / name)], check=True)
        overlay = overlay_dir / dist / version
        if overlay.exists():
            shutil.copytree(overlay, root, dirs_exist_ok=True)
        out = dist_dir / upstream.name.replace(f"-{version}-", f"-{version}+nvfp4.0-")
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for f in sorted(root.rglob("*")):
                if f.is_file():
                    zf.write(f, f.relative_to(root).as_posix())
    return out
