"""doctor's live check, run as `python -m nvfp4_overlay.probes.doctor.doctor_trace` in the examined interpreter.

First the environment's facts (probes/doctor/doctor_env.py): the interpreter, the installed distributions
with their RECORD checked. Then whether flashinfer imports, and, unless --no-trace, every entry point
the installed FlashInfer routes (where its route decorators sit, flashinfer.gemm's included; for an
unpatched one, the FP4/MXFP8 entry points this project routes) traced once with torch.compile(fullgraph=True), with the first argument
table of probes/flashinfer/tables/cases.py (FlashInfer's own compile list: the first case of
probes/flashinfer/tables/compile_cases.py that routes); the report names each one that fails.

Prints one JSON line per fact as soon as it is known ({"python": ...}, {"distributions": ...},
{"gpu": ...}, {"import": ...}, {"trace": ...}), so a crash or a hang in the trace still leaves the
others behind. Without a GPU it fakes what a Blackwell server reports (compute capability 12.0, a
CUDA build of torch), as tests/releases/test_trace_flashinfer.py does. The backend stops after the trace:
running the graph would JIT-build the kernel (nvcc, seconds to minutes), which is not what is asked.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from nvfp4_overlay.probes import io_audit
from nvfp4_overlay.probes.capability import fake_capability
from nvfp4_overlay.probes.doctor import doctor_env

FAKE_CAPABILITY = (12, 0)  # RTX PRO 6000 / SM120, the report's GPUs


def emit(key: str, value: Any) -> None:
    print(json.dumps({key: value}), flush=True)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {text[0] if text else ''}"


def gpu_facts(torch: Any) -> dict[str, Any]:
    gpu: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                           "available": torch.cuda.is_available(), "devices": []}
    for i in range(torch.cuda.device_count() if gpu["available"] else 0):
        gpu["devices"].append({"index": i, "name": torch.cuda.get_device_name(i),
                               "capability": list(torch.cuda.get_device_capability(i))})
    return gpu


def fake_blackwell(torch: Any, fakes: list[str]) -> None:
    """Before flashinfer is imported: a CUDA build of torch, as a Blackwell server has."""
    if torch.version.cuda is None:
        torch.version.cuda = "12.8"
        fakes.append("torch.version.cuda=12.8")


def routed_entries(flashinfer: Any) -> dict[str, Any]:
    """name -> function: the entry points the installed FlashInfer routes, each where its route decorator sits
    (probes/flashinfer/routed.py: flashinfer.gemm's too); for an unpatched one, the FP4/MXFP8 entry points this
    project routes, where the release defines them."""
    from nvfp4_overlay.probes.flashinfer import routed

    found = routed.entry_points(flashinfer)
    if found:
        return found
    from nvfp4_overlay.probes.flashinfer.tables.cases import CANDIDATES

    return routed.entry_points(flashinfer, CANDIDATES)


def trace(torch: Any, flashinfer: Any, device: str) -> dict[str, Any]:
    """torch.compile(fullgraph=True) over one call of each routed entry point: the graph, the processes."""
    from nvfp4_overlay.probes.flashinfer.tables import cases, compile_cases

    sys.addaudithook(WATCHED.audit)
    entries: dict[str, Any] = {}
    eager_only: dict[str, str] = {}  # routed functions of the compile list no call of which routes in this release
    for name, fn in routed_entries(flashinfer).items():
        made = next(iter(cases.cases(name, fn, quick=True)), None)
        if made is None:  # FlashInfer's own compile list: its first case that routes, made on the device
            release = flashinfer.__version__.split("+")[0]
            why = compile_cases.eager_only(name, release)
            if why is not None:
                eager_only[name] = why
                continue
            made = compile_cases.routed_case(name, release)
            if made is not None:
                with torch.device(device):
                    made = made[0], _made(made[1](torch))
        if made is None:
            entries[name] = {"ok": False, "error": "no case to call it with"}
            continue
        args, kwargs = made[1](torch)
        args = tuple(a.to(device) if isinstance(a, torch.Tensor) and a.device.type == "cpu" else a for a in args)
        entries[name] = trace_one(torch, lambda *a, fn=fn, kwargs=kwargs: fn(*a, **kwargs), args)
    failed = [n for n, e in entries.items() if not e["ok"]]
    result: dict[str, Any] = {"ok": bool(entries) and not failed, "entries": entries, "failed": failed,
                              "eager_only": eager_only}
    if failed:
        result["error"] = entries[failed[0]]["error"]
    elif not entries:
        result["error"] = "flashinfer has none of the entry points to check"
    return result


def _made(inputs: Any) -> Any:
    """A case's inputs, made once, as a case table's make."""
    return lambda torch: inputs


# The processes started while dynamo traces (doctor counts no file), heard by one hook (trace installs it)
WATCHED = io_audit.Watched()


def trace_one(torch: Any, call: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    graphs = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        graphs.append([str(n.target) for n in gm.graph.nodes if n.op == "call_function"])
        raise io_audit.Traced

    torch._dynamo.reset()
    stop: BaseException | None = None
    WATCHED.events, WATCHED.phase = [], "trace"
    try:
        torch.compile(call, fullgraph=True, backend=backend)(*args)
    except BaseException as exc:  # noqa: BLE001 - dynamo wraps the backend's exception; ours is in the chain
        stop = exc
    finally:
        WATCHED.phase = "after"
    spawned = [" ".join(event) for event in WATCHED.events]
    return {**judged(stop, spawned), "ops": graphs[0] if graphs else [], "subprocesses": spawned}


def judged(stop: BaseException | None, spawned: list[str]) -> dict[str, Any]:
    """A trace's verdict from how it ended: through (the backend's Traced) with no process started, or the error."""
    if stop is None:
        return {"ok": False, "error": "the backend was never called"}
    if not io_audit.caused_by_traced(stop):
        return {"ok": False, "error": first_line(stop), "detail": str(stop).strip().splitlines()[:8]}
    if spawned:
        return {"ok": False, "error": f"a subprocess started while dynamo traced: {spawned[0]}"}
    return {"ok": True}


def main(argv: list[str]) -> int:
    emit("python", doctor_env.python_facts())
    names = argv[argv.index("--distributions") + 1].split(",") if "--distributions" in argv else []
    emit("distributions", {name: doctor_env.distribution_facts(name) for name in names})
    traced = "--no-trace" not in argv
    fakes: list[str] = []
    no_torch = None
    if traced:  # torch first, so that the fakes are in place before flashinfer reads them
        try:
            import torch
        except Exception as exc:  # noqa: BLE001 - whatever breaks the import is the finding
            no_torch = "import torch: " + first_line(exc)
            emit("gpu", {"torch": None, "error": first_line(exc)})
        else:
            gpu = gpu_facts(torch)
            emit("gpu", gpu)
            if not gpu["available"]:
                fake_blackwell(torch, fakes)
    start = time.monotonic()
    try:
        import flashinfer
    except Exception as exc:  # noqa: BLE001 - whatever breaks the import is the finding
        no_import = "import flashinfer: " + first_line(exc)
        emit("import", {"ok": False, "error": first_line(exc)})
        flashinfer = None
    else:
        emit("import", {"ok": True, "version": getattr(flashinfer, "__version__", None),
                        "seconds": round(time.monotonic() - start, 2)})
    if not traced:
        if "torch" in sys.modules:  # flashinfer brought it: its GPU facts cost nothing more
            emit("gpu", gpu_facts(sys.modules["torch"]))
    elif no_torch is not None:
        emit("trace", {"ok": False, "cause": "no-torch", "error": no_torch})
    elif flashinfer is None:
        emit("trace", {"ok": False, "cause": "no-import", "error": no_import})
    else:
        emit("trace", run_trace(sys.modules["torch"], flashinfer, fakes, start))
    return 0


def run_trace(torch: Any, flashinfer: Any, fakes: list[str], start: float) -> dict[str, Any]:
    available = torch.cuda.is_available()
    if not available:
        fake_capability(torch, FAKE_CAPABILITY)
        fakes.append("compute capability=12.0")
        # Upstream's wrappers (nvfp4_quantize, mxfp4_quantize) call a.cuda(), and so do the fakes that
        # mirror them; with no GPU the tensors stay where they are.
        torch.Tensor.cuda = lambda self, *a, **k: self
        fakes.append("Tensor.cuda()=identity")
        # bmm_fp8's runner (its fake is upstream's wrapper) asks for the cuBLAS handle, which a CPU build refuses
        torch.cuda.current_blas_handle = lambda: 0
        fakes.append("current_blas_handle()=0")
    result = trace(torch, flashinfer, "cuda" if available else "cpu")
    result.update(faked=fakes, flashinfer=getattr(flashinfer, "__version__", None),
                  capability=list(torch.cuda.get_device_capability(0)) if available else list(FAKE_CAPABILITY),
                  seconds=round(time.monotonic() - start, 2))
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
