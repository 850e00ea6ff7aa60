"""A warm probe interpreter: torch imported and dynamo set up once, each probe run in a fork of it.

``python -m nvfp4_overlay.probes.serve`` reads one JSON request per line on stdin
(``{"probe": "flashinfer_trace", "plan": {...}}``) and answers one JSON line on stdout, the
probe's result, or ``{"crash": ...}`` with the tail of what the run wrote to stderr. Each run is a
fork of this interpreter as it stood before the first request: torch imported, one trivial
torch.compile done (dynamo's first compile in a process sets up most of what every later one uses),
dynamo's log-only function names off, the libraries a probe's first fork imports anyway (WARM)
imported, no FlashInfer imported, nothing left of an earlier run. oracle.run_probe starts one per thread and
keeps it, so a test session pays torch's import (1.4 s) and that first compile (1.7 s) once, not
once per release and probe.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from nvfp4_overlay.probes import forking


def main() -> None:
    # Bytecode written whatever the environment says (PYTHONDONTWRITEBYTECODE): the trees a probe
    # imports are unpacked fresh and every run is a fork, so without it each fork compiles SGLang and
    # FlashInfer anew (SGLang 0.5.19's regions: 56 s -> 39 s). A trace writes none (io_audit.Phased).
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    import torch

    _no_funcname_headers()
    torch.compile(lambda t: t + 1, fullgraph=True, backend="eager")(torch.zeros(1))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        for name in WARM.get(request["probe"], ()):  # here, once, not in each fork
            with contextlib.suppress(ImportError):  # absent: the run's own import says so, with its result
                importlib.import_module(name)
        # Every temporary file or directory a run makes (a toolkit, a workspace, a cubin cache) lands
        # in a directory of its own, removed once the run ends, however it ended.
        with tempfile.TemporaryFile() as errors, tempfile.TemporaryDirectory(prefix="nvfp4-probe-") as scratch:
            result = forking.in_child(functools.partial(_run, request, errors, scratch))
            if "crash" in result:
                errors.seek(0)
                result["stderr"] = errors.read().decode("utf-8", "replace")[-4000:]
        print(json.dumps(result), flush=True)


def _no_funcname_headers() -> None:
    """Dynamo names the function around each node it creates (symbolic_convert.get_funcname) for a
    header that only its debug log prints, and it does so whether that log is on or not: it tokenizes
    every file it traces once per process, and every probe run is a new process (12.7% of SGLang
    0.5.20's region probe, 1.1% of a FlashInfer ladder). The probes print no dynamo log: the name is
    None, as dynamo gives it for a file it cannot read. Nothing a probe records holds that header."""
    from torch._dynamo import symbolic_convert

    if hasattr(symbolic_convert, "get_funcname"):
        symbolic_convert.get_funcname = lambda filename, lineno: None


# What a probe imports before its first fork of every run, imported in this interpreter on its first
# request instead: the SGLang probe's inductor (2-3 s a run; it must come before any stand-in of triton);
# the libraries of this interpreter that importing any FlashInfer tree imports (requests alone 0.15 s,
# with these 0.25 s of a 1.0 s import of 0.7.2, paid by each tree a FlashInfer probe forks: they read
# no environment as they import, so a tree finds them as its own import would leave them).
_FLASHINFER_IMPORTS = ("requests", "jinja2", "filelock")
WARM = {"sglang_regions": ("torch._inductor.compile_fx",),
        "flashinfer_trace": _FLASHINFER_IMPORTS, "cuda_grid": _FLASHINFER_IMPORTS}


def _run(request: dict[str, Any], errors: Any, scratch: str) -> Any:
    os.environ["TMPDIR"] = tempfile.tempdir = scratch  # the run's processes too
    os.dup2(errors.fileno(), 1)  # stdout carries the answers: whatever the run prints goes with its stderr
    os.dup2(errors.fileno(), 2)  # the run's own stderr, returned with a crash
    module = importlib.import_module(f"nvfp4_overlay.probes.{probe_module(request['probe'])}")
    return module.run(request["plan"])


def probe_module(probe: str) -> str:
    """A probe's module under probes/, by its name: probes/<what it probes>/<probe>.py."""
    (path,) = Path(__file__).parent.glob(f"*/{probe}.py")
    return f"{path.parent.name}.{probe}"


if __name__ == "__main__":
    main()
