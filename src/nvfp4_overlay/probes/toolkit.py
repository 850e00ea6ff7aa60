"""Fake CUDA toolkits: a CUDA_HOME whose bin/nvcc answers --version, for the grid and the trace ladder."""

from __future__ import annotations

import json
import stat
from collections.abc import Sequence
from pathlib import Path


def make_toolkit(root: Path, release: str, files_: Sequence[str] = ("version.json", "cuda.h")) -> Path:
    """A CUDA_HOME whose bin/nvcc answers --version, with the release's version.json and cuda.h."""
    home = root / f"cuda-{release}-{'-'.join(files_) or 'bare'}"
    if home.exists():
        return home
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        f"echo 'Cuda compilation tools, release {release}, V{release}.93'\n"
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    major, minor = (int(p) for p in release.split("."))
    if "version.json" in files_:
        (home / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": f"{release}.1"}}))
    if "cuda.h" in files_:
        (home / "include").mkdir()
        (home / "include" / "cuda.h").write_text(f"#pragma once\n#define CUDA_VERSION {major * 1000 + minor * 10}\n")
    return home
