"""Upstream is the oracle for what nvcc compiles: the patched FlashInfer writes upstream's nvcc lines.

For every carried flashinfer-python release, the upstream and the patched wheel run through the
same grid (oracle.grid_for, probes/flashinfer/cuda_grid.py; upstream's half from tests/oracle/, test_oracle.py): torch's CUDA {12.6, 12.8, 12.9, 13.0} x a
toolkit {12.8, 12.9, 13.0} x a GPU {SM90, SM100, SM103, SM120, SM121}. The toolkit is a fake
CUDA_HOME whose bin/nvcc answers ``--version`` and which has that release's version.json and
include/cuda.h. In each cell the two wheels must agree on TARGET_CUDA_ARCHS (or log the same
refusal) and write the same ``cuda_cflags`` into build.ninja for every FP4-quantize JIT spec and for
specs whose flags come from the architecture list (or fail with the same error). The patched wheel
starts no process to learn a version where upstream runs nvcc. A control run with every call
answered from torch (a lookup that ignores the toolkit) must differ. Both trees also import a JIT module the
audit has never seen (probes/flashinfer/stubs/cuda_control.py: its SM120 flags follow the toolkit, asked under an
alias): the patched wheel must hand nvcc what upstream hands it there too, and say it does not know
the call site.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import ReleaseOracle, by_release, flashinfer_releases

from nvfp4_overlay.oracle import behaviour
from nvfp4_overlay.oracle.behaviour import asks_version, cell_name
from nvfp4_overlay.oracle.grid import compiled_digest, grid_cells, processes, with_toolkits
from nvfp4_overlay.oracle.probe_runner import run_probe
from nvfp4_overlay.probes.flashinfer.stubs import cuda_control

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

RELEASES = flashinfer_releases()


@pytest.fixture
def g(release_oracle: ReleaseOracle, release: str) -> dict[str, Any]:
    """This release's grid: upstream (compact), patched, and the control (torch 12.6 row)."""
    return release_oracle.grid(release)


@pytest.mark.parametrize("release", by_release(RELEASES))
def test_patched_writes_upstreams_nvcc_command_lines(g: dict[str, Any], release: str) -> None:
    assert len(g["patched"]) == 60
    assert behaviour.grid_problems(release, g) == []
    # The comparison is about something: every FP4-quantize spec and an architecture-list spec (the
    # patched cell's, which is upstream's by the digest just compared).
    modules = g["patched"][0]["modules"]
    assert any(".gen_fp4_quantization_sm1" in m for m in modules), sorted(modules)
    assert "cuda_cflags" in modules["flashinfer.jit.activation.gen_act_and_mul_module"]


@pytest.mark.parametrize("release", by_release(RELEASES))
def test_the_grid_tells_a_torch_based_lookup_from_upstream(g: dict[str, Any], release: str) -> None:
    """Control: with no call site asking nvcc's question (every call answered from torch), the grid
    sees the difference."""
    row = [(c, u) for c, u in zip(g["cells"], g["upstream"], strict=True) if c["torch"] == "12.6"]
    differing = {cell_name(c) for (c, u), k in zip(row, g["control"], strict=True)
                 if compiled_digest(u) != compiled_digest(k)}
    # torch 12.6 is below 12.8 and every toolkit here is not: upstream writes nvcc's
    # -static-global-template-stub=false into every build.ninja it writes; a torch-based lookup does not.
    # the cells where upstream writes nvcc flags: the patched cell's modules, upstream's by its digest
    patched = [p for c, p in zip(g["cells"], g["patched"], strict=True) if c["torch"] == "12.6"]
    assert [compiled_digest(p) for p in patched] == [compiled_digest(u) for _, u in row]
    straddling = {cell_name(c) for (c, _), p in zip(row, patched, strict=True)
                  if any("cuda_cflags" in m for m in p["modules"].values())}
    assert straddling, "no cell to tell the two apart"
    assert straddling <= differing, sorted(straddling - differing)
    # and the verdict refresh uses says so
    control = iter(g["control"])
    broken = {**g, "patched": [next(control) if c["torch"] == "12.6" else p
                               for c, p in zip(g["cells"], g["patched"], strict=True)]}
    assert any("cells hand nvcc other flags" in p for p in behaviour.grid_problems(release, broken))


@pytest.mark.parametrize("release", by_release(RELEASES))
def test_patched_asks_no_process_for_a_version(g: dict[str, Any], release: str) -> None:
    """Upstream runs `nvcc --version` in every cell; the patched wheel reads version.json instead.

    Other nvcc queries that upstream makes while writing build.ninja (0.7.4 asks
    `nvcc --list-gpu-arch` for SM107 support) are upstream's own and stay: the patched wheel starts
    exactly those, no more.
    """
    for cell, patched, upstream in zip(g["cells"], g["patched"], g["upstream"], strict=True):
        ours, theirs = processes(patched), processes(upstream)
        assert [p for p in ours if asks_version(p)] == [], cell
        assert ["open", "<toolkit>/version.json"] in patched["events"], cell  # read, not asked
        assert ["<toolkit>/bin/nvcc", "--version"] in theirs, cell
        assert [p for p in theirs if not asks_version(p)] == ours, cell


@pytest.mark.parametrize("variant", ["pip", "bare", "on-path", "none", "pip-beside"])
@pytest.mark.parametrize("release", by_release(RELEASES))
def test_other_toolkit_layouts_give_upstreams_answer(g: dict[str, Any], release: str, variant: str) -> None:
    patched, upstream = g["patched_variants"][variant], g["upstream_variants"][variant]
    assert compiled_digest(patched) == compiled_digest(upstream)
    asked = [p for p in processes(patched) if asks_version(p)]
    if variant == "bare":
        assert asked == [["<toolkit>/bin/nvcc", "--version"]], asked  # the last resort, once
    else:
        assert asked == [], asked
    if variant == "pip":
        assert ["open", "<toolkit>/include/cuda.h"] in patched["events"]


@pytest.mark.parametrize("release", by_release(RELEASES))
def test_run_time_choices_get_torchs_release(g: dict[str, Any], release: str) -> None:
    """At a run-time call site of the audit the patched wheel answers torch's CUDA, upstream nvcc's;
    a caller outside FlashInfer gets upstream's answer from both."""
    for cell, patched, upstream in zip(g["cells"], g["patched"], g["upstream"], strict=True):
        assert patched["runtime_version"] == cell["torch"]
        assert upstream["runtime_version"] == cell["toolkit_release"]
        assert patched["outside_version"] == cell["toolkit_release"] == upstream["outside_version"]


CONTROL_SPEC = ".".join(cuda_control.SPEC[:2])


@pytest.mark.parametrize("release", by_release(RELEASES))
def test_an_unaudited_nvcc_facing_caller_gets_the_toolkits_answer(g: dict[str, Any], release: str) -> None:
    """The control module's flags are the toolkit's choice in every cell that builds it (upstream's, by
    the digest grid_problems compares), and the patched wheel warns once per cell, naming the site;
    answered from torch (the control run), the torch 12.6 row would build 120a where 12.9+ toolkits
    build 120f."""
    built = 0
    for cell, patched in zip(g["cells"], g["patched"], strict=True):
        flags = patched["modules"][CONTROL_SPEC].get("cuda_cflags")
        if flags is None:  # refused as upstream refuses (no architecture for this GPU and toolkit)
            continue
        built += 1
        wanted = cuda_control.nvcc_flags(cell["toolkit_release"] >= "12.9")
        assert [f for f in flags if f in wanted] == wanted, cell_name(cell)
        assert len(patched["overlay_warnings"]) == 1 and " ".join(cuda_control.SITE) in patched["overlay_warnings"][0]
    assert built >= 24, built
    torch_row = [c for c in g["cells"] if c["torch"] == "12.6"]
    answered_from_torch = [k["modules"][CONTROL_SPEC].get("cuda_cflags") for k in g["control"]]
    straddling = [f for c, f in zip(torch_row, answered_from_torch, strict=True)
                  if f is not None and c["toolkit_release"] >= "12.9"]
    assert straddling and all(cuda_control.nvcc_flags(False)[0] in f for f in straddling)


@pytest.mark.parametrize("release", by_release([v for v in RELEASES if tuple(map(int, v.split(".")[:3])) >= (0, 6, 7)]))
def test_the_reports_box_builds_sm120f_as_upstream_does(g: dict[str, Any], release: str) -> None:
    """cu128 torch, a 12.9 or 13.0 toolkit, an SM120 GPU: upstream targets 120f and so does the patch."""
    for cell, patched in zip(g["cells"], g["patched"], strict=True):
        if cell["torch"] == "12.8" and cell["toolkit_release"] in ("12.9", "13.0") and cell["gpu"] == [12, 0]:
            assert patched["archs"] == [[12, "0f"]], cell_name(cell)


@pytest.mark.parametrize("release", by_release(RELEASES[-1:]))
def test_the_grids_path_memo_changes_no_cell(release_oracle: ReleaseOracle, release: str) -> None:
    """The grid remembers how the paths under the tree and the interpreter resolve (cuda_grid's
    _memo_realpath); the cells are those it finds without the memo, on the same tree: the other
    layouts and the cu128-torch-with-a-13.0-toolkit row, every GPU. (What a cell records of
    build.ninja is its cuda_cflags, no path; the include paths resolved are upstream's write_ninja's,
    the same code in both trees: a wrong resolve would show as an error or a missing module.)"""
    cells, variants = grid_cells()
    chosen = with_toolkits([*[c for c in cells if c["torch"] == "12.8" and c["toolkit_release"] == "13.0"],
                            *variants.values()], release_oracle.oracle.toolkits)
    tree = {"key": "tree", "path": str(release_oracle.wheel_tree("flashinfer-python", release)), "control_module": True}
    found = [run_probe("cuda_grid", {"trees": [{**tree, "memo_paths": memo}], "cells": chosen})["tree"]["cells"]
             for memo in (False, True)]
    assert found[0] == found[1]
    # about something: every cell wrote build.ninja files (whose writing resolves the paths)
    assert all(any("cuda_cflags" in m for m in cell["modules"].values()) for cell in found[1])
