"""stacks.toml against the SGLang wheels: every stack pairs an SGLang release with the flashinfer-python
its wheel really pins (the file read alone: tests/unit/test_stacks_file.py)."""

from __future__ import annotations

import pytest
from helpers import PATCHES, cache_dir

from nvfp4_overlay.carry import releases
from nvfp4_overlay.patch.manifest import Target, load_stacks
from nvfp4_overlay.wheel import fetch
from nvfp4_overlay.wheel.archive import WheelReader
from nvfp4_overlay.wheel.metadata import find_dist_info

STACKS = load_stacks(PATCHES)
SGLANG = [s for s in STACKS.stacks if any(t.dist == "sglang" for t in (*s.targets, *s.upstream))]


@pytest.mark.upstream
@pytest.mark.parametrize("stack", SGLANG, ids=[s.name for s in SGLANG])
def test_the_flashinfer_pin_is_the_sglang_wheels_own(stack: object) -> None:
    from packaging.requirements import Requirement

    (sglang,) = [t for t in (*stack.targets, *stack.upstream) if t.dist == "sglang"]  # type: ignore[attr-defined]
    (flashinfer,) = [t for t in stack.targets if t.dist == "flashinfer-python"]  # type: ignore[attr-defined]
    wheel = releases.release_wheel(PATCHES, Target("sglang", sglang.version), fetch.Source(cache_dir()))
    with WheelReader(wheel.path) as reader:
        info = find_dist_info(wheel.filename, reader.names, reader.read)
        metadata = reader.read(f"{info.dist_info}/METADATA").decode()
    pins = [Requirement(line.split(":", 1)[1].strip()) for line in metadata.splitlines()
            if line.startswith("Requires-Dist:") and "flashinfer" in line.lower()]
    pins = [r for r in pins if r.name.replace("_", "-").lower() == "flashinfer-python"]
    assert len(pins) == 1, pins
    assert str(pins[0].specifier) == f"=={flashinfer.version}"
    if tuple(map(int, sglang.version.split(".")[:3])) >= (0, 5, 13):
        assert pins[0].extras == {"cu13"}
