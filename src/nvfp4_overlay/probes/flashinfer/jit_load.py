"""Probe: the first call of routed entry points, and whether FlashInfer took each module from its jit cache.

``python -m nvfp4_overlay.probes.flashinfer.jit_load < plan.json`` prints one JSON document. The plan names the
entry points (each called where the release defines it: probes/flashinfer/routed.py) and a case of each
(probes/flashinfer/tables/cases.py), and ``gpu``: on a machine without one, the
compute capability to fake (the tensors are the CPU's and the call stops once the module is
loaded, before any kernel); without it, the real GPU and the real call, timed, its outputs digested (inputs from a fixed seed, so two processes
compare: the cached module's outputs against the JIT-built one's). Every
``JitSpec.build_and_load`` is watched, not replaced: the module's name, whether FlashInfer found it
prebuilt (``JitSpec.is_aot``: flashinfer_jit_cache's directory) and the library it loaded. An
audit hook records every process started during the calls (nvcc, ninja, ``which``): on the cached
path there is none.
"""

from __future__ import annotations

import hashlib
import sys
import time
from typing import Any

import torch

from nvfp4_overlay.probes import io_audit, stdio
from nvfp4_overlay.probes.flashinfer import routed
from nvfp4_overlay.probes.flashinfer.tables import cases as case_table


class Loaded(Exception):
    """Raised after the module loaded when no GPU runs the kernel (a CPU machine)."""


def run(plan: dict[str, Any]) -> dict[str, Any]:
    faked = plan.get("gpu")
    if faked:
        torch.version.cuda = plan.get("torch_cuda", "13.0")  # as a CUDA build of torch answers
        torch.cuda.device_count = lambda: 1
        torch.cuda.is_available = lambda: True
        torch.cuda.get_device_capability = lambda device=None: tuple(faked)
    started = time.perf_counter()
    import flashinfer
    from flashinfer.jit import core as jit_core
    from flashinfer.jit import env as jit_env

    imported = time.perf_counter() - started
    if faked:
        from nvfp4_overlay.probes.capability import fake_capability

        fake_capability(torch, tuple(faked))
        torch.Tensor.cuda = lambda self, *a, **k: self
        torch.cuda.current_device = lambda: 0
    loads: list[dict[str, Any]] = []
    _watch(jit_core, loads, stop=bool(faked))
    processes: list[str] = []
    watching = [False]

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if watching[0] and io_audit.is_spawn(event):  # subprocess.Popen is one of io_audit.SPAWN
            processes.append(f"{event} {repr(args[:2])[:200]}")

    sys.addaudithook(audit)
    calls = {}
    functions = routed.entry_points(flashinfer, [name for name, _ in plan["calls"]])
    for name, case_id in plan["calls"]:
        fn = functions[name]
        make = dict(case_table.cases(name, fn))[case_id]
        torch.manual_seed(0)  # the same inputs in every process: outputs comparable across runs
        args, kwargs = make(torch)
        if not faked:
            args = tuple(_on_gpu(torch, a) for a in args)
            kwargs = {k: _on_gpu(torch, v) for k, v in kwargs.items()}
        del loads[:]
        watching[0] = True
        begun = time.perf_counter()
        digest = None
        try:
            result = fn(*args, **kwargs)
            if not faked:
                torch.cuda.synchronize()
                digest = _outputs_sha256(torch, result)
            outcome = "ok"
        except Loaded:
            outcome = "loaded"
        except Exception as exc:  # noqa: BLE001 - reported, not raised: the other calls still run
            outcome = f"{type(exc).__name__}: {str(exc)[:300]}"
        watching[0] = False
        calls[f"{name}[{case_id}]"] = {"outcome": outcome, "seconds": round(time.perf_counter() - begun, 3),
                                       "loads": list(loads), "outputs_sha256": digest}
    return {"version": flashinfer.__version__, "aot_dir": str(jit_env.FLASHINFER_AOT_DIR), "import_seconds": round(imported, 3),
            "calls": calls, "processes": processes}


def _outputs_sha256(torch: Any, result: Any) -> str:
    """One digest of every tensor a call returned (nested as upstream nests them): dtype, shape and bytes."""
    digest = hashlib.sha256()
    stack = [result]
    while stack:
        value = stack.pop(0)
        if isinstance(value, (tuple, list)):
            stack[:0] = list(value)
        elif isinstance(value, torch.Tensor):
            data = value.detach().contiguous().cpu()
            digest.update(f"{data.dtype}{tuple(data.shape)}".encode())
            digest.update(bytes(data.reshape(-1).view(torch.uint8).numpy()))
        else:
            digest.update(repr(value).encode())
    return digest.hexdigest()


def _on_gpu(torch: Any, value: Any) -> Any:
    """A case's CPU tensor on the GPU; a meta tensor (mxfp8's cases) as zeros of its shape there."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.device.type == "meta":
        return torch.zeros(value.shape, dtype=value.dtype, device="cuda")
    return value.cuda()


def _watch(jit_core: Any, loads: list[dict[str, Any]], *, stop: bool) -> None:
    real = jit_core.JitSpec.build_and_load

    def build_and_load(self: Any) -> Any:
        aot = bool(self.is_aot)
        module = real(self)
        loads.append({"name": self.name, "is_aot": aot, "library": str(self.get_library_path())})
        if stop:
            raise Loaded(self.name)
        return module

    jit_core.JitSpec.build_and_load = build_and_load


if __name__ == "__main__":
    stdio.answer(run)
