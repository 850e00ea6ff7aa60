"""Probe: which JIT modules a release's routed entry points load on a GPU, and (asked to) build them with nvcc.

``python -m nvfp4_overlay.probes.flashinfer.jit_plan < plan.json`` prints one JSON document. The plan names a
FlashInfer tree (the patched wheel, unpacked), the GPU (its compute capability), the toolkit
(CUDA_HOME: the real nvcc) and torch's CUDA release. The probe fakes that GPU as the trace ladder
does (probes/flashinfer/flashinfer_trace.py, serving_stubs.py: CPU tensors, kernels that record), lets
upstream's CompilationContext choose the architectures from it and the toolkit (as FlashInfer's JIT
does on that node), calls every case of every routed entry point (probes/flashinfer/cases.py) eagerly,
or of those ``entries`` names (the stack's serving path: what its SGLang calls), and records each
JitSpec that reaches ``build_and_load`` (the module, its sources and flags, the entry point and case
that first loaded it, every entry point that loads it) and each cubin the cubin loader fetched. Nothing is built
while planning: ``build_and_load`` returns recording kernels. The trtllm-gen modules (the MoE's
``fused_moe_trtllm_sm100``, the GEMM's ``trtllm_gemm``) reach ``build_and_load`` too, but their
generators first fetch the trtllm-gen headers through the cubin loader (``get_artifact``) and compile
against them: with ``cubins`` (a directory of flashinfer-cubin's artifacts but the cubins, its
headers and checksum lists) those are the real headers, copied into the probe's cubin directory;
without it the loader's misses are answered with placeholders, and such a module is not built.

With ``build``: {"out": DIR, "modules": [names] or null}, each planned module is then built by
FlashInfer's own AOT machinery (``jit.core.build_jit_specs``, one spec at a time, into the
workspace FLASHINFER_WORKSPACE_BASE names) and its ``<name>.so`` copied to ``DIR/<name>/<name>.so``
beside ``build.json`` (its inputs' digest and the seconds it took); a module whose build.json names
the same inputs is kept, so an interrupted build resumes where it stopped. Progress goes to stderr.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

from nvfp4_overlay.probes import stdio
from nvfp4_overlay.probes.capability import fake_capability
from nvfp4_overlay.probes.flashinfer import cases as case_table
from nvfp4_overlay.probes.flashinfer import serving_stubs
from nvfp4_overlay.probes.flashinfer.flashinfer_trace import Box

HEARTBEAT_S = 30.0


def run(plan: dict[str, Any]) -> dict[str, Any]:
    specs, found = plan_modules(plan)
    places = found.pop("places")
    if plan.get("build") is not None:
        built = build(specs, {**plan["build"], "cubins": plan.get("cubins_sha256")}, places)
        found["built"], found["failed"], found["skipped"] = built["modules"], built["failed"], built["skipped"]
    return found


def plan_modules(plan: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec objects by name, the plan as data): every case of every routed entry point, eagerly."""
    tree, toolkit = plan["tree"], plan["toolkit"]
    flashinfer, jit_core = _faked_node(plan)
    # The architectures as FlashInfer's JIT chooses them on that GPU with that toolkit.
    archs = sorted(f"{a}{b}" for a, b in jit_core.current_compilation_context.TARGET_CUDA_ARCHS)
    box: Any = Box(os.path.dirname(os.path.abspath(flashinfer.__file__)))
    generators = _generators()
    serving_stubs.install(box)
    if plan.get("cubins"):  # flashinfer-cubin's headers where FlashInfer's cubin loader looks first
        shutil.copytree(plan["cubins"], box.cubin_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".*"))
    _restore(generators)  # CUTLASS kernel generation writes the sources a module compiles: keep it
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.cuda.current_device = lambda: 0
    fake_capability(torch, tuple(plan["gpu"]))
    specs: dict[str, Any] = {}
    _record_specs(jit_core, box, specs)
    _record_cubins(box)
    first, calls, cubins = _call_every_case(flashinfer, box, specs, tree, plan.get("entries"))
    # The paths of this run, as the provenance names them: a module's inputs are the same wherever it is built.
    places = {tree: "<tree>", toolkit: "<toolkit>", os.environ["FLASHINFER_WORKSPACE_BASE"]: "<workspace>",
              box.cubin_dir: "<cubins>"}
    loaded_by: dict[str, set[str]] = {}
    for entry, by_case in calls.items():
        for outcome in by_case.values():
            for name in outcome.pop("loaded"):
                loaded_by.setdefault(name, set()).add(entry)
    modules = {n: describe_spec(s, places) | {"first_loaded_by": first.get(n), "loaded_by": sorted(loaded_by.get(n, ()))}
               for n, s in specs.items()}
    return specs, {"version": flashinfer.__version__, "archs": archs, "modules": modules, "calls": calls,
                   "cubins": cubins, "places": places}


def _faked_node(plan: dict[str, Any]) -> tuple[Any, Any]:
    """flashinfer imported from the tree on the GPU, toolkit and torch CUDA the plan names."""
    torch.version.cuda = plan["torch_cuda"]
    os.environ["CUDA_HOME"] = plan["toolkit"]
    os.environ.pop("FLASHINFER_CUDA_ARCH_LIST", None)
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")  # ninja
    major, minor = plan["gpu"]
    torch.cuda.device_count = lambda: 1
    torch.cuda.is_available = lambda: True
    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    sys.path.insert(0, plan["tree"])
    import flashinfer
    from flashinfer.jit import core as jit_core

    jit_core.current_compilation_context.__init__()  # as at import on that GPU: every importer shares it
    return flashinfer, jit_core


def _call_every_case(flashinfer: Any, box: Any, specs: dict[str, Any], tree: str,
                     entries: list[str] | None) -> tuple[Any, Any, Any]:
    """(module -> [entry point, case] that first loaded it, each call's outcome and the modules it loaded,
    cubin -> the calls that fetched it), for every routed entry point or those `entries` names."""
    from flashinfer._nvfp4_overlay.entries import ENTRIES

    first: dict[str, list[str]] = {}
    calls: dict[str, dict[str, Any]] = {}
    cubins: dict[str, set[str]] = {}
    for name in sorted(n for n in ENTRIES if hasattr(flashinfer, n) and (entries is None or n in entries)):
        fn, calls[name] = getattr(flashinfer, name), {}
        _forget_loaded_modules()
        for case_id, make in case_table.cases(name, fn):
            before, fetched, loaded = set(specs), len(box.fetched), len(box.loaded)
            args, kwargs = make(torch)
            try:
                fn(*args, **kwargs)
                outcome = "ok"
            except Exception as exc:  # noqa: BLE001 - upstream's own refusal on that GPU is a fact too
                outcome = f"{type(exc).__name__}: {str(exc)[:200]}"
            for spec_name in specs.keys() - before:
                first[spec_name] = [name, case_id]
            calls[name][case_id] = {"outcome": outcome.replace(tree, "<tree>"),
                                    "cubins": sorted(set(box.fetched[fetched:])), "loaded": set(box.loaded[loaded:])}
            for uri in box.fetched[fetched:]:
                cubins.setdefault(uri, set()).add(f"{name}[{case_id}]")
    return first, calls, {uri: sorted(by) for uri, by in cubins.items()}


def _forget_loaded_modules() -> None:
    """Empty FlashInfer's functools caches (its get_*_module loaders are cached), so that each entry point
    reaches build_and_load for every module it loads, not only for those no entry point loaded before."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("flashinfer") or module is None:
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)) and hasattr(value, "__wrapped__"):
                value.cache_clear()


def _generators() -> dict[str, Any]:
    return {name: vars(module)["generate_gemm_operations"] for name, module in list(sys.modules.items())
            if name.startswith("flashinfer") and module is not None and "generate_gemm_operations" in vars(module)}


def _restore(generators: dict[str, Any]) -> None:
    for name, function in generators.items():
        setattr(sys.modules[name], "generate_gemm_operations", function)  # noqa: B010


def _record_specs(jit_core: Any, box: Any, specs: dict[str, Any]) -> None:
    """Every nvcc-built JitSpec that reaches build_and_load (not the CuTe DSL's, which cutlass-dsl compiles)."""
    box.loaded = []

    def build_and_load(self: Any, *args: Any, **kwargs: Any) -> Any:
        specs.setdefault(self.name, self)
        box.loaded.append(self.name)
        return serving_stubs.AnsweringModule(box)

    for obj in list(vars(jit_core).values()):
        if isinstance(obj, type) and issubclass(obj, jit_core.JitSpec):
            obj.build_and_load = build_and_load  # type: ignore[attr-defined]


def _record_cubins(box: Any) -> None:
    """The cubin loader's downloads (serving_stubs answers them from a placeholder cache)."""
    from flashinfer.jit import cubin_loader

    box.fetched = []
    answer = cubin_loader.download_file

    def download_file(uri: str, path: str, *args: Any, **kwargs: Any) -> bool:
        box.fetched.append(str(uri).rsplit("/", 3)[-1] if "://" in str(uri) else str(uri))
        return bool(answer(uri, path, *args, **kwargs))

    cubin_loader.download_file = download_file


def describe_spec(spec: Any, places: dict[str, str]) -> dict[str, Any]:
    """A spec as data, with no path of this machine (places: path -> its name), sources with their sha256."""
    def clean(values: Any) -> list[str]:
        return [scrub(str(v), places) for v in values or []]

    sources = {}
    for source in spec.sources:
        data = Path(source).read_bytes() if Path(source).is_file() else b""
        sources[scrub(str(source), places)] = hashlib.sha256(data).hexdigest()
    described = {"sources": sources, "cflags": clean(spec.extra_cflags), "cuda_cflags": clean(spec.extra_cuda_cflags),
                 "ldflags": clean(spec.extra_ldflags), "include_dirs": clean(spec.extra_include_dirs),
                 "needs_device_linking": bool(spec.needs_device_linking)}
    described["inputs"] = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()
    return described


def scrub(text: str, places: dict[str, str]) -> str:
    for path, name in places.items():
        text = text.replace(path, name)
    return text


def build(specs: dict[str, Any], how: dict[str, Any], places: dict[str, str]) -> dict[str, Any]:
    """Each chosen module built alone by upstream's build_jit_specs, kept when its inputs have not changed;
    {"modules": what was built, "failed": module -> nvcc's first error line, "skipped": module -> why}."""
    from flashinfer.jit import core as jit_core

    out = Path(how["out"])
    chosen = [n for n in sorted(specs) if how.get("modules") is None or n in how["modules"]]
    done: dict[str, Any] = {}
    failed: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for number, name in enumerate(chosen, start=1):
        spec = specs[name]
        uses_cubins, inputs = _inputs(describe_spec(spec, places), how.get("cubins"))
        stamp = out / name / "build.json"
        if stamp.is_file() and json.loads(stamp.read_text()).get("inputs") == inputs and (out / name / f"{name}.so").is_file():
            print(f"[{number}/{len(chosen)}] {name}: built before, kept", file=sys.stderr, flush=True)
            done[name] = json.loads(stamp.read_text())
            continue
        if uses_cubins and not how.get("cubins"):
            # The planning stubs answered the trtllm-gen headers with placeholders; nvcc needs the real ones,
            # flashinfer-cubin's (jit-cache reads them from its pinned wheel when the dist dir or cache holds it).
            skipped[name] = ("it compiles against the trtllm-gen headers, which flashinfer-cubin ships and the dist dir and "
                             "cache lack: not prebuilt; bring it ('nvfp4-overlay index --cubins') and build again")
            print(f"[{number}/{len(chosen)}] {name}: skipped: {skipped[name]}", file=sys.stderr, flush=True)
            continue
        print(f"[{number}/{len(chosen)}] {name}: nvcc, {len(spec.sources)} sources", file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            with _heartbeat(name, started):
                jit_core.build_jit_specs([spec], verbose=bool(how.get("verbose")), skip_prebuilt=False)
        except RuntimeError as exc:  # nvcc refused: say so, go on with the others (one run shows every failure)
            first = next((line for line in str(exc).splitlines() if "error" in line), str(exc)[-300:])
            failed[name] = scrub(first, places)
            print(f"[{number}/{len(chosen)}] {name}: FAILED: {failed[name]}", file=sys.stderr, flush=True)
            continue
        seconds = round(time.monotonic() - started, 1)
        (out / name).mkdir(parents=True, exist_ok=True)
        staged = out / name / f".{name}.so.partial"
        shutil.copyfile(spec.jit_library_path, staged)
        staged.replace(out / name / f"{name}.so")
        done[name] = {"inputs": inputs, "seconds": seconds}
        stamp.write_text(json.dumps(done[name], sort_keys=True))
        print(f"[{number}/{len(chosen)}] {name}: built in {seconds} s", file=sys.stderr, flush=True)
    return {"modules": done, "failed": failed, "skipped": skipped}


def _inputs(described: dict[str, Any], cubins: str | None) -> tuple[bool, str]:
    """(whether the module compiles against the trtllm-gen headers, what its build is kept by): a trtllm-gen
    module's inputs include those headers, flashinfer-cubin's, by that wheel's digest."""
    uses_cubins = any(d.startswith("<cubins>") for d in described["include_dirs"])
    return uses_cubins, described["inputs"] + (f"+cubin:{cubins}" if uses_cubins and cubins else "")


@contextlib.contextmanager
def _heartbeat(name: str, started: float) -> Any:
    """A line every HEARTBEAT_S seconds while nvcc works, so a long module never looks hung."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            print(f"    {name}: still building, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


if __name__ == "__main__":
    stdio.answer(run)
