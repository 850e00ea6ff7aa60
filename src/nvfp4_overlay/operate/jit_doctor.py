"""doctor on a serving node: the jit cache, the cubins and the toolkit against the FlashInfer and GPU it has.

The facts come from the examined interpreter (a child running FACTS: the standard library, and torch
for the GPU it sees; nothing of it runs in this process); judge() reads them and this host's cache of
builds. What it answers: which modules of the serving path are prebuilt for that GPU and which will
JIT at first call, and whether nvcc is there to do it; the flashinfer_jit_cache and flashinfer-cubin
versions against the installed FlashInfer; a cache built for another CUDA major or GPU family; a
toolkit older than FlashInfer needs for SM12x. Each problem names its fix.

The installed cache's files are held to three things: the RECORD it was installed with (a file changed
since the install; read here as bytes, records.check_files), the provenance the wheel carries (a module that arrived edited), and the anchor no
wheel can rewrite: the module as this host built it from the same inputs and toolchain (jit-cache and
verify keep every build under the cache dir by its key, probes/flashinfer/jit_build.py; module builds
are reproducible). A module this host has no such build of is taken on its builder's word: exit 5,
naming the command that builds it here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from .. import records
from ..files import sha256_file
from ..probes.flashinfer import jit_build
from ..wheel import default_cache_dir, jit_wheel
from .installed import Finding

# Run by the examined interpreter: its own packages, PATH and CUDA_HOME.
FACTS = r'''
import json, os, re, shutil, importlib.metadata as md, importlib.util as iu
out = {"nvcc": shutil.which("nvcc"), "cuda_home": os.environ.get("CUDA_HOME")}
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
out["flashinfer"] = version("flashinfer-python")
out["cubin"] = version("flashinfer-cubin")
out["cache"] = version("flashinfer-jit-cache")
if out["cache"]:
    dist = md.distribution("flashinfer-jit-cache")
    text = dist.read_text("NVFP4_OVERLAY_JIT_CACHE.json")
    out["provenance"] = json.loads(text) if text else None
    spec = iu.find_spec("flashinfer_jit_cache")
    root = os.path.join(os.path.dirname(spec.origin), "jit_cache") if spec and spec.origin else ""
    out["present"] = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, d + ".so"))) if os.path.isdir(root) else []
    import hashlib
    def digest(path):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    out["modules_sha256"] = {d: digest(os.path.join(root, d, d + ".so")) for d in out["present"]}
    out["installed"] = {"location": str(dist.locate_file("")), "record": dist.read_text("RECORD") or ""}
spec = iu.find_spec("flashinfer")
if spec and spec.origin:
    path = os.path.join(os.path.dirname(spec.origin), "compilation_context.py")
    out["sm12x_needs_129"] = os.path.isfile(path) and "requires CUDA >= 12.9" in open(path).read()
homes = [out["cuda_home"], os.path.dirname(os.path.dirname(os.path.realpath(out["nvcc"]))) if out["nvcc"] else None,
         "/usr/local/cuda" if out["nvcc"] else None]
home = next((h for h in homes if h and os.path.isfile(os.path.join(h, "include", "cuda.h"))), None)
if home:
    out["headers_missing"] = [h for h in ("cublasLt.h", "curand_kernel.h") if not os.path.isfile(os.path.join(home, "include", h))]
for header in ([os.path.join(home, "include", "cuda.h")] if home else []):
    if os.path.isfile(header):
        found = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", open(header).read())
        if found:
            n = int(found.group(1)); out["toolkit"] = "%d.%d" % (n // 1000, n % 1000 // 10); break
try:
    import torch
    out["torch_cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        out["gpu"] = "sm%d%d" % torch.cuda.get_device_capability(0)
except Exception as exc:
    out["torch_error"] = str(exc)[:200]
print(json.dumps(out))
'''


def facts(python: str, timeout: float = 120, env: dict[str, str] | None = None) -> dict[str, Any]:
    """What FACTS found in `python`'s environment, and the installed cache's files against the RECORD it was
    installed with ("record"), read here as bytes (nothing of that environment runs in this process)."""
    done = subprocess.run([python, "-c", FACTS], capture_output=True, text=True, timeout=timeout, check=False, env=env)
    try:
        found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (done.stderr.strip().splitlines() or ["no answer"])[-1]}
    installed = found.pop("installed", None)
    if installed is not None:
        rows = [records.Row(*row) for row in records.read(installed["record"]) if len(row) == 3]
        checked = records.check_files(rows, Path(installed["location"]))
        found["record"] = {"differs": sorted(checked.modified), "missing": sorted(checked.missing)}
    return found


def report(document: dict[str, Any], finding: Finding, python: str, stack: str, cache_dir: Path | None = None) -> None:
    """doctor's document gains "jit" (judge's view) and the problems and notes, as doctor renders them."""
    fact = facts(python)
    view = judge(fact, stack, finding, cache_dir)
    document["jit"] = view
    document.update(ok=finding.exit_code == 0, exit_code=finding.exit_code,
                    problems=finding.all_problems, notes=finding.notes, taken_on_trust=finding.trusted)


def judge(fact: dict[str, Any], stack: str, finding: Finding, cache_dir: Path | None = None) -> dict[str, Any]:
    if "error" in fact:
        finding.notes.append(f"the jit-cache check could not read the environment: {fact['error']}")
        return {"error": fact["error"]}
    flashinfer, gpu = fact.get("flashinfer"), fact.get("gpu")
    view: dict[str, Any] = {"gpu": gpu, "nvcc": fact.get("nvcc"), "toolkit": fact.get("toolkit"),
                            "cache": fact.get("cache"), "cubin": fact.get("cubin"), "prebuilt": [], "will_jit": []}
    if not flashinfer:
        return view
    public = flashinfer.split("+")[0]
    build = f"nvfp4-overlay jit-cache --stack {stack} --gpu {gpu or 'sm120'}"
    _judge_cubin(fact, public, finding)
    provenance = fact.get("provenance") or {}
    if not fact.get("cache"):
        finding.notes.append(f"no flashinfer_jit_cache: every module of the FP4 serving path builds with nvcc at its first "
                             f"call on this node (seconds to minutes each); prebuild them: {build}, then pip install it")
    else:
        _judge_cache(fact, flashinfer, provenance, build, finding)
        view["anchored"] = _judge_files(fact, provenance, cache_dir or default_cache_dir(), finding)
        for name, module in sorted(provenance.get("modules", {}).items()):
            held = module.get("included") and name in fact.get("present", [])
            view["prebuilt" if held else "will_jit"].append(name)
    if view["will_jit"] or not fact.get("cache"):
        _judge_toolkit(fact, gpu, build, finding)
    return view


def _judge_cache(fact: dict[str, Any], flashinfer: str, provenance: dict[str, Any], build: str, finding: Finding) -> None:
    cache, public = str(fact["cache"]), flashinfer.split("+")[0]
    if cache.split("+")[0] != public:
        finding.problems.append(f"flashinfer-jit-cache {cache} is for FlashInfer {cache.split('+')[0]}, installed is "
                                f"{flashinfer} (FlashInfer refuses it at import, or loads modules of another release); "
                                f"rebuild it: {build}")
    elif provenance.get("flashinfer", {}).get("version") and provenance["flashinfer"].get("filename", "").find(flashinfer) < 0:
        finding.problems.append(f"flashinfer-jit-cache {cache} was built from {provenance['flashinfer'].get('filename')}, "
                                f"installed is flashinfer-python {flashinfer}; rebuild it: {build}")
    gpu = fact.get("gpu")
    if gpu and provenance.get("gpu") and provenance["gpu"] != gpu:
        finding.problems.append(f"flashinfer-jit-cache is built for {provenance['gpu']}, this node's GPU is {gpu}: "
                                f"FlashInfer would load its modules (the names are the same) and their kernels would not "
                                f"run here; install the {gpu} cache: {build}")
    built_major = str(provenance.get("cuda", {}).get("release", "")).split(".")[0]
    torch_major = str(fact.get("torch_cuda") or "").split(".")[0]
    if built_major and torch_major and built_major != torch_major:
        finding.problems.append(f"flashinfer-jit-cache is built with CUDA {built_major}, this torch is CUDA "
                                f"{fact.get('torch_cuda')}: its modules link libcudart.so.{built_major}; build it with "
                                f"a CUDA {torch_major} toolkit: {build}")
    built_torch = provenance.get("cuda", {}).get("torch_cuda")
    if built_major == torch_major and built_torch and fact.get("torch_cuda") and built_torch != fact["torch_cuda"]:
        finding.notes.append(f"flashinfer-jit-cache was planned for a torch built for CUDA {built_torch}, this torch is "
                             f"{fact['torch_cuda']}: FlashInfer picks some modules by it (the SM120 FP4 quantizer), and a "
                             f"module it picks that the cache lacks builds at first call; rebuild with --torch-cuda "
                             f"{fact['torch_cuda']}")
    missing = [n for n, m in provenance.get("modules", {}).items() if m.get("included") and n not in fact.get("present", [])]
    if missing:
        finding.problems.append(f"flashinfer-jit-cache lists {', '.join(missing)} and does not hold it; reinstall it")


def _judge_files(fact: dict[str, Any], provenance: dict[str, Any], cache_dir: Path, finding: Finding) -> list[str]:
    """The installed cache's files against their RECORD, the provenance and this host's builds (into finding);
    the modules found equal to a build of this host."""
    prefix = f"{jit_wheel.PACKAGE}/{jit_wheel.MODULES_DIR}/"
    record = fact.get("record") or {}
    for path in record.get("differs", []):
        finding.integrity.append(f"flashinfer-jit-cache: {path} differs from its RECORD row: it changed after the "
                                 f"install; reinstall the cache wheel (pip install --force-reinstall --no-deps ...)")
    for path in record.get("missing", []):
        finding.integrity.append(f"flashinfer-jit-cache: {path} is in its RECORD and missing: reinstall the cache wheel")
    anchored = []
    for name, module in sorted(provenance.get("modules", {}).items()):
        found = fact.get("modules_sha256", {}).get(name)
        if not module.get("included") or found is None or f"{prefix}{name}/{name}.so" in record.get("differs", []):
            continue
        if found != module.get("sha256"):
            finding.integrity.append(f"flashinfer-jit-cache: {prefix}{name}/{name}.so sha256 {found}, its provenance says "
                                     f"{module.get('sha256')}: the wheel arrived edited; verify it and rebuild it")
            continue
        built = _built_here(provenance, name, module, cache_dir)
        if built is None:
            finding.trusted.append(
                f"flashinfer-jit-cache: {prefix}{name}/{name}.so is taken on its builder's word: this host holds no "
                f"build of it from the same inputs and toolchain under {cache_dir}; build one here (nvfp4-overlay "
                f"jit-cache --stack {provenance.get('stack')} --gpu {provenance.get('gpu')} --module {name}) or verify "
                f"the cache wheel where it was built")
        elif built != found:
            finding.integrity.append(f"flashinfer-jit-cache: {prefix}{name}/{name}.so sha256 {found}, built here from the "
                                     f"same inputs {built}: not what those inputs build; reinstall a cache you verified")
        else:
            anchored.append(name)
    return anchored


def _built_here(provenance: dict[str, Any], name: str, module: dict[str, Any], cache_dir: Path) -> str | None:
    """The sha256 of this host's build of the module from the inputs and toolchain the provenance names (jit-cache
    and verify keep each under <cache>/jit-cache/<wheel>-<gpu>-cuda<release>/modules/<name>/), else None."""
    cuda, flashinfer = provenance.get("cuda", {}), provenance.get("flashinfer", {})
    work = cache_dir / "jit-cache" / f"{str(flashinfer.get('sha256'))[:16]}-{provenance.get('gpu')}-cuda{cuda.get('release')}"
    stamp, library = work / "modules" / name / "build.json", work / "modules" / name / f"{name}.so"
    if not (stamp.is_file() and library.is_file()) or not module.get("reproducible"):
        return None
    cubin = (provenance.get("flashinfer_cubin") or {}).get("sha256")
    uses_cubins = any(str(d).startswith("<cubins>") for d in module.get("include_dirs", []))
    key = jit_build.build_key(module, cubin if uses_cubins else None, provenance.get("toolchain"), True)
    try:
        kept = json.loads(stamp.read_text())
    except ValueError:
        return None
    return sha256_file(library) if kept.get("key") == key else None


def _judge_cubin(fact: dict[str, Any], public: str, finding: Finding) -> None:
    cubin = fact.get("cubin")
    if cubin and cubin != public:
        finding.problems.append(f"flashinfer-cubin {cubin} does not match flashinfer-python {public} (FlashInfer "
                                f"refuses it at import); pip install flashinfer-cubin=={public}")


def _judge_toolkit(fact: dict[str, Any], gpu: str | None, build: str, finding: Finding) -> None:
    """What stops a module from building at its first call: a problem on a node with a GPU (a serving node),
    a note elsewhere (a build or CI machine serves nothing)."""
    found = finding.problems if gpu else finding.notes
    if not fact.get("nvcc") and not fact.get("cuda_home"):
        found.append(f"no nvcc on PATH and no CUDA_HOME: the modules not prebuilt cannot be built here and "
                                f"their first call fails; install the prebuilt cache ({build}) or a CUDA toolkit")
        return
    toolkit = fact.get("toolkit")
    if fact.get("headers_missing"):
        found.append(f"the CUDA toolkit has no {', '.join(fact['headers_missing'])} (a partial install: "
                                f"nvcc and cudart alone): most FP4 modules include them and will not build at first call; "
                                f"install the full toolkit (cuBLAS and cuRAND development files) or the prebuilt cache: {build}")
    if gpu and gpu.startswith("sm12") and toolkit:
        need = "12.9" if fact.get("sm12x_needs_129") else "12.8"
        if tuple(map(int, toolkit.split("."))) < tuple(map(int, need.split("."))):
            found.append(f"CUDA toolkit {toolkit}: FlashInfer needs {need} or newer to build for {gpu} "
                                    f"(flashinfer/compilation_context.py); install a newer toolkit or the prebuilt cache: {build}")
