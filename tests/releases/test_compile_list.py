"""FlashInfer's own compile list on the real wheels: the committed table holds the probe's runs.

The compile-list probe (probes/flashinfer/compile_list.py, SM90 faked) runs each function of the
list on its cases through the counting harness, on the patched tree of the default stack's release
(every release with NVFP4_OVERLAY_FULL=1) and on the
upstream tree where the rotating sample or NVFP4_OVERLAY_FULL says; the runs are kept in the result
cache under their inputs. patches/flashinfer-python/audit-compile-list.json holds the verdicts of
every release (make compile-list-table); these tests hold it to the runs and read the facts off it.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import (
    FRESH_UPSTREAM,
    FULL,
    PATCHES,
    ReleaseOracle,
    by_release,
    cache_dir,
    default_flashinfer,
    fetch_upstream,
    flashinfer_releases,
)
from packaging.version import Version

from nvfp4_overlay.oracle import compile_table
from nvfp4_overlay.probes.flashinfer.tables import compile_cases

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

RELEASES = flashinfer_releases()
# make test probes the default stack's release (about 2 minutes cold on 2 cores, from the result cache
# after); NVFP4_OVERLAY_FULL=1 probes every release. The table is read for all 38 either way.
SLICE = RELEASES if FULL else [default_flashinfer()]
TABLE = compile_table.load_table(PATCHES)


def _runs(release_oracle: ReleaseOracle, release: str, side: int) -> dict[str, Any]:
    wheel = fetch_upstream("flashinfer-python", release, patches_dir=PATCHES, cache_dir=cache_dir())
    return compile_table.runs_for(release_oracle.sides(release)[side], wheel,
                                  results=release_oracle.oracle.results)


@pytest.fixture
def patched(release_oracle: ReleaseOracle, release: str) -> dict[str, Any]:
    return _runs(release_oracle, release, 1)


@pytest.mark.parametrize("release", by_release(SLICE))
def test_the_table_holds_the_patched_runs(patched: dict[str, Any], release: str) -> None:
    assert "crash" not in patched, patched
    entry = compile_table.release_entry(patched, patched)["patched"]
    assert entry == TABLE["releases"][release]["patched"], "run: make compile-list-table RELEASES=" + release


@pytest.mark.parametrize("release", by_release([r for r in SLICE if FULL or r in FRESH_UPSTREAM]))
def test_the_table_holds_upstreams_runs(release_oracle: ReleaseOracle, release: str) -> None:
    upstream = _runs(release_oracle, release, 0)
    entry = compile_table.release_entry(upstream, upstream)["upstream"]
    assert entry == TABLE["releases"][release]["upstream"], "run: make compile-list-table RELEASES=" + release


@pytest.mark.parametrize("release", RELEASES)
def test_every_carried_release_is_in_the_table(release: str) -> None:
    assert release in TABLE["releases"], "run: make compile-list-table RELEASES=" + release


@pytest.mark.parametrize("release", [r for r in RELEASES if r in TABLE["releases"]])
def test_upstream_compiles_nothing_of_the_list(release: str) -> None:
    """The baseline: no case of any function of the list compiles on the upstream wheel; each breaks
    in the wheel's own code (the JIT loader, a spec generator, the kernel call of a planned wrapper)."""
    for name, cell in TABLE["releases"][release]["upstream"].items():
        if cell.get("absent"):
            continue
        assert cell["compiled"] == 0, (name, cell)
        assert cell["breaks"] and not cell["breaks"].startswith("outside"), (name, cell)


@pytest.mark.parametrize("release", [r for r in RELEASES if r in TABLE["releases"]])
def test_every_routed_function_compiles_patched(release: str) -> None:
    """Every function of the list the overlay routes compiles on the patched wheel, every case that
    routes (one opaque op a call, no process or FlashInfer file while tracing, the op's fake equal to
    upstream's wrapper), where the release has it; a case that stays upstream's path by design is
    named with its reason, and a release where every case of a function does (sampling before 0.6.4,
    whose seed and offset are host ints) says so."""
    for name, cell in TABLE["releases"][release]["patched"].items():
        if cell.get("absent") or name in compile_cases.EAGER_ONLY:
            continue
        assert cell["compiled"] == cell["cases"], (name, cell)
        if not cell["cases"]:
            assert cell["eager_only"] and set(cell["eager_only"].values()) == {compile_cases.HOST_STATE}, (name, cell)
            assert Version(release) < Version("0.6.4"), (name, cell)


@pytest.mark.parametrize("release", [r for r in RELEASES if r in TABLE["releases"]])
def test_what_stays_eager_only_breaks_as_upstream(release: str) -> None:
    """A function the overlay leaves upstream's (the wrappers' run(), the segment GEMM) breaks on the
    patched wheel where it breaks on upstream's."""
    sides = TABLE["releases"][release]
    for name in compile_cases.EAGER_ONLY:
        patched, upstream = sides["patched"][name], sides["upstream"][name]
        if not upstream.get("absent"):
            assert patched["compiled"] == 0, (name, patched)
            assert patched.get("breaks", "").rsplit(": ", 1)[-1] in ("the kernel (foreign code)", "Import failure",
                                                                    "Observed exception", "open"), (name, patched)


@pytest.mark.parametrize("release", [r for r in RELEASES if r in TABLE["releases"]])
def test_the_patched_wheel_calls_each_case_eagerly_as_upstream(release: str) -> None:
    """The patched wheel's eager calls (outputs and kernel arguments) are upstream's, case by case."""
    sides = TABLE["releases"][release]
    for name, cell in sides["patched"].items():
        assert cell.get("absent") == sides["upstream"][name].get("absent"), name
        if not cell.get("absent"):
            assert cell["eager"] == sides["upstream"][name]["eager"], name


def test_the_patched_run_counts_every_case(release_oracle: ReleaseOracle) -> None:
    """The harness reached every case: each compiled call of every function was made through a
    replaced binding (calls > 0), so a verdict of 0 compiled is a failure, never a call missed."""
    runs = _runs(release_oracle, default_flashinfer(), 1)
    for name, found in runs["functions"].items():
        if found.get("missing"):
            continue
        assert found["bound"], name
        for case, run in found["cases"].items():
            assert run["compiled"]["counts"]["calls"] == 1, (name, case)
