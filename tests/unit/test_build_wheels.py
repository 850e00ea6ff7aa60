"""The door from a clone, build_wheels.py: any Python 3.10+ runs it, handing over to the clone's .venv or saying
how to make one (exit 2), and the commands it suggests are spelled as the user ran it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# The interpreter this venv was made from: what a clone's user has on PATH, without the project's dependencies
# (-I -S: no site-packages, whatever that interpreter has installed).
SYSTEM_PYTHON = getattr(sys, "_base_executable", sys.executable)


def clone(tmp_path: Path, *, venv: bool) -> Path:
    """A clone in tmp_path: the door copied (it finds its clone by its own path), the rest linked; with `venv`, a
    .venv whose site-packages lead to this interpreter's (what `make wheels` installs, without installing)."""
    root = tmp_path / "clone"
    root.mkdir()
    shutil.copy(ROOT / "build_wheels.py", root)
    for name in ("src", "patches", "overlay"):
        (root / name).symlink_to(ROOT / name, target_is_directory=True)
    if venv:
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
        site = subprocess.run([str(root / ".venv" / "bin" / "python"), "-c",
                               "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return root


def door(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SYSTEM_PYTHON, "-I", "-S", "build_wheels.py", *argv], cwd=root, check=False,
                          capture_output=True, text=True)


def test_the_system_python_lacks_the_dependencies() -> None:
    """The premise of the tests below: without site-packages, unidiff is not importable."""
    done = subprocess.run([SYSTEM_PYTHON, "-I", "-S", "-c", "import unidiff"], check=False, capture_output=True)
    assert done.returncode == 1


@pytest.mark.parametrize("command", ["list", "verify dist/x.whl", "doctor --no-trace", "drift --offline",
                                     "build --offline"])
def test_without_a_venv_every_command_is_exit_2_naming_make_wheels(tmp_path: Path, command: str) -> None:
    root = clone(tmp_path, venv=False)
    done = door(root, *command.split())
    assert done.returncode == 2, done.stderr
    assert "'make wheels'" in done.stderr and str(root / ".venv") in done.stderr and "unidiff" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    done = door(root, *command.split(), "--json")
    error = json.loads(done.stdout)["error"]
    assert (done.returncode, error["exit_code"], error["kind"]) == (2, 2, "ConfigError")
    assert error["fix"] == f"make -C {root} wheels"


def test_with_a_venv_the_door_hands_over_to_it(tmp_path: Path) -> None:
    root = clone(tmp_path, venv=True)
    done = door(root, "list", "--json")
    assert done.returncode == 0, done.stderr
    assert "sglang-0.5.11" in json.loads(done.stdout)["stacks"]
    # The hint is the command the user ran, to paste as it is: not .venv's interpreter, not nvfp4-overlay.
    done = door(root, "build", "flashinfer-python==0.6.19", "--offline")
    assert done.returncode == 2
    hint = re.search(r"'([^']*) refresh flashinfer-python 0\.6\.18\.post1 0\.6\.19'", done.stderr)
    assert hint is not None, done.stderr
    assert hint.group(1).endswith(" build_wheels.py") and ".venv" not in hint.group(1)
    assert Path(hint.group(1).split()[0]).name == Path(SYSTEM_PYTHON).name


def test_a_venv_that_lacks_the_dependencies_is_named_with_its_repair(tmp_path: Path) -> None:
    root = clone(tmp_path, venv=True)
    for pth in (root / ".venv").rglob("deps.pth"):
        pth.unlink()
    done = door(root, "list")
    assert done.returncode == 2
    assert f"{root / '.venv' / 'bin' / 'python'} lacks" in done.stderr and "-m pip install -e" in done.stderr


def test_the_door_checks_what_pyproject_requires() -> None:
    """build_wheels.REQUIRES is pyproject.toml's [project] dependencies, by import name."""
    sys.path.insert(0, str(ROOT))
    try:
        import build_wheels
    finally:
        sys.path.remove(str(ROOT))
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[ <>=;\[]", d, maxsplit=1)[0] for d in declared}
    assert {"tomli"} | set(build_wheels.REQUIRES) == names


def test_a_venv_interpreter_that_reports_another_executable_is_entered_once(tmp_path: Path) -> None:
    """.venv/bin/python as a launcher (sys.executable then names another file): the door hands over once, and that
    interpreter, lacking the dependencies, is told so; it does not hand over again, forever."""
    root = clone(tmp_path, venv=False)
    launcher = root / ".venv" / "bin" / "python"
    launcher.parent.mkdir(parents=True)
    launcher.write_text(f'#!/bin/sh\nexec {SYSTEM_PYTHON} -I -S "$@"\n')
    launcher.chmod(0o755)
    done = subprocess.run([SYSTEM_PYTHON, "-I", "-S", "build_wheels.py", "list"], cwd=root, check=False,
                          capture_output=True, text=True, timeout=120)  # a loop would never end: fail, not hang
    assert done.returncode == 2
    assert f"{launcher} lacks" in done.stderr
