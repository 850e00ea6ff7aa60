"""Running a probe: a warm probe interpreter per thread (probes/serve.py), and the trees the probes read.

Each run is a fork of one child interpreter that has torch imported and dynamo set up, started the
first time a thread asks and kept for the process's life; it sees no toolkit of this machine (no
CUDA_HOME, no nvcc on PATH), so what a probe finds is the wheel's, not this machine's.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigError


def run_probe(probe: str, plan: dict[str, Any], timeout: float = 3000) -> dict[str, Any]:
    """Run probes/<probe>.py's run(plan) in a fork of this thread's warm probe interpreter (probes/serve.py)."""
    server = _servers.get(threading.get_ident())
    if server is None or server.poll() is not None:
        server = _servers[threading.get_ident()] = _start_server()
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(json.dumps({"probe": probe, "plan": plan}) + "\n")
    server.stdin.flush()
    line = _read_line(server, timeout)
    if not line:
        del _servers[threading.get_ident()]
        msg = f"probe {probe}: the probe interpreter died (exit {server.wait()})"
        raise ConfigError(msg, fix="run it again, or see its stderr above")
    result: dict[str, Any] = json.loads(line)
    if "crash" in result and set(result) <= {"crash", "stderr"}:
        msg = f"probe {probe} failed:\n{result['crash'][-2000:]}\n{result.get('stderr', '')[-2000:]}"
        raise ConfigError(msg)
    return result


_servers: dict[int, subprocess.Popen[str]] = {}  # thread -> its probe interpreter, kept for the process's life


def _start_server() -> subprocess.Popen[str]:
    """A child of this interpreter with torch imported, no toolkit of this machine in sight."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not os.path.exists(os.path.join(p, "nvcc")))
    server = subprocess.Popen([sys.executable, "-m", "nvfp4_overlay.probes.serve"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert server.stdout is not None and server.stderr is not None
    ready = server.stdout.readline()
    if not ready:
        error = server.stderr.read()
        if "No module named 'torch'" in error:
            msg = f"the behaviour checks need torch in this interpreter ({sys.executable})"
            raise ConfigError(msg, fix="run them from make test's .venv, or pip install torch")
        msg = f"the probe interpreter did not start:\n{error[-2000:]}"
        raise ConfigError(msg)
    threading.Thread(target=_drain, args=(server.stderr,), daemon=True).start()
    return server


def _drain(stream: IO[str]) -> None:
    for _ in stream:  # the server's own stderr (a run's goes back with its result): read, so it never blocks
        pass


def _read_line(server: subprocess.Popen[str], timeout: float) -> str:
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], timeout)
    if not ready:
        server.kill()
        msg = f"a probe ran past {timeout:.0f} s: killed; it hung (a lock, a download?)"
        raise ConfigError(msg)
    return server.stdout.readline()


def unpack(wheel: Path, into: Path) -> Path:
    """What the probes import: the wheel's Python and JSON files (0.6.11.post2 reads a workloads.json
    at import), the Jinja templates a JIT spec renders its sources from (mm_fp4's CUTLASS runner,
    flashinfer/data/csrc/*.jinja) and its dist-info, not the sources, CUTLASS and cubins under
    flashinfer/data/ (0.7.4: 717 MB unpacked, about 30 MB this way)."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(into, [n for n in zf.namelist() if _readable(n)])
    return into


def _readable(name: str) -> bool:
    top = name.split("/", 1)[0]
    return (top.endswith(".dist-info") or name.endswith(".jinja")
            or (name.endswith((".py", ".json")) and not name.startswith("flashinfer/data/")))
