"""cubins: the flashinfer-cubin of a stack's FlashInfer release, pinned by version and sha256, brought into the dist dir."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import write_wheel

from nvfp4_overlay.cli import main
from nvfp4_overlay.errors import ConfigError, Exit, HashMismatchError
from nvfp4_overlay.operate import cubins
from nvfp4_overlay.operate.install import Tool
from nvfp4_overlay.patch import load_upstream
from nvfp4_overlay.patch.manifest import load_stacks
from nvfp4_overlay.wheel import cubin_pins

PATCHES = Path(__file__).resolve().parents[2] / "patches"
DEFAULT_DIGEST = "43636d4cd39e694a83d76a89f87fefcdf4cecb4c4f7dd22dac25ec368c1e901f"  # the index's, for 0.6.8.post1


def _stack(name: str, patches: Path = PATCHES):  # type: ignore[no-untyped-def]
    return load_stacks(patches).get(name, patches / "stacks.toml")


def _synthetic(tmp_path: Path) -> tuple[Path, Path]:
    """(patches dir whose pin of 0.6.8.post1 is a small wheel's digest, that wheel in a directory of its own)."""
    wheels = tmp_path / "synthetic"
    wheels.mkdir()
    wheel = write_wheel(wheels, "flashinfer-cubin", "0.6.8.post1", {"flashinfer_cubin/__init__.py": "",
                        "flashinfer_cubin/cubins/a1/include/flashinferMetaInfo.h": "#pragma once\n",
                        "flashinfer_cubin/cubins/a1/kernel.cubin": b"\x7fELF"})
    patches = tmp_path / "patches"
    (patches / "flashinfer-cubin").mkdir(parents=True)
    shutil.copy(PATCHES / "stacks.toml", patches / "stacks.toml")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (patches / cubin_pins.PINS).write_text(f'[[wheel]]\nfilename = "{wheel.name}"\nsha256 = "{digest}"\n')
    return patches, wheel


@pytest.mark.parametrize(("stack", "pin"), [
    ("sglang-0.5.11", f"flashinfer-cubin==0.6.8.post1 --hash=sha256:{DEFAULT_DIGEST}"),
    ("sglang-0.5.15", "flashinfer-cubin==0.6.12 --hash=sha256:01de132c493bb21d5df42ebe6890966cf83b40aa970dae06b2a3c0bed85f13ec"),
    ("sglang-0.5.19", None),  # 0.6.18: the index publishes no flashinfer-cubin of it
], ids=["default", "0.6.12", "none-published"])
def test_the_pin_is_the_public_version_and_the_file_s_digest(stack: str, pin: str | None) -> None:
    assert cubins.requirement(_stack(stack), PATCHES) == (pin.split(" ")[0] if pin else None)
    step = cubins.install_step(_stack(stack), Tool(), PATCHES)
    assert (step.stdin if step else None) == pin
    if step is not None:  # pip's hash-checking mode, the hashed line read as a requirements file, on a download
        assert step.argv[-3:] == ("--require-hashes", "-r", "/dev/stdin")
        assert step.shell == (f"printf '%s\\n' '{pin}' | pip install --force-reinstall --no-deps --require-hashes "
                              f"-r /dev/stdin")
        assert cubins.first_of([step], _stack(stack), Tool(), PATCHES) == [step, step]  # before every other step


def test_pip_refuses_a_file_that_is_not_the_pinned_one(tmp_path: Path) -> None:
    """The step as install prints it, run by pip against an index holding another file of that name and version."""
    patches, wheel = _synthetic(tmp_path)
    step = cubins.install_step(_stack("sglang-0.5.11", patches), Tool(python=sys.executable), patches)
    assert step is not None and step.stdin is not None
    local = ["--dry-run", "--ignore-installed", "--no-index", "--find-links", str(wheel.parent)]
    ran = subprocess.run([*step.argv, *local], input=step.stdin + "\n", capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    write_wheel(wheel.parent, "flashinfer-cubin", "0.6.8.post1", {"flashinfer_cubin/__init__.py": "# another\n"})
    ran = subprocess.run([*step.argv, *local], input=step.stdin + "\n", capture_output=True, text=True, timeout=300)
    assert ran.returncode != 0 and "DO NOT MATCH THE HASHES" in ran.stderr


def test_bring_copies_the_pinned_wheel_into_the_dist_dir(tmp_path: Path) -> None:
    patches, wheel = _synthetic(tmp_path)
    cache, dist = tmp_path / "cache", tmp_path / "dist"
    (cache / "wheels").mkdir(parents=True)
    shutil.copy(wheel, cache / "wheels")
    brought = cubins.bring(_stack("sglang-0.5.11", patches), patches, dist, cache, offline=True)
    assert brought == dist / wheel.name and brought.read_bytes() == wheel.read_bytes()
    assert cubins.missing_line(_stack("sglang-0.5.11", patches), patches, [dist]) is None


def test_bring_refuses_a_wheel_whose_digest_is_not_the_pin(tmp_path: Path) -> None:
    cache, dist = tmp_path / "cache", tmp_path / "dist"
    (cache / "wheels").mkdir(parents=True)
    edited = cache / "wheels" / "flashinfer_cubin-0.6.8.post1-py3-none-any.whl"
    edited.write_bytes(b"not the pinned file")
    with pytest.raises(HashMismatchError, match=r"flashinfer_cubin-0\.6\.8\.post1-py3-none-any\.whl: sha256 \w+ is "
                                                   r"not 43636d4c\w+, the digest of .* pinned in patches/flashinfer-cubin") as caught:
        cubins.bring(_stack("sglang-0.5.11"), PATCHES, dist, cache, offline=True)
    assert caught.value.exit_code == Exit.INTEGRITY
    assert caught.value.data()["fix"].startswith(f"delete {edited}")
    assert not dist.exists()  # nothing mirrored


def test_index_cubins_exits_3_on_a_wheel_that_is_not_the_pinned_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """index --cubins over a dist dir holding the default stack's patched wheels and an edited cubin wheel."""
    dist = tmp_path / "dist"
    dist.mkdir()
    for target in _stack("sglang-0.5.11").targets:  # names alone: index --cubins asks only whether each is there
        stem = "flashinfer_python" if target.dist == "flashinfer-python" else "sglang"
        (dist / f"{stem}-{load_upstream(PATCHES, target).local_version}-py3-none-any.whl").write_bytes(b"")
    (dist / "flashinfer_cubin-0.6.8.post1-py3-none-any.whl").write_bytes(b"edited")
    code = main(["index", "--cubins", "--offline", "--patches-dir", str(PATCHES), "--dist-dir", str(dist)])
    assert code == Exit.INTEGRITY
    assert "flashinfer_cubin-0.6.8.post1-py3-none-any.whl: sha256" in capsys.readouterr().err


def test_offline_without_it_names_what_is_missing_and_the_fix(tmp_path: Path) -> None:
    line = cubins.missing_line(_stack("sglang-0.5.11"), PATCHES, [tmp_path])
    assert line is not None and "flashinfer-cubin==0.6.8.post1" in line
    with pytest.raises(ConfigError, match=r"flashinfer-cubin==0\.6\.8\.post1 is not in") as caught:
        cubins.bring(_stack("sglang-0.5.11"), PATCHES, tmp_path / "dist", tmp_path / "cache", offline=True)
    assert caught.value.data()["fix"] == "nvfp4-overlay index --cubins (online)"


def test_artifacts_are_the_headers_and_checksums_without_the_cubins(tmp_path: Path) -> None:
    """What jit-cache compiles the trtllm-gen modules against: unpacked once, stamped with the pinned digest."""
    patches, wheel = _synthetic(tmp_path)
    pin = cubin_pins.pin_for(_stack("sglang-0.5.11", patches), patches)
    assert pin is not None
    dest = cubin_pins.artifacts(wheel, pin, tmp_path / "artifacts")
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        ".nvfp4-overlay-artifacts", "a1/include/flashinferMetaInfo.h"]
    assert cubin_pins.unpacked(dest, pin)
    other = tmp_path / "other.whl"
    other.write_bytes(b"edited")
    with pytest.raises(HashMismatchError):
        cubin_pins.artifacts(other, pin, tmp_path / "elsewhere")


def test_verify_knows_the_pinned_cubin_mirror_for_what_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`verify dist/*.whl` after `index --cubins`: the mirrored cubin wheel is upstream's file, no build of this
    tool (no provenance, not in SHA256SUMS), held to its pin: ok. Before, verify raised a supply-chain alarm
    about it (not in SHA256SUMS, "not a wheel built by nvfp4-overlay", exit 3)."""
    patches, wheel = _synthetic(tmp_path)
    dist = tmp_path / "dist"
    dist.mkdir()
    shutil.copy(wheel, dist)
    (dist / "SHA256SUMS").write_text("")  # the build's list, which never names the mirror
    assert main(["verify", "--json", "--patches-dir", str(patches), str(dist / wheel.name)]) == Exit.OK
    (verdict,) = json.loads(capsys.readouterr().out)["wheels"]
    assert verdict["ok"] and verdict["checked_against"] == "pin" and "the pinned flashinfer-cubin==0.6.8.post1" in verdict["notes"][0]


@pytest.mark.parametrize("swap", ["edited", "unpinned"])
def test_verify_refuses_a_cubin_wheel_that_is_not_the_pinned_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   swap: str) -> None:
    patches, wheel = _synthetic(tmp_path)
    dist = tmp_path / "dist"
    dist.mkdir()
    version = "0.6.8.post1" if swap == "edited" else "0.6.9"
    other = write_wheel(dist, "flashinfer-cubin", version, {"flashinfer_cubin/__init__.py": "# another\n"})
    assert main(["verify", "--json", "--patches-dir", str(patches), str(other)]) == Exit.INTEGRITY
    (verdict,) = json.loads(capsys.readouterr().out)["wheels"]
    found = (rf"{re.escape(str(other))}: sha256 \w+ is not {hashlib.sha256(wheel.read_bytes()).hexdigest()}"
             if swap == "edited" else r"pins no flashinfer-cubin file of that name")
    assert not verdict["ok"] and re.search(found, verdict["problems"][0]), verdict
