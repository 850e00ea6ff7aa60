"""stacks.toml: every stack pairs an SGLang release with the flashinfer-python its wheel really pins."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import PATCHES, cache_dir

from nvfp4_overlay.carry import releases
from nvfp4_overlay.errors import ConfigError
from nvfp4_overlay.patch.manifest import Target, load_stacks
from nvfp4_overlay.wheel import fetch
from nvfp4_overlay.wheel.archive import WheelReader
from nvfp4_overlay.wheel.metadata import find_dist_info

STACKS = load_stacks(PATCHES)
SGLANG = [s for s in STACKS.stacks if any(t.dist == "sglang" for t in (*s.targets, *s.upstream))]


def test_every_final_sglang_release_from_0_5_8_to_0_5_23_has_a_stack() -> None:
    versions = {t.version for s in SGLANG for t in (*s.targets, *s.upstream) if t.dist == "sglang"}
    assert versions == {"0.5.8", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12",
                        "0.5.12.post1", "0.5.13", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.15.post1", "0.5.16",
                        "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"}


# The SGLang releases a series patches: 0.5.8-0.5.11 (the SM120 fp4_quantize) and 0.5.16-0.5.21 (Inkling's
# routed MoE under tc_piecewise); the rest ship upstream SGLang.
PATCHED_SGLANG = ((0, 5, 8), (0, 5, 12)), ((0, 5, 16), (0, 5, 22))


def test_sglang_ships_patched_where_a_series_carries_it_and_every_flashinfer_pin_is_carried() -> None:
    for stack in SGLANG:
        (sglang,) = [t for t in (*stack.targets, *stack.upstream) if t.dist == "sglang"]
        release = tuple(map(int, sglang.version.split(".")[:3]))
        patched = any(low <= release < high for low, high in PATCHED_SGLANG)
        assert (sglang in stack.targets) == patched, stack
        assert (PATCHES / "sglang" / sglang.version / "series").is_file() == patched, stack
        for target in stack.targets:
            assert (PATCHES / target.dist / target.version / "upstream.toml").is_file(), target


@pytest.mark.parametrize("text, match", [
    ('sglang = { version = "0.5.19" }', "a table must be"),
    ('sglang = { version = "0.5.19", patched = true }', "a table must be"),
    ('sglang = { version = "x", patched = false }', "not a PEP 440 version"),
], ids=["no-patched-key", "patched-true", "bad-version"])
def test_a_malformed_upstream_entry_is_refused(tmp_path: Path, text: str, match: str) -> None:
    (tmp_path / "stacks.toml").write_text(f'default = "s"\n[stacks.s]\nflashinfer-python = "0.6.1"\n{text}\n')
    with pytest.raises(ConfigError, match=match):
        load_stacks(tmp_path)


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
