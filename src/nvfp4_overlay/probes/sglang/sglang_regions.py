"""Probe: SGLang's compiled regions that reach FlashInfer, traced from a release's own files, on a CPU.

``python -m nvfp4_overlay.probes.sglang.sglang_regions < plan.json`` prints one JSON document, for each
tree of the plan (an SGLang tree, a FlashInfer tree, a GPU to fake):

- ``regions``: per region of probes/sglang/sglang_drivers.py, either ``{"absent": why}`` (read from the
  release's files) or the outcome of ``torch.compile(fullgraph=True)`` over it: ``ok``, the
  ``error``, the graph's call_function targets (``ops``), the FlashInfer functions the region
  entered (``calls``, below), the stand-ins of sglang_machine.py it used while dynamo traced
  (``stand_ins``: code of sglang_machine.py or sglang_imports.py dynamo traced into; a permissive
  stand-in of an absent module there means the region did not run its own code), and the processes
  started and FlashInfer files opened while tracing (``events``);
- ``stubbed``: the modules that are stand-ins in this tree (sglang_imports.py), with why;
- ``routes``: the patched FlashInfer's ENTRIES as it imports them (``None``: upstream).

A FlashInfer call is recorded where dynamo inlines a function of the FlashInfer package from code
outside it (``InliningInstructionTranslator.inline_call``): its public name, the scalar arguments
it was bound to (defaults applied), the call site, and how it ended: ``failed`` (the trace died
inside it), ``opaque`` (the patched overlay put its op in the graph and no other FlashInfer code
was traced), or ``traced`` (dynamo traced FlashInfer's own code through).

One child per tree (SGLang imported once, with the GPU faked before the import: SGLang picks its
kernels at import), one grandchild per region (a region's set-up changes module state).
"""

from __future__ import annotations

import enum
import functools
import importlib
import inspect
import json
import os
import re
import sys
import traceback
from typing import Any

import torch

from nvfp4_overlay.probes import forking, io_audit
from nvfp4_overlay.probes.sglang import sglang_drivers, sglang_imports, sglang_machine, sglang_moe

REGIONS = (*sglang_drivers.DENSE_REGIONS, *sglang_moe.MOE_REGIONS)
NEEDED = sorted({module for region in REGIONS for module in region.needs})
OVERLAY_OP = "nvfp4_overlay."


def main() -> None:
    json.dump(run(json.load(sys.stdin)), sys.stdout)


def run(plan: dict[str, Any]) -> dict[str, Any]:
    """{tree key: its report}, each tree in a child of its own (probes/serve.py calls this too)."""
    # Dynamo's first compile in a process sets much up; once, before the forks. Inductor imports
    # triton if it finds it: before any stand-in of it exists (SGLang's @torch.compile imports it).
    torch.compile(lambda t: t + 1, fullgraph=True, backend="eager")(torch.zeros(1))
    importlib.import_module("torch._inductor.compile_fx")
    jobs = plan.get("jobs", 1)
    # One tree at a time (jobs 1): each child hands the next the guarded lines it found.
    batches = [plan["trees"]] if jobs > 1 else [[tree] for tree in plan["trees"]]
    out: dict[str, Any] = {}
    for batch in batches:
        out.update(forking.each_tree(batch, probe_tree, jobs))
        for tree in batch:
            found = out[tree["key"]].pop("guarded_lines", {})
            sglang_imports.GUARDED.update({digest: frozenset(lines) for digest, lines in found.items()})
    return out


def probe_tree(tree: dict[str, Any]) -> dict[str, Any]:
    packages = [os.path.join(tree["sglang"], "sglang"), os.path.join(tree["flashinfer"], "flashinfer")]
    gpu = sglang_machine.FakeGpu(torch, (tree["gpu"][0], tree["gpu"][1]), packages)
    gpu.setup()
    os.environ["FLASHINFER_WORKSPACE_BASE"] = os.path.join(tree["scratch"], "flashinfer-workspace")
    sys.path[:0] = [tree["flashinfer"], tree["sglang"]]
    import flashinfer

    gpu.refresh()
    builds = sglang_machine.FlashInferBuilds()
    builds.stub()
    sglang_machine.sgl_kernel_ops(torch)
    sglang_imports.install_imports(tree["sglang"], NEEDED)
    package = os.path.dirname(os.path.abspath(flashinfer.__file__))
    recorder = Recorder(package)
    recorder.install()
    out: dict[str, Any] = {"flashinfer_version": flashinfer.__version__, "flashinfer_file": flashinfer.__file__,
                           "routes": _routes(), "regions": {}, "import_errors": {}}
    for name in NEEDED:  # once here, for every region's grandchild
        if not os.path.isfile(os.path.join(tree["sglang"], *name.split(".")) + ".py"):
            continue  # not in this release: the region says so
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the region that needs it reports it
            out["import_errors"][name] = traceback.format_exc()[-2000:]
    gpu.refresh()
    for region in REGIONS:
        out["regions"][region.name] = forking.in_child(functools.partial(run_region, region, tree, gpu, builds, recorder))
    out["stubbed"] = dict(sorted(sglang_imports.STUBBED.items()))
    out["guarded_lines"] = {digest: sorted(lines) for digest, lines in sglang_imports.GUARDED.items()}  # for the next tree
    return out


def run_region(region: sglang_drivers.Region, tree: dict[str, Any], gpu: sglang_machine.FakeGpu,
               builds: sglang_machine.FlashInferBuilds, recorder: Recorder) -> dict[str, Any]:
    try:
        built = region.build(sglang_drivers.Context(tree["sglang"], tuple(tree["gpu"]), torch, tree["scratch"]))
    except Exception as exc:  # noqa: BLE001 - SGLang's own set-up failed: the probe's finding
        return {"setup_error": f"{type(exc).__name__}: {str(exc)[:800]}\n{traceback.format_exc()[-2500:]}"}
    if isinstance(built, sglang_drivers.Absent):
        return {"absent": built.why}
    gpu.for_tracing()
    builds.restore()
    return {**trace(built, recorder), "variant": built.variant}


def trace(built: sglang_drivers.Built, recorder: Recorder) -> dict[str, Any]:
    graphs: list[list[str]] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        recorder.phase = "after"
        graphs.append([str(n.target) for n in gm.graph.nodes if n.op == "call_function"])
        raise io_audit.Traced  # the whole region is one graph; running it would launch kernels

    torch._dynamo.reset()
    recorder.start()
    result: dict[str, Any] = {"ok": False}
    try:
        with built.context():
            torch.compile(built.call, fullgraph=True, backend=backend)(*built.args)
        result["error"] = "the backend was never called"
    except Exception as exc:  # noqa: BLE001 - the upstream stack fails here; the message says where
        if io_audit.caused_by_traced(exc):
            result["ok"] = True
        else:
            result["error"] = f"{type(exc).__name__}: {str(exc)[:3000]}"
            if not isinstance(exc, torch._dynamo.exc.Unsupported):  # a crash, not dynamo giving up
                result["traceback"] = traceback.format_exc()[-3000:]
    finally:
        recorder.stop()
    # A stand-in dynamo traced into, or gave up on (a permissive stand-in's class): the region did
    # not run SGLang's own code there.
    stand_ins = set(recorder.stand_ins) | set(re.findall(r"stand-in\.([\w.]+)", result.get("error", "")))
    result.update(ops=graphs[0] if graphs else [], calls=recorder.calls, events=recorder.events[:20],
                  stand_ins=sorted(stand_ins))
    return result


class Recorder(io_audit.Watched):
    """Which FlashInfer functions dynamo enters from outside FlashInfer, and how each ends; the processes
    started and FlashInfer's files opened (io_audit.Watched: ``events``)."""

    def __init__(self, package: str) -> None:
        super().__init__(package + os.sep)  # root: FlashInfer's folder, whose files opened are events
        self.overlay = os.path.join(package, "_nvfp4_overlay") + os.sep
        self.calls: list[dict[str, Any]] = []
        self.open: list[dict[str, Any]] = []
        self.stand_ins: list[str] = []

    def start(self) -> None:
        self.calls, self.events, self.open, self.stand_ins = [], [], [], []
        self.phase = "trace"

    def stop(self) -> None:
        self.phase = "after"

    def install(self) -> None:
        from torch._dynamo.symbolic_convert import InliningInstructionTranslator as Inliner

        original = Inliner.inline_call.__func__
        recorder = self

        def inline_call(cls: Any, parent: Any, func: Any, args: Any, kwargs: Any, *rest: Any, **kw: Any) -> Any:
            file = func.get_code().co_filename
            if file in (sglang_machine.__file__, sglang_imports.__file__):
                recorder.stand_ins.append(func.get_code().co_qualname)
            if not file.startswith(recorder.root):
                return original(cls, parent, func, args, kwargs, *rest, **kw)
            if recorder.open and not file.startswith(recorder.overlay):
                recorder.open[-1]["upstream_code"] = True
            if recorder.open or parent.f_code.co_filename.startswith(recorder.root):
                return original(cls, parent, func, args, kwargs, *rest, **kw)  # inside a call already entered
            call = recorder.enter(parent, func, args, kwargs)
            try:
                value = original(cls, parent, func, args, kwargs, *rest, **kw)
            except BaseException:
                call["outcome"] = "failed"
                raise
            finally:
                recorder.leave(call, parent)
            return value

        Inliner.inline_call = classmethod(inline_call)
        sys.addaudithook(self.audit)

    def enter(self, parent: Any, func: Any, args: Any, kwargs: Any) -> dict[str, Any]:
        fn = _function(func)
        code = func.get_code()
        call: dict[str, Any] = {
            "function": getattr(fn, "__name__", code.co_name),
            "module": getattr(fn, "__module__", None),
            "args": _scalar_arguments(fn, args, kwargs),
            "site": f"{_short(parent.f_code.co_filename)}:{parent.lineno} {parent.f_code.co_name}",
            "upstream_code": not code.co_filename.startswith(self.overlay),
            "ops_before": len(parent.output.graph.nodes),
        }
        self.open.append(call)
        self.calls.append(call)
        return call

    def leave(self, call: dict[str, Any], parent: Any) -> None:
        self.open.remove(call)
        nodes = list(parent.output.graph.nodes)[call.pop("ops_before"):]
        ours = [str(n.target) for n in nodes if n.op == "call_function" and str(n.target).startswith(OVERLAY_OP)]
        call.setdefault("outcome", "opaque" if ours and not call["upstream_code"] else "traced")
        call["overlay_ops"] = ours


def _function(func: Any) -> Any:
    try:
        return func.get_function()
    except Exception:  # noqa: BLE001 - a nested function dynamo built has no Python object
        return None


def _scalar_arguments(fn: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    """The arguments a call binds that are Python constants (str, bool, int, float, None, an enum member),
    defaults applied; tensors and other objects are left out."""
    if fn is None:
        return {}
    values = [_constant(a) for a in args]
    named = {k: _constant(v) for k, v in kwargs.items()}
    try:
        bound = inspect.signature(fn).bind(*values, **named)
    except (TypeError, ValueError):
        return {}
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if v is not _NOT_SCALAR and _is_scalar(v)}


_NOT_SCALAR = object()


def _constant(value: Any) -> Any:
    try:
        if value.is_python_constant():
            constant = value.as_python_constant()
            return constant.name if isinstance(constant, enum.Enum) else constant
    except Exception:  # noqa: BLE001 - not a constant dynamo can give
        pass
    return _NOT_SCALAR


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int, float))


def _short(path: str) -> str:
    marker = os.sep + "sglang" + os.sep
    return path[path.rfind(marker) + 1:] if marker in path else os.path.basename(path)


def _routes() -> dict[str, dict[str, list[Any]]] | None:
    """The patched FlashInfer's ENTRIES, as imported: entry point -> parameter -> the values it routes."""
    try:
        from flashinfer._nvfp4_overlay.entries import ENTRIES
    except ImportError:
        return None
    return {name: {param: sorted(values, key=repr) for param, values in entry.routes.items()}
            for name, entry in sorted(ENTRIES.items())}


if __name__ == "__main__":
    main()
