"""cubins: the flashinfer-cubin of a stack's FlashInfer release, pinned, brought into the dist dir for the index."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvfp4_overlay.errors import ConfigError
from nvfp4_overlay.operate import cubins
from nvfp4_overlay.operate.install import Tool
from nvfp4_overlay.patch.manifest import load_stacks

PATCHES = Path(__file__).resolve().parents[2] / "patches"


def _stack(name: str):  # type: ignore[no-untyped-def]
    return load_stacks(PATCHES).get(name, PATCHES / "stacks.toml")


@pytest.mark.parametrize(("stack", "pin"), [
    ("sglang-0.5.11", "flashinfer-cubin==0.6.8.post1"),  # the public version of 0.6.8.post1+nvfp4.N
    ("sglang-0.5.15", "flashinfer-cubin==0.6.12"),
    ("sglang-0.5.19", None),  # 0.6.18: the index publishes no flashinfer-cubin of it
], ids=["default", "0.6.12", "none-published"])
def test_the_pin_is_the_release_s_public_version(stack: str, pin: str | None) -> None:
    assert cubins.requirement(_stack(stack)) == pin
    step = cubins.install_step(_stack(stack), Tool())
    assert (step.argv[-1] if step else None) == pin


def test_bring_copies_the_cached_wheel_into_the_dist_dir(tmp_path: Path) -> None:
    cache, dist = tmp_path / "cache", tmp_path / "dist"
    (cache / "wheels").mkdir(parents=True)
    wheel = cache / "wheels" / "flashinfer_cubin-0.6.8.post1-py3-none-any.whl"
    wheel.write_bytes(b"cubins")
    brought = cubins.bring(_stack("sglang-0.5.11"), dist, cache, offline=True)
    assert brought == dist / wheel.name and brought.read_bytes() == b"cubins"
    assert cubins.missing_line(_stack("sglang-0.5.11"), [dist]) is None


def test_offline_without_it_names_what_is_missing_and_the_fix(tmp_path: Path) -> None:
    line = cubins.missing_line(_stack("sglang-0.5.11"), [tmp_path])
    assert line is not None and "flashinfer-cubin==0.6.8.post1" in line
    with pytest.raises(ConfigError, match=r"flashinfer-cubin==0\.6\.8\.post1 is not in") as caught:
        cubins.bring(_stack("sglang-0.5.11"), tmp_path / "dist", tmp_path / "cache", offline=True)
    assert caught.value.data()["fix"] == "nvfp4-overlay index --cubins (online)"
