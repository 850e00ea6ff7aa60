"""Upstream is the oracle for what nvcc compiles: the patched FlashInfer writes upstream's nvcc lines.

For every carried flashinfer-python release, the upstream and the patched wheel run through the
same grid (tests/probes/cuda_grid.py): torch's CUDA {12.6, 12.8, 12.9, 13.0} x a toolkit
{12.8, 12.9, 13.0} x a GPU {SM90, SM100, SM103, SM120, SM121}. The toolkit is a fake CUDA_HOME whose
bin/nvcc answers ``--version`` and which has the version.json and include/cuda.h of that release.
In each cell the two wheels must agree on TARGET_CUDA_ARCHS (or log the same refusal) and write the
same ``cuda_cflags`` into build.ninja for every FP4-quantize JIT spec and for specs whose flags
come from the architecture list (or fail with the same error). The patched wheel starts no process
where upstream runs nvcc. A control run with the nvcc-facing table emptied (every call answered
from torch, as the turn-1 patch did) must differ: the grid can tell the two apart.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import PATCHES, ROOT

from nvfp4_overlay.manifest import all_targets

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

PROBE = ROOT / "tests" / "probes" / "cuda_grid.py"
RELEASES = [t.version for t in all_targets(PATCHES) if t.dist == "flashinfer-python"]
TORCH = ["12.6", "12.8", "12.9", "13.0"]
TOOLKITS = ["12.8", "12.9", "13.0"]
GPUS = [(9, 0), (10, 0), (10, 3), (12, 0), (12, 1)]
# How else a toolkit is found or read, on the box of the report (cu128 torch, 13.0 toolkit, SM120).
VARIANTS = {
    "pip": "include/cuda.h and nvcc, no version.json (a pip-installed toolkit)",
    "bare": "nvcc alone: the patched wheel must run `nvcc --version` as its last resort",
    "on-path": "no CUDA_HOME: nvcc found on PATH",
    "none": "CUDA_HOME without nvcc: both fall back to torch's release",
}


def make_toolkit(root: Path, release: str, files: tuple[str, ...] = ("version.json", "cuda.h")) -> Path:
    home = root / f"cuda-{release}-{'-'.join(files) or 'bare'}"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        f"echo 'Cuda compilation tools, release {release}, V{release}.93'\n"
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    major, minor = (int(p) for p in release.split("."))
    if "version.json" in files:
        (home / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": f"{release}.1"}}))
    if "cuda.h" in files:
        (home / "include").mkdir()
        (home / "include" / "cuda.h").write_text(f"#pragma once\n#define CUDA_VERSION {major * 1000 + minor * 10}\n")
    return home


def grid_cells(root: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    toolkits = {release: make_toolkit(root, release) for release in TOOLKITS}
    cells = [
        {"torch": t, "toolkit": str(toolkits[k]), "toolkit_release": k, "gpu": list(g)}
        for t in TORCH for k in TOOLKITS for g in GPUS
    ]
    no_nvcc = root / "cuda-without-nvcc"
    (no_nvcc / "bin").mkdir(parents=True)
    box = {"torch": "12.8", "toolkit_release": "13.0", "gpu": [12, 0]}
    variants = {
        "pip": {**box, "toolkit": str(make_toolkit(root, "13.0", ("cuda.h",)))},
        "bare": {**box, "toolkit": str(make_toolkit(root, "13.0", ()))},
        "on-path": {**box, "toolkit": str(toolkits["13.0"]), "on_path": True},
        "none": {**box, "toolkit": str(no_nvcc)},
    }
    return cells, variants


@pytest.fixture(scope="module")
def grid(wheel_tree: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """{release: {"upstream": [...], "patched": [...], "control": [...], "variants": {...}}}, one run."""
    root = tmp_path_factory.mktemp("toolkits")
    cells, variants = grid_cells(root)
    trees = []
    for release in RELEASES:
        for kind in ("upstream", "patched"):
            tree = wheel_tree("flashinfer-python", release, patched=kind == "patched")
            trees.append({"key": f"{release}/{kind}", "path": str(tree)})
        control = [i for i, c in enumerate(cells) if c["torch"] == "12.6"]
        trees.append({"key": f"{release}/control", "path": trees[-1]["path"], "empty_table": True, "cells": control})
    plan = {"trees": trees, "cells": [*cells, *variants.values()], "jobs": os.cpu_count() or 1}
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not _has_nvcc(p))
    done = subprocess.run([sys.executable, str(PROBE)], input=json.dumps(plan), capture_output=True,
                          text=True, env=env, timeout=3000)
    assert done.returncode == 0, done.stderr[-6000:]
    raw = json.loads(done.stdout)
    out: dict[str, Any] = {}
    for key, result in raw.items():
        release, kind = key.split("/")
        assert "cells" in result, f"{key}: {result}"
        crashed = [c["crash"] for c in result["cells"] if "crash" in c]
        assert not crashed, f"{key}: {crashed[0]}"
        out.setdefault(release, {"cells": cells, "variant_cells": variants})
        if kind == "control":
            out[release][kind] = result["cells"]
            continue
        out[release][kind] = result["cells"][: len(cells)]
        out[release][f"{kind}_variants"] = dict(zip(variants, result["cells"][len(cells):]))
    return out


def _has_nvcc(directory: str) -> bool:
    return bool(directory) and os.path.exists(os.path.join(directory, "nvcc"))


def _compiled(cell: dict[str, Any]) -> dict[str, Any]:
    return {"archs": cell["archs"], "arch_warnings": cell["arch_warnings"], "modules": cell["modules"]}


def _differing(cells: list[dict[str, Any]], ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[str]:
    return [
        f"torch {c['torch']} toolkit {c['toolkit_release']} sm{c['gpu'][0]}{c['gpu'][1]}"
        for c, a, b in zip(cells, ours, theirs, strict=True)
        if _compiled(a) != _compiled(b)
    ]


@pytest.mark.parametrize("release", RELEASES)
def test_patched_writes_upstreams_nvcc_command_lines(grid: dict[str, Any], release: str) -> None:
    g = grid[release]
    assert len(g["patched"]) == len(TORCH) * len(TOOLKITS) * len(GPUS) == 60
    differing = _differing(g["cells"], g["patched"], g["upstream"])
    assert differing == [], f"{release}: {len(differing)} of 60 cells differ from upstream: {differing}"
    # The comparison is about something: every FP4-quantize spec and an architecture-list spec.
    modules = g["upstream"][0]["modules"]
    assert any(".gen_fp4_quantization_sm1" in m for m in modules), sorted(modules)
    assert "flashinfer.jit.activation.gen_act_and_mul_module" in modules


@pytest.mark.parametrize("release", RELEASES)
def test_the_grid_tells_a_torch_based_lookup_from_upstream(grid: dict[str, Any], release: str) -> None:
    """Control: with no call site asking nvcc's question, as in turn 1, the grid sees the difference."""
    g = grid[release]
    row = [(c, u) for c, u in zip(g["cells"], g["upstream"], strict=True) if c["torch"] == "12.6"]
    differing = set(_differing([c for c, _ in row], g["control"], [u for _, u in row]))
    # Where torch's release is below 12.8 and every toolkit here is not, upstream writes nvcc's
    # -static-global-template-stub=false into every build.ninja it writes; a torch-based lookup does not.
    straddling = {
        f"torch {c['torch']} toolkit {c['toolkit_release']} sm{c['gpu'][0]}{c['gpu'][1]}"
        for c, u in row
        if _writes_ninja(u)
    }
    assert straddling, "no cell to tell the two apart"
    assert straddling <= differing, sorted(straddling - differing)


def _writes_ninja(cell: dict[str, Any]) -> bool:
    return any("cuda_cflags" in m for m in cell["modules"].values())


@pytest.mark.parametrize("release", RELEASES)
def test_patched_asks_no_process_for_a_version(grid: dict[str, Any], release: str) -> None:
    """Upstream runs `nvcc --version` in every cell; the patched wheel reads version.json instead.

    Other nvcc queries that upstream makes while writing build.ninja (0.7.4 asks
    `nvcc --list-gpu-arch` for SM107 support) are upstream's own and stay: the patched wheel starts
    exactly those, no more.
    """
    g = grid[release]
    for cell, patched, upstream in zip(g["cells"], g["patched"], g["upstream"], strict=True):
        ours, theirs = _processes(patched), _processes(upstream)
        assert [p for p in ours if _asks_version(p)] == [], cell
        assert ["open", "<toolkit>/version.json"] in patched["events"], cell  # read, not asked
        assert ["<toolkit>/bin/nvcc", "--version"] in theirs, cell
        assert [p for p in theirs if not _asks_version(p)] == ours, cell


def _processes(cell: dict[str, Any]) -> list[list[str]]:
    return [e[1:] for e in cell["events"] if e[0] == "process"]


def _asks_version(argv: list[str]) -> bool:
    return argv[:1] == ["which"] or "--version" in argv


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("release", RELEASES)
def test_other_toolkit_layouts_give_upstreams_answer(grid: dict[str, Any], release: str, variant: str) -> None:
    g = grid[release]
    patched, upstream = g["patched_variants"][variant], g["upstream_variants"][variant]
    assert _compiled(patched) == _compiled(upstream), VARIANTS[variant]
    asked = [p for p in _processes(patched) if _asks_version(p)]
    if variant == "bare":
        assert asked == [["<toolkit>/bin/nvcc", "--version"]], asked  # the last resort, once
    else:
        assert asked == [], asked
    if variant == "pip":
        assert ["open", "<toolkit>/include/cuda.h"] in patched["events"]


@pytest.mark.parametrize("release", RELEASES)
def test_run_time_choices_get_torchs_release(grid: dict[str, Any], release: str) -> None:
    """Outside the nvcc-facing call sites the patched wheel answers torch's CUDA, upstream nvcc's."""
    g = grid[release]
    for cell, patched, upstream in zip(g["cells"], g["patched"], g["upstream"], strict=True):
        assert patched["runtime_version"] == cell["torch"]
        assert upstream["runtime_version"] == cell["toolkit_release"]
