"""The gates anchored outside the wheel: verify, install --run, index and doctor on wheels that rewrite all they say
about themselves, with the pinned upstream wheel at hand and without it (issue 39).

Each hostile wheel is the default stack's real flashinfer-python build with members edited or added and its
RECORD rows, its provenance's digests and its SHA256SUMS line rewritten to match (helpers.rewritten_wheel): the
wheel agrees with itself everywhere, so only the build made again from the pinned upstream wheel tells. With
that wheel at hand (the cache, or a --wheelhouse) every gate refuses it (exit 3) and names the member; without
it (--offline, an empty cache) every gate says it cannot be verified here (exit 4), never 0. doctor runs in
this process against one venv (its --python), and must not run the examined environment's entries.py here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers import OVERLAY, PATCHES, ROOT, cache_dir, relabelled_wheel, rewritten_wheel, run_cli

from nvfp4_overlay import cli

pytestmark = [pytest.mark.upstream, pytest.mark.xdist_group("trust")]

MARKER = "NVFP4_TRUST_MARKERS"  # the folder an edited entries.py writes its process id into when it runs
ENTRIES = "flashinfer/_nvfp4_overlay/entries.py"
EDITS = {  # the wheels: which members, and what each gate must name
    "pth": {"evil.pth": "unexplained", "flashinfer/__init__.py": "upstream"},
    "patched": {"flashinfer/jit/cpp_ext.py": "patched"},
}
DATA = ["--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default stack's patched wheels (flashinfer-python and SGLang), built from the cached pinned wheels."""
    dist = tmp_path_factory.mktemp("built")
    assert cli.main(["build", *DATA, "--dist-dir", str(dist), "--cache-dir", str(cache_dir()), "--quiet"]) == 0
    return dist


def flashinfer_of(dist: Path) -> Path:
    return next(dist.glob("flashinfer_python-*.whl"))


def edit(wheel: Path, member: str) -> bytes:
    """The member's new bytes: a line appended to an existing one; a .pth that runs at interpreter start."""
    if member.endswith(".pth"):
        return b"import os\n"
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(member) + b"\nEDITED = True\n"


@pytest.fixture(scope="module")
def hostile(built: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """case -> a dist dir: the build's, with its flashinfer-python wheel rewritten (SHA256SUMS too) or, for
    "relabelled", beside a copy labelled one series revision higher that SHA256SUMS does not list."""
    out = {}
    for case, members in EDITS.items():
        dist = tmp_path_factory.mktemp(case)
        for path in built.iterdir():
            shutil.copy(path, dist / path.name)
        wheel = flashinfer_of(built)
        rewritten_wheel(wheel, dist, {m: edit(wheel, m) for m in members})
        out[case] = dist
    dist = tmp_path_factory.mktemp("relabelled")
    for path in built.iterdir():
        shutil.copy(path, dist / path.name)
    version = flashinfer_of(built).name.split("-")[1]
    head, _, revision = version.rpartition(".")
    out["relabelled"] = dist
    out["relabelled-wheel"] = relabelled_wheel(flashinfer_of(built), dist, f"{head}.{int(revision) + 1}")
    return out


@pytest.fixture
def pin(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the pinned upstream wheel is at hand: the shared cache; or an empty cache and a pip that can reach
    no index (so a gate that fetches it, as build does, cannot have it, and no test touches the network)."""
    at_hand = bool(request.param)
    monkeypatch.setenv("NVFP4_OVERLAY_CACHE", str(cache_dir() if at_hand else tmp_path / "empty"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    return at_hand


AT_HAND = pytest.mark.parametrize("pin", [True, False], ids=["upstream-at-hand", "no-upstream"], indirect=True)


def provenance_of(wheel: Path) -> str:
    return f"flashinfer_python-{wheel.name.split('-')[1]}.dist-info/NVFP4_OVERLAY.json"


# --- verify -----------------------------------------------------------------------------------------


@AT_HAND
@pytest.mark.parametrize("case", list(EDITS))
def test_verify_refuses_a_self_consistent_wheel_or_cannot_verify_it(hostile: dict[str, Path], case: str,
                                                                   pin: bool) -> None:
    wheel = flashinfer_of(hostile[case])
    code, out, _ = run_cli("verify", "--json", *DATA, str(wheel))
    (verdict,) = json.loads(out)["wheels"]
    assert code == (3 if pin else 4), verdict  # never 0 on the wheel's own word (pip reaches no index here)
    assert not any("SHA256SUMS" in p or "RECORD says" in p for p in verdict["problems"])  # it agrees with itself
    if pin:  # named member by member, the provenance itself among them: it is not what the build writes
        assert {m["member"]: m["kind"] for m in verdict["members"]} == {**EDITS[case], provenance_of(wheel): "provenance"}
        assert (verdict["verdict"], verdict["checked_against"]) == ("refused", "upstream")
    else:
        assert (verdict["verdict"], verdict["ok"], verdict["members"]) == ("unverified", False, [])
        assert verdict["unverified"].startswith("cannot be verified here: ")


def test_verify_offline_without_the_pin_cannot_verify(hostile: dict[str, Path], tmp_path: Path) -> None:
    code, out, err = run_cli("verify", *DATA, "--offline", "--cache-dir", str(tmp_path / "empty"),
                             str(flashinfer_of(hostile["pth"])))
    assert code == 4
    assert out.startswith("UNVERIFIED  ") and "cannot be verified here" in out and "--offline forbids pip" in out


def test_verify_fetches_the_pin_from_a_wheelhouse(hostile: dict[str, Path], tmp_path: Path) -> None:
    """Not in the cache, but in --wheelhouse: found as build finds it, its sha256 checked, every member named."""
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(cache_dir() / "wheels" / "flashinfer_python-0.6.8.post1-py3-none-any.whl", house)
    wheel = flashinfer_of(hostile["pth"])
    code, out, _ = run_cli("verify", "--json", *DATA, "--cache-dir", str(tmp_path / "empty"), "--wheelhouse", str(house),
                           str(wheel))
    assert code == 3
    assert sorted(m["member"] for m in json.loads(out)["wheels"][0]["members"]) == sorted([*EDITS["pth"], provenance_of(wheel)])


# --- install --run ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The environment install --run would install into: a bare venv (no pip: a step that ran would fail)."""
    env = tmp_path_factory.mktemp("target") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    return env


@AT_HAND
@pytest.mark.parametrize("case", list(EDITS))
def test_install_run_installs_nothing(hostile: dict[str, Path], target: Path, case: str, pin: bool) -> None:
    code, out, err = run_cli("install", "--run", "--json", *DATA, "--dist-dir", str(hostile[case]),
                             "--python", str(target / "bin" / "python"))
    assert code == (3 if pin else 4), err
    error = json.loads(out)["error"]
    assert error["kind"] == ("IntegrityError" if pin else "Unverified")
    wheel = flashinfer_of(hostile[case])
    assert "nothing was installed" in error["message"] and wheel.name in error["message"]
    assert (provenance_of(wheel) if pin else "cannot be verified here") in error["message"]
    assert "[1/" not in err  # no step ran
    assert not list((target / "lib").glob("python*/site-packages/*.pth"))


# --- index --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("case", "pin", "code"), [("pth", True, 3), ("pth", False, 4), ("relabelled", True, 3)],
                         ids=["sums-rewritten", "sums-rewritten-offline", "relabelled-copy"], indirect=["pin"])
def test_index_publishes_nothing_it_cannot_vouch_for(hostile: dict[str, Path], tmp_path: Path, case: str,
                                                     pin: bool, code: int) -> None:
    dist = tmp_path / "dist"
    shutil.copytree(hostile[case], dist)
    offline = [] if pin else ["--offline"]
    got, out, err = run_cli("index", "--json", "--patches-dir", str(PATCHES), "--dist-dir", str(dist), *offline)
    assert got == code, err
    named = (hostile["relabelled-wheel"] if case == "relabelled" else flashinfer_of(dist)).name
    assert named in json.loads(out)["error"]["item"] and named in err
    assert not (dist / "simple").exists()  # nothing published
    if case == "relabelled":
        assert "SHA256SUMS does not list it" in err


# --- doctor: one venv, the wheel of every edit installed with SGLang ------------------------------------


@pytest.fixture(scope="module")
def venv(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the default stack's SGLang and a flashinfer-python whose every kind of member is edited, an
    evil.pth added and an entries.py that writes its process id where MARKER says, all rewritten to match."""
    wheel = flashinfer_of(built)
    members = [*EDITS["pth"], *EDITS["patched"], ENTRIES]
    marker = (b"\nimport os as _o\nif _o.environ.get('" + MARKER.encode() + b"'):\n"
              b"    open(_o.path.join(_o.environ['" + MARKER.encode() + b"'], str(_o.getpid())), 'w').close()\n")
    edits = {m: edit(wheel, m) for m in members} | {ENTRIES: edit(wheel, ENTRIES) + marker}
    hostile = rewritten_wheel(wheel, tmp_path_factory.mktemp("doctor-wheel"), edits)
    env = tmp_path_factory.mktemp("doctor") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "-q",
                    "--disable-pip-version-check", "--no-index", "--no-deps", str(hostile),
                    str(next(built.glob("sglang-*.whl")))], check=True)
    purelib = next((env / "lib").glob("python*/site-packages"))  # the probe's imports: this checkout, torch
    Path(purelib, "_tests.pth").write_text(f"import site; list(map(site.addsitedir, {[str(ROOT / 'src'), *_site()]!r}))\n")
    return env / "bin" / "python"


def _site() -> list[str]:
    import site

    return site.getsitepackages()


def doctor(python: Path, *args: str) -> tuple[int, dict[str, Any] | str, str]:
    code, out, err = run_cli("doctor", "--python", str(python), "--no-trace", "--patches-dir", str(PATCHES), *args)
    return code, (json.loads(out) if "--json" in args else out), err


@pytest.fixture
def markers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "markers"
    folder.mkdir()
    monkeypatch.setenv(MARKER, str(folder))
    return folder


@pytest.mark.parametrize("pin", [True], ids=["upstream-at-hand"], indirect=True)
@pytest.mark.parametrize("form", ["json", "plain", "sglang-args"])
def test_doctor_names_every_edited_file_and_runs_none_here(venv: Path, markers: Path, form: str, pin: bool) -> None:
    """Held to the build made again (the shared cache has the pin): exit 3, each file named; and the installed
    entries.py ran only in the examined interpreter's child (its marker), never in doctor's own process."""
    args = {"json": ["--json"], "plain": [], "sglang-args": ["--json", "--sglang-args", "--quantization modelopt_fp4", "--model-arch", "qwen3-moe"]}
    code, document, err = doctor(venv, *args[form])
    assert str(os.getpid()) not in os.listdir(markers), "doctor ran the examined environment's entries.py in its own process"
    assert os.listdir(markers), "control: the child imported flashinfer, so the edited entries.py did run there"
    assert code == 3, err
    text = "\n".join(document["problems"]) if isinstance(document, dict) else document
    for member in [*EDITS["pth"], *EDITS["patched"], ENTRIES]:
        assert member in text
    if isinstance(document, dict):
        assert document["distributions"]["flashinfer-python"]["anchor"]["unexplained"] == ["evil.pth"]
    if form == "sglang-args":
        assert document["sglang_launch"] is not None
    if form == "plain":
        assert "NOT OK (integrity) (exit 3)" in document


@pytest.mark.parametrize("pin", [False], ids=["no-upstream"], indirect=True)
def test_doctor_without_the_pin_cannot_verify(venv: Path, markers: Path, pin: bool) -> None:
    code, document, _ = doctor(venv, "--json")
    assert (code, document["exit_code"]) == (4, 4)
    assert any(p.startswith("flashinfer-python ") and "cannot be verified here" in p for p in document["problems"])
    assert str(os.getpid()) not in os.listdir(markers)


@pytest.mark.parametrize("pin", [True], ids=["upstream-at-hand"], indirect=True)
def test_doctor_calls_a_removed_overlay_file_an_integrity_failure(venv: Path, markers: Path, pin: bool) -> None:
    """Last in the module: it changes the venv. Doctor said the tool's interpreter lacks a module (exit 2)."""
    (next(venv.parent.parent.glob("lib/python*/site-packages")) / "flashinfer/_nvfp4_overlay/codecs.py").unlink()
    code, document, err = doctor(venv, "--json")
    assert code == 3, err
    (missing,) = [p for p in document["problems"] if "_nvfp4_overlay/codecs.py" in p]
    assert "missing since they were installed" in missing
