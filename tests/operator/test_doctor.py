"""doctor in real virtual environments: upstream vs patched installs, hand edits, and the live trace check.

Each environment is `python -m venv --without-pip` with a .pth that adds this interpreter's
site-packages (torch, pip, nvfp4_overlay) behind its own, so `pip install` puts the wheel under
test into the fresh environment exactly as on a server, and doctor runs in that interpreter.
"""

from __future__ import annotations

import hashlib
import json
import site
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from doctor_facts import check_document
from helpers import OVERLAY, PATCHES, ROOT, build_one, cache_dir, edited_wheel, fetch_upstream, run_cli, write_wheel

from nvfp4_overlay import cli
from nvfp4_overlay.patch.patching import read_series

Env = Callable[..., Path]


@pytest.fixture
def make_env(tmp_path: Path) -> Env:
    """make_env(*wheels) -> a fresh virtual environment with the wheels pip-installed (--no-deps)."""
    count = [0]

    def make(*wheels: Path) -> Path:
        count[0] += 1
        env = tmp_path / f"env{count[0]}"
        return new_env(env, *wheels)

    return make


def new_env(env: Path, *wheels: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    parents = [str(ROOT / "src"), *site.getsitepackages()]
    Path(purelib, "_nvfp4_overlay_tests.pth").write_text(f"import site; list(map(site.addsitedir, {parents!r}))\n")
    if wheels:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
                        "--no-deps", *map(str, wheels)], check=True)
    return env


def pins(patches: Path) -> list[str]:
    """Where doctor finds what it holds a patched build to: the fakes' overlay and upstream wheels (offline) beside
    their patches/; this checkout's overlay and the shared cache for the real ones."""
    if patches == PATCHES:
        return ["--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--cache-dir", str(cache_dir())]
    return ["--patches-dir", str(patches), "--overlay-dir", str(patches.parent / "overlay"), "--wheelhouse",
            str(patches.parent / "upstream"), "--cache-dir", str(patches.parent / "cache"), "--offline"]


def doctor(env: Path, patches: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([str(env / "bin" / "python"), "-m", "nvfp4_overlay.cli", "doctor", "--json",
                           *pins(patches), *args], check=False, capture_output=True, text=True, timeout=600)
    try:
        document = json.loads(done.stdout)
    except ValueError:
        pytest.fail(f"doctor printed no JSON (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    assert document["exit_code"] == done.returncode
    check_document(document)
    return done.returncode, document


def site_packages(env: Path) -> Path:
    return next((env / "lib").glob("python*/site-packages"))


# --- small stand-ins for flashinfer-python and sglang (no torch, no real wheels) -------------------


# Each fake: its files, and a one-hunk patch against its second line.
FAKES = {
    ("flashinfer-python", "1.0"): ("flashinfer/__init__.py", "v0 = 0\nv1 = 1\nv2 = 2\n"),
    ("sglang", "0.5.9"): ("sglang/srt/quant.py", "q0 = 0\nq1 = 1\nq2 = 2\n"),
}


@pytest.fixture
def fakes(tmp_path: Path) -> dict[str, Path]:
    """Upstream and patched wheels of a fake flashinfer-python 1.0 and sglang 0.5.9, with their series."""
    upstream, patches, dist = tmp_path / "upstream", tmp_path / "patches", tmp_path / "dist"
    upstream.mkdir()
    stack = ['default = "s"\n[stacks.s]\n']
    for (name, version), (path, text) in FAKES.items():
        wheel = write_wheel(upstream, name, version, {path: text})
        series = patches / name / version
        series.mkdir(parents=True)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        (series / "upstream.toml").write_text(f'revision = 1\n[[wheel]]\nfilename = "{wheel.name}"\nsha256 = "{digest}"\n')
        first, second, third = text.splitlines()
        (series / "0001-change.patch").write_text(
            f"Description: change\n\n--- a/{path}\n+++ b/{path}\n@@ -1,3 +1,3 @@\n {first}\n-{second}\n+{second}  # patched\n {third}\n")
        (series / "series").write_text("0001-change.patch\n")
        stack.append(f'{name} = "{version}"\n')
    (patches / "stacks.toml").write_text("".join(stack))
    assert cli.main(["build", "--patches-dir", str(patches), "--overlay-dir", str(tmp_path / "overlay"),
                     "--dist-dir", str(dist), "--wheelhouse", str(upstream), "--cache-dir", str(tmp_path / "cache"),
                     "--offline", "--quiet"]) == 0
    return {
        "patches": patches,
        "upstream": upstream,
        "flashinfer": upstream / "flashinfer_python-1.0-py3-none-any.whl",
        "flashinfer+": dist / "flashinfer_python-1.0+nvfp4.1-py3-none-any.whl",
        "sglang": upstream / "sglang-0.5.9-py3-none-any.whl",
        "sglang+": dist / "sglang-0.5.9+nvfp4.1-py3-none-any.whl",
    }


def test_upstream_and_patched_installs_are_told_apart(make_env: Env, fakes: dict[str, Path]) -> None:
    code, up = doctor(make_env(fakes["flashinfer"], fakes["sglang"]), fakes["patches"], "--no-trace")
    assert code == 1
    for name, version in [("flashinfer-python", "1.0"), ("sglang", "0.5.9")]:
        dist = up["distributions"][name]
        assert (dist["installed"], dist["version"], dist["patched"], dist["series"]) == (True, version, False, "available")
        assert any(p.startswith(f"{name} {version} is the unpatched upstream release") for p in up["problems"])

    code, patched = doctor(make_env(fakes["flashinfer+"], fakes["sglang+"]), fakes["patches"], "--no-trace")
    assert code == 0, patched["problems"]
    for name, version in [("flashinfer-python", "1.0+nvfp4.1"), ("sglang", "0.5.9+nvfp4.1")]:
        dist = patched["distributions"][name]
        assert (dist["version"], dist["patched"], dist["revision"], dist["series"]) == (version, True, 1, "current")
        assert dist["patches"] == ["0001-change.patch"]
        assert dist["record"]["modified"] == dist["record"]["missing"] == []
        assert dist["record"]["matching"] == dist["record"]["files"] > 0
    assert patched["ok"] is True and patched["problems"] == []


def test_an_unpatched_sglang_fails_the_gate_even_with_a_patched_flashinfer(make_env: Env, fakes: dict[str, Path]) -> None:
    code, document = doctor(make_env(fakes["flashinfer+"], fakes["sglang"]), fakes["patches"], "--no-trace")
    assert code == 1
    assert document["problems"] == [
        (
            "sglang 0.5.9 is the unpatched upstream release; a series exists for it: build it with "
            "'nvfp4-overlay build sglang==0.5.9' (or 'make wheels STACK=...') and pip install the wheel"
        )
    ]


def test_sglang_fixed_upstream_needs_no_patch(make_env: Env, fakes: dict[str, Path]) -> None:
    fixed = write_wheel(fakes["upstream"], "sglang", "0.5.12", {"sglang/__init__.py": ""})
    code, document = doctor(make_env(fakes["flashinfer+"], fixed), fakes["patches"], "--no-trace")
    assert code == 0, document["problems"]
    assert document["distributions"]["sglang"]["series"] == "fixed-upstream"


@pytest.mark.parametrize(("pin", "code"), [("==1.0", 0), ("==1.1", 1)], ids=["pin-kept", "pin-broken"])
def test_sglang_s_flashinfer_pin_is_checked(make_env: Env, fakes: dict[str, Path], pin: str, code: int) -> None:
    """`pip install --no-deps` lets a stack's pair be broken; 1.0+nvfp4.1 satisfies ==1.0 (PEP 440)."""
    sglang = write_wheel(fakes["upstream"], "sglang", "0.5.12", {"sglang/__init__.py": ""},
                         extra_metadata=f"Requires-Dist: flashinfer_python{pin}\nRequires-Dist: torch; extra == 'x'")
    got, document = doctor(make_env(fakes["flashinfer+"], sglang), fakes["patches"], "--no-trace")
    assert got == code, document["problems"]
    broken = [p for p in document["problems"] if "requires flashinfer_python" in p]
    expected = (
        "sglang 0.5.12 requires flashinfer_python==1.1, but flashinfer-python 1.0+nvfp4.1 is installed; "
        "install the pair of one stack ('nvfp4-overlay install --stack NAME' prints how)"
    )
    assert broken == ([] if code == 0 else [expected])


def test_hand_edited_and_deleted_files_are_an_integrity_failure(make_env: Env, fakes: dict[str, Path]) -> None:
    env = make_env(fakes["flashinfer+"], fakes["sglang+"])
    with (site_packages(env) / "flashinfer" / "__init__.py").open("a") as f:
        f.write("HOTFIX = True\n")
    (site_packages(env) / "sglang" / "srt" / "quant.py").unlink()
    code, document = doctor(env, fakes["patches"], "--no-trace")
    assert code == 3
    assert document["distributions"]["flashinfer-python"]["record"]["modified"] == ["flashinfer/__init__.py"]
    assert document["distributions"]["sglang"]["record"]["missing"] == ["sglang/srt/quant.py"]
    (edited,) = [p for p in document["problems"] if "flashinfer/__init__.py" in p]
    assert "1 installed file(s) modified since they were installed (flashinfer/__init__.py)" in edited
    assert "reinstall" in edited and "arrived edited" not in edited  # changed after the install, not in the wheel
    assert not any("arrived edited" in p for p in document["problems"])


def test_a_newer_series_revision_is_reported(make_env: Env, fakes: dict[str, Path]) -> None:
    """This checkout builds 1.0+nvfp4.2 now: the installed 1.0+nvfp4.1 is nothing it can derive (exit 4), not a pass."""
    toml = fakes["patches"] / "flashinfer-python" / "1.0" / "upstream.toml"
    toml.write_text(toml.read_text().replace("revision = 1", "revision = 2"))
    code, document = doctor(make_env(fakes["flashinfer+"], fakes["sglang+"]), fakes["patches"], "--no-trace")
    assert code == 4
    assert document["distributions"]["flashinfer-python"]["series"] == "outdated"
    assert any("was built at revision 1" in n and "at revision 2" in n for n in document["notes"])
    (problem,) = document["problems"]
    assert problem.startswith("flashinfer-python 1.0+nvfp4.1: cannot be verified here: it is labelled 1.0+nvfp4.1, "
                              "and this checkout builds flashinfer-python==1.0 as 1.0+nvfp4.2")


def env_python(document: dict[str, Any]) -> str:
    return str(document["python"]["executable"])


def test_no_flashinfer_at_all(make_env: Env, fakes: dict[str, Path]) -> None:
    code, document = doctor(make_env(), fakes["patches"], "--no-trace")
    assert code == 1
    python = str(env_python(document))
    assert document["problems"] == [
        f"flashinfer-python is not installed in {python}; install a stack's wheels there "
        f"('nvfp4-overlay install --stack NAME --python {python}' prints the commands)"]


def test_human_output_names_the_verdict(make_env: Env, fakes: dict[str, Path]) -> None:
    env = make_env(fakes["flashinfer+"])
    done = subprocess.run([str(env / "bin" / "python"), "-m", "nvfp4_overlay.cli", "doctor", "--no-trace",
                           *pins(fakes["patches"])], check=False, capture_output=True, text=True)
    assert done.returncode == 0
    assert "1.0+nvfp4.1  patched, revision 1" in done.stdout
    assert "patches: 0001-change.patch" in done.stdout
    assert done.stdout.rstrip().endswith("OK, not traced (--no-trace) (exit 0)")
    assert "import flashinfer ok" in done.stdout


def test_text_and_json_say_the_same_facts(make_env: Env, fakes: dict[str, Path]) -> None:
    """doctor's text is its --json document rendered: each fact the one the JSON holds (doctor_facts.py), over a
    patched, an upstream and an edited environment (the JSON said will_jit [] where the text said every module
    builds at first call, and held no verdict)."""
    edited = make_env(fakes["flashinfer+"])
    (site_packages(edited) / "flashinfer" / "__init__.py").write_text("HOTFIX = True\n")
    for env in (make_env(fakes["flashinfer+"], fakes["sglang+"]), make_env(fakes["flashinfer"]), edited):
        code, document = doctor(env, fakes["patches"], "--no-trace")
        done = subprocess.run([str(env / "bin" / "python"), "-m", "nvfp4_overlay.cli", "doctor", "--no-trace",
                               *pins(fakes["patches"])], check=False, capture_output=True, text=True)
        assert (done.returncode, done.stdout.rstrip("\n")) == (code, check_document(document))


# --- the trace check's isolation: a crash or a hang in the probe is a finding, not a doctor crash ---


@pytest.mark.torch
@pytest.mark.parametrize(
    ("init", "args", "error"),
    [
        pytest.param("import os\nos._exit(7)\n", (), "the probe exited 7", id="crash"),
        pytest.param("import time\ntime.sleep(600)\n", ("--trace-timeout", "20"), "no answer within 20 s (--trace-timeout)", id="hang"),
        pytest.param("raise ImportError('no kernels here')\n", (), "import flashinfer: builtins.ImportError: no kernels here", id="import-error"),
    ],
)
def test_a_broken_flashinfer_is_reported_not_fatal(tmp_path: Path, make_env: Env, fakes: dict[str, Path],
                                                   init: str, args: tuple[str, ...], error: str) -> None:
    broken = write_wheel(tmp_path, "flashinfer-python", "1.0", {"flashinfer/__init__.py": init})
    code, document = doctor(make_env(broken), fakes["patches"], *args)
    assert code == 1
    assert document["trace"]["ok"] is False
    assert document["trace"]["error"] == error
    assert document["gpu"]["torch"].startswith("2.")  # the probe's first answer came back all the same


# --- the real wheels: flashinfer-python 0.6.1 upstream and patched ---------------------------------


@pytest.fixture(scope="module")
def real_envs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    upstream = fetch_upstream("flashinfer-python", "0.6.1", patches_dir=PATCHES, cache_dir=cache_dir())
    patched = build_one("flashinfer-python", "0.6.1", patches_dir=PATCHES, overlay_dir=OVERLAY,
                            dist_dir=tmp_path_factory.mktemp("dist"), cache_dir=cache_dir())
    root = tmp_path_factory.mktemp("envs")
    return {"upstream": new_env(root / "upstream", upstream), "patched": new_env(root / "patched", patched),
            "patched_wheel": patched}


@pytest.mark.upstream
@pytest.mark.torch
def test_real_upstream_flashinfer_fails_the_trace_check(real_envs: dict[str, Path]) -> None:
    code, document = doctor(real_envs["upstream"], PATCHES)
    assert code == 1
    flashinfer = document["distributions"]["flashinfer-python"]
    assert (flashinfer["version"], flashinfer["patched"], flashinfer["series"]) == ("0.6.1", False, "available")
    trace = document["trace"]
    assert trace["ok"] is False
    fp4 = trace["entries"]["fp4_quantize"]
    assert fp4["error"] == "torch._dynamo.exc.Unsupported: Attempted to call function marked as skipped"
    assert "fp4_quantize" in trace["failed"]
    assert any("flashinfer.fp4_quantize does not compile" in p for p in document["problems"])
    assert "compute capability=12.0" in trace["faked"]


@pytest.mark.upstream
@pytest.mark.torch
def test_real_patched_flashinfer_passes_the_trace_check(real_envs: dict[str, Path]) -> None:
    code, document = doctor(real_envs["patched"], PATCHES)
    assert code == 0, document["problems"]
    flashinfer = document["distributions"]["flashinfer-python"]
    assert flashinfer["patched"] is True and flashinfer["version"].startswith("0.6.1+nvfp4.")
    series = read_series(PATCHES / "flashinfer-python" / "0.6.1")
    assert flashinfer["patches"] == [p.name for p in series.patches]
    assert flashinfer["upstream"]["filename"] == "flashinfer_python-0.6.1-py3-none-any.whl"
    assert flashinfer["record"]["matching"] == flashinfer["record"]["files"] > 1000
    trace = document["trace"]
    assert trace["ok"] is True, trace
    assert trace["failed"] == []
    fp4 = trace["entries"]["fp4_quantize"]  # and every other entry point the overlay routes
    assert [op for op in fp4["ops"] if "getitem" not in op] == ["nvfp4_overlay.flashinfer_fp4_quantize.default"]
    assert all(e["subprocesses"] == [] for e in trace["entries"].values())


@pytest.mark.upstream
def test_real_hand_edit_is_caught(real_envs: dict[str, Path], tmp_path: Path) -> None:
    env = new_env(tmp_path / "edited", real_envs["patched_wheel"])
    cpp_ext = site_packages(env) / "flashinfer" / "jit" / "cpp_ext.py"
    cpp_ext.write_text(cpp_ext.read_text().replace("def get_cuda_version", "def get_cuda_version_hotfix", 1))
    code, document = doctor(env, PATCHES, "--no-trace")
    assert code == 3
    assert document["distributions"]["flashinfer-python"]["record"]["modified"] == ["flashinfer/jit/cpp_ext.py"]


@pytest.fixture(scope="module")
def default_flashinfer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default stack's patched flashinfer-python 0.6.8.post1, built from the cached upstream wheel."""
    return build_one("flashinfer-python", "0.6.8.post1", patches_dir=PATCHES, overlay_dir=OVERLAY,
                     dist_dir=tmp_path_factory.mktemp("dist"), cache_dir=cache_dir())


@pytest.mark.upstream
@pytest.mark.parametrize("member", ["flashinfer/_nvfp4_overlay/cuda.py", "flashinfer/jit/cpp_ext.py",
                                    "flashinfer/__init__.py"], ids=["overlay", "patched", "upstream"])
def test_a_wheel_that_arrived_edited_is_told_from_a_file_changed_after_install(default_flashinfer: Path, tmp_path: Path,
                                                                               member: str) -> None:
    """The wheel edited before the install (its RECORD row rewritten): every installed file matches the RECORD
    it came with, so only the provenance tells; the fix is to verify and rebuild the wheel, not to reinstall it."""
    env = new_env(tmp_path / "env", edited_wheel(default_flashinfer, member, tmp_path / "edited"))
    code, document = doctor(env, PATCHES, "--no-trace")
    assert code == 3, document["problems"]
    flashinfer = document["distributions"]["flashinfer-python"]
    assert flashinfer["record"]["modified"] == flashinfer["record"]["missing"] == []  # RECORD alone says all is well
    (problem,) = document["problems"]
    assert problem.startswith("flashinfer-python 0.6.8.post1+nvfp4.") and "the wheel arrived edited" in problem
    assert f"not what this checkout's build makes from flashinfer_python-0.6.8.post1-py3-none-any.whl ({member})" in problem
    assert flashinfer["anchor"]["differs"] == [member]
    assert "verify the wheel you installed" in problem and "rebuild it" in problem
    if member != "flashinfer/jit/cpp_ext.py":
        return
    # Control (once): the same file changed after the install of the wheel as built is the other diagnosis.
    env = new_env(tmp_path / "later", default_flashinfer)
    with (site_packages(env) / member).open("a") as f:
        f.write("EDITED = True\n")
    code, document = doctor(env, PATCHES, "--no-trace")
    (problem,) = document["problems"]
    assert code == 3 and "modified since they were installed" in problem and "reinstall" in problem
    assert "arrived edited" not in problem


# --- another interpreter: --python PATH, from this one -------------------------------------------


def bare_env(env: Path, *wheels: Path) -> Path:
    """A venv with nothing but the wheels: no pip, no packaging, no torch, no nvfp4_overlay (pip runs from here)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    if wheels:
        subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "-q",
                        "--disable-pip-version-check", "--no-index", "--no-deps", *map(str, wheels)], check=True)
    return env / "bin" / "python"


def run_doctor(*args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_cli("doctor", "--json", *args)
    check_document(json.loads(out))
    return code, json.loads(out), err


def fake_pins(fakes: dict[str, Path]) -> list[str]:
    return pins(fakes["patches"])


def test_python_examines_that_interpreter_not_this_one(tmp_path: Path, fakes: dict[str, Path]) -> None:
    python = bare_env(tmp_path / "serving", fakes["flashinfer+"], fakes["sglang+"])
    code, document, _ = run_doctor("--python", str(python), "--no-trace", *fake_pins(fakes))
    assert code == 0, document["problems"]
    assert document["python"]["executable"] == str(python)
    assert document["python"]["prefix"] == str(tmp_path / "serving")
    flashinfer = document["distributions"]["flashinfer-python"]
    assert (flashinfer["version"], flashinfer["patched"]) == ("1.0+nvfp4.1", True)
    assert flashinfer["location"].startswith(str(tmp_path / "serving"))
    # Control: the same fakes unpatched in a second interpreter give that interpreter's answer.
    other = bare_env(tmp_path / "other", fakes["flashinfer"])
    code, document, _ = run_doctor("--python", str(other), "--no-trace", *fake_pins(fakes))
    assert code == 1
    assert document["distributions"]["flashinfer-python"]["patched"] is False
    assert document["python"]["executable"] == str(other)


def test_the_trace_runs_in_that_interpreter_and_names_missing_torch(tmp_path: Path, fakes: dict[str, Path]) -> None:
    python = bare_env(tmp_path / "serving", fakes["flashinfer+"])
    code, document, _ = run_doctor("--python", str(python), *fake_pins(fakes))
    assert code == 1
    assert document["trace"] == {"ok": False, "cause": "no-torch", "error": document["trace"]["error"]}
    assert "No module named 'torch'" in document["trace"]["error"]  # this interpreter has torch; that one has not
    (problem,) = [p for p in document["problems"] if p.startswith("torch does not import")]
    assert f"torch does not import in {python}" in problem and "install into that environment" in problem


def test_no_trace_never_says_ok_where_flashinfer_does_not_import(tmp_path: Path, fakes: dict[str, Path]) -> None:
    broken = write_wheel(tmp_path, "flashinfer-python", "1.0", {"flashinfer/__init__.py": "import torch_is_not_here\n"})
    python = bare_env(tmp_path / "serving", broken)
    code, document, _ = run_doctor("--python", str(python), "--no-trace", *fake_pins(fakes))
    assert code == 1 and document["ok"] is False
    assert document["import"]["ok"] is False
    assert any(p.startswith("flashinfer-python 1.0 does not import in") and "torch_is_not_here" in p
               for p in document["problems"])


@pytest.mark.parametrize(("name", "mode", "text"), [("missing", None, ""), ("not-executable", 0o644, "x"),
                                                    ("not-a-program", 0o755, "not an ELF\n")],
                         ids=["missing", "not-executable", "not-a-program"])
def test_a_python_that_cannot_run_is_exit_2(tmp_path: Path, name: str, mode: int | None, text: str) -> None:
    python = tmp_path / name
    if mode is not None:
        python.write_text(text)
        python.chmod(mode)
    code, document, err = run_doctor("--python", str(python), "--no-trace")
    assert code == 2
    assert document["error"]["item"] == "--python" and document["error"]["path"] == str(python)
    assert "Traceback" not in err


@pytest.mark.parametrize("args", [["--python-version", "3.12"], ["--platform", "x"], ["--fuzz", "1"],
                                  ["--pyth", "/usr/bin/python3"]], ids=["python-version", "platform", "fuzz", "abbrev"])
def test_doctor_takes_no_build_flags_and_no_abbreviations(args: list[str]) -> None:
    code, document, err = run_doctor(*args, "--no-trace")
    assert code == 2
    assert document["error"]["kind"] == "UsageError"
    assert "unrecognized arguments" in document["error"]["message"]


@pytest.mark.parametrize(("capability", "cuda", "family", "note"), [
    ((12, 0), "12.8", "SM12x, the SM120 paths", False),
    ((12, 1), "13.0", "SM12x, the SM120 paths (from CUDA 12.9)", False),
    ((12, 1), "12.8", "SM12x, the SM120 paths (from CUDA 12.9)", True),
    ((10, 0), "12.8", "SM10x", False),
], ids=["sm120", "sm121", "sm121-cuda-12.8", "sm100"])
def test_doctor_names_sm121_as_sm12x_and_its_cuda_floor(capability: tuple[int, int], cuda: str, family: str,
                                                        note: bool) -> None:
    """A GB10 (DGX Spark, 12.1) is named with the SM12x family FlashInfer and SGLang give it (their major-only
    checks), and a torch below CUDA 12.9 there is noted: FlashInfer's is_sm12x_supported asks 12.9 of 12.1."""
    from nvfp4_overlay.cli.doctor import _render_gpu
    from nvfp4_overlay.operate import doctor
    from nvfp4_overlay.operate.doctor_report import Finding, Gpu, parse

    gpu = {"torch": "2.13.0", "cuda": cuda, "available": True,
           "devices": [{"index": 0, "name": "NVIDIA GB10", "capability": list(capability)}]}
    finding = Finding()
    doctor._judge_gpu(gpu, "fix", finding)
    assert any("FlashInfer supports it from CUDA 12.9" in n for n in finding.notes) is note, finding.notes
    (line,) = _render_gpu(parse(Gpu, gpu))
    assert f"compute capability {capability[0]}.{capability[1]} ({family}; torch 2.13.0, CUDA {cuda})" in line
