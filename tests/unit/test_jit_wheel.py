"""The flashinfer_jit_cache wheel (synthetic modules): its version rule, layout, fixed bytes, and verify's checks."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers import OVERLAY, PATCHES, jit_cache_provenance, jit_cache_wheel
from packaging.version import Version

from nvfp4_overlay.cli import main
from nvfp4_overlay.files import SHA256SUMS, format_sums, sha256_file
from nvfp4_overlay.operate import Sums, jit_verify
from nvfp4_overlay.wheel import jit_wheel


def _provenance(data: bytes) -> dict[str, Any]:
    return jit_cache_provenance(data)


def _wheel(directory: Path, data: bytes = b"\x7fELF module", provenance: dict[str, Any] | None = None) -> Path:
    path = jit_cache_wheel(directory, data, provenance or _provenance(data))
    (directory / SHA256SUMS).write_bytes(format_sums({path.name: sha256_file(path)}))
    return path


def test_the_version_is_one_flashinfer_and_pip_accept() -> None:
    version = jit_wheel.cache_version("0.6.8.post1+nvfp4.7", "13", "sm120")
    assert version == "0.6.8.post1+nvfp4.7.cu130.sm120"
    assert version.startswith("0.6.8.post1")  # flashinfer/jit/env.py's rule against flashinfer's __version__
    assert Version(version).public == "0.6.8.post1" and Version(version).local == "nvfp4.7.cu130.sm120"


def test_the_layout_is_flashinfer_s_and_the_bytes_are_fixed(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = _wheel(tmp_path / "a"), _wheel(tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as zf:
        names = zf.namelist()
        init = zf.read("flashinfer_jit_cache/__init__.py").decode()
    assert "flashinfer_jit_cache/jit_cache/m/m.so" in names
    assert names[-1].endswith(".dist-info/RECORD")
    assert '__version__ = "0.6.8.post1+nvfp4.7.cu130.sm120"' in init and "def get_jit_cache_dir" in init


def test_verify_finds_nothing_against_it_and_takes_its_modules_on_trust(tmp_path: Path) -> None:
    """As written, nothing contradicts it; with the patched wheel it names not beside it, its module cannot be built
    again here: taken on its builder's word (TAKEN ON TRUST, exit 5), never ok."""
    verdict = jit_verify.verify_cache_wheel(_wheel(tmp_path), PATCHES, OVERLAY, sums=Sums.BESIDE)
    assert verdict.problems == [], verdict.problems
    assert verdict.state == "taken on trust" and verdict.exit_code == 5 and not verdict.ok
    (trusted,) = verdict.trusted
    assert trusted.startswith("flashinfer_jit_cache/jit_cache/m/m.so: taken on its builder's word: the patched wheel")


@pytest.mark.parametrize("edit", ["module-and-provenance", "flags"])
def test_verify_refuses_a_rewritten_provenance(tmp_path: Path, edit: str) -> None:
    """A module and its provenance rewritten together, RECORD made to match: SHA256SUMS beside it differs;
    flags edited in the provenance: they no longer digest to the module's inputs."""
    path = _wheel(tmp_path)
    sums = (tmp_path / SHA256SUMS).read_bytes()
    provenance = _provenance(b"other bytes")
    if edit == "flags":
        provenance = _provenance(b"\x7fELF module")
        provenance["modules"]["m"]["cuda_cflags"] = ["-O0"]
    _wheel(tmp_path, b"other bytes" if edit != "flags" else b"\x7fELF module", provenance)
    (tmp_path / SHA256SUMS).write_bytes(sums)  # what jit-cache wrote beside the original
    problems = jit_verify.verify_cache_wheel(path, PATCHES, OVERLAY, sums=Sums.BESIDE).problems
    expected = "the file changed after the build wrote it" if edit != "flags" else "do not digest to its inputs"
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("listed", ["itself", "another wheel"])
def test_verify_holds_a_cache_wheel_to_the_sha256sums_beside_it_as_a_patched_wheel(
        tmp_path: Path, listed: str, capsys: pytest.CaptureFixture[str]) -> None:
    """jit-cache lists the wheel it writes in the dist dir's SHA256SUMS, as build lists its own: a list beside it
    that does not name it says no build wrote it there, refused (3); before, a note beside TAKEN ON TRUST (5)."""
    path = _wheel(tmp_path)
    if listed != "itself":
        (tmp_path / SHA256SUMS).write_bytes(format_sums({"flashinfer_python-0.6.8.post1-py3-none-any.whl": "0" * 64}))
    code = main(["verify", str(path), "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--json"])
    (verdict,) = json.loads(capsys.readouterr().out)["wheels"]
    if listed == "itself":
        assert code == 5 and verdict["problems"] == [], verdict
    else:
        assert code == 3, verdict
        assert verdict["problems"] == [f"{path.name}: {tmp_path / SHA256SUMS} does not list it: the build did not "
                                       f"write this file here; rebuild it and find out where this one came from"]
