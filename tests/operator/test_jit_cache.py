"""jit-cache with the real nvcc: one module of the default stack built, resolved by FlashInfer's own lookup, verified.

The cheapest module of the default stack's SM120 serving path is fp4_kv_quant (one .cu file: about
25 s on two cores); jit-cache keeps it under the shared cache by its inputs (the patched wheel's
sha256, the GPU, the toolkit, the sources' digests and flags), so a warm run plans and packs only.
The full sets are built by `make jit-cache GPU=...` (docs/bench.md says how long where).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers import build_one, cache_dir, sources_digest

from nvfp4_overlay.cli import main
from nvfp4_overlay.operate import jit_doctor
from nvfp4_overlay.operate.installed import Finding
from nvfp4_overlay.patch import Target, load_upstream
from nvfp4_overlay.records import hash_of as record_hash
from nvfp4_overlay.wheel.jit_toolkit import find_toolkit

pytestmark = [pytest.mark.upstream, pytest.mark.torch,
              pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"),
                                 reason="needs the CUDA toolkit (nvcc)")]
ROOT = Path(__file__).resolve().parents[2]
# the patched wheel's version the cache wheel's begins with (FlashInfer's jit/env.py asks that)
PATCHED = load_upstream(ROOT / "patches", Target("flashinfer-python", "0.6.8.post1")).local_version
MODULE = "fp4_kv_quant"
CALL = ["nvfp4_kv_quantize", "m40-k256"]  # the routed entry point whose loader builds it


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    dist = tmp_path_factory.mktemp("dist")
    patched = build_one("flashinfer-python", "0.6.8.post1", patches_dir=ROOT / "patches", overlay_dir=ROOT / "overlay",
                        dist_dir=dist, cache_dir=cache_dir())
    code = main(["jit-cache", "--gpu", "sm120", "--module", MODULE, "--dist-dir", str(dist), "--cache-dir",
                 str(cache_dir()), "--patches-dir", str(ROOT / "patches"), "--quiet"])
    assert code == 0
    (wheel,) = dist.glob("flashinfer_jit_cache-*.whl")
    trees = tmp_path_factory.mktemp("trees")
    for name, source in (("flashinfer", patched), ("cache", wheel)):
        with zipfile.ZipFile(source) as zf:
            zf.extractall(trees / name)
    return {"wheel": wheel, "patched": patched, "flashinfer": trees / "flashinfer", "cache": trees / "cache"}


def _node_env(path: list[Path], tmp_path: Path) -> dict[str, str]:
    """A serving node without nvcc: no CUDA_HOME, a PATH with no toolkit and no ninja; libcudart found
    as a CUDA torch finds it (here: the toolkit's lib64 on the loader path)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "FLASHINFER_CUDA_ARCH_LIST")}
    env.update(PATH="/usr/bin:/bin", PYTHONPATH=os.pathsep.join(map(str, path)),
               LD_LIBRARY_PATH=str(find_toolkit().root / "lib64"), FLASHINFER_WORKSPACE_BASE=str(tmp_path))
    return env


def _first_call(path: list[Path], tmp_path: Path) -> dict[str, Any]:
    plan = {"gpu": [12, 0], "torch_cuda": "13.0", "calls": [CALL]}
    done = subprocess.run([sys.executable, "-m", "nvfp4_overlay.probes.flashinfer.jit_load"], input=json.dumps(plan),
                          capture_output=True, text=True, env=_node_env(path, tmp_path), check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_wheel_holds_the_module_with_a_version_flashinfer_accepts(built: dict[str, Path]) -> None:
    version = built["wheel"].name.split("-")[1]
    assert version == f"{PATCHED}.cu130.sm120"
    package = built["cache"] / "flashinfer_jit_cache"
    assert (package / "jit_cache" / MODULE / f"{MODULE}.so").is_file()
    provenance = json.loads(next(built["cache"].glob("*.dist-info/NVFP4_OVERLAY_JIT_CACHE.json")).read_text())
    assert provenance["archs"] == ["120f"] and provenance["modules"][MODULE]["included"]
    assert provenance["modules"][MODULE]["first_loaded_by"] == CALL
    # kept under the cache by its inputs: a run after this one (or after an interruption) builds it no more
    stamp = next(cache_dir().glob(f"jit-cache/{provenance['flashinfer']['sha256'][:16]}-sm120-cuda*/modules/{MODULE}/build.json"))
    assert json.loads(stamp.read_text())["inputs"] == provenance["modules"][MODULE]["inputs"]
    assert "-gencode=arch=compute_120f,code=sm_120f" in provenance["modules"][MODULE]["cuda_cflags"]
    # the other modules of the plan are named, not held: they JIT at first call
    assert {"fp4_quantization_120f", "fused_moe_120"} <= {n for n, m in provenance["modules"].items() if not m["included"]}
    # the plan is the serving path's: SGLang 0.5.11 calls no rmsnorm_quant, so `norm` is no module of it
    assert "norm" not in provenance["modules"]
    assert provenance["serving_path"]["sglang"] == "0.5.11" and not provenance["serving_path"]["all_routes"]
    assert provenance["modules"][MODULE]["sglang_sites"] == {
        "nvfp4_kv_quantize": ["sglang/srt/layers/quantization/kvfp4_tensor.py:198 quantize"]}


def _plan(built: dict[str, Path], *extra: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["jit-cache", "--gpu", "sm120", "--plan", "--json", "--dist-dir", str(built["patched"].parent),
                     "--cache-dir", str(cache_dir()), "--patches-dir", str(ROOT / "patches"), *extra])
    assert code == 0
    plan: dict[str, Any] = json.loads(out.getvalue())["plan"]
    return plan


def test_the_serving_path_s_modules_are_fewer_than_every_route_s(built: dict[str, Path]) -> None:
    """The default stack on SM120: the modules of the entry points SGLang 0.5.11 calls, against --all-routes."""
    narrowed, every = _plan(built), _plan(built, "--all-routes")
    assert every["serving_path"] == {"sglang": None, "all_routes": True, "entries": None}
    assert set(narrowed["modules"]) < set(every["modules"])
    # norm: loaded by rmsnorm_quant and fused_add_rmsnorm_quant alone, which no file of sglang/srt 0.5.11 calls
    assert set(every["modules"]) - set(narrowed["modules"]) == {"norm"}
    assert every["modules"]["norm"]["loaded_by"] == ["fused_add_rmsnorm_quant", "rmsnorm_quant"]
    entries = narrowed["serving_path"]["entries"]
    assert "rmsnorm_quant" not in entries and "nvfp4_quantize" not in entries
    # each module names the entry points that load it and where SGLang calls them
    quantizer = narrowed["modules"]["fp4_quantization_120f"]["sglang_sites"]["fp4_quantize"]
    assert "sglang/srt/layers/quantization/modelopt_quant.py:1479 apply" in quantizer
    assert ("compiled region modelopt_fp4_linear (sm120): sglang/srt/layers/quantization/modelopt_quant.py:1479 apply"
            in quantizer)  # the region table: this call runs inside the fullgraph region on SM120
    trtllm = narrowed["modules"]["fused_moe_trtllm_sm100"]["sglang_sites"]["trtllm_fp4_block_scale_moe"]
    assert "sglang/srt/layers/moe/moe_runner/flashinfer_trtllm.py:942 fused_experts_none_to_flashinfer_trtllm_fp4" in trtllm


def test_flashinfer_loads_it_from_the_cache_and_starts_no_process(built: dict[str, Path], tmp_path: Path) -> None:
    result = _first_call([built["cache"], built["flashinfer"]], tmp_path)
    call = result["calls"]["nvfp4_kv_quantize[m40-k256]"]
    assert result["aot_dir"] == str(built["cache"] / "flashinfer_jit_cache" / "jit_cache")
    assert call["outcome"] == "loaded", call
    assert call["loads"] == [{"name": MODULE, "is_aot": True,
                              "library": str(built["cache"] / "flashinfer_jit_cache" / "jit_cache" / MODULE / f"{MODULE}.so")}]
    assert result["processes"] == []


def test_without_the_cache_the_same_call_builds(built: dict[str, Path], tmp_path: Path) -> None:
    """The control: the audit sees the build the cache spares (ninja started, not found on this PATH)."""
    result = _first_call([built["flashinfer"]], tmp_path)
    call = result["calls"]["nvfp4_kv_quantize[m40-k256]"]
    assert call["outcome"] != "loaded" and call["loads"] == []
    assert any("ninja" in p for p in result["processes"]), result["processes"]


def test_verify_refuses_an_edited_cache_wheel(built: dict[str, Path], tmp_path: Path) -> None:
    assert main(["verify", str(built["wheel"]), "--patches-dir", str(ROOT / "patches")]) == 0
    edited = tmp_path / built["wheel"].name
    member = f"flashinfer_jit_cache/jit_cache/{MODULE}/{MODULE}.so"
    with zipfile.ZipFile(built["wheel"]) as zin, zipfile.ZipFile(edited, "w") as zout:
        record_name = next(n for n in zin.namelist() if n.endswith("RECORD"))
        data = bytearray(zin.read(member))
        data[-1] ^= 0xFF
        for info in zin.infolist():
            if info.filename == member:
                zout.writestr(info, bytes(data))
            elif info.filename == record_name:  # the RECORD row rewritten to match, as an editor would
                rows = zin.read(record_name).decode().splitlines()
                rows = [f"{member},{record_hash(bytes(data))},{len(data)}" if r.startswith(member + ",") else r for r in rows]
                zout.writestr(info, "\n".join(rows) + "\n")
            else:
                zout.writestr(info, zin.read(info.filename))
    assert main(["verify", str(edited), "--patches-dir", str(ROOT / "patches")]) == 3


def test_doctor_with_and_without_the_cache(built: dict[str, Path], tmp_path: Path) -> None:
    without = Finding()
    view = jit_doctor.judge(jit_doctor.facts(sys.executable, env=_node_env([built["flashinfer"]], tmp_path)),
                            "sglang-0.5.11", without)
    assert view["cache"] is None
    assert any("no flashinfer_jit_cache" in n for n in without.notes)
    assert any("no nvcc on PATH" in n for n in without.notes)  # no GPU here: a note, not a serving node's problem
    on_a_node = Finding()
    jit_doctor.judge({**jit_doctor.facts(sys.executable, env=_node_env([built["flashinfer"]], tmp_path)), "gpu": "sm120"},
                     "sglang-0.5.11", on_a_node)
    assert any("no nvcc on PATH" in p for p in on_a_node.problems)  # nothing prebuilt, nothing to build with
    with_cache = Finding()
    fact = jit_doctor.facts(sys.executable, env=_node_env([built["cache"], built["flashinfer"]], tmp_path))
    view = jit_doctor.judge(fact, "sglang-0.5.11", with_cache)
    assert view["cache"] == f"{PATCHED}.cu130.sm120"
    assert view["prebuilt"] == [MODULE] and "fp4_quantization_120f" in view["will_jit"]
    assert not any("jit-cache" in p and "built for" in p for p in with_cache.problems)
    on_hopper = Finding()
    jit_doctor.judge({**fact, "gpu": "sm90", "torch_cuda": "12.8"}, "sglang-0.5.11", on_hopper)
    assert any("built for sm120, this node's GPU is sm90" in p for p in on_hopper.problems)
    assert any("built with CUDA 13, this torch is CUDA 12.8" in p for p in on_hopper.problems)


# --- the cache anchored: builds reproducible, verify and doctor hold each module to the one built here ---------


def _rewritten(wheel: Path, dest: Path, *, provenance: bool, sums: bool = True) -> Path:
    """The cache wheel with its module edited, as an attacker who can rewrite any byte would: RECORD's row made to
    match, and (provenance) the provenance's sha256 of the module too; (sums) SHA256SUMS beside it rewritten, the
    patched wheel it names beside it as well."""
    member = f"flashinfer_jit_cache/jit_cache/{MODULE}/{MODULE}.so"
    out = dest / wheel.name
    with zipfile.ZipFile(wheel) as zin:
        data = bytearray(zin.read(member))
        data[-1] ^= 0xFF
        files = {i.filename: zin.read(i.filename) for i in zin.infolist()}
    files[member] = bytes(data)
    doc_name = next(n for n in files if n.endswith("NVFP4_OVERLAY_JIT_CACHE.json"))
    if provenance:
        doc = json.loads(files[doc_name])
        doc["modules"][MODULE]["sha256"] = hashlib.sha256(data).hexdigest()
        files[doc_name] = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
    record_name = next(n for n in files if n.endswith("RECORD"))
    rows = [r for r in files[record_name].decode().splitlines() if r.split(",")[0] not in (member, doc_name)]
    rows += [f"{n},{record_hash(files[n])},{len(files[n])}" for n in (member, doc_name)]
    files[record_name] = ("\n".join(sorted(rows)) + "\n").encode()
    with zipfile.ZipFile(out, "w") as zout:
        for name, content in files.items():
            zout.writestr(name, content)
    for sibling in wheel.parent.glob("flashinfer_python-*.whl"):
        shutil.copy(sibling, dest)
    if sums:
        lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}" for p in sorted(dest.glob("*.whl"))]
        (dest / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return out


def test_verify_builds_each_module_again_and_refuses_one_whose_provenance_was_rewritten_too(
        built: dict[str, Path], tmp_path: Path) -> None:
    """Module, RECORD, provenance and SHA256SUMS all rewritten to agree: only the module built here from the same
    inputs (the patched wheel beside it, held to the pinned upstream) tells; before the anchor, verify said ok."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["verify", str(built["wheel"]), "--patches-dir", str(ROOT / "patches"), "--json"]) == 0
    (genuine,) = json.loads(out.getvalue())["wheels"]
    assert genuine["verdict"] == "ok" and genuine["taken_on_trust"] == []
    edited = _rewritten(built["wheel"], tmp_path, provenance=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["verify", str(edited), "--patches-dir", str(ROOT / "patches"), "--json"])
    (verdict,) = json.loads(out.getvalue())["wheels"]
    assert code == 3, verdict
    assert any(f"{MODULE}.so: sha256" in p and "built here from the same inputs" in p for p in verdict["problems"])


def test_verify_takes_a_module_it_cannot_build_again_on_trust(built: dict[str, Path], tmp_path: Path) -> None:
    """The cache wheel without the patched wheel it was built from: nothing contradicts it, nothing here derives
    it: TAKEN ON TRUST, exit 5, the module named with the reason and the fix."""
    shutil.copy(built["wheel"], tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["verify", str(tmp_path / built["wheel"].name), "--patches-dir", str(ROOT / "patches"), "--json"])
    (verdict,) = json.loads(out.getvalue())["wheels"]
    assert code == 5 and verdict["verdict"] == "taken on trust" and not verdict["ok"]
    (trusted,) = verdict["taken_on_trust"]
    assert f"{MODULE}.so: taken on its builder's word: the patched wheel it was built from" in trusted


def _installed(wheel: Path, root: Path) -> Path:
    """The cache wheel installed as an installer lays it out (its files and dist-info with RECORD) under root."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(root)
    return root


@pytest.mark.parametrize("edit", ["after-install", "arrived-edited", "provenance-rewritten"])
def test_doctor_refuses_an_edited_module_in_an_installed_cache(built: dict[str, Path], tmp_path: Path, edit: str) -> None:
    """An edited module: changed after the install (its RECORD row tells), arrived edited with its RECORD row
    rewritten (the provenance tells), or with the provenance rewritten too (the module this host built from the
    same inputs tells). Each is an integrity failure, exit 3; doctor said nothing of it before."""
    if edit == "after-install":
        site = _installed(built["wheel"], tmp_path / "site")
        so = site / "flashinfer_jit_cache" / "jit_cache" / MODULE / f"{MODULE}.so"
        so.write_bytes(so.read_bytes()[:-1] + bytes([so.read_bytes()[-1] ^ 0xFF]))
    else:
        (tmp_path / "edited").mkdir()
        edited = _rewritten(built["wheel"], tmp_path / "edited", provenance=edit == "provenance-rewritten")
        site = _installed(edited, tmp_path / "site")
    finding = Finding()
    fact = jit_doctor.facts(sys.executable, env=_node_env([site, built["flashinfer"]], tmp_path))
    jit_doctor.judge(fact, "sglang-0.5.11", finding, cache_dir())
    assert finding.exit_code == 3, finding
    expected = {"after-install": "differs from its RECORD row", "arrived-edited": "the wheel arrived edited",
                "provenance-rewritten": "built here from the same inputs"}[edit]
    assert any(MODULE in p and expected in p for p in finding.integrity), finding.integrity


def test_doctor_anchors_a_genuine_cache_to_the_build_here_and_takes_it_on_trust_without_one(
        built: dict[str, Path], tmp_path: Path) -> None:
    site = _installed(built["wheel"], tmp_path / "site")
    fact = jit_doctor.facts(sys.executable, env=_node_env([site, built["flashinfer"]], tmp_path))
    anchored = Finding()
    view = jit_doctor.judge(fact, "sglang-0.5.11", anchored, cache_dir())
    assert view["anchored"] == [MODULE] and anchored.exit_code == 0, anchored
    elsewhere = Finding()  # a node that never built it: nothing contradicts it, nothing here derives it
    jit_doctor.judge(fact, "sglang-0.5.11", elsewhere, tmp_path / "empty-cache")
    assert elsewhere.exit_code == 5 and not elsewhere.integrity
    assert any(f"{MODULE}.so is taken on its builder's word" in t for t in elsewhere.trusted)


# The flags a build adds to FlashInfer's command lines: each changes embedded names only (jit_build.py).
NAME_FLAGS = re.compile(r"^(-Xcompiler=)?-ffile-prefix-map=<[a-z-]+>=/nvfp4-overlay/[a-z-]+$|^--keep$|^--keep-dir=<workspace>/keep/\w+$")


def test_the_build_s_command_lines_are_upstream_s_plus_flags_that_change_names_only(built: dict[str, Path]) -> None:
    provenance = json.loads(next(built["cache"].glob("*.dist-info/NVFP4_OVERLAY_JIT_CACHE.json")).read_text())
    (stamp,) = cache_dir().glob(f"jit-cache/{provenance['flashinfer']['sha256'][:16]}-sm120-cuda*/modules/{MODULE}/build.json")
    lines = json.loads(stamp.read_text())["command_lines"]
    assert lines["removed"] == []  # nothing of upstream's build.ninja dropped or changed
    assert lines["added"] and all(NAME_FLAGS.match(t) for t in lines["added"]), lines["added"]
    assert provenance["modules"][MODULE]["reproducible"] is True


def test_a_module_builds_to_the_same_bytes_in_another_directory_and_process(built: dict[str, Path],
                                                                              tmp_path: Path) -> None:
    """The same module built again under another cache dir (another tree path, workspace, pid): the same bytes,
    and the whole cache wheel too. Kept under the cache dir by the build's key and the build code's digest."""
    provenance = json.loads(next(built["cache"].glob("*.dist-info/NVFP4_OVERLAY_JIT_CACHE.json")).read_text())
    probes = ROOT / "src" / "nvfp4_overlay" / "probes" / "flashinfer"
    # the patched wheel too: the cache wheel's provenance names it (its sha256, its routed entry points)
    key = hashlib.sha256(json.dumps([provenance["modules"][MODULE]["inputs"], provenance["toolchain"],
                                     sources_digest(probes / "jit_build.py", probes / "jit_plan.py"),
                                     hashlib.sha256(built["patched"].read_bytes()).hexdigest()]).encode()).hexdigest()
    kept = cache_dir() / "jit-reproduce" / f"{key[:32]}.json"
    if not kept.is_file():
        other = tmp_path / "another" / "cache" / "dir"
        other.mkdir(parents=True)
        (other / "wheels").symlink_to(cache_dir() / "wheels")  # the pinned wheels it reads (SGLang's, the cubins)
        dist = tmp_path / "dist"
        dist.mkdir()
        shutil.copy(built["patched"], dist)
        assert main(["jit-cache", "--gpu", "sm120", "--module", MODULE, "--dist-dir", str(dist), "--cache-dir", str(other),
                     "--patches-dir", str(ROOT / "patches"), "--quiet"]) == 0
        (again,) = dist.glob("flashinfer_jit_cache-*.whl")
        (so,) = other.glob(f"jit-cache/*/modules/{MODULE}/{MODULE}.so")
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps({"module": hashlib.sha256(so.read_bytes()).hexdigest(),
                                    "wheel": hashlib.sha256(again.read_bytes()).hexdigest()}))
    found = json.loads(kept.read_text())
    assert found["module"] == provenance["modules"][MODULE]["sha256"]
    assert found["wheel"] == hashlib.sha256(built["wheel"].read_bytes()).hexdigest()
