"""tests/torch_pins.py's table against the SGLang wheels' own METADATA: the torch each stack runs."""

from __future__ import annotations

import zipfile

import pytest
from helpers import PATCHES, cache_dir, fetch_upstream
from packaging.requirements import Requirement
from torch_pins import TORCH_PINS, releases_under

from nvfp4_overlay.patch.manifest import all_targets

SERIES = [t.version for t in all_targets(PATCHES) if t.dist == "sglang"]


@pytest.mark.upstream
@pytest.mark.parametrize("version", SERIES)
def test_the_table_is_the_wheels_torch_pin(version: str) -> None:
    wheel = fetch_upstream("sglang", version, patches_dir=PATCHES, cache_dir=cache_dir())
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        lines = zf.read(name).decode().splitlines()
    pins = [Requirement(line.split(":", 1)[1]) for line in lines if line.startswith("Requires-Dist:")]
    (torch,) = [r for r in pins if r.name == "torch"]
    assert str(torch.specifier) == f"=={TORCH_PINS[version]}"


def test_a_stack_torch_selects_its_releases_and_another_selects_all() -> None:
    assert releases_under("2.9.1") == ["0.6.1", "0.6.3", "0.6.7.post2", "0.6.7.post3"]
    assert releases_under("2.14.1") == ["0.7.1", "0.7.2"]
    assert releases_under("2.14.1+cpu") == ["0.7.1", "0.7.2"]
    assert len(releases_under("2.99.0")) == 38  # a torch no stack pins: every carried release
