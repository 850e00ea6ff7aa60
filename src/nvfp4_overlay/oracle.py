"""The oracle, one release and one side at a time: the trace ladder and the CUDA grid, cached by their inputs.

behaviour.py judges; this module computes what it judges. A side is one tree of one release: the
upstream wheel unpacked, the patched wheel, or the grid's control (the patched tree with
every CUDA-version call answered from torch). Each probe run is keyed by everything that makes its result: the
wheel's sha256; for a patched tree the series, the overlay and the engine modules that apply them
(digests of their files); the probes' own source; the plan; torch's and Python's versions. The same
key gives the stored result with no run; one byte changed in any input runs the probe again.

Upstream's half is a fact about a published wheel. It is kept compact (compact_ladder,
compact_grid: what the verdicts compare, a digest where they compare a whole value, no path of the
machine that made it), so that the tests can keep it committed (tests/oracle/) and re-verify a
rotating sample of it on every run; a patched tree is probed in full.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import files
from .errors import ConfigError

PACKAGE = Path(__file__).resolve().parent
PROBES = PACKAGE / "probes"  # whose source is part of every key
TRACE_GPUS = ((12, 0), (10, 0))
TORCH = ("12.6", "12.8", "12.9", "13.0")
TOOLKITS = ("12.8", "12.9", "13.0")
GPUS = ((9, 0), (10, 0), (10, 3), (12, 0), (12, 1))


# --- digests of what makes a result ------------------------------------------------------------------


def digest_tree(root: Path, names: Sequence[str] | None = None) -> str:
    """sha256 over the relative names and bytes of the files under root (or of `names` in it)."""
    paths = sorted(root.rglob("*")) if names is None else sorted(root / n for n in names)
    digest = hashlib.sha256()
    for path in paths:
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def probe_digest() -> str:
    return digest_tree(PROBES)


def patched_inputs(wheel_sha256: str, patches_dir: Path, overlay_dir: Path, dist: str, version: str) -> dict[str, str]:
    """What a patched tree is made of, by digest: its upstream wheel, series, overlay and engine."""
    return {"wheel": wheel_sha256, "series": digest_tree(patches_dir / dist / version),
            "overlay": digest_tree(overlay_dir / dist), "engine": engine_digest()}


def engine_digest() -> str:
    """The modules that apply a series and write the wheel (the package's top level: any of them
    may shape a patched file; probes/ and cli/ do not)."""
    return digest_tree(PACKAGE, sorted(p.name for p in PACKAGE.glob("*.py")))


def short_digest(value: Any) -> str:
    """A whole value, as the verdicts compare it: 16 hex digits of its canonical JSON's sha256."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


# --- sides and the result cache ------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One tree of one release, as a probe sees it, and what it is made of."""

    release: str
    kind: str  # "upstream" or "patched"
    inputs: Mapping[str, str]  # digests: see patched_inputs; an upstream tree has its wheel's alone
    tree: Callable[[], Path] = field(compare=False)  # unpacks (and builds) the tree on first use


class Results:
    """Probe results under root/<probe>/<release>-<kind>-<key>.json; None: nothing kept.

    A probe that crashed is not kept: the next run probes again. A result is computed under a lock of its own file, so parallel test workers that ask for the
    same one wait for the first instead of computing it twice.
    """

    def __init__(self, root: Path | None) -> None:
        self.root = root

    def computed(self, probe: str, side: Side, key: dict[str, Any], compute: Callable[[], Any]) -> Any:
        if self.root is None:
            return compute()
        path = self.root / probe / f"{side.release}-{side.kind}-{short_digest(key)}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path.with_suffix(".lock")):
            if path.is_file():
                with contextlib.suppress(ValueError):
                    return json.loads(path.read_text())["result"]
            result = compute()
            if not (isinstance(result, dict) and "crash" in result):  # a crash is news, not a fact to keep
                files.replace_file(path, json.dumps({"key": key, "result": result}).encode())
            return result


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def key_of(probe: str, side: Side, plan: Mapping[str, Any], variant: str = "") -> dict[str, Any]:
    import torch  # the behaviour checks run where torch is: run_probe says so when it is not

    return {"probe": probe, "probe_source": probe_digest(), "plan": short_digest(plan), "inputs": dict(side.inputs),
            "side": side.kind + (f"/{variant}" if variant else ""), "torch": torch.__version__,
            "python": f"{sys.version_info[0]}.{sys.version_info[1]}"}


# --- running a probe -------------------------------------------------------------------------------


def run_probe(probe: str, plan: dict[str, Any], timeout: float = 3000) -> dict[str, Any]:
    """Run probes/<probe>.py in a child of this interpreter, with no toolkit of this machine in sight."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not os.path.exists(os.path.join(p, "nvcc")))
    command = [sys.executable, "-m", f"nvfp4_overlay.probes.{probe}"]
    done = subprocess.run(command, input=json.dumps(plan), capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0 or not done.stdout.strip():
        tail = "\n".join(done.stderr.strip().splitlines()[-12:])
        if "No module named 'torch'" in done.stderr:
            msg = (f"the behaviour checks need torch in this interpreter ({sys.executable}); "
                   f"run them from make test's .venv (make refresh ...), or pip install torch")
            raise ConfigError(msg, fix="pip install torch, or run from make test's .venv")
        msg = f"probe {probe} failed (exit {done.returncode}):\n{tail}"
        raise ConfigError(msg)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


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


# --- the trace ladder ----------------------------------------------------------------------------------


def ladder_for(side: Side, entries: Sequence[str], *, quick: bool, results: Results) -> dict[str, Any]:
    """The trace ladder of one tree: compact for an upstream tree (always every case), full for a patched one."""
    upstream = side.kind == "upstream"
    plan = ladder_plan(entries, quick=quick and not upstream)

    def compute() -> dict[str, Any]:
        found = run_probe("flashinfer_trace", {**plan, "trees": [{"key": "tree", "path": str(side.tree())}]})["tree"]
        return compact_ladder(found) if upstream and "crash" not in found else found

    result: dict[str, Any] = results.computed("flashinfer_trace", side, key_of("flashinfer_trace", side, plan), compute)
    return result


def ladder_plan(entries: Sequence[str], *, quick: bool) -> dict[str, Any]:
    return {"entries": list(entries), "gpus": [list(g) for g in TRACE_GPUS], "quick": quick}


def compact_ladder(result: dict[str, Any]) -> dict[str, Any]:
    """What the verdicts read of an upstream ladder: signatures, each eager call as a digest, the
    compile errors (kind, reason, the builtin, dynamo's user stack), the opt-in op's launches."""
    out = {k: result[k] for k in ("version", "routed", "probed", "lookups")}
    out["entries"] = {name: {"signature": info["signature"]} for name, info in result["entries"].items()}
    for gpu in (f"{g[0]}.{g[1]}" for g in TRACE_GPUS):
        if gpu not in result:
            continue
        out[gpu] = {"opt_in_fp4_op": result[gpu]["opt_in_fp4_op"]}
        for name in result["entries"]:
            out[gpu][name] = {case: _compact_run(run) for case, run in result[gpu][name].items()}
    if "error" in out["lookups"]:
        out["lookups"] = {"error": _compact_error(out["lookups"]["error"])}
    return out


def _compact_run(run: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"eager": eager_digest(run["eager"])}
    compiled = run.get("compiled")
    if compiled is not None:
        out["compiled"] = ({"error": _compact_error(compiled["error"])} if "error" in compiled
                           else {"targets": compiled.get("targets", [])})
    return out


def _compact_error(error: dict[str, Any]) -> dict[str, Any]:
    """The error without the frames of dynamo's polyfills and the standard library: the wheel's own
    frames, the probe's, and the last one (where the trace gave up)."""
    stack = error["stack"]
    kept = [f for i, f in enumerate(stack) if not f.startswith("<outside>/") or "flashinfer_trace" in f
            or i == len(stack) - 1]
    return {"kind": error["kind"], "reason": error["reason"], "explanation": error["explanation"], "stack": kept}


def eager_digest(eager: dict[str, Any] | str) -> str:
    """An eager call (outputs, launches, or the error) as a digest; a compact one is its digest already."""
    if isinstance(eager, str):
        return eager
    return short_digest({k: eager.get(k) for k in ("outputs", "launches", "error")})


# --- the CUDA-version grid -------------------------------------------------------------------------


def make_toolkit(root: Path, release: str, files_: Sequence[str] = ("version.json", "cuda.h")) -> Path:
    """A CUDA_HOME whose bin/nvcc answers --version, with the release's version.json and cuda.h."""
    home = root / f"cuda-{release}-{'-'.join(files_) or 'bare'}"
    if home.exists():
        return home
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        f"echo 'Cuda compilation tools, release {release}, V{release}.93'\n"
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    major, minor = (int(p) for p in release.split("."))
    if "version.json" in files_:
        (home / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": f"{release}.1"}}))
    if "cuda.h" in files_:
        (home / "include").mkdir()
        (home / "include" / "cuda.h").write_text(f"#pragma once\n#define CUDA_VERSION {major * 1000 + minor * 10}\n")
    return home


def grid_cells() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The 60 cells of the grid, and four other toolkit layouts on an SM120 box with a cu128 torch
    beside a 13.0 toolkit; a cell names its toolkit by release and layout (with_toolkits gives paths)."""
    cells: list[dict[str, Any]] = [{"torch": t, "toolkit_release": k, "layout": "full", "gpu": list(g)}
                                   for t in TORCH for k in TOOLKITS for g in GPUS]
    box: dict[str, Any] = {"torch": "12.8", "toolkit_release": "13.0", "gpu": [12, 0]}
    variants: dict[str, dict[str, Any]] = {
        "pip": {**box, "layout": "cuda.h"},  # include/cuda.h, no version.json: a pip-installed toolkit
        "bare": {**box, "layout": "bare"},  # nvcc alone: the last resort
        "on-path": {**box, "layout": "full", "on_path": True},  # no CUDA_HOME
        "none": {**box, "layout": "no-nvcc"},  # no nvcc: both fall back to torch's
        # pip's nvcc (the nvidia-cuda-nvcc wheel's layout on sys.path) beside the system's CUDA_HOME:
        # a lookup that took pip's first would pick 12.8 where CUDA_HOME's is 13.0
        "pip-beside": {**box, "layout": "full", "pip_toolkit": "12.8"},
    }
    return cells, variants


def with_toolkits(cells: Sequence[dict[str, Any]], root: Path) -> list[dict[str, Any]]:
    """The cells with the CUDA_HOME each names, made under root."""
    layouts = {"full": ("version.json", "cuda.h"), "cuda.h": ("cuda.h",), "bare": ()}
    out = []
    for cell in cells:
        if cell["layout"] == "no-nvcc":
            home = root / "cuda-without-nvcc"
            (home / "bin").mkdir(parents=True, exist_ok=True)
        else:
            home = make_toolkit(root, cell["toolkit_release"], layouts[cell["layout"]])
        extra = {"site": str(pip_site(root, cell["pip_toolkit"]))} if "pip_toolkit" in cell else {}
        out.append({**cell, "toolkit": str(home), **extra})
    return out


PIP_NVCC = ("nvidia", "cuda_nvcc")  # where the nvidia-cuda-nvcc wheel puts the toolkit, under site-packages


def pip_site(root: Path, release: str) -> Path:
    """A site-packages directory holding pip's toolkit (include/cuda.h and bin/nvcc, no version.json)."""
    site = root / f"site-packages-{release}"
    home = site.joinpath(*PIP_NVCC)
    if not home.exists():
        make_toolkit(home.parent, release, ("cuda.h",)).rename(home)
    return site


def grid_for(side: Side, *, results: Results, toolkits: Path, control: bool = False) -> dict[str, Any]:
    """One tree through the grid: {"cells": [...], "variants": {...}} (compact for an upstream tree).

    With `control`, the patched tree with every CUDA-version call answered from torch (a lookup
    that ignores the toolkit), over the torch 12.6 row: {"cells": [...]} for those cells.
    """
    cells, variants = grid_cells()
    plan = grid_plan(control=control)
    chosen = plan["cells"]

    def compute() -> dict[str, Any]:
        tree = {"key": "tree", "path": str(side.tree()), "empty_table": control, "control_module": True}
        raw = run_probe("cuda_grid", {"trees": [tree], "cells": with_toolkits(chosen, toolkits), "jobs": 1})["tree"]
        if "cells" not in raw:
            return {"crash": raw}
        found = raw["cells"] if side.kind == "patched" else [compact_cell(c) for c in raw["cells"]]
        if control:
            return {"cells": found}
        return {"cells": found[: len(cells)], "variants": dict(zip(variants, found[len(cells):]))}

    key = key_of("cuda_grid", side, plan, "control" if control else "")
    result: dict[str, Any] = results.computed("cuda_grid", side, key, compute)
    return result


def grid_plan(*, control: bool) -> dict[str, Any]:
    cells, variants = grid_cells()
    return {"cells": [c for c in cells if c["torch"] == "12.6"] if control else [*cells, *variants.values()],
            "empty_table": control, "control_module": True}


def compiled_part(cell: dict[str, Any]) -> dict[str, Any]:
    """What nvcc would be handed: the architectures (or the refusal logged) and each spec's flags."""
    return {"archs": cell.get("archs"), "arch_warnings": cell.get("arch_warnings"), "modules": cell.get("modules")}


def compiled_digest(cell: dict[str, Any]) -> str:
    """compiled_part as a digest; a compact cell holds it."""
    return str(cell["compiled"]) if "compiled" in cell else short_digest(compiled_part(cell))


def processes(cell: dict[str, Any]) -> list[list[str]]:
    return [e[1:] for e in cell.get("events", []) if e[0] == "process"]


def compact_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """What the verdicts read of an upstream cell: what nvcc is handed (a digest of the architectures
    and every spec's flags), the processes started, the run-time answer, the architectures."""
    if "crash" in cell:
        return cell
    return {"compiled": compiled_digest(cell), "events": [e for e in cell.get("events", []) if e[0] == "process"],
            "runtime_version": cell.get("runtime_version"), "outside_version": cell.get("outside_version"),
            "archs": cell.get("archs")}


# --- one release: both sides, as the verdicts take them ---------------------------------------------------


@dataclass
class Oracle:
    """The ladder and the grid of a release, upstream's half taken from `committed` where its key holds.

    committed: a directory of <release>.json files ({"ladder": {"key", "result"}, "grid": ...}),
    upstream halves a test suite keeps; fresh: releases whose upstream half is computed even so
    (the rotating sample that keeps the committed half honest).
    """

    results: Results
    toolkits: Path
    committed: Path | None = None
    fresh: Collection[str] = ()

    def ladder(self, upstream: Side, patched: Side, entries: Sequence[str], *, quick: bool) -> dict[str, Any]:
        return {"upstream": self.upstream_ladder(upstream, entries),
                "patched": ladder_for(patched, entries, quick=quick, results=self.results)}

    def upstream_ladder(self, upstream: Side, entries: Sequence[str]) -> dict[str, Any]:
        kept = self._committed(upstream, "ladder", key_of("flashinfer_trace", upstream, ladder_plan(entries, quick=False)))
        return kept if kept is not None else ladder_for(upstream, entries, quick=False, results=self.results)

    def grid(self, upstream: Side, patched: Side, *, control: bool = False) -> dict[str, Any]:
        cells, variants = grid_cells()
        theirs = self.upstream_grid(upstream)
        ours = grid_for(patched, results=self.results, toolkits=self.toolkits)
        out: dict[str, Any] = {"cells": cells, "variant_names": list(variants)}
        crashes = [f"{kind}: {side['crash']}" for kind, side in (("upstream", theirs), ("patched", ours))
                   if "crash" in side]
        if crashes:
            return {**out, "crashes": crashes}
        crashes = [f"{kind}: {c['crash']}" for kind, side in (("upstream", theirs), ("patched", ours))
                   for c in [*side["cells"], *side["variants"].values()] if "crash" in c][:1]
        out.update(upstream=theirs["cells"], patched=ours["cells"], upstream_variants=theirs["variants"],
                   patched_variants=ours["variants"], **({"crashes": crashes} if crashes else {}))
        if control:
            out["control"] = grid_for(patched, results=self.results, toolkits=self.toolkits, control=True)["cells"]
        return out

    def upstream_grid(self, upstream: Side) -> dict[str, Any]:
        kept = self._committed(upstream, "grid", key_of("cuda_grid", upstream, grid_plan(control=False)))
        return kept if kept is not None else grid_for(upstream, results=self.results, toolkits=self.toolkits)

    def _committed(self, upstream: Side, part: str, key: dict[str, Any]) -> dict[str, Any] | None:
        if self.committed is None or upstream.release in self.fresh:
            return None
        path = self.committed / f"{upstream.release}.json"
        try:
            kept = json.loads(path.read_text())[part]
        except (OSError, ValueError, KeyError):
            return None
        result: dict[str, Any] | None = kept["result"] if kept.get("key") == key else None
        return result


def upstream_record(upstream: Side, entries: Sequence[str], *, results: Results, toolkits: Path) -> dict[str, Any]:
    """Upstream's half of a release with the keys it holds under: what a test suite commits."""
    return {"release": upstream.release,
            "ladder": {"key": key_of("flashinfer_trace", upstream, ladder_plan(entries, quick=False)),
                       "result": ladder_for(upstream, entries, quick=False, results=results)},
            "grid": {"key": key_of("cuda_grid", upstream, grid_plan(control=False)),
                     "result": grid_for(upstream, results=results, toolkits=toolkits)}}
