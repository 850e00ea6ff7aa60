"""What the GPU proofs share: the project's probes on the path, a wheel installed into a folder of its own,
and one child interpreter per checked tree, whose last marked stdout line is its JSON result.

Each proof (fp4_quantize.py, entry_points.py, serving.py, cuda_versions.py) runs on a GPU machine in
one device call: its driver installs the upstream and patched wheels side by side (`pip install
--no-deps --target`), runs itself as a child in each (`--child`), and writes the results to --out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))  # the probes' tables (nvfp4_overlay.probes), the one copy of each


def install(wheel: Path, deps: Sequence[Path], target: Path, *, reuse: bool = False) -> Path:
    """The wheel and its dependency wheels in `target`, for PYTHONPATH (kept there with reuse)."""
    if not (reuse and target.exists()):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                        "--target", str(target), str(wheel), *map(str, deps)], check=True)
    return target


@dataclass(frozen=True)
class Child:
    """A child's run: its result (the last line starting with the mark, as JSON), or what it left."""

    result: dict[str, Any] | None
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str
    timeout: float

    def or_crash(self, note: str = "") -> dict[str, Any]:
        """The result, else {"crash": ...}: the output's tail, or the time it ran out at."""
        if self.result is not None:
            return self.result
        if self.returncode is None:
            return {"crash": f"timed out after {self.timeout} s{note}: {self.stdout[-2000:]}"}
        return {"crash": (self.stderr or self.stdout)[-4000:]}


def run_child(script: str, args: Sequence[str], env: Mapping[str, str], timeout: float, mark: str) -> Child:
    """`python SCRIPT ARGS` under env, given `timeout` seconds."""
    try:
        done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=dict(env),
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return Child(None, None, _text(exc.stdout), _text(exc.stderr), timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith(mark)]
    result = json.loads(lines[-1][len(mark):]) if lines else None
    return Child(result, done.returncode, done.stdout, done.stderr, timeout)


def _text(data: str | bytes | None) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
