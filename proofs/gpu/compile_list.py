"""GPU proof of FlashInfer's own compile list (issue 43): each routed function compiled, replayed in a CUDA graph, equal to eager.

    python3 proofs/gpu/compile_list.py --wheels DIR --out "$OUT" [--prebuild]

`--wheels` holds `patched/` and `upstream/` (flashinfer-python wheels, the same releases) and `deps/`
(apache-tvm-ffi for this interpreter). On the GPU (SM90), for each release and each function of the
list the overlay routes (probes/flashinfer/tables/compile_cases.py: the first case that routes, its inputs
made on the GPU from a fixed seed):

- eager, twice on fresh copies of the inputs: what it returns and every tensor input as the call left
  it (the in-place functions write there), each as its sha256, and whether the two calls agree;
- through the compile harness (probes/flashinfer/compile_harness.py, inductor, every binding
  replaced): the counts (the call ran a compiled graph holding one opaque op), and the outputs
  against eager, byte for byte;
- the compiled call captured in a CUDA graph (after a warm-up on a side stream) and replayed three
  times, the inputs put back before each replay: the outputs against eager, byte for byte;
- upstream's wheel: the same eager call (its sha256s against the patched wheel's) and the compiled
  one (which fails: in the JIT loader).

With `--prebuild`, the JIT modules every case loads are built first, all at once (FlashInfer's own
build_jit_specs, one ninja run over every spec), in the workspace both wheels of a release share.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import driver

MARK = "@@COMPILE_LIST@@"


def routed_calls(flashinfer: Any) -> dict[str, tuple[str, Any]]:
    """qualname -> (case id, make) for every function of the list the overlay routes in this release."""
    from nvfp4_overlay.probes.flashinfer.compile_harness import resolve
    from nvfp4_overlay.probes.flashinfer.tables import compile_cases

    release = flashinfer.__version__.split("+")[0]
    out = {}
    for qualname in compile_cases.every_name():
        if qualname in compile_cases.EAGER_ONLY:
            continue
        try:
            resolve(f"flashinfer.{qualname}")
        except (ImportError, AttributeError):
            continue
        found = compile_cases.routed_case(qualname.rsplit(".", 1)[1], release)
        if found is not None:
            out[qualname] = found
    return out


def child(prebuild: bool) -> dict[str, Any]:
    import flashinfer
    import torch

    from nvfp4_overlay.probes.flashinfer.compile_harness import Harness, resolve

    patched = _has_overlay()
    out: dict[str, Any] = {"flashinfer": flashinfer.__version__, "gpu": torch.cuda.get_device_name(0),
                           "torch": torch.__version__, "patched": patched, "functions": {}}
    calls = routed_calls(flashinfer)
    if prebuild:
        out["prebuild"] = prebuild_modules(flashinfer, torch, calls)
    harness = Harness("inductor")
    harness.install([f"flashinfer.{q}" for q in calls])
    for qualname, (case_id, make) in calls.items():
        holder, attr, _ = resolve(f"flashinfer.{qualname}")
        out["functions"][qualname] = one_function(torch, harness, getattr(holder, attr), case_id, make)
        print(MARK + json.dumps(out), flush=True)  # what is done so far, should the run stop
    return out


def one_function(torch: Any, harness: Any, compiled_fn: Any, case_id: str, make: Any) -> dict[str, Any]:
    eager_fn = compiled_fn.__nvfp4_compile_harness__  # the function itself, as every binding had it
    torch.manual_seed(0)
    with torch.device("cuda"):
        args, kwargs = make(torch)
    rec: dict[str, Any] = {"case": case_id}
    start = time.monotonic()
    try:
        first, again = observe(torch, eager_fn, args, kwargs), observe(torch, eager_fn, args, kwargs)
    except Exception as exc:  # noqa: BLE001 - a refusal on this GPU is a finding too
        return {**rec, "eager": {"error": _err(exc)}}
    rec["eager"] = {"sha256": [_sha(torch, t) for t in first], "deterministic": _same(torch, first, again),
                    "outputs": [[list(t.shape), str(t.dtype)] for t in first]}
    with harness.case() as counts:
        try:
            compiled = observe(torch, compiled_fn, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - upstream fails here
            rec["compiled"] = {"error": _err(exc), "counts": vars(counts).copy()}
            return rec
    rec["compiled"] = {"counts": vars(counts).copy(), "equal_eager": _same(torch, compiled, first)}
    rec["cuda_graph"] = replayed(torch, compiled_fn, args, kwargs, first)
    rec["seconds"] = round(time.monotonic() - start, 2)
    return rec


def observe(torch: Any, fn: Any, args: Any, kwargs: Any) -> list[Any]:
    """fn on fresh copies of the inputs: its result's tensors, then every tensor input as it left it."""
    a, k = copy.deepcopy((args, kwargs))
    result = fn(*a, **k)
    torch.cuda.synchronize()
    return _tensors(result) + _tensors([a, list(k.values())])


def replayed(torch: Any, fn: Any, args: Any, kwargs: Any, eager: list[Any]) -> dict[str, Any]:
    """The compiled call captured in a CUDA graph and replayed three times, the inputs put back each time."""
    try:
        static_args, static_kwargs = copy.deepcopy((args, kwargs))
        originals = [t.clone() for t in _tensors([static_args, list(static_kwargs.values())])]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn(*static_args, **static_kwargs)  # warm-up: allocations and workspaces before the capture
        torch.cuda.current_stream().wait_stream(stream)
        for t, o in zip(_tensors([static_args, list(static_kwargs.values())]), originals):
            t.copy_(o)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            result = fn(*static_args, **static_kwargs)
        equal = []
        for _ in range(3):
            for t, o in zip(_tensors([static_args, list(static_kwargs.values())]), originals):
                t.copy_(o)
            graph.replay()
            torch.cuda.synchronize()
            equal.append(_same(torch, _tensors(result) + _tensors([static_args, list(static_kwargs.values())]), eager))
        return {"replays": 3, "equal_eager": equal}
    except Exception as exc:  # noqa: BLE001
        return {"error": _err(exc)}


def prebuild_modules(flashinfer: Any, torch: Any, calls: dict[str, tuple[str, Any]]) -> dict[str, Any]:
    """Every JIT spec the cases load, built in one ninja run (FlashInfer's build_jit_specs), then the
    module getters' caches emptied so that the calls load the built modules."""
    import functools
    import sys

    from flashinfer.jit import core as jit_core

    from nvfp4_overlay.probes.flashinfer.compile_harness import resolve

    specs: dict[str, Any] = {}
    original = jit_core.JitSpec.build_and_load

    def record(self: Any, *a: Any, **k: Any) -> Any:
        specs.setdefault(self.name, self)
        raise _Planned

    start = time.monotonic()
    jit_core.JitSpec.build_and_load = record
    try:
        for qualname, (_, make) in calls.items():
            with torch.device("cuda"):
                args, kwargs = make(torch)
            try:
                resolve(f"flashinfer.{qualname}")[2](*args, **kwargs)  # eagerly: upstream's path, to its loader
            except BaseException:  # noqa: BLE001 - _Planned, or what a stub module made the wrapper do
                pass
    finally:
        jit_core.JitSpec.build_and_load = original
    for module in list(sys.modules.values()):  # the getters cached nothing (record raised), but be sure
        for value in list(vars(module).values()) if module and module.__name__.startswith("flashinfer") else []:
            if isinstance(value, functools._lru_cache_wrapper):  # type: ignore[attr-defined]
                value.cache_clear()
    try:
        jit_core.build_jit_specs(list(specs.values()), verbose=False)
        error = None
    except Exception as exc:  # noqa: BLE001
        error = _err(exc)
    return {"modules": sorted(specs), "seconds": round(time.monotonic() - start, 1), "error": error}


class _Planned(Exception):
    """Raised by the recording build_and_load: the spec is known, nothing is built yet."""


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _sha(torch: Any, t: Any) -> str:
    return hashlib.sha256(bytes(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())).hexdigest()


def _same(torch: Any, a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and _sha(torch, x) == _sha(torch, y)
                                    for x, y in zip(a, b))


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip()[:400]}"


def _has_overlay() -> bool:
    import importlib.util

    return importlib.util.find_spec("flashinfer._nvfp4_overlay") is not None


def parent(args: argparse.Namespace, deps: list[Path]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="compile-list-proof-"))
    found: dict[str, Any] = {}
    for kind in ("patched", "upstream"):  # the patched wheel first: it builds the modules both load
        for wheel in sorted((args.wheels / kind).glob("flashinfer_python-*.whl")):
            release = wheel.name.split("-")[1].split("+")[0]
            env = dict(os.environ, PYTHONPATH=f"{driver.install(wheel, deps, root / f'site-{wheel.name}')}{os.pathsep}"
                       f"{driver.ROOT / 'src'}", FLASHINFER_WORKSPACE_BASE=str(args.workspace / release), MAX_JOBS="16")
            flags = ["--child"] + (["--prebuild"] if args.prebuild and kind == "patched" else [])
            found[f"{release}/{kind}"] = driver.run_child(__file__, flags, env, args.timeout, MARK).so_far()
            (args.out / "gpu_compile_list_proof.json").write_text(json.dumps(found, indent=1))
    print(json.dumps(found)[:6000])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--prebuild", action="store_true")
    parser.add_argument("--workspace", type=Path, default=Path("/tmp/flashinfer-ws"))
    parser.add_argument("--timeout", type=float, default=420)
    driver.main(parser, MARK, lambda args: child(args.prebuild), parent)
