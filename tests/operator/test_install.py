"""install and rollback: the printed commands, and the same commands run into fresh virtual environments.

The serving environment is a real venv; "your index" is a PEP 503 index of small upstream stand-ins
(flashinfer-python 1.0 and sglang 0.5.9, which need a dependency of their own, as the real ones need
torch), named to pip and uv by their environment variables as a user's configuration would name it.
Upstream's real dependency tree is resolved in test_the_real_stacks_resolve_in_a_fresh_venv (network).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import FULL, PATCHES, fresh_venv, run_cli, write_wheel

from nvfp4_overlay import cli
from nvfp4_overlay.errors import ConfigError
from nvfp4_overlay.operate import index, rollback
from nvfp4_overlay.operate.install import Tool, install_steps
from nvfp4_overlay.patch.manifest import Stack, Target, load_stacks, load_upstream

UV = shutil.which("uv") or (str(Path(sys.executable).parent / "uv") if (Path(sys.executable).parent / "uv").exists() else None)
PATCHED = Stack("sglang-0.5.11", (Target("flashinfer-python", "0.6.8.post1"), Target("sglang", "0.5.11")))
SHIPPED = Stack("sglang-0.5.19", (Target("flashinfer-python", "0.6.18"),), (Target("sglang", "0.5.19"),))
CUBIN_PINNED = {"flashinfer_cubin/__init__.py": "PINNED = True\n"}  # the stand-in's file its pin names
LOCAL = {Target("flashinfer-python", "0.6.8.post1"): "0.6.8.post1+nvfp4.3", Target("sglang", "0.5.11"): "0.5.11+nvfp4.3",
         Target("flashinfer-python", "0.6.18"): "0.6.18+nvfp4.2"}


# --- the commands -------------------------------------------------------------------------------


def test_install_is_upstream_with_dependencies_then_the_patched_wheels_alone() -> None:
    steps = install_steps(PATCHED, LOCAL, Tool(python="/srv/sglang/bin/python"), dist_dir=Path("/w/dist"))
    assert [s.shell for s in steps] == [
        "/srv/sglang/bin/python -m pip install flashinfer-python==0.6.8.post1 sglang==0.5.11",
        "/srv/sglang/bin/python -m pip install --no-deps --no-index --find-links /w/dist "
        "flashinfer-python==0.6.8.post1+nvfp4.3 sglang==0.5.11+nvfp4.3",
        "/srv/sglang/bin/python -m pip check",
    ]


def test_a_stack_that_ships_sglang_unpatched_installs_it_from_your_index_only() -> None:
    steps = install_steps(SHIPPED, LOCAL, Tool(uv=True, python="/p"), fleet_index="https://w.example/simple")
    assert [s.shell for s in steps] == [
        "uv pip install --python /p flashinfer-python==0.6.18 sglang==0.5.19",
        # uv searches --extra-index-url first and takes each project from the first index that has it.
        "uv pip install --python /p --no-deps --extra-index-url https://w.example/simple flashinfer-python==0.6.18+nvfp4.2",
        "uv pip check --python /p",
    ]


def test_rollback_names_the_exact_upstream_versions_by_their_pinned_hashes() -> None:
    pins = rollback.hashed(PATCHED.targets, PATCHES)
    flashinfer, sglang = pins.splitlines()
    assert flashinfer == ("flashinfer-python===0.6.8.post1 "
                          "--hash=sha256:818f9b8cc2fe66c42a1f6264be4841ac8821ada703685a02cfccb2b5124a710b")
    # every platform's wheel upstream.toml pins: pip and uv take the one file that fits, if its digest is one of them
    assert sglang.startswith("sglang===0.5.11 --hash=sha256:") and sglang.count("--hash=sha256:") == 8
    assert "--hash=sha256:fe0748beaff218d3e16c9018a5e19f018db06fc3c7ac4f90d2f93da1cf074b6f" in sglang  # cp311 x86_64
    assert [s.shell for s in rollback.rollback_steps("stack sglang-0.5.11", PATCHED.targets, pins, Tool())] == [
        f"printf '%s\\n' '{flashinfer}' '{sglang}' | pip install --force-reinstall --no-deps --require-hashes -r /dev/stdin",
        "pip check"]
    jit = rollback.Installed("flashinfer-jit-cache", "0.6.8.post1+nvfp4.9.7.cu130.sm120", "0.6.8.post1", True)
    steps = rollback.rollback_steps("installed in /p", SHIPPED.targets, "P", Tool(uv=True, python="/p"), remove=[jit],
                                    switch=SHIPPED)
    assert [s.shell for s in steps] == [
        "uv pip uninstall --python /p flashinfer-jit-cache",
        "printf '%s\\n' P | uv pip install --python /p --reinstall --no-deps --require-hashes -r /dev/stdin",
        "uv pip install --python /p flashinfer-python===0.6.18 sglang===0.5.19",  # the tree, as install's first step
        "uv pip check --python /p"]


def test_rollback_refuses_a_release_whose_pins_are_not_here(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"flashinfer-python==0\.6\.0 has no pins in .* run rollback from the "
                                          r"checkout whose series built that release") as caught:
        rollback.hashed([Target("flashinfer-python", "0.6.0")], PATCHES)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(("installed", "switch", "gone"), [
    ([("flashinfer-jit-cache", "1.0+nvfp4.1.cu130.sm120")], None, ["flashinfer-jit-cache"]),
    ([("flashinfer-jit-cache", "1.0+cu130")], None, []),  # upstream's own JIT cache of the release kept
    ([("flashinfer-jit-cache", "0.6.8.post1+cu130"), ("flashinfer-cubin", "0.6.8.post1")], "sglang-0.5.19",
     ["flashinfer-jit-cache", "flashinfer-cubin"]),  # 0.6.18 has no cubin: FlashInfer refuses one of 0.6.8.post1
    ([("flashinfer-cubin", "0.6.8.post1")], "sglang-0.5.15", []),  # 0.6.12 pins one: the hashed step replaces it
    ([("flashinfer-cubin", "0.6.8.post1")], None, []),  # the release stays: upstream's cubin of it stays
], ids=["ours", "upstream-s", "switch-unpinned", "switch-pinned", "same-release"])
def test_rollback_removes_what_install_added(installed: list[tuple[str, str]], switch: str | None, gone: list[str]) -> None:
    facts = {name: {"installed": True, "version": version, "provenance": None} for name, version in installed}
    stack = load_stacks(PATCHES).get(switch, PATCHES / "stacks.toml") if switch else None
    found = rollback.leftovers(rollback.installed_from_facts(facts), stack, PATCHES)
    assert sorted(i.dist for i in found) == sorted(gone)


def test_install_prints_the_stack_s_commands_as_json() -> None:
    code, out, err = run_cli("install", "--stack", "sglang-0.5.15", "--patches-dir", str(PATCHES), "--json",
                         "--dist-dir", "/no/dist/here")
    assert code == 0
    document = json.loads(out)
    revision = load_stacks(PATCHES)  # the stack's current revision names the pin
    assert revision.get("sglang-0.5.15", PATCHES).upstream == (Target("sglang", "0.5.15"),)
    shells = [s["shell"] for s in document["steps"]]
    # its release's cubins, no fetch at run time: the pinned file, by pip's hash-checking mode, first, so that
    # the upstream step (SGLang requires flashinfer-cubin) finds it installed and fetches no other file
    assert shells[0] == ("printf '%s\\n' 'flashinfer-cubin==0.6.12 --hash=sha256:01de132c493bb21d5df42ebe6890966cf83b40aa970dae06b2a3c0bed85f13ec' "
                         "| pip install --force-reinstall --no-deps --require-hashes -r /dev/stdin")
    assert document["steps"][0]["stdin"] == "flashinfer-cubin==0.6.12 --hash=sha256:01de132c493bb21d5df42ebe6890966cf83b40aa970dae06b2a3c0bed85f13ec"
    assert shells[1] == "pip install flashinfer-python==0.6.12 sglang==0.5.15"
    assert shells[2].startswith("pip install --no-deps --no-index --find-links /no/dist/here flashinfer-python==0.6.12+nvfp4.")
    assert document["missing"] and "warning:" in err  # printed all the same; --run would refuse


def test_install_brings_no_cubin_where_its_release_has_none() -> None:
    """flashinfer-cubin is published up to 0.6.13: sglang-0.5.19 (FlashInfer 0.6.18) fetches at run time."""
    code, out, _ = run_cli("install", "--stack", "sglang-0.5.19", "--patches-dir", str(PATCHES), "--json",
                       "--dist-dir", "/no/dist/here")
    assert code == 0
    assert not any("flashinfer-cubin" in s["shell"] for s in json.loads(out)["steps"])


def test_install_run_refuses_a_stack_that_is_not_built(tmp_path: Path) -> None:
    code, out, err = run_cli("install", "--run", "--patches-dir", str(PATCHES), "--dist-dir", str(tmp_path), "--json")
    assert code == 2
    assert json.loads(out)["error"]["fix"] == ("build the stack first ('nvfp4-overlay build --stack sglang-0.5.11'), "
                                               "or take the wheels from an index (--fleet-index URL)")


# --- run into a fresh venv: install, pip check, doctor; rollback, doctor ---------------------------


@pytest.fixture
def fleet(tmp_path: Path) -> dict[str, Path]:
    """A stack of stand-ins with a series each, built; "your index" holding upstream and their dependency."""
    upstream, patches, dist, yours = tmp_path / "upstream", tmp_path / "patches", tmp_path / "dist", tmp_path / "index"
    upstream.mkdir()
    write_wheel(upstream, "demo-dep", "1.0", {"demo_dep.py": "DEP = 1\n"})
    write_wheel(upstream, "demo-dep", "2.0", {"demo_dep.py": "DEP = 2\n"})
    # Stack s (the default) pairs flashinfer-python 1.0 with sglang 0.5.9, which requires flashinfer-cubin 1.0
    # (pinned by its sha256, as SGLang requires the cubins of its FlashInfer); stack t is flashinfer-python 1.1
    # alone, whose dependency moved on (demo-dep 2.0), as torch moves between the real stacks.
    cubin = write_wheel(upstream, "flashinfer-cubin", "1.0", CUBIN_PINNED)
    (patches / "flashinfer-cubin").mkdir(parents=True)
    (patches / "flashinfer-cubin" / "upstream-pins.toml").write_text(
        f'[[wheel]]\nfilename = "{cubin.name}"\nsha256 = "{hashlib.sha256(cubin.read_bytes()).hexdigest()}"\n')
    stacks = ['default = "s"\n[stacks.t]\nflashinfer-python = "1.1"\n[stacks.s]\n']
    for name, version, path in [("flashinfer-python", "1.1", "flashinfer/__init__.py"),
                                ("flashinfer-python", "1.0", "flashinfer/__init__.py"),
                                ("sglang", "0.5.9", "sglang/__init__.py")]:
        requires = f"Requires-Dist: demo-dep=={'2.0' if version == '1.1' else '1.0'}\n" + (
            "Requires-Dist: flashinfer-python==1.0\nRequires-Dist: flashinfer_cubin==1.0\n" if name == "sglang" else "")
        wheel = write_wheel(upstream, name, version, {path: "a = 0\nb = 1\nc = 2\n"}, extra_metadata=requires)
        series = patches / name / version
        series.mkdir(parents=True)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        (series / "upstream.toml").write_text(f'revision = 1\n[[wheel]]\nfilename = "{wheel.name}"\nsha256 = "{digest}"\n')
        (series / "0001-change.patch").write_text(
            f"Description: change\n\n--- a/{path}\n+++ b/{path}\n@@ -1,3 +1,3 @@\n a = 0\n-b = 1\n+b = 1  # patched\n c = 2\n")
        (series / "series").write_text("0001-change.patch\n")
        if version != "1.1":
            stacks.append(f'{name} = "{version}"\n')
    (patches / "stacks.toml").write_text("".join(stacks))
    assert cli.main(["build", "--patches-dir", str(patches), "--overlay-dir", str(tmp_path / "overlay"), "--dist-dir",
                     str(dist), "--wheelhouse", str(upstream), "--cache-dir", str(tmp_path / "cache"), "--offline",
                     "--quiet", "--stack", "all"]) == 0
    index.write_index(upstream, yours)
    return {"patches": patches, "dist": dist, "index": yours, "upstream": upstream, "overlay": tmp_path / "overlay",
            "cache": tmp_path / "cache"}


def pins(fleet: dict[str, Path]) -> list[str]:
    """Where install --run and doctor find the pinned upstream stand-ins the fleet's wheels are held to (offline)."""
    return ["--wheelhouse", str(fleet["upstream"]), "--cache-dir", str(fleet["cache"]), "--offline"]


def use_index(monkeypatch: pytest.MonkeyPatch, url: str, *find_links: Path) -> None:
    """The user's configuration: this index, for pip and uv, and nothing of this machine's own."""
    for key in [k for k in os.environ if k.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("UV_INDEX_URL", url)
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    if find_links:
        monkeypatch.setenv("PIP_FIND_LINKS", " ".join(map(str, find_links)))
        monkeypatch.setenv("UV_FIND_LINKS", ",".join(map(str, find_links)))


def doctor(python: str, fleet: dict[str, Path]) -> tuple[int, dict[str, Any]]:
    code, out, _ = run_cli("doctor", "--python", python, "--no-trace", "--json", "--patches-dir", str(fleet["patches"]),
                           "--overlay-dir", str(fleet["overlay"]), *pins(fleet))
    return code, json.loads(out)


def installed(python: str) -> dict[str, str]:
    done = subprocess.run([python, "-c", "import importlib.metadata as m, json; "
                           "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"],
                          capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout))


TOOLS = ["pip", pytest.param("uv", marks=pytest.mark.skipif(UV is None, reason="uv is not installed here"))]
# The same with uv only in the weekly run (NVFP4_OVERLAY_FULL=1): make test runs the pip case.
TOOLS_FULL = ["pip", pytest.param("uv", marks=pytest.mark.skipif(UV is None or not FULL, reason="uv: NVFP4_OVERLAY_FULL=1"))]


def serving(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tool: str, patches: Path) -> tuple[str, list[str]]:
    """A fresh serving venv (uv needs no pip in it), and the options every install and rollback of it takes."""
    if tool == "uv":
        monkeypatch.setenv("PATH", f"{Path(str(UV)).parent}{os.pathsep}{os.environ['PATH']}")
    python = fresh_venv(tmp_path / "serving", pip=tool == "pip")
    return python, ["--python", python, "--patches-dir", str(patches), *(["--uv"] if tool == "uv" else [])]


def with_jit_cache(fleet: dict[str, Path]) -> Path:
    """A flashinfer_jit_cache wheel for sm120 of stack s's patched FlashInfer in the dist dir, listed in
    SHA256SUMS as jit-cache lists it; it requires that patched build exactly, as jit-cache's does."""
    from helpers import jit_cache_provenance, jit_cache_wheel

    flashinfer = next(fleet["dist"].glob("flashinfer_python-1.0+*.whl"))
    provenance = jit_cache_provenance(b"\x7fELF", flashinfer.name, hashlib.sha256(flashinfer.read_bytes()).hexdigest())
    cache = jit_cache_wheel(fleet["dist"], b"\x7fELF", provenance, "1.0+nvfp4.1")
    with (fleet["dist"] / "SHA256SUMS").open("a") as sums:
        sums.write(f"{hashlib.sha256(cache.read_bytes()).hexdigest()}  {cache.name}\n")
    return cache


def pip_check(python: str, tool: str) -> subprocess.CompletedProcess[str]:
    argv = [str(UV), "pip", "check", "--python", python] if tool == "uv" else [python, "-m", "pip", "check"]
    return subprocess.run(argv, capture_output=True, text=True)


@pytest.mark.parametrize("tool", TOOLS)
def test_install_then_rollback_in_a_fresh_venv(fleet: dict[str, Path], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, tool: str) -> None:
    """install with the JIT cache `install --gpu` adds, then rollback: the environment as the upstream step alone
    leaves it, pip check clean. The cache's step is run as printed (`install --gpu`): its stand-in module can be
    built again nowhere, so `install --run --gpu` takes it on its builder's word and refuses it (exit 5)."""
    # "Your index" also lists the patched builds (a fleet index in pip.conf): rollback must still reach upstream.
    use_index(monkeypatch, fleet["index"].as_uri(), fleet["dist"])
    python, common = serving(monkeypatch, tmp_path, tool, fleet["patches"])
    with_jit_cache(fleet)
    code, out, err = run_cli("install", "--run", "--dist-dir", str(fleet["dist"]), "--overlay-dir", str(fleet["overlay"]),
                             *pins(fleet), *common)
    assert code == 0, err
    assert "check" in err  # the last step, pip check, ran and passed
    code, out, err = run_cli("install", "--gpu", "sm120", "--json", "--dist-dir", str(fleet["dist"]), *common)
    (jit,) = [s["argv"] for s in json.loads(out)["steps"] if "flashinfer-jit-cache==1.0+nvfp4.1.cu130.sm120" in s["argv"]]
    subprocess.run(jit, check=True, capture_output=True)
    assert pip_check(python, tool).returncode == 0
    versions = installed(python)
    assert versions["flashinfer-python"] == "1.0+nvfp4.1" and versions["sglang"] == "0.5.9+nvfp4.1"
    assert versions["demo-dep"] == "1.0"  # upstream's dependency tree came from your index
    assert versions["flashinfer-jit-cache"] == "1.0+nvfp4.1.cu130.sm120" and cubin_is_pinned(python)
    code, report = doctor(python, fleet)
    assert code == 5 and report["problems"] == [], report  # patched and intact; the stand-in cache on its builder's word
    if tool == "pip":  # control: the plain pin leaves the patched build ("already satisfied"); rollback does not
        done = subprocess.run([python, "-m", "pip", "install", "--no-deps", "flashinfer-python==1.0"],
                              capture_output=True, text=True, check=True)
        assert "already satisfied" in done.stdout and installed(python)["flashinfer-python"] == "1.0+nvfp4.1"

    code, out, err = run_cli("rollback", "--run", *common)
    assert code == 0, err
    versions = installed(python)
    assert versions["flashinfer-python"] == "1.0" and versions["sglang"] == "0.5.9"
    assert "flashinfer-jit-cache" not in versions  # built for the patched FlashInfer, it goes with it
    assert versions["flashinfer-cubin"] == "1.0" and cubin_is_pinned(python)  # upstream's own, kept
    assert pip_check(python, tool).returncode == 0
    code, report = doctor(python, fleet)
    assert code == 1  # upstream again: doctor says so
    assert [report["distributions"][n]["patched"] for n in ("flashinfer-python", "sglang")] == [False, False]
    assert report["distributions"]["flashinfer-python"]["series"] == "available"


def test_a_failed_step_stops_the_run_and_names_it(fleet: dict[str, Path], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-index"
    empty.mkdir()
    use_index(monkeypatch, empty.as_uri())
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "serving")], check=True)
    python = str(tmp_path / "serving" / "bin" / "python")  # an index with nothing, and no pip at all
    code, out, err = run_cli("install", "--run", "--json", "--python", python, "--dist-dir", str(fleet["dist"]),
                         "--patches-dir", str(fleet["patches"]), "--overlay-dir", str(fleet["overlay"]), *pins(fleet))
    assert code == 1
    error = json.loads(out)["error"]
    assert error["kind"] == "StepFailed" and "flashinfer-cubin==1.0 --hash=sha256:" in error["item"]
    assert "step 1 of 4" in error["message"]  # the hashed cubin goes first
    assert "flashinfer-python" not in installed(python)


def test_rollback_reads_the_environment_and_leaves_another_stack_s_releases(fleet: dict[str, Path], tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment of stack t (flashinfer-python 1.1, no SGLang) where the default stack is s (1.0 with
    sglang 0.5.9): rollback puts back 1.1 and installs nothing else; a --stack s is refused unless switched."""
    use_index(monkeypatch, fleet["index"].as_uri())
    python = fresh_venv(tmp_path / "serving")
    data = ["--python", python, "--patches-dir", str(fleet["patches"])]
    code, _, err = run_cli("install", "--run", "--stack", "t", "--dist-dir", str(fleet["dist"]), "--overlay-dir",
                       str(fleet["overlay"]), *pins(fleet), *data)
    assert code == 0, err
    assert installed(python)["flashinfer-python"] == "1.1+nvfp4.1" and "sglang" not in installed(python)

    code, out, err = run_cli("rollback", "--stack", "s", "--run", "--json", *data)
    assert code == 2, err
    error = json.loads(out)["error"]
    assert error["item"] == "--stack" and "--switch-release" in error["fix"]
    assert "flashinfer-python 1.1+nvfp4.1" in error["found"] and "flashinfer-python==1.0" in error["expected"]
    assert installed(python)["flashinfer-python"] == "1.1+nvfp4.1"  # refused before anything ran

    code, out, err = run_cli("rollback", "--run", *data)
    assert code == 0, err
    versions = installed(python)
    assert versions["flashinfer-python"] == "1.1" and "sglang" not in versions  # its release kept, nothing added

    code, out, _ = run_cli("rollback", "--json", *data)  # nothing patched is left: nothing to run
    assert code == 0 and json.loads(out)["steps"] == []
    code, out, _ = run_cli("rollback", "--stack", "s", "--switch-release", "--json", *data)  # said explicitly: printed
    assert code == 0
    cubin, exact, tree, check = json.loads(out)["steps"]
    assert cubin["stdin"].startswith("flashinfer-cubin==1.0 --hash=sha256:")
    assert [line.split(" ")[0] for line in exact["stdin"].splitlines()] == ["flashinfer-python===1.0", "sglang===0.5.9"]
    assert tree["argv"][-2:] == ["flashinfer-python===1.0", "sglang===0.5.9"] and check["argv"][-1] == "check"


# --- what the index serves is held to the pins: the cubins, upstream at rollback ----------------------------


def cubin_is_pinned(python: str) -> bool:
    """Whether the flashinfer-cubin installed is the file its pin names (the stand-in's module says so)."""
    done = subprocess.run([python, "-c", "import flashinfer_cubin; print(flashinfer_cubin.PINNED)"],
                          capture_output=True, text=True)
    return done.stdout.strip() == "True"


def swapped(fleet: dict[str, Path], tmp_path: Path, name: str, files: dict[str, bytes | str], requires: str = "") -> Path:
    """Your index with the file of name 1.0 replaced by another of the same name and version (a mirror that
    was tampered with, or an upstream re-publication), as a PEP 503 index."""
    wheels = tmp_path / "swapped-wheels"
    shutil.copytree(fleet["upstream"], wheels)
    write_wheel(wheels, name, "1.0", files, extra_metadata=requires)  # over the original: same file name
    index.write_index(wheels, tmp_path / "swapped-index")
    return tmp_path / "swapped-index"


def hash_refusal(tool: str) -> str:
    return "Hash mismatch" if tool == "uv" else "THESE PACKAGES DO NOT MATCH THE HASHES"


@pytest.mark.parametrize("tool", TOOLS)
def test_install_refuses_a_cubin_that_is_not_the_pinned_file(fleet: dict[str, Path], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, tool: str) -> None:
    """Your index serves another file as flashinfer-cubin 1.0: the hashed step, first, refuses it, before the
    upstream step (whose SGLang requires flashinfer-cubin) could fetch it unchecked. Before, that step
    installed it and the hashed line after it found it "already satisfied" (pip) or "checked" (uv)."""
    yours = swapped(fleet, tmp_path, "flashinfer-cubin", {"flashinfer_cubin/__init__.py": "PINNED = False\n"})
    use_index(monkeypatch, yours.as_uri())
    python, common = serving(monkeypatch, tmp_path, tool, fleet["patches"])
    code, out, err = run_cli("install", "--run", "--json", "--dist-dir", str(fleet["dist"]), "--overlay-dir",
                             str(fleet["overlay"]), *pins(fleet), *common)
    assert code == 1, err
    error = json.loads(out)["error"]
    assert error["kind"] == "StepFailed" and "step 1 of 4" in error["message"], error
    assert "flashinfer-cubin==1.0 --hash=sha256:" in error["item"] and hash_refusal(tool) in err
    assert installed(python).keys().isdisjoint({"flashinfer-cubin", "flashinfer-python", "sglang"})


def test_index_prints_the_hashed_cubin_step_first(fleet: dict[str, Path]) -> None:
    """The lines `index` prints for a stack: the cubin from the fleet's mirror where it holds one, else from
    your index, hashed, before the upstream step."""
    url = "https://w.example/simple"
    args = ["index", "--json", "--patches-dir", str(fleet["patches"]), "--overlay-dir", str(fleet["overlay"]),
            "--dist-dir", str(fleet["dist"]), "--url", url, *pins(fleet)]
    code, out, err = run_cli(*args)
    assert code == 0, err
    first, upstream = json.loads(out)["stacks"]["s"][:2]
    assert first.startswith("printf '%s\\n' 'flashinfer-cubin==1.0 --hash=sha256:") and "--index-url" not in first
    assert upstream == "pip install flashinfer-python==1.0 sglang==0.5.9"
    shutil.copy(next(fleet["upstream"].glob("flashinfer_cubin-*.whl")), fleet["dist"])  # as index --cubins brings it
    code, out, err = run_cli(*args)
    assert code == 0, err
    assert f"--force-reinstall --no-deps --index-url {url} --require-hashes" in json.loads(out)["stacks"]["s"][0]


@pytest.mark.parametrize("tool", TOOLS_FULL)
def test_install_from_a_fleet_index_refuses_a_cubin_mirror_that_is_not_the_pinned_file(
        fleet: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str) -> None:
    """--fleet-index: the cubin comes from the fleet's mirror (`index --cubins` put it there), hashed, before
    the upstream step: another file there is refused though your index holds the pinned one."""
    mirror = tmp_path / "mirror"
    shutil.copytree(fleet["dist"], mirror)
    write_wheel(mirror, "flashinfer-cubin", "1.0", {"flashinfer_cubin/__init__.py": "PINNED = False\n"})
    index.write_index(mirror, tmp_path / "fleet")
    use_index(monkeypatch, fleet["index"].as_uri())
    python, common = serving(monkeypatch, tmp_path, tool, fleet["patches"])
    code, out, err = run_cli("install", "--run", "--json", "--fleet-index", (tmp_path / "fleet").as_uri(), *common)
    assert code == 1, err
    error = json.loads(out)["error"]
    assert error["kind"] == "StepFailed" and "step 1 of 4" in error["message"] and hash_refusal(tool) in err
    assert (tmp_path / "fleet").as_uri() in error["item"]
    assert installed(python).keys().isdisjoint({"flashinfer-cubin", "flashinfer-python", "sglang"})


@pytest.mark.parametrize("tool", TOOLS_FULL)
def test_rollback_reinstalls_upstream_by_the_pinned_hashes(fleet: dict[str, Path], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, tool: str) -> None:
    """After an install, your index serves another file as flashinfer-python 1.0: rollback refuses it (the
    sha256 of upstream.toml, not whatever the index serves), and the patched build stays in place."""
    use_index(monkeypatch, fleet["index"].as_uri())
    python, common = serving(monkeypatch, tmp_path, tool, fleet["patches"])
    code, _, err = run_cli("install", "--run", "--dist-dir", str(fleet["dist"]), "--overlay-dir", str(fleet["overlay"]),
                           *pins(fleet), *common)
    assert code == 0, err
    yours = swapped(fleet, tmp_path, "flashinfer-python", {"flashinfer/__init__.py": "a = 0\nb = 'swapped'\nc = 2\n"},
                    "Requires-Dist: demo-dep==1.0\n")
    use_index(monkeypatch, yours.as_uri())
    code, out, err = run_cli("rollback", "--run", "--json", *common)
    assert code == 1, err
    error = json.loads(out)["error"]
    assert error["kind"] == "StepFailed" and "flashinfer-python===1.0 --hash=sha256:" in error["item"], error
    assert hash_refusal(tool) in err
    assert installed(python)["flashinfer-python"] == "1.0+nvfp4.1"


@pytest.mark.parametrize("tool", TOOLS_FULL)
def test_rollback_switch_release_installs_the_stack_s_dependencies(fleet: dict[str, Path], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch, tool: str) -> None:
    """From stack t (flashinfer-python 1.1, demo-dep 2.0) patched, --switch-release to stack s: its upstream
    releases with their dependency tree (demo-dep 1.0, the hashed cubin its SGLang requires), as install's
    upstream step installs them; pip check clean. Before, --no-deps left s's requirements unmet."""
    use_index(monkeypatch, fleet["index"].as_uri())
    python, common = serving(monkeypatch, tmp_path, tool, fleet["patches"])
    code, _, err = run_cli("install", "--run", "--stack", "t", "--dist-dir", str(fleet["dist"]), "--overlay-dir",
                           str(fleet["overlay"]), *pins(fleet), *common)
    assert code == 0, err
    assert installed(python)["demo-dep"] == "2.0"
    code, out, err = run_cli("rollback", "--stack", "s", "--switch-release", "--run", "--json", *common)
    assert code == 0, err
    versions = installed(python)
    assert (versions["flashinfer-python"], versions["sglang"], versions["demo-dep"]) == ("1.0", "0.5.9", "1.0")
    assert cubin_is_pinned(python) and pip_check(python, tool).returncode == 0


# --- install --run verifies every wheel before step 1: the default stack's real wheels -----------


@pytest.fixture(scope="module")
def default_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from helpers import OVERLAY, cache_dir

    dist = tmp_path_factory.mktemp("dist")
    assert cli.main(["build", "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--dist-dir", str(dist),
                     "--cache-dir", str(cache_dir()), "--quiet"]) == 0
    return dist


def _install_run(dist: Path, python: str) -> tuple[int, dict[str, Any], str]:
    from helpers import OVERLAY

    code, out, err = run_cli("install", "--run", "--json", "--python", python, "--dist-dir", str(dist),
                         "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY))
    return code, json.loads(out), err


@pytest.mark.upstream
@pytest.mark.parametrize("member", ["flashinfer/_nvfp4_overlay/cuda.py", "flashinfer/jit/cpp_ext.py",
                                    "flashinfer/__init__.py"], ids=["overlay", "patched", "upstream"])
def test_install_run_refuses_an_edited_wheel_before_step_1(default_dist: Path, tmp_path: Path, member: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The edited wheel is listed in SHA256SUMS too (as if the dist dir had been rewritten whole): verify refuses it."""
    from helpers import edited_wheel

    dist = tmp_path / "dist"
    dist.mkdir()
    sglang = next(default_dist.glob("sglang-*.whl"))
    shutil.copy(sglang, dist)
    (dist / "SHA256SUMS").write_text(f"{hashlib.sha256(sglang.read_bytes()).hexdigest()}  {sglang.name}\n")
    edited_wheel(next(default_dist.glob("flashinfer_python-*.whl")), member, dist, sums=True)
    empty = tmp_path / "empty-index"
    empty.mkdir()
    use_index(monkeypatch, empty.as_uri())  # had step 1 run, it would fail fast here, not reach an index
    python = fresh_venv(tmp_path / "serving", pip=False)
    code, document, err = _install_run(dist, python)
    assert code == 3, err
    error = document["error"]
    assert error["kind"] == "IntegrityError" and "refused before step 1, nothing was installed" in error["message"]
    assert "flashinfer_python-0.6.8.post1+nvfp4" in error["found"] and "rebuild" in error["fix"]
    assert member in error["found"] or "carried over from upstream" in error["found"]
    assert "[1/3]" not in err and installed(python).keys().isdisjoint({"flashinfer-python", "sglang"})


@pytest.mark.upstream
def test_install_run_refuses_a_dist_whose_sha256sums_disagree(default_dist: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    dist = tmp_path / "dist"
    shutil.copytree(default_dist, dist)
    sums = (dist / "SHA256SUMS").read_text().splitlines()
    (dist / "SHA256SUMS").write_text("\n".join(["0" * 64 + line[64:] if "flashinfer" in line else line for line in sums]) + "\n")
    use_index(monkeypatch, (tmp_path / "none").as_uri())
    python = fresh_venv(tmp_path / "serving", pip=False)
    code, document, err = _install_run(dist, python)
    assert code == 3, err
    assert "SHA256SUMS says " + "0" * 64 in document["error"]["message"]
    assert "[1/3]" not in err and "flashinfer-python" not in installed(python)


@pytest.mark.upstream
def test_the_printed_sequence_says_how_to_verify(default_dist: Path, tmp_path: Path) -> None:
    """The line printed first checks the wheels as install --run does: pasted as is, it passes the built
    dist and refuses an edited one."""
    from helpers import OVERLAY, edited_wheel

    code, out, _ = run_cli("install", "--json", "--dist-dir", str(default_dist), "--patches-dir", str(PATCHES),
                       "--overlay-dir", str(OVERLAY))
    check = json.loads(out)["verify"]
    assert code == 0 and check["argv"][3] == "verify"
    assert subprocess.run(check["argv"], capture_output=True, text=True).returncode == 0
    edited = tmp_path / "dist"
    shutil.copytree(default_dist, edited)
    edited_wheel(next(default_dist.glob("flashinfer_python-*.whl")), "flashinfer/__init__.py", edited)
    argv = [a.replace(str(default_dist), str(edited)) for a in check["argv"]]
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 3, done.stdout


# --- the real stacks: the whole dependency tree, resolved from this machine's index ---------------


def _requirements_met(resolved: dict[str, tuple[str, list[str]]], environment: dict[str, str]) -> list[str]:
    """What `pip check` would say of this set: every applicable requirement of every member met (PEP 508).

    A requirement applies when its marker holds for no extra or for an extra some applicable
    requirement asks of its distribution (found to a fixed point: `sglang[all]` asks `sglang[srt]`).
    """
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    parsed = {name: [Requirement(text) for text in requires] for name, (_, requires) in resolved.items()}
    extras: dict[str, set[str]] = {name: {""} for name in resolved}

    def applies(name: str, requirement: Requirement) -> bool:
        return requirement.marker is None or any(
            requirement.marker.evaluate({**environment, "extra": e}) for e in extras[name])

    changed = True
    while changed:
        changed = False
        for name, requirements in parsed.items():
            for requirement in requirements:
                wanted = extras.setdefault(canonicalize_name(requirement.name), {""})
                if applies(name, requirement) and not requirement.extras <= wanted:
                    wanted.update(requirement.extras)
                    changed = True
    problems = []
    for name, requirements in parsed.items():
        for requirement in (r for r in requirements if applies(name, r)):
            have = resolved.get(canonicalize_name(requirement.name))
            if have is None or not requirement.specifier.contains(have[0], prereleases=True):
                problems.append(f"{name} {resolved[name][0]} requires {requirement}, has {have[0] if have else 'nothing'}")
    return problems


def _metadata_requires(wheel: Path) -> list[str]:
    import zipfile
    from email.parser import HeaderParser

    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return HeaderParser().parsestr(zf.read(name).decode()).get_all("Requires-Dist") or []


@pytest.mark.network
@pytest.mark.upstream
def test_the_default_stack_resolves_in_a_fresh_venv_and_the_patched_wheels_keep_pip_check_clean(tmp_path: Path) -> None:
    from helpers import OVERLAY, cache_dir

    stacks = load_stacks(PATCHES)
    stack = stacks.get(stacks.default, PATCHES)
    dist = tmp_path / "dist"
    assert cli.main(["build", "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--dist-dir", str(dist),
                     "--cache-dir", str(cache_dir()), "--quiet"]) == 0
    # Python 3.11's own pip (23.2) resolves this tree in 140 s of CPU, pip 26 in 58 s (2026-12-03, this
    # test alone); both reach the pins asserted below. The test takes the newest.
    python = fresh_venv(tmp_path / "serving", newest_pip=True)
    code, out, _ = run_cli("install", "--python", python, "--dist-dir", str(dist), "--patches-dir", str(PATCHES), "--json")
    steps = [s["argv"] for s in json.loads(out)["steps"]]  # flashinfer-cubin, upstream, the patched wheels, check
    first = next(argv for argv in steps if argv[3] == "install" and "--no-deps" not in argv)
    second = next(argv for argv in steps if "--find-links" in argv)
    report = tmp_path / "report.json"
    # Step 1 as printed, as a dry run: the whole tree from this machine's index (about 196 distributions).
    done = subprocess.run([*first[:4], "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), *first[4:]],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(report.read_text())
    resolved = {m["name"].lower().replace("_", "-"): (m["version"], m.get("requires_dist", []))
                for m in (item["metadata"] for item in document["install"])}
    for target in stack.targets:
        assert resolved[target.dist][0] == target.version
    assert resolved["torch"][0] == "2.11.0"  # SGLang 0.5.11's pin
    # Step 2 as printed, as a dry run: the patched wheels, from dist/ alone.
    done = subprocess.run([*second[:4], "--dry-run", "--quiet", "--report", str(tmp_path / "patched.json"), *second[4:]],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    patched = json.loads((tmp_path / "patched.json").read_text())["install"]
    assert sorted(m["metadata"]["version"] for m in patched) == sorted(
        load_upstream_local(t) for t in stack.targets)
    # What step 2 leaves installed: upstream's tree with the patched builds in place; pip check is clean.
    for wheel in dist.glob("*.whl"):
        name = wheel.name.split("-")[0].replace("_", "-")
        version = wheel.name.split("-")[1]
        assert _metadata_requires(wheel) == resolved[name][1], name  # the patched wheel asks what upstream asks
        resolved[name] = (version, _metadata_requires(wheel))
    assert _requirements_met(resolved, document["environment"]) == []
    # Control: the same set with another torch is not clean, so the check above can fail.
    wrong = {**resolved, "torch": ("2.9.1", resolved["torch"][1])}
    sglang = load_upstream_local(Target("sglang", "0.5.11"))
    assert any(p.startswith(f"sglang {sglang} requires torch==2.11.0") for p in _requirements_met(wrong, document["environment"]))


def load_upstream_local(target: Target) -> str:
    from nvfp4_overlay.patch.manifest import load_upstream

    return load_upstream(PATCHES, target).local_version


@pytest.mark.network
@pytest.mark.upstream
@pytest.mark.skipif(UV is None, reason="uv is not installed here")
def test_a_stack_that_ships_sglang_unpatched_resolves_with_uv(tmp_path: Path) -> None:
    venv = tmp_path / "serving"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    code, out, _ = run_cli("install", "--uv", "--python", str(venv / "bin" / "python"), "--stack", "sglang-0.5.19",
                       "--patches-dir", str(PATCHES), "--dist-dir", str(tmp_path), "--json")
    first = json.loads(out)["steps"][0]["argv"]
    assert first[:5] == ["uv", "pip", "install", "--python", str(venv / "bin" / "python")]
    done = subprocess.run([str(UV), *first[1:3], "--dry-run", *first[3:]], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    would = {line.split("==")[0].strip(" +"): line.split("==")[1] for line in done.stderr.splitlines() if line.startswith(" + ")}
    assert (would["flashinfer-python"], would["sglang"], would["torch"]) == ("0.6.18", "0.5.19", "2.13.0")
    assert len(would) > 100


def test_install_gpu_adds_the_jit_cache_built_for_that_family(tmp_path: Path) -> None:
    local = load_upstream(PATCHES, Target("flashinfer-python", "0.6.8.post1")).local_version
    (tmp_path / f"flashinfer_jit_cache-{local}.cu130.sm120-py3-none-manylinux_2_28_x86_64.whl").write_bytes(b"")
    code, out, _ = run_cli("install", "--gpu", "sm120", "--patches-dir", str(PATCHES), "--dist-dir", str(tmp_path), "--json")
    assert code == 0
    shells = [s["shell"] for s in json.loads(out)["steps"]]
    assert shells[-2] == (f"pip install --no-deps --no-index --find-links {tmp_path} "
                          f"flashinfer-jit-cache=={local}.cu130.sm120")
    assert shells[-1] == "pip check"
    # another family's cache is not this one's: printed without it, and --run refuses
    code, out, err = run_cli("install", "--gpu", "sm90", "--patches-dir", str(PATCHES), "--dist-dir", str(tmp_path), "--json")
    assert code == 0 and "holds no JIT cache of sglang-0.5.11 for sm90" in err
    assert not any("flashinfer-jit-cache" in s["shell"] for s in json.loads(out)["steps"])


@pytest.mark.upstream
@pytest.mark.parametrize("data", [b"\x7fELF edited", b"\x7fELF as built"], ids=["edited", "as-built"])
def test_install_run_gpu_refuses_an_edited_jit_cache_wheel_before_step_1(default_dist: Path, tmp_path: Path, data: bytes,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """--gpu adds the JIT cache wheel to what step 2 installs: it is verified with the others before step 1
    (a module whose bytes are not the ones its provenance records, RECORD rewritten to match: exit 3); the
    same wheel as written, whose synthetic module this host cannot build again (its provenance names no
    toolchain), would be taken on its builder's word: refused too, exit 5, nothing installed."""
    from helpers import jit_cache_provenance, jit_cache_wheel

    dist = tmp_path / "dist"
    shutil.copytree(default_dist, dist)
    patched = load_upstream_local(Target("flashinfer-python", "0.6.8.post1"))
    flashinfer = f"flashinfer_python-{patched}-py3-none-any.whl"
    provenance = jit_cache_provenance(b"\x7fELF as built", flashinfer,
                                      hashlib.sha256((dist / flashinfer).read_bytes()).hexdigest())
    cache = jit_cache_wheel(dist, data, provenance, patched)
    with (dist / "SHA256SUMS").open("a") as sums:
        sums.write(f"{hashlib.sha256(cache.read_bytes()).hexdigest()}  {cache.name}\n")
    empty = tmp_path / "empty-index"
    empty.mkdir()
    use_index(monkeypatch, empty.as_uri())  # had step 1 run, it would fail fast here, not reach an index
    python = fresh_venv(tmp_path / "serving", pip=False)
    from helpers import OVERLAY

    code, out_text, err = run_cli("install", "--run", "--json", "--gpu", "sm120", "--python", python, "--dist-dir",
                              str(dist), "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY))
    error = json.loads(out_text)["error"]
    if data == b"\x7fELF as built":
        assert code == 5 and error["kind"] == "TakenOnTrust" and "taken on its builder's word" in error["found"], error
        assert installed(python).keys().isdisjoint({"flashinfer-python", "sglang", "flashinfer-jit-cache"})
        return
    assert code == 3, err
    assert "refused before step 1" in error["message"] and cache.name in error["found"], error
    assert installed(python).keys().isdisjoint({"flashinfer-python", "sglang", "flashinfer-jit-cache"})
