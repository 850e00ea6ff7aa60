"""Probe: which JIT modules a release's routed entry points load on a GPU, and (asked to) build them with nvcc.

``python -m nvfp4_overlay.probes.flashinfer.jit_plan < plan.json`` prints one JSON document. The plan names a
FlashInfer tree (the patched wheel, unpacked), the GPU (its compute capability), the toolkit
(CUDA_HOME: the real nvcc) and torch's CUDA release. The probe fakes that GPU as the trace ladder
does (probes/flashinfer/flashinfer_trace.py, serving_stubs.py: CPU tensors, kernels that record), lets
upstream's CompilationContext choose the architectures from it and the toolkit (as FlashInfer's JIT
does on that node), calls every case of every routed entry point (probes/flashinfer/tables/cases.py) eagerly,
or of those ``entries`` names (the stack's serving path: what its SGLang calls), and records each
JitSpec that reaches ``build_and_load`` (the module, its sources and flags, the entry point and case
that first loaded it, every entry point that loads it) and each cubin the cubin loader fetched. Nothing is built
while planning: ``build_and_load`` returns recording kernels. The trtllm-gen modules (the MoE's
``fused_moe_trtllm_sm100``, the GEMM's ``trtllm_gemm``) reach ``build_and_load`` too, but their
generators first fetch the trtllm-gen headers through the cubin loader (``get_artifact``) and compile
against them: with ``cubins`` (a directory of flashinfer-cubin's artifacts but the cubins, its
headers and checksum lists) those are the real headers, copied into the probe's cubin directory;
without it the loader's misses are answered with placeholders, and such a module is not built.

Planning starts no download: FlashInfer's cubin loader is answered from the probe's cubin directory
alone (a miss is recorded and answered with a placeholder, never logged as a fetch), and an audit
hook refuses, and records in ``network``, any connection the process attempts.

With ``build``: {"out": DIR, "modules": [names] or null}, each planned module is then built
(probes/flashinfer/jit_build.py: FlashInfer's own build_jit_specs, with the flags that make its bytes
the same on any build host) into ``DIR/<name>/<name>.so``. Progress goes to stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import torch

from nvfp4_overlay.probes import stdio
from nvfp4_overlay.probes.capability import fake_capability
from nvfp4_overlay.probes.flashinfer import jit_build, routed
from nvfp4_overlay.probes.flashinfer.flashinfer_trace import Box
from nvfp4_overlay.probes.flashinfer.stubs import serving_stubs
from nvfp4_overlay.probes.flashinfer.tables import cases as case_table


def run(plan: dict[str, Any]) -> dict[str, Any]:
    network: list[str] = []
    _refuse_connections(network)
    specs, found = plan_modules(plan)
    places = found.pop("places")
    if plan.get("build") is not None:
        how = {**plan["build"], "cubins": plan.get("cubins_sha256"), "toolchain": plan.get("toolchain")}
        built = jit_build.build(specs, found["modules"], how, places)
        found["built"], found["failed"], found["skipped"] = built["modules"], built["failed"], built["skipped"]
    found["network"] = network
    return found


def _refuse_connections(attempts: list[str]) -> None:
    """Every connection the planning process attempts (a name lookup, a connect) refused and recorded."""
    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event in _NETWORK_EVENTS:
            attempts.append(f"{event} {repr(args)[:160]}")
            raise ConnectionRefusedError(f"nvfp4-overlay: planning starts no download ({event} {repr(args)[:80]})")

    sys.addaudithook(audit)


# The standard library's audit events of a connection (socket) and of urllib's requests.
_NETWORK_EVENTS = frozenset({"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto",
                             "urllib.Request"})


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
    _local_artifacts(box)
    first, calls, cubins = _call_every_case(flashinfer, box, specs, tree, plan.get("entries"))
    # The paths of this run, as the provenance names them: a module's inputs are the same wherever it is built.
    places = {tree: "<tree>", toolkit: "<toolkit>", os.environ["FLASHINFER_WORKSPACE_BASE"]: "<workspace>",
              box.cubin_dir: "<cubins>"}
    loaded_by: dict[str, set[str]] = {}
    for entry, by_case in calls.items():
        for outcome in by_case.values():
            for name in outcome["loaded"]:
                loaded_by.setdefault(name, set()).add(entry)
    modules = {n: describe_spec(s, places) | {"first_loaded_by": first.get(n), "loaded_by": sorted(loaded_by.get(n, ()))}
               for n, s in specs.items()}
    homes = routed.routed_modules(box.package)
    return specs, {"version": flashinfer.__version__, "archs": archs, "modules": modules, "calls": calls,
                   "cubins": cubins, "places": places, "entries": homes}


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
    cubin -> the calls that fetched it), for every routed entry point or those `entries` names, each called
    where the release defines it (probes/flashinfer/routed.py: flashinfer.gemm's too)."""
    first: dict[str, list[str]] = {}
    calls: dict[str, dict[str, Any]] = {}
    cubins: dict[str, set[str]] = {}
    for name, fn in routed.entry_points(flashinfer).items():
        if entries is not None and name not in entries:
            continue
        calls[name] = {}
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
                                    "cubins": sorted(set(box.fetched[fetched:])), "loaded": sorted(set(box.loaded[loaded:]))}
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


def _local_artifacts(box: Any) -> None:
    """FlashInfer's cubin loader (get_artifact, get_cubin before 0.6.7) answered from the probe's cubin directory
    alone: a file there is read as upstream reads it; a miss is recorded and written by serving_stubs' placeholder
    writer, with no URL made and no "Fetching" line logged. Replaced wherever a module bound it by name."""
    from flashinfer.jit import cubin_loader

    loaders = {id(getattr(cubin_loader, n)) for n in ("get_artifact", "get_cubin") if hasattr(cubin_loader, n)}
    placeholder = cubin_loader.download_file  # serving_stubs': writes what a miss "downloads"
    box.fetched = []

    def get_artifact(file_name: str, sha256: str, session: Any = None) -> bytes:
        local = os.path.join(str(cubin_loader.FLASHINFER_CUBIN_DIR), file_name)
        data: bytes = cubin_loader.load_cubin(local, sha256)
        if not data:
            box.fetched.append(os.path.basename(file_name))
            placeholder(file_name, local)
            data = cubin_loader.load_cubin(local, sha256)
        return data

    for name, module in list(sys.modules.items()):
        if name.startswith("flashinfer") and module is not None:
            for attribute in ("get_artifact", "get_cubin"):
                if id(getattr(module, attribute, None)) in loaders:
                    setattr(module, attribute, get_artifact)


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


if __name__ == "__main__":
    stdio.answer(run)
