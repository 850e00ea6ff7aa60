"""Fake CUDA toolkits: a CUDA_HOME whose bin/nvcc answers --version, for the grid and the trace ladder."""

from __future__ import annotations

import json
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path


def make_toolkit(root: Path, release: str, files_: Sequence[str] = ("version.json", "cuda.h")) -> Path:
    """A CUDA_HOME whose bin/nvcc answers --version, with the release's version.json and cuda.h.

    Made in a directory of its own and renamed into place, so that threads and processes sharing
    root (the oracle's regeneration) never see, or make, half of one; the first rename wins and a
    later maker's identical copy is dropped.
    """
    home = root / f"cuda-{release}-{'-'.join(files_) or 'bare'}"
    if home.exists():
        return home
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{home.name}-", dir=root))
    (work / "bin").mkdir()
    nvcc = work / "bin" / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        f"echo 'Cuda compilation tools, release {release}, V{release}.93'\n"
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    major, minor = (int(p) for p in release.split("."))
    if "version.json" in files_:
        (work / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": f"{release}.1"}}))
    if "cuda.h" in files_:
        (work / "include").mkdir()
        (work / "include" / "cuda.h").write_text(f"#pragma once\n#define CUDA_VERSION {major * 1000 + minor * 10}\n")
    try:
        work.rename(home)
    except OSError:  # made meanwhile by another thread or process: the same files
        shutil.rmtree(work, ignore_errors=True)
    return home
