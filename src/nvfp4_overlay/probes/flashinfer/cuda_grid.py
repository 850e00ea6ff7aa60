"""Probe: what FlashInfer would hand nvcc, over a grid of torch CUDA x toolkit x GPU (oracle/behaviour.py).

``python -m nvfp4_overlay.probes.flashinfer.cuda_grid < plan.json`` prints one JSON document. The plan names FlashInfer trees
(an unpacked upstream or patched wheel each, optionally with the indexes of the cells it runs) and cells (torch's CUDA release, a CUDA_HOME, a GPU).
This process imports torch once; each tree is imported in a forked child (``jobs`` at a time), and
each cell runs in a child forked from that one, so a cell sees flashinfer as a fresh import left it
and nothing of another cell. A cell sets torch.version.cuda, CUDA_HOME (or PATH) and the reported
GPU, then does again the one import-time step those feed (jit/core.py's
``current_compilation_context``, re-initialised in place, as every importer shares that object),
and records:

- ``archs``: TARGET_CUDA_ARCHS, or the warning CompilationContext logged instead;
- ``modules``: for each FP4-quantize JIT spec and a few whose flags come from the architecture list,
  the ``cuda_cflags`` line of the build.ninja that FlashInfer writes for it, or the error;
- ``processes``: every process the cell started (an audit hook), and ``opened`` the toolkit files;
- ``runtime_version``: what a run-time call site of the audit is answered, ``outside_version`` a
  caller outside FlashInfer, ``overlay_warnings`` what the overlay warned of call sites it does not know.

A tree with ``control_module`` also imports probes/flashinfer/stubs/cuda_control.py's JIT module, whose nvcc flags
follow the toolkit through a call site no table lists; its spec is probed with the others. A cell
with ``site`` puts that directory first on sys.path (pip's nvcc beside the system's toolkit).

Paths are written as <tree>, <toolkit>, <workspace> so that two trees compare line for line.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import tempfile
import warnings as pywarnings
from pathlib import Path
from typing import Any

import torch

from nvfp4_overlay.probes import forking, io_audit
from nvfp4_overlay.probes.flashinfer.stubs import cuda_control

ARCH_LIST_MODULES = [  # (module, function, arguments): flags from the architecture list
    ("flashinfer.jit.activation", "gen_act_and_mul_module", ["silu"]),
    ("flashinfer.jit.norm", "gen_norm_module", []),
    ("flashinfer.jit.fp4_kv_quantization", "gen_fp4_kv_quantization_module", []),
]
FP4_MODULES = ["flashinfer.quantization.fp4_quantization", "flashinfer.fp4_quantization",
               "flashinfer.jit.fp4_quantization"]


def main() -> None:
    json.dump(run(json.load(sys.stdin)), sys.stdout)


def run(plan: dict[str, Any]) -> dict[str, Any]:
    """{tree key: its cells}, each tree in a child of its own (probes/serve.py calls this too)."""
    def one(tree: dict[str, Any]) -> dict[str, Any]:
        return probe_tree(tree, [plan["cells"][i] for i in tree.get("cells", range(len(plan["cells"])))])

    return forking.each_tree(plan["trees"], one, plan.get("jobs", 1))


def probe_tree(tree: dict[str, Any], cells: list[dict[str, Any]]) -> dict[str, Any]:
    os.environ.pop("CUDA_HOME", None)
    os.environ.pop("CUDA_PATH", None)
    os.environ.pop("FLASHINFER_CUDA_ARCH_LIST", None)
    # A workspace of its own: FlashInfer writes build.ninja there, and trees probe side by side.
    os.environ["FLASHINFER_WORKSPACE_BASE"] = tempfile.mkdtemp(prefix="flashinfer-workspace-")
    sys.path.insert(0, tree["path"])
    import flashinfer  # noqa: F401 - with no GPU: TARGET_CUDA_ARCHS empty, no version asked yet
    from flashinfer.jit import core as jit_core
    from flashinfer.jit import cpp_ext

    cold = _cold(cpp_ext)
    if cold is not None:
        return {"import_error": f"a CUDA version was looked up at import ({cold}); the grid needs it cold"}
    if tree.get("empty_table"):  # the control: every call answered from torch, (no call site asks nvcc's question)
        from flashinfer._nvfp4_overlay import cuda

        cuda._answers.clear()
        cuda._classify = lambda module, qualname, calls: "torch"
    if tree.get("control_module"):  # a caller the audit never saw, as a new release would bring one
        cuda_control.load(Path(tree["path"]))
    if tree.get("memo_paths", True):
        _memo_realpath((tree["path"], sys.prefix, sys.base_prefix))
    out = []
    for cell in cells:
        out.append(forking.in_child(functools.partial(probe_cell, cell, tree["path"], jit_core, cpp_ext)))
    return {"cells": out}


def probe_cell(cell: dict[str, Any], tree: str, jit_core: Any, cpp_ext: Any) -> dict[str, Any]:
    # The box: torch's CUDA, the toolkit, the GPU.
    torch.version.cuda = cell["torch"]
    toolkit = cell["toolkit"]
    if cell.get("on_path"):
        os.environ["PATH"] = os.path.join(toolkit, "bin") + os.pathsep + os.environ.get("PATH", "")
    else:
        os.environ["CUDA_HOME"] = toolkit
    if cell.get("site"):
        sys.path.insert(0, cell["site"])
    major, minor = cell["gpu"]
    torch.cuda.device_count = lambda: 1
    torch.cuda.is_available = lambda: True
    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    workspace = os.environ["FLASHINFER_WORKSPACE_BASE"]
    events: list[list[str]] = []

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event == "subprocess.Popen":  # (executable, args, cwd, env)
            argv = [args[1]] if isinstance(args[1], (str, bytes)) else list(args[1] or [args[0]])
            events.append(["process", *(_clean(os.fsdecode(a), tree, toolkit, workspace) for a in argv)])
        elif io_audit.is_spawn(event):
            events.append(["process", _clean(repr(args[0])[:200], tree, toolkit, workspace)])
        elif event == "open" and isinstance(args[0], str) and args[0].startswith(toolkit):
            events.append(["open", _clean(args[0], tree, toolkit, workspace)])

    sys.addaudithook(audit)
    warnings: list[str] = []
    handler = _ListHandler(warnings)
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.WARNING)
    # What jit/core.py's import did with no GPU, done again for this one.
    jit_core.current_compilation_context.__init__()
    archs = sorted([m, str(s)] for m, s in jit_core.current_compilation_context.TARGET_CUDA_ARCHS)
    result: dict[str, Any] = {"archs": archs, "arch_warnings": [w for w in warnings if "capability" in w]}
    clean = functools.partial(_clean, tree=tree, toolkit=toolkit, workspace=workspace, site=cell.get("site"))
    modules = {}
    with pywarnings.catch_warnings(record=True) as caught:
        pywarnings.simplefilter("always")
        for name, make in _specs():
            try:
                spec = make()
                spec.write_ninja()
                with open(spec.ninja_path) as f:
                    flags = _ninja_variable(f.read(), "cuda_cflags")
                modules[name] = {"cuda_cflags": [clean(flag) for flag in flags]}
            except Exception as exc:  # noqa: BLE001 - the error is the result, compared with upstream's
                modules[name] = {"error": [type(exc).__name__, clean(str(exc))[:300]]}
        # A run-time call site of the audit: torch's release (patched), nvcc's (upstream); and a
        # caller outside FlashInfer: upstream's answer on both.
        result["runtime_version"] = str(cuda_control.ask_as(cuda_control.RUN_TIME_SITE, cpp_ext.get_cuda_version))
        result["outside_version"] = str(cpp_ext.get_cuda_version())
    result["modules"] = modules
    result["overlay_warnings"] = [str(w.message) for w in caught if "nvfp4-overlay" in str(w.message)]
    result["events"] = events
    return result


def _specs() -> list[tuple[str, Any]]:
    import importlib

    specs = []
    seen = set()
    for module_name in FP4_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for attr in sorted(vars(module)):
            fn = getattr(module, attr)
            if attr.startswith("gen_fp4_quantization_sm") and attr.endswith("_module") and fn not in seen:
                seen.add(fn)
                specs.append((f"{module_name}.{attr}", fn))
    for module_name, attr, args in [*ARCH_LIST_MODULES, *([cuda_control.SPEC] if cuda_control.MODULE in sys.modules
                                                           else [])]:
        try:
            fn = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):
            continue
        specs.append((f"{module_name}.{attr}", lambda fn=fn, args=args: fn(*args)))
    return specs


def _memo_realpath(roots: tuple[str, ...]) -> None:
    """os.path.realpath remembered for paths under roots (the tree, this interpreter's prefix), in this
    process and the cells forked from it.

    Upstream's write_ninja resolves every include directory (FlashInfer's, CUTLASS's, torch's, the
    Python headers) once per spec, and realpath lstat()s each component of each: 48% of a cell's time
    (0.7.2: 7.1 s -> 4.8-5.3 s for its 65 cells). Nothing under those roots is made, moved or linked
    while the grid runs, so a path resolves as it did the first time; the workspace and the toolkit,
    which a cell writes or each cell names anew, are resolved every time. The cells are the same
    with the memo as without it (tests/releases/test_cuda_versions.py: a tree with ``memo_paths`` false).
    pathlib's resolve() calls os.path.realpath, so both take it.
    """
    import posixpath

    real = posixpath.realpath
    under = tuple(os.path.join(root, "") for root in roots)
    seen: dict[str, str] = {}

    def realpath(path: Any, *, strict: bool = False) -> Any:
        key = os.fspath(path)
        if strict or not isinstance(key, str) or not key.startswith(under):
            return real(path, strict=strict)
        if key not in seen:
            seen[key] = real(key)
        return seen[key]

    posixpath.realpath = realpath  # type: ignore[assignment]


def _ninja_variable(text: str, name: str) -> list[str]:
    """The words of a build.ninja variable, its ' $' line continuations joined."""
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith(f"{name} = "):
            value = line[len(name) + 3:]
            while value.endswith("$"):
                value = value[:-1] + next(lines, "").strip()
            return value.split()
    return []


def _cold(cpp_ext: Any) -> str | None:
    info = getattr(cpp_ext.get_cuda_version, "cache_info", None)
    if info is not None and info().currsize:
        return "upstream get_cuda_version's functools.cache"
    from importlib import import_module

    try:
        cuda = import_module("flashinfer._nvfp4_overlay.cuda")
    except ImportError:
        return None
    if cuda._toolkit or cuda._cuda_path:
        return "flashinfer._nvfp4_overlay.cuda's caches"
    return None


def _clean(text: str, tree: str, toolkit: str, workspace: str, site: str | None = None) -> str:
    text = text.replace(site, "<site>") if site else text
    return text.replace(tree, "<tree>").replace(toolkit, "<toolkit>").replace(workspace, "<workspace>")


class _ListHandler(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


if __name__ == "__main__":
    main()
