"""A stack's JIT cache for one GPU family: which modules, built where and with what, packed as a wheel.

The modules are those the patched FlashInfer's routed entry points load on that GPU, found by
calling them (probes/flashinfer/jit_plan.py: every case of probes/flashinfer/tables/cases.py, the GPU faked, upstream's
CompilationContext choosing the architectures from it and the toolkit), not listed by hand: the entry
points the stack's SGLang calls (its serving path: the caller names them, with their SGLang call
sites, from the SGLang audit), or every routed one (``serving`` None: the superset). Each is
built by FlashInfer's own AOT machinery from the release's own sources (the patched wheel, unpacked
whole), one at a time under the cache dir, so an interrupted build resumes: a module whose inputs
(sources' digests, flags) are unchanged is kept. The result is a flashinfer_jit_cache wheel
(wheel/jit_wheel.py) in the dist dir, listed in SHA256SUMS, with its provenance.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import ConfigError, OverlayError
from ..files import (
    SHA256SUMS,
    AtomicWrites,
    format_sums,
    read_sums,
    replace_dir,
    sha256_bytes,
    sha256_file,
    staging_dir,
)
from ..patch import Stack, Target, load_stacks, load_upstream
from . import cubin_pins, jit_wheel
from .jit_toolkit import Toolkit, find_toolkit, link_stub, toolchain
from .writer import zip_date_time

# GPU family -> the compute capability the probe fakes (a family's first member: SM120 is the RTX PRO
# 6000 and RTX 50 series, SM121 the DGX Spark, SM100 the B200/GB200, SM90 the H100/H200).
GPUS: dict[str, tuple[int, int]] = {"sm90": (9, 0), "sm100": (10, 0), "sm120": (12, 0), "sm121": (12, 1)}
PLAN_PROBE = "nvfp4_overlay.probes.flashinfer.jit_plan"


@dataclass(frozen=True)
class Request:
    stack: str | None  # None: the default stack
    gpu: str
    modules: tuple[str, ...] | None = None  # None: every module of the plan
    torch_cuda: str | None = None  # None: the toolkit's release (a torch built for it)
    serving: Mapping[str, Sequence[str]] | None = None  # entry point -> its SGLang call sites; None: every route
    sglang: str | None = None  # the SGLang release whose calls `serving` holds
    plan_only: bool = False  # plan, build nothing, write no wheel


@dataclass(frozen=True)
class Result:
    wheel: Path | None  # None: a plan only
    sha256: str
    version: str
    provenance: dict[str, Any]
    seconds: Mapping[str, float] = field(default_factory=dict)  # each module's build, this run or the one it kept
    calls: Mapping[str, Any] = field(default_factory=dict)  # entry point -> case -> its outcome and the modules it loaded


def build_cache(request: Request, patches_dir: Path, dist_dir: Path, cache_dir: Path, epoch: int,
                log: Callable[[str], None]) -> Result:
    # 1. The stack, its FlashInfer and the patched wheel that build wrote.
    stack, target, local = _stack(request, patches_dir)
    wheel = _patched_wheel(dist_dir, local, stack)
    # 2-4. The plan and the builds (kept under the cache dir by their keys).
    found, provenance, work = _plan_and_build(request, stack, local, wheel, dist_dir, patches_dir, cache_dir, log)
    _check_asked(request, found)
    if request.plan_only:
        return Result(None, "", "", provenance, calls=found["calls"])
    _check_failed(found, work)
    # 5. The wheel: the modules built, the plan and how they were built.
    version = jit_wheel.cache_version(local, str(provenance["cuda"]["release"]).split(".")[0], request.gpu)
    built = [jit_wheel.Built(n, (work / "modules" / n / f"{n}.so").read_bytes()) for n in sorted(found["built"])]
    for module in built:
        provenance["modules"][module.name]["sha256"] = sha256_bytes(module.data)
    files = jit_wheel.members(version, built, provenance, f"{target.dist}=={local}")
    name = jit_wheel.filename(version)
    landed = _land(dist_dir, name, files, epoch, version, provenance)
    # How long each took is the run's, not the wheel's: the same inputs give the same bytes.
    return replace(landed, seconds={n: b["seconds"] for n, b in found["built"].items()})


@dataclass(frozen=True)
class Rederived:
    """A cache wheel's modules built again here: bytes and inputs by module, and those taken on trust, with why."""

    modules: dict[str, bytes]
    inputs: dict[str, str]
    trusted: dict[str, str]


def rederive(provenance: Mapping[str, Any], patched: Path, patches_dir: Path, cache_dir: Path,
             log: Callable[[str], None]) -> Rederived:
    """The modules a cache wheel says it holds, planned and built here from the patched wheel `patched` (its
    sha256 the one the provenance names) with the toolchain here, as jit-cache builds them; a build this host
    already made from the same inputs is taken from the cache. Where that cannot be done here (another toolchain,
    no nvcc or torch, a module that is not reproducible), each module is named with the reason instead."""
    included = sorted(n for n, m in provenance.get("modules", {}).items() if m.get("included"))
    cuda = provenance.get("cuda", {})
    try:
        toolkit = find_toolkit()
        request = Request(str(provenance.get("stack")), str(provenance.get("gpu")), tuple(included),
                          cuda.get("torch_cuda"), serving=None)
        stack, _, local = _stack(request, patches_dir)
    except OverlayError as exc:
        return Rederived({}, {}, dict.fromkeys(included, f"it cannot be built again here: {exc}"))
    # Another nvcc, host compiler or tvm-ffi builds other bytes from the same inputs: not a verdict on the file.
    here, there = toolchain(toolkit), provenance.get("toolchain") or {}
    if here != there:
        differs = "; ".join(f"{k}: built with {there.get(k)!r}, here {here.get(k)!r}" for k in sorted(set(here) | set(there))
                            if here.get(k) != there.get(k))
        why = f"the toolchain here is not the builder's ({differs}); verify it on a host with the builder's toolchain"
        return Rederived({}, {}, dict.fromkeys(included, why))
    try:
        found, _, work = _plan_and_build(request, stack, local, patched, patched.parent, patches_dir, cache_dir, log)
    except OverlayError as exc:  # the child stopped (torch missing, a crash): nothing here says the modules are wrong
        return Rederived({}, {}, dict.fromkeys(included, f"it could not be built again here: {exc}"))
    trusted = {n: f"nvcc could not build it here: {line}" for n, line in (found.get("failed") or {}).items()}
    trusted |= {n: why for n, why in (found.get("skipped") or {}).items()}
    for name, record in found.get("built", {}).items():
        if not record.get("reproducible"):
            trusted[name] = f"not reproducible: {record.get('not_reproducible')}"
    modules = {n: (work / "modules" / n / f"{n}.so").read_bytes() for n in found.get("built", {}) if n not in trusted}
    inputs = {n: m["inputs"] for n, m in found["modules"].items()}
    return Rederived(modules, inputs, trusted)


def _plan_and_build(request: Request, stack: Stack, local: str, wheel: Path, dist_dir: Path, patches_dir: Path,
                    cache_dir: Path, log: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """(the probe's answer, the provenance, the workspace): the plan, and the builds unless plan_only."""
    sha256 = sha256_file(wheel)
    # 2. The toolkit (the real nvcc), the toolchain around it, and the workspace this wheel, GPU and toolkit build in.
    toolkit = find_toolkit()
    work = cache_dir / "jit-cache" / f"{sha256[:16]}-{request.gpu}-cuda{toolkit.release}"
    with _exclusive(work):
        return _plan_and_build_in(request, stack, local, wheel, sha256, toolkit, work, dist_dir, patches_dir,
                                  cache_dir, log)


@contextlib.contextmanager
def _exclusive(work: Path) -> Iterator[None]:
    """One build in a workspace at a time: a second jit-cache of the same wheel, GPU and toolkit waits for
    the first (two at once removed each other's nvcc intermediates, and the second failed)."""
    work.mkdir(parents=True, exist_ok=True)
    with open(work / ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes, or the process ends
        yield


def _plan_and_build_in(request: Request, stack: Stack, local: str, wheel: Path, sha256: str, toolkit: Toolkit,
                       work: Path, dist_dir: Path, patches_dir: Path, cache_dir: Path,
                       log: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any], Path]:
    tree = _unpacked(wheel, work / "tree")
    # 3. flashinfer-cubin's headers, checked against its pin, for the trtllm-gen modules (none held: they are left out).
    cubin = cubin_pins.pin_for(stack, patches_dir)
    headers = _cubin_headers(cubin, dist_dir, cache_dir)
    # 4. Plan and build in a child interpreter (torch, the tree's flashinfer), one module at a time.
    plan = {"tree": str(tree), "gpu": list(GPUS[request.gpu]), "toolkit": str(toolkit.root),
            "torch_cuda": request.torch_cuda or toolkit.release, "toolchain": toolchain(toolkit),
            "build": {"out": str(work / "modules"), "modules": list(request.modules) if request.modules else None},
            "cubins": str(headers) if headers else None, "cubins_sha256": cubin.sha256 if headers and cubin else None,
            "entries": None if request.serving is None else sorted(request.serving)}
    if request.plan_only:
        del plan["build"]
    then = "" if request.plan_only else f", then nvcc ({toolkit.nvcc_version})"
    log(f"{stack.name} on {request.gpu}: planning FlashInfer {local}'s modules{then}")
    found = _run_probe(plan, toolkit, work)
    provenance = _provenance(request, stack, wheel, sha256, toolkit, plan, found)
    if not request.plan_only:
        provenance["flashinfer_cubin"] = {"filename": cubin.filename, "sha256": cubin.sha256} if headers and cubin else None
    return found, provenance, work


def _stack(request: Request, patches_dir: Path) -> tuple[Stack, Target, str]:
    if request.gpu not in GPUS:
        msg = f"--gpu {request.gpu}: not a GPU family this tool builds for"
        raise ConfigError(msg, item="--gpu", expected=" | ".join(GPUS), found=request.gpu,
                          fix=f"use one of {', '.join(GPUS)}")
    stacks = load_stacks(patches_dir)
    stack = stacks.get(request.stack or stacks.default, patches_dir / "stacks.toml")
    target = next((t for t in stack.targets if t.dist == "flashinfer-python"), None)
    if target is None:
        msg = f"stack {stack.name} patches no flashinfer-python: there is no JIT cache to build for it"
        raise ConfigError(msg, item=stack.name, expected="a patched flashinfer-python", found="none")
    return stack, target, load_upstream(patches_dir, target).local_version


def _patched_wheel(dist_dir: Path, local: str, stack: Stack) -> Path:
    found = sorted(dist_dir.glob(f"flashinfer_python-{local}-*.whl"))
    if not found:
        msg = (f"{dist_dir} holds no flashinfer_python-{local}-*.whl: the cache is built from the patched wheel's "
               f"sources")
        raise ConfigError(msg, path=dist_dir, item=f"flashinfer-python=={local}", expected="the patched wheel",
                          found="not built", fix=f"build it first ('nvfp4-overlay build --stack {stack.name}')")
    return found[-1]


def _cubin_headers(pin: cubin_pins.CubinPin | None, dist_dir: Path, cache_dir: Path) -> Path | None:
    """flashinfer-cubin's artifacts but the cubins, unpacked once per pinned digest from the wheel the dist dir or
    the cache holds (where `index --cubins` brings it); None where its release has no pin or neither holds it."""
    if pin is None:
        return None
    dest = cache_dir / "cubin-artifacts" / pin.sha256[:16]
    if cubin_pins.unpacked(dest, pin):
        return dest
    held = next((d / pin.filename for d in (dist_dir, cache_dir / "wheels") if (d / pin.filename).is_file()), None)
    return None if held is None else cubin_pins.artifacts(held, pin, dest)


def _unpacked(wheel: Path, tree: Path) -> Path:
    """The whole wheel (sources, CUTLASS, headers), once per wheel digest; unpacked aside, then renamed."""
    if (tree / "flashinfer" / "__init__.py").is_file():
        return tree
    staged = staging_dir(tree)
    with zipfile.ZipFile(wheel) as zf:  # our own build's output, verified when it was written
        zf.extractall(staged)
    replace_dir(staged, tree)
    return tree


def _run_probe(plan: dict[str, Any], toolkit: Toolkit, work: Path) -> dict[str, Any]:
    try:
        import torch  # noqa: F401 - only to say what is missing before a child says it worse
    except ImportError as exc:
        msg = (f"{sys.executable}: no torch: planning imports FlashInfer, which needs it (any build, a CPU one "
               f"will do)")
        raise ConfigError(msg, item="torch", expected="importable", found="missing",
                          fix="pip install torch, or run from an environment that has it") from exc
    env = dict(os.environ, FLASHINFER_WORKSPACE_BASE=str(work / "workspace"), CUDA_HOME=str(toolkit.root))
    stub = link_stub(toolkit, work / "libcuda-stub")
    if stub is not None:
        env["LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(stub), env.get("LIBRARY_PATH")]))
        plan["libcuda_stub"] = True
    done = subprocess.run([sys.executable, "-m", PLAN_PROBE], input=json.dumps(plan), env=env, check=False,
                          stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        msg = f"building the JIT cache stopped (exit {done.returncode}); nvcc's or FlashInfer's message is above"
        raise OverlayError(msg, path=work, expected="exit 0", found=f"exit {done.returncode}",
                           fix="fix what it names and run the same command again: the modules built so far are kept "
                               f"in {work}")
    result: dict[str, Any] = json.loads(done.stdout)
    if result.get("network"):  # refused in the child: what it planned may lack what that download would have brought
        msg = (f"planning attempted {len(result['network'])} connection(s), refused ({result['network'][0]}): a planning "
               f"run starts no download")
        raise OverlayError(msg, path=work, expected="no connection", found="; ".join(result["network"]),
                           fix="report this with the stack and GPU family")
    return result


def _check_asked(request: Request, found: dict[str, Any]) -> None:
    unknown = sorted(set(request.modules or ()) - set(found["modules"]))
    if unknown:
        msg = (f"--module {', '.join(unknown)}: not loaded by the serving path on {request.gpu}; the plan's modules "
               f"are {', '.join(sorted(found['modules']))}"
               + ("" if request.serving is None else " (--all-routes plans every routed entry point's)"))
        raise ConfigError(msg, item="--module", expected=", ".join(sorted(found["modules"])), found=", ".join(unknown),
                          fix="name modules of the plan, or leave out --module")


def _check_failed(found: dict[str, Any], work: Path) -> None:
    failed = found.get("failed") or {}
    if failed:
        lines = "; ".join(f"{name}: {line}" for name, line in sorted(failed.items()))
        msg = (f"nvcc could not build {len(failed)} module(s) ({lines}); the {len(found['built'])} built are kept in "
               f"{work}")
        raise OverlayError(msg, path=work, item=", ".join(sorted(failed)), expected="built", found=lines,
                           fix="fix the toolkit (a header missing: install the full CUDA toolkit) and run the same "
                               "command again, or leave them out with --module")


def _provenance(request: Request, stack: Stack, wheel: Path, sha256: str, toolkit: Toolkit, plan: dict[str, Any],
                found: dict[str, Any]) -> dict[str, Any]:
    modules = {}
    serving = request.serving
    for name, module in sorted(found["modules"].items()):
        entry = {k: module[k] for k in ("sources", "cuda_cflags", "cflags", "ldflags", "include_dirs", "needs_device_linking",
                                           "inputs", "first_loaded_by", "loaded_by")}
        if serving is not None:  # which SGLang call sites need the module: those of the entry points that load it
            entry["sglang_sites"] = {e: list(serving[e]) for e in module["loaded_by"] if e in serving}
        entry["included"] = name in found.get("built", {})
        if entry["included"]:
            built = found["built"][name]
            entry["reproducible"] = bool(built.get("reproducible"))
            if not entry["reproducible"]:
                entry["not_reproducible"] = built.get("not_reproducible")
        elif name in found.get("skipped", {}):
            entry["not_prebuilt"] = found["skipped"][name]
        modules[name] = entry
    return {
        "tool": "nvfp4-overlay", "tool_version": __version__, "kind": "jit-cache",
        "stack": stack.name, "gpu": request.gpu, "capability": list(GPUS[request.gpu]), "archs": found["archs"],
        "flashinfer": {"filename": wheel.name, "sha256": sha256, "version": found["version"]},
        "cuda": {"release": toolkit.release, "nvcc": toolkit.nvcc_version, "torch_cuda": plan["torch_cuda"],
                 "libcuda_stub": bool(plan.get("libcuda_stub"))},
        "toolchain": plan["toolchain"], "entry_points": found.get("entries", {}),
        "serving_path": {"sglang": request.sglang, "all_routes": serving is None,
                         "entries": None if serving is None else {e: list(v) for e, v in sorted(serving.items())
                                                                  if e in found["calls"]}},
        "modules": modules, "cubins": found["cubins"], "reproducible": jit_wheel.REPRODUCIBLE,
    }


def _land(dist_dir: Path, name: str, files: dict[str, bytes], epoch: int, version: str,
          provenance: dict[str, Any]) -> Result:
    sums = read_sums(dist_dir / SHA256SUMS)
    with AtomicWrites(dist_dir) as writes:
        with writes.open(name) as out:
            jit_wheel.write(out, files, zip_date_time(epoch))  # type: ignore[arg-type]
        writes.commit()
    digest = sha256_file(dist_dir / name)
    sums[name] = digest
    with AtomicWrites(dist_dir) as writes:
        with writes.open(SHA256SUMS) as out:
            out.write(format_sums(sums))
        writes.commit()
    return Result(dist_dir / name, digest, version, provenance)
