"""doctor's live check, run as `python -m nvfp4_overlay.trace_probe` in a child of doctor's interpreter.

Prints one JSON line {"gpu": ...} as soon as torch answers, then one {"trace": ...}, so a crash or a
hang in the trace still leaves the GPU facts behind. Without a GPU it fakes what a Blackwell server
reports (compute capability 12.0, a CUDA build of torch), as tests/test_trace_flashinfer.py does. The
backend stops after the trace: running the graph would JIT-build the kernel (nvcc, seconds to
minutes), which is not what is asked.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

FAKE_CAPABILITY = (12, 0)  # RTX PRO 6000 / SM120, the report's GPUs
SPAWN_EVENTS = ("subprocess.Popen", "os.system", "os.posix_spawn", "os.fork")


class Traced(Exception):
    """Raised by the backend once dynamo hands it the whole graph: tracing succeeded."""


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
    """Before flashinfer is imported: it reads torch.version.cuda at import (patched) or per call."""
    if torch.version.cuda is None:
        torch.version.cuda = "12.8"
        fakes.append("torch.version.cuda=12.8")
    torch.cuda.get_device_capability = lambda device=None: FAKE_CAPABILITY


def fp4_module() -> Any:
    try:  # flashinfer/quantization/ from 0.6.7, flashinfer/ before
        import flashinfer.quantization.fp4_quantization as module  # type: ignore[import-not-found]
    except ImportError:
        import flashinfer.fp4_quantization as module  # type: ignore[import-not-found]
    return module


def trace(torch: Any, flashinfer: Any, device: str) -> dict[str, Any]:
    """torch.compile(fullgraph=True) over a call of flashinfer.fp4_quantize; the graph's ops, the processes."""
    tracing, spawned, graphs = [False], [], []

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if tracing[0] and (event in SPAWN_EVENTS or event.startswith("os.exec")):
            spawned.append(f"{event} {repr(args[:2])[:160]}")

    def backend(gm: Any, example_inputs: Any) -> Any:
        graphs.append([str(n.target) for n in gm.graph.nodes if n.op == "call_function"])
        raise Traced

    def quantize(x: Any, global_scale: Any) -> Any:
        return flashinfer.fp4_quantize(x, global_scale)

    sys.addaudithook(audit)
    x = torch.randn(128, 256, dtype=torch.bfloat16, device=device)
    gs = torch.tensor([448.0 * 6.0], dtype=torch.float32, device=device)
    result: dict[str, Any] = {"ok": False}
    tracing[0] = True
    try:
        torch.compile(quantize, fullgraph=True, backend=backend)(x, gs)
        result["error"] = "the backend was never called"
    except BaseException as exc:  # noqa: BLE001 - dynamo wraps the backend's exception; ours is in the chain
        if _caused_by_traced(exc):
            result["ok"] = True
        else:
            result["error"] = first_line(exc)
            result["detail"] = str(exc).strip().splitlines()[:8]
    finally:
        tracing[0] = False
    result.update(ops=graphs[0] if graphs else [], subprocesses=spawned)
    return result


def _caused_by_traced(exc: BaseException) -> bool:
    seen: list[BaseException] = []
    chain: BaseException | None = exc
    while chain is not None and chain not in seen:
        if isinstance(chain, Traced):
            return True
        seen.append(chain)
        chain = getattr(chain, "inner_exception", None) or chain.__cause__ or chain.__context__
    return False


def main() -> int:
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - whatever breaks the import is the finding
        emit("gpu", {"torch": None, "error": first_line(exc)})
        return 0
    gpu = gpu_facts(torch)
    emit("gpu", gpu)
    fakes: list[str] = []
    if not gpu["available"]:
        fake_blackwell(torch, fakes)
    start = time.monotonic()
    try:
        import flashinfer

        module = fp4_module()
    except Exception as exc:  # noqa: BLE001 - whatever breaks the import is the finding
        emit("trace", {"ok": False, "faked": fakes, "error": "import flashinfer: " + first_line(exc)})
        return 0
    if not gpu["available"]:
        module.get_compute_capability = lambda device: FAKE_CAPABILITY  # CPU tensors: flashinfer refuses them
        fakes.append("compute capability=12.0")
    result = trace(torch, flashinfer, "cuda" if gpu["available"] else "cpu")
    result.update(faked=fakes, flashinfer=getattr(flashinfer, "__version__", None),
                  capability=gpu["devices"][0]["capability"] if gpu["available"] else list(FAKE_CAPABILITY),
                  seconds=round(time.monotonic() - start, 2))
    emit("trace", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
