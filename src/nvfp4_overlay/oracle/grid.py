"""The CUDA-version grid's cells: torch's CUDA x a toolkit x a GPU, the fake toolkits, and what is compared.

Data and small pure functions for oracle.grid_for and behaviour.grid_problems: the 60 cells and the
other toolkit layouts, the fake CUDA_HOMEs they name (a bin/nvcc that answers --version, the
release's version.json and include/cuda.h), and what of a cell is nvcc's command line.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..files import short_digest
from ..probes.toolkit import make_toolkit

TORCH = ("12.6", "12.8", "12.9", "13.0")
TOOLKITS = ("12.8", "12.9", "13.0")
GPUS = ((9, 0), (10, 0), (10, 3), (12, 0), (12, 1))


def grid_cells() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The 60 cells of the grid, and four other toolkit layouts on an SM120 box with a cu128 torch
    beside a 13.0 toolkit; a cell names its toolkit by release and layout (with_toolkits gives paths)."""
    cells: list[dict[str, Any]] = [{"torch": t, "toolkit_release": k, "layout": "full", "gpu": list(g)}
                                   for t in TORCH for k in TOOLKITS for g in GPUS]
    box: dict[str, Any] = {"torch": "12.8", "toolkit_release": "13.0", "gpu": [12, 0]}
    variants: dict[str, dict[str, Any]] = {
        "pip": {**box, "layout": "cuda.h"},  # include/cuda.h, no version.json: a pip-installed toolkit
        "bare": {**box, "layout": "bare"},  # nvcc alone: the last resort
        "on-path": {**box, "layout": "full", "on_path": True},  # no CUDA_HOME
        "none": {**box, "layout": "no-nvcc"},  # no nvcc: both fall back to torch's
        # pip's nvcc (the nvidia-cuda-nvcc wheel's layout on sys.path) beside the system's CUDA_HOME:
        # a lookup that took pip's first would pick 12.8 where CUDA_HOME's is 13.0
        "pip-beside": {**box, "layout": "full", "pip_toolkit": "12.8"},
    }
    return cells, variants


def with_toolkits(cells: Sequence[dict[str, Any]], root: Path) -> list[dict[str, Any]]:
    """The cells with the CUDA_HOME each names, made under root."""
    layouts = {"full": ("version.json", "cuda.h"), "cuda.h": ("cuda.h",), "bare": ()}
    out = []
    for cell in cells:
        if cell["layout"] == "no-nvcc":
            home = root / "cuda-without-nvcc"
            (home / "bin").mkdir(parents=True, exist_ok=True)
        else:
            home = make_toolkit(root, cell["toolkit_release"], layouts[cell["layout"]])
        extra = {"site": str(pip_site(root, cell["pip_toolkit"]))} if "pip_toolkit" in cell else {}
        out.append({**cell, "toolkit": str(home), **extra})
    return out


PIP_NVCC = ("nvidia", "cuda_nvcc")  # where the nvidia-cuda-nvcc wheel puts the toolkit, under site-packages


def pip_site(root: Path, release: str) -> Path:
    """A site-packages directory holding pip's toolkit (include/cuda.h and bin/nvcc, no version.json)."""
    site = root / f"site-packages-{release}"
    home = site.joinpath(*PIP_NVCC)
    if not home.exists():
        root.mkdir(parents=True, exist_ok=True)
        made = make_toolkit(Path(tempfile.mkdtemp(prefix=".pip-toolkit-", dir=root)), release, ("cuda.h",))
        home.parent.mkdir(parents=True, exist_ok=True)
        try:
            made.rename(home)
        except OSError:  # made meanwhile by another thread (make_toolkit says why this is safe)
            pass
        shutil.rmtree(made.parent, ignore_errors=True)
    return site


def grid_plan(*, control: bool) -> dict[str, Any]:
    cells, variants = grid_cells()
    return {"cells": [c for c in cells if c["torch"] == "12.6"] if control else [*cells, *variants.values()],
            "empty_table": control, "control_module": True}


def compiled_part(cell: dict[str, Any]) -> dict[str, Any]:
    """What nvcc would be handed: the architectures (or the refusal logged) and each spec's flags."""
    return {"archs": cell.get("archs"), "arch_warnings": cell.get("arch_warnings"), "modules": cell.get("modules")}


def compiled_digest(cell: dict[str, Any]) -> str:
    """compiled_part as a digest; a compact cell holds it."""
    return str(cell["compiled"]) if "compiled" in cell else short_digest(compiled_part(cell))


def processes(cell: dict[str, Any]) -> list[list[str]]:
    return [e[1:] for e in cell.get("events", []) if e[0] == "process"]


def compact_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """What the verdicts read of an upstream cell: what nvcc is handed (a digest of the architectures
    and every spec's flags), the processes started, the run-time answer, the architectures."""
    if "crash" in cell:
        return cell
    return {"compiled": compiled_digest(cell), "events": [e for e in cell.get("events", []) if e[0] == "process"],
            "runtime_version": cell.get("runtime_version"), "outside_version": cell.get("outside_version"),
            "archs": cell.get("archs")}
