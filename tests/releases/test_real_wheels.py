"""The default stack built from the real pinned upstream wheels, verified, reproducible, installable."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import OVERLAY, PATCHES, cache_dir, fresh_venv

from nvfp4_overlay import cli
from nvfp4_overlay.patch.manifest import load_stacks, load_upstream
from nvfp4_overlay.patch.patching import read_series

pytestmark = pytest.mark.upstream


def build(dist_dir: Path, *args: str) -> int:
    return cli.main(["build", "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY),
                     "--dist-dir", str(dist_dir), "--cache-dir", str(cache_dir()), "--quiet", *args])


@pytest.fixture(scope="module")
def default_stack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist_dir = tmp_path_factory.mktemp("dist")
    assert build(dist_dir) == 0
    return dist_dir


def test_default_stack_builds_the_issue_s_wheels(default_stack: Path) -> None:
    stacks = load_stacks(PATCHES)
    pins = {t.dist: load_upstream(PATCHES, t) for t in stacks.get(stacks.default, PATCHES).targets}
    flashinfer, sglang = pins["flashinfer-python"], pins["sglang"]
    names = sorted(p.name for p in default_stack.glob("*.whl"))
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert names == [
        f"flashinfer_python-{flashinfer.local_version}-py3-none-any.whl",
        f"sglang-{sglang.local_version}-{py}-{py}-manylinux_2_34_x86_64.whl",
    ]
    assert cli.main(["verify", "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY),
                     *map(str, default_stack.glob("*.whl"))]) == 0


def test_real_builds_are_byte_identical(default_stack: Path, tmp_path: Path) -> None:
    assert build(tmp_path) == 0
    for wheel in default_stack.glob("*.whl"):
        assert (tmp_path / wheel.name).read_bytes() == wheel.read_bytes(), wheel.name
    assert (tmp_path / "SHA256SUMS").read_bytes() == (default_stack / "SHA256SUMS").read_bytes()


def test_patched_members_differ_and_the_rest_is_upstream(default_stack: Path) -> None:
    wheel = next(default_stack.glob("flashinfer_python-*.whl"))
    upstream = cache_dir() / "wheels" / "flashinfer_python-0.6.8.post1-py3-none-any.whl"
    with zipfile.ZipFile(upstream) as up, zipfile.ZipFile(wheel) as out:
        up_infos = {i.filename: i for i in up.infolist()}
        changed = [i.filename for i in out.infolist()
                   if i.filename in up_infos and up.read(i.filename) != out.read(i.filename)]
        added = [n for n in out.namelist() if n not in up_infos and ".dist-info/" not in n]
    # What changed is exactly what the series touches, no member more or less.
    touched = {fp.path for patch in read_series(PATCHES / "flashinfer-python" / "0.6.8.post1").patches
               for fp in patch.files}
    assert touched and set(changed) == touched, (changed, touched)
    assert all(not c.startswith("flashinfer_python-0.6.8.post1.dist-info") for c in changed)
    # What the wheel adds is the one overlay of the distribution, whole (no copy per release).
    assert set(added) == {p.relative_to(OVERLAY / "flashinfer-python").as_posix()
                          for p in (OVERLAY / "flashinfer-python").rglob("*")
                          if p.is_file() and "__pycache__" not in p.parts}
    assert "flashinfer/_nvfp4_overlay/cuda.py" in added


def test_all_platform_wheels_of_sglang_0_5_11(tmp_path: Path) -> None:
    assert build(tmp_path, "--all-platforms", "sglang==0.5.11") == 0
    wheels = sorted(p.name for p in tmp_path.glob("*.whl"))
    assert len(wheels) == len(load_upstream(PATCHES, load_stacks(PATCHES).get("sglang-0.5.11", PATCHES).targets[1]).wheels) == 8
    assert all(w.startswith("sglang-0.5.11+nvfp4.") for w in wheels)
    assert cli.main(["verify", "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY),
                     *map(str, tmp_path.glob("*.whl"))]) == 0


def test_pip_install_replaces_upstream_and_satisfies_sglang_s_pin(default_stack: Path, tmp_path: Path) -> None:
    """Installed over the upstream versions, the patched wheels replace them and keep SGLang's pin true."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    venv = tmp_path / "venv"
    python = fresh_venv(venv)
    upstream = [cache_dir() / "wheels" / "flashinfer_python-0.6.8.post1-py3-none-any.whl",
                *(cache_dir() / "wheels").glob(f"sglang-0.5.11-cp{sys.version_info[0]}{sys.version_info[1]}-*x86_64.whl")]
    pip = [python, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--no-index"]
    subprocess.run([*pip, *map(str, upstream)], check=True)
    subprocess.run([*pip, *map(str, default_stack.glob("*.whl"))], check=True)
    code = ("import importlib.metadata as m; print(m.version('flashinfer-python')); print(m.version('sglang'));"
            "print('\\n'.join(m.requires('sglang') or []))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
    flashinfer_version, sglang_version, *requires = out.splitlines()
    assert Version(flashinfer_version).local and Version(flashinfer_version).public == "0.6.8.post1"
    assert Version(sglang_version).local and Version(sglang_version).public == "0.5.11"
    pin = next(Requirement(r) for r in requires if Requirement(r).name.replace("_", "-") == "flashinfer-python")
    assert str(pin.specifier) == "==0.6.8.post1"
    assert pin.specifier.contains(Version(flashinfer_version))
    site = next(venv.glob("lib/python*/site-packages"))
    dist_infos = sorted(p.name for p in site.glob("*.dist-info") if p.name.startswith(("flashinfer", "sglang")))
    assert dist_infos == [f"flashinfer_python-{flashinfer_version}.dist-info", f"sglang-{sglang_version}.dist-info"]
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True).stdout
    unmet = [line for line in check.splitlines() if line.startswith("sglang") and "flashinfer" in line.split(" requires ")[-1]
             and "cubin" not in line]  # flashinfer-cubin is a separate distribution, not installed here
    assert not unmet
