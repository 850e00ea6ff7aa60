"""stacks.toml read alone: a stack for every final SGLang release from 0.5.8 on, SGLang patched where
a series carries it, every FlashInfer pin carried, and a malformed upstream entry refused. Each pin
against the SGLang wheel's own METADATA: tests/releases/test_stacks.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import PATCHES, sglang_stack_releases
from packaging.version import Version

from nvfp4_overlay.errors import ConfigError
from nvfp4_overlay.patch.manifest import load_stacks

STACKS = load_stacks(PATCHES)
SGLANG = [s for s in STACKS.stacks if any(t.dist == "sglang" for t in (*s.targets, *s.upstream))]


def test_every_final_sglang_release_from_0_5_8_on_has_a_stack() -> None:
    """Every release up to 0.5.23 (the newest when this was written); a newer stack is no failure."""
    versions = {t.version for s in SGLANG for t in (*s.targets, *s.upstream) if t.dist == "sglang"}
    assert {v for v in versions if Version(v) <= Version("0.5.23")} == {
        "0.5.8", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.12.post1", "0.5.13",
        "0.5.13.post1", "0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20",
        "0.5.21", "0.5.22", "0.5.23"}
    assert sglang_stack_releases()[-1] == max(versions, key=Version)  # the tests' newest is this file's


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


