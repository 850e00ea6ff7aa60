"""The oracle on the real wheels: upstream's committed half holds, and a result is recomputed exactly when an input changes.

tests/oracle/flashinfer-python/<release>.json is upstream's half of the ladder and the grid, kept
as a fact about each pinned wheel. It is taken only while its key holds (the wheel, the probes'
source, the plan, torch, Python); every run computes it afresh for a rotating sample of releases
(helpers.FRESH_UPSTREAM: two a day, every one with NVFP4_OVERLAY_FRESH=1) and holds the committed
half to it, so it cannot rot. The result cache (oracle.Results) is keyed by the same inputs plus,
for a patched tree, the series, the overlay and the engine: the controls below change one byte of
each and see the result computed again. The bookkeeping alone: tests/unit/test_oracle.py."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import COMMITTED_ORACLE, FRESH_UPSTREAM, OVERLAY, PATCHES, ReleaseOracle, by_release, flashinfer_releases

from nvfp4_overlay.oracle import grid, oracle
from nvfp4_overlay.probes.flashinfer.tables.cases import CANDIDATES

RELEASES = flashinfer_releases()


def _committed(release: str) -> dict[str, Any]:
    path = COMMITTED_ORACLE / f"{release}.json"
    assert path.is_file(), f"{path}: missing; run 'make oracle ARGS={release}' and commit it"
    record: dict[str, Any] = json.loads(path.read_text())
    return record


@pytest.mark.upstream
@pytest.mark.torch
@pytest.mark.parametrize("release", by_release(RELEASES))
def test_the_committed_upstream_half_is_current(release_oracle: ReleaseOracle, release: str) -> None:
    """Its key is the one this checkout computes: else the tests would probe upstream again on every
    run (correct, but slow) and the committed file would say something about other code."""
    import torch

    record = _committed(release)
    upstream, _ = release_oracle.sides(release)
    key = oracle.key_of("flashinfer_trace", upstream, oracle.ladder_plan(CANDIDATES, quick=False))
    kept = record["ladder"]["key"]
    if (kept["torch"], kept["python"]) != (torch.__version__, f"{sys.version_info[0]}.{sys.version_info[1]}"):
        pytest.skip(f"committed for torch {kept['torch']}, Python {kept['python']}: computed afresh here")
    stale = sorted(k for k in key if key[k] != kept.get(k))
    assert not stale, f"{COMMITTED_ORACLE / release}.json is stale ({', '.join(stale)}): run 'make oracle'"
    grid_key = oracle.key_of("cuda_grid", upstream, grid.grid_plan(control=False))
    assert record["grid"]["key"] == grid_key, f"{COMMITTED_ORACLE / release}.json: the grid is stale: run 'make oracle'"


@pytest.mark.upstream
@pytest.mark.torch
@pytest.mark.parametrize("release", by_release(FRESH_UPSTREAM))
def test_the_committed_upstream_half_is_what_upstream_does(release_oracle: ReleaseOracle, release: str) -> None:
    """The rotating sample: upstream probed afresh equals what is committed, key and result."""
    import torch

    record = _committed(release)
    if record["ladder"]["key"]["torch"] != torch.__version__:
        pytest.skip(f"committed for torch {record['ladder']['key']['torch']}")
    upstream, _ = release_oracle.sides(release)
    fresh = oracle.upstream_record(upstream, CANDIDATES, results=release_oracle.oracle.results,
                                   toolkits=release_oracle.oracle.toolkits)
    assert fresh["ladder"] == record["ladder"], f"{release}: upstream's ladder is not what tests/oracle/ says"
    assert fresh["grid"] == record["grid"], f"{release}: upstream's grid is not what tests/oracle/ says"


# --- the cache: one byte changed in an input, the result computed again -----------------------------


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """oracle.run_probe replaced by one that records its calls and answers a canned result."""
    calls: list[str] = []

    def run_probe(probe: str, plan: dict[str, Any], timeout: float = 0) -> dict[str, Any]:
        calls.append(probe)
        if probe == "cuda_grid":
            return {"tree": {"cells": []}}
        return {"tree": {"version": "canned", "routed": [], "probed": [], "lookups": {}, "entries": {}}}

    monkeypatch.setattr(oracle, "run_probe", run_probe)
    return calls


def _patched(tmp: Path, release: str = "0.7.4") -> oracle.Side:
    """A patched side whose inputs are digests of copies under tmp (patches, overlay)."""
    inputs = oracle.patched_inputs("0" * 64, tmp / "patches", tmp / "overlay", "flashinfer-python", release)
    return oracle.Side(release, "patched", inputs, lambda: tmp / "tree")


@pytest.mark.torch
def test_the_cache_runs_a_probe_once_per_inputs_and_again_when_one_byte_changes(
        tmp_path: Path, counted: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(PATCHES / "flashinfer-python" / "0.7.4", tmp_path / "patches" / "flashinfer-python" / "0.7.4")
    shutil.copytree(OVERLAY / "flashinfer-python", tmp_path / "overlay" / "flashinfer-python")
    results = oracle.Results(tmp_path / "cache")

    def ladder() -> None:
        oracle.ladder_for(_patched(tmp_path), CANDIDATES, quick=True, results=results)

    ladder()
    ladder()
    assert counted == ["flashinfer_trace"]  # the second came from the cache

    fakes = tmp_path / "overlay" / "flashinfer-python" / "flashinfer" / "_nvfp4_overlay" / "fakes.py"
    fakes.write_bytes(fakes.read_bytes() + b" ")  # one byte of the overlay
    ladder()
    assert counted == ["flashinfer_trace"] * 2

    series = tmp_path / "patches" / "flashinfer-python" / "0.7.4" / "series"
    series.write_bytes(series.read_bytes() + b"#")  # one byte of the series
    ladder()
    assert counted == ["flashinfer_trace"] * 3

    probes = tmp_path / "probes"
    shutil.copytree(oracle.PROBES, probes, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(oracle, "PROBES", probes)
    ladder()
    assert counted == ["flashinfer_trace"] * 3  # the same source: the same key
    (probes / "sglang" / "sglang_regions.py").write_text("# another probe's source\n")
    ladder()
    assert counted == ["flashinfer_trace"] * 3  # a probe the ladder does not import: the same key
    cases = probes / "flashinfer" / "tables" / "cases.py"
    cases.write_bytes(cases.read_bytes() + b"\n")  # one byte of the probes
    ladder()
    assert counted == ["flashinfer_trace"] * 4
    stubs = probes / "flashinfer" / "stubs" / "serving_stubs.py"  # imported by the ladder's probe, not named by the plan
    stubs.write_bytes(stubs.read_bytes() + b"\n")
    ladder()
    assert counted == ["flashinfer_trace"] * 5


@pytest.mark.torch
def test_the_cache_tells_upstream_wheels_apart(tmp_path: Path, counted: list[str]) -> None:
    results = oracle.Results(tmp_path / "cache")
    for wheel in ("a" * 64, "a" * 63 + "b", "a" * 64):  # one hex digit of the sha256 differs
        side = oracle.Side("0.7.4", "upstream", {"wheel": wheel}, lambda: tmp_path)
        oracle.ladder_for(side, CANDIDATES, quick=False, results=results)
        oracle.grid_for(side, results=results, toolkits=tmp_path / "toolkits")
    assert counted == ["flashinfer_trace", "cuda_grid"] * 2


