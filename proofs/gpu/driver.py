"""What the GPU proofs share: the project's probes on the path, a wheel installed into a folder of its own,
and one child interpreter per checked tree, whose last marked stdout line is its JSON result.

Each proof (fp4_quantize.py, entry_points.py, serving.py, cuda_versions.py, fp8_blockscale.py) runs on a
GPU machine in one device call: its driver installs the upstream and patched wheels side by side (`pip
install --no-deps --target`), runs itself as a child in each (`--child`: answer_as_child), and writes the
results to --out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))  # the probes' tables (nvfp4_overlay.probes), the one copy of each


def main(parser: argparse.ArgumentParser, mark: str, child: Callable[[argparse.Namespace], dict[str, Any]],
         parent: Callable[[argparse.Namespace, list[Path]], None]) -> None:
    """A proof's command line: `--wheels DIR --out DIR` (with the proof's own options) runs parent(args, the
    dependency wheels) on the GPU machine; `--child`, the proof's call of itself in a checked tree, runs
    child(args) and answers as the child."""
    parser.add_argument("--wheels", type=Path, help="the wheels: a folder a flavour, and deps/")
    parser.add_argument("--out", type=Path, help="where the results are written")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        answer_as_child(lambda: child(args), mark)
    else:
        parent(args, dependency_wheels(args.wheels) if args.wheels else [])


def dependency_wheels(wheels: Path) -> list[Path]:
    """The wheels in WHEELS/deps built for this interpreter (its cpXY tag): what each checked tree needs beside it."""
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    return [w for w in sorted((wheels / "deps").glob("*.whl")) if f"-{tag}-" in w.name]


def install(wheel: Path, deps: Sequence[Path], target: Path, *, reuse: bool = False) -> Path:
    """The wheel and its dependency wheels in `target`, for PYTHONPATH (kept there with reuse)."""
    if not (reuse and target.exists()):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                        "--target", str(target), str(wheel), *map(str, deps)], check=True)
    return target


@dataclass(frozen=True)
class Child:
    """A child's run: its result (the last line starting with the mark, as JSON), or what it left."""

    result: dict[str, Any] | None  # on a timeout, the last result it marked before then
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str
    timeout: float

    def or_crash(self, note: str = "") -> dict[str, Any]:
        """The result, else {"crash": ...}: the output's tail, or the time it ran out at."""
        if self.returncode is None:  # what it marked before then is not taken as its result
            return {"crash": f"timed out after {self.timeout} s{note}: {self.stdout[-2000:]}"}
        if self.result is not None:
            return self.result
        return {"crash": (self.stderr or self.stdout)[-4000:]}

    def so_far(self) -> dict[str, Any]:
        """The result, or the last one the child marked before its time ran out (with a note saying so);
        else {"crash": ...}. For a child that marks its result after each step."""
        if self.result is None:
            return {"crash": f"timed out after {self.timeout} s" if self.returncode is None
                    else (self.stderr or self.stdout)[-4000:]}
        return self.result if self.returncode is not None else {**self.result, "note": f"timed out after {self.timeout} s"}


def answer_as_child(child: Callable[[], dict[str, Any]], mark: str) -> None:
    """The child's side: its result, or the tail of its traceback as {"crash": ...}, on one marked stdout line."""
    try:
        result = child()
    except Exception:  # noqa: BLE001 - the parent takes a crash as the child's result
        result = {"crash": traceback.format_exc()[-4000:]}
    print(mark + json.dumps(result), flush=True)


def run_child(script: str, args: Sequence[str], env: Mapping[str, str], timeout: float, mark: str) -> Child:
    """`python SCRIPT ARGS` under env, given `timeout` seconds."""
    returncode: int | None
    try:
        done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=dict(env),
                              timeout=timeout)
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        returncode, stdout, stderr = None, _text(exc.stdout), _text(exc.stderr)
    return Child(_last_marked(stdout, mark), returncode, stdout, stderr, timeout)


def _last_marked(stdout: str, mark: str) -> dict[str, Any] | None:
    """The last line starting with the mark, as JSON; one cut short (a child stopped while it wrote) is passed over."""
    for line in reversed([line for line in stdout.splitlines() if line.startswith(mark)]):
        try:
            return dict(json.loads(line[len(mark):]))
        except json.JSONDecodeError:
            continue
    return None


def _text(data: str | bytes | None) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
