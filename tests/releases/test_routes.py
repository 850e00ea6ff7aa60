"""The generated committed files: patch 0002 of every release and the serving-API audit are what the
tool's generators write (`nvfp4-overlay routes --check`, `audit-api --check` on the committed tree),
and a refresh writes its port's route patch with the same generator."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest
from helpers import OVERLAY, PATCHES, cache_dir

from nvfp4_overlay.audit import routes
from nvfp4_overlay.carry.drift import drift_series
from nvfp4_overlay.carry.matrix import ReleaseFiles
from nvfp4_overlay.carry.refresh import port_series, with_routes
from nvfp4_overlay.carry.releases import release_wheel
from nvfp4_overlay.cli import main
from nvfp4_overlay.patch.manifest import Target
from nvfp4_overlay.patch.patching import read_series
from nvfp4_overlay.wheel import fetch

pytestmark = pytest.mark.upstream


def _check(command: str, patches: Path, *extra: str) -> int:
    return main([command, "--check", "--offline", "--quiet", "--patches-dir", str(patches),
                 "--overlay-dir", str(OVERLAY), "--cache-dir", str(cache_dir()), *extra])


def test_the_committed_route_patches_are_the_generators() -> None:
    assert _check("routes", PATCHES) == 0


def test_routes_check_names_a_release_whose_patch_differs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES / "flashinfer-python" / "0.7.4", patches / "flashinfer-python" / "0.7.4")
    path = patches / "flashinfer-python" / "0.7.4" / routes.PATCH
    path.write_text(path.read_text().replace("Last-Update: 2026-12-01", "Last-Update: 2026-12-02"))
    assert _check("routes", patches, "0.7.4") == 1
    assert "0.7.4 differ from what the generator writes" in capsys.readouterr().out
    assert main(["routes", "--offline", "--quiet", "--patches-dir", str(patches), "--overlay-dir", str(OVERLAY),
                 "--cache-dir", str(cache_dir()), "0.7.4"]) == 0
    assert path.read_text() == (PATCHES / "flashinfer-python" / "0.7.4" / routes.PATCH).read_text()


def test_the_committed_serving_api_audit_is_the_generators() -> None:
    assert _check("audit-api", PATCHES) == 0


def test_routed_names_are_the_overlays_table() -> None:
    names = routes.routed_names(OVERLAY)
    assert "silu_and_mul_nvfp4_quantize" in names and "fp4_quantize" in names and len(set(names)) == len(names)


# (old series, new release): a port where the new release defines a routed entry point the old lacks
PORTS = [("0.6.8.post1", "0.7.1"), ("0.6.12", "0.6.18")]


@pytest.mark.parametrize(("old", "new"), PORTS, ids=[f"{a}-to-{b}" for a, b in PORTS])
def test_a_port_routes_every_entry_point_the_release_defines(old: str, new: str) -> None:
    """The port's route patch is the committed one: silu_and_mul_nvfp4_quantize (0.6.16 on) routed too,
    although the old series never touched it (before, refresh refused: 'not routed')."""
    dist, source = "flashinfer-python", fetch.Source(cache_dir(), offline=True)
    series = read_series(PATCHES / dist / old)
    wheel = release_wheel(PATCHES, Target(dist, new), source)
    from nvfp4_overlay.wheel.archive import WheelReader

    with WheelReader(release_wheel(PATCHES, Target(dist, old), source).path) as origin, WheelReader(wheel.path) as r:
        base, files = ReleaseFiles(origin), ReleaseFiles(r)
        drifts = drift_series(series, files.read, files.names, dist, new, base.read)
    ported = with_routes(port_series(series, drifts, new, drop_upstream=True, today=date(2026, 12, 4)), OVERLAY, wheel)
    text = dict(ported.patches)[routes.PATCH]
    assert "silu_and_mul_nvfp4_quantize" in text
    assert text == (PATCHES / dist / new / routes.PATCH).read_text()
