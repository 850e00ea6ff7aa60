"""Behaviour checks: a patched wheel against its upstream wheel, by what they do, not by their text.

Upstream is the oracle. The probes (probes/) run in a child interpreter that has torch; this module
unpacks the trees, writes the plans, runs the probes and judges what they print, as lists of
problems (sentences a maintainer can act on; no problem: the patched wheel behaves). refresh runs
these before it writes a ported series; the tests run them for every carried release.

- The CUDA-version grid: the same TARGET_CUDA_ARCHS and nvcc flags as upstream for every torch
  CUDA x toolkit x GPU cell, and no process started to learn a version.
- The trace ladder, per routed entry point and GPU (SM120, SM100 faked): upstream fails under
  torch.compile(fullgraph=True); patched compiles to one opaque op, starts no process and opens no
  FlashInfer file while tracing, hands the kernel what an eager call hands it, and its fake returns
  what upstream's wrapper allocates; every upstream parameter is in the op's schema.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import fetch, wheels
from .archive import WheelReader
from .errors import ConfigError, OverlayError
from .manifest import Target, load_upstream
from .probes.cases import CANDIDATES

TORCH = ("12.6", "12.8", "12.9", "13.0")
TOOLKITS = ("12.8", "12.9", "13.0")
GPUS = ((9, 0), (10, 0), (10, 3), (12, 0), (12, 1))
TRACE_GPUS = ((12, 0), (10, 0))
OP_PREFIX = "nvfp4_overlay.flashinfer_"
ROUTED_CANDIDATES = CANDIDATES  # the entry points the trace ladder calls (probes/cases.py)


@dataclass(frozen=True)
class Pair:
    """One release: its upstream and its patched wheel, unpacked."""

    release: str
    upstream: Path
    patched: Path


def unpack(wheel: Path, into: Path) -> Path:
    """What the probes import: the wheel's Python and JSON files (0.6.11.post2 reads a workloads.json
    at import) and its dist-info, not the sources, CUTLASS and cubins under flashinfer/data/ (0.7.4:
    717 MB unpacked, about 30 MB this way)."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(into, [n for n in zf.namelist() if _readable(n)])
    return into


def _readable(name: str) -> bool:
    top = name.split("/", 1)[0]
    return top.endswith(".dist-info") or (name.endswith((".py", ".json")) and not name.startswith("flashinfer/data/"))


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
            raise ConfigError(msg)
        msg = f"probe {probe} failed (exit {done.returncode}):\n{tail}"
        raise ConfigError(msg)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# --- the CUDA-version grid -----------------------------------------------------------------------


def make_toolkit(root: Path, release: str, files: Sequence[str] = ("version.json", "cuda.h")) -> Path:
    """A CUDA_HOME whose bin/nvcc answers --version, with the release's version.json and cuda.h."""
    home = root / f"cuda-{release}-{'-'.join(files) or 'bare'}"
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
    if "version.json" in files:
        (home / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": f"{release}.1"}}))
    if "cuda.h" in files:
        (home / "include").mkdir()
        (home / "include" / "cuda.h").write_text(f"#pragma once\n#define CUDA_VERSION {major * 1000 + minor * 10}\n")
    return home


def grid_cells(root: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The 60 cells of the grid, and four other toolkit layouts on the report's box."""
    toolkits = {release: make_toolkit(root, release) for release in TOOLKITS}
    cells: list[dict[str, Any]] = [
        {"torch": t, "toolkit": str(toolkits[k]), "toolkit_release": k, "gpu": list(g)}
        for t in TORCH for k in TOOLKITS for g in GPUS
    ]
    no_nvcc = root / "cuda-without-nvcc"
    (no_nvcc / "bin").mkdir(parents=True, exist_ok=True)
    box: dict[str, Any] = {"torch": "12.8", "toolkit_release": "13.0", "gpu": [12, 0]}
    variants: dict[str, dict[str, Any]] = {
        "pip": {**box, "toolkit": str(make_toolkit(root, "13.0", ("cuda.h",)))},  # include/cuda.h, no version.json
        "bare": {**box, "toolkit": str(make_toolkit(root, "13.0", ()))},  # nvcc alone: the last resort
        "on-path": {**box, "toolkit": str(toolkits["13.0"]), "on_path": True},  # no CUDA_HOME
        "none": {**box, "toolkit": str(no_nvcc)},  # no nvcc: both fall back to torch's
    }
    return cells, variants


def cuda_grid(pairs: Sequence[Pair], root: Path, *, control: bool = False, jobs: int | None = None) -> dict[str, Any]:
    """{release: {"cells", "upstream", "patched", "upstream_variants", "patched_variants"[, "control"]}}.

    With `control`, also the patched tree with its nvcc-facing table emptied (every call answered
    from torch, as turn 1's patch did), over the torch 12.6 row: the grid must tell it from upstream.
    """
    cells, variants = grid_cells(root)
    control_cells = [i for i, c in enumerate(cells) if c["torch"] == "12.6"]
    trees: list[dict[str, Any]] = []
    for pair in pairs:
        trees.append({"key": f"{pair.release}/upstream", "path": str(pair.upstream)})
        trees.append({"key": f"{pair.release}/patched", "path": str(pair.patched)})
        if control:
            trees.append({"key": f"{pair.release}/control", "path": str(pair.patched), "empty_table": True,
                          "cells": control_cells})
    plan = {"trees": trees, "cells": [*cells, *variants.values()], "jobs": jobs or os.cpu_count() or 1}
    raw = run_probe("cuda_grid", plan)
    out: dict[str, Any] = {}
    for key, result in raw.items():
        release, kind = key.split("/")
        entry = out.setdefault(release, {"cells": cells, "variant_names": list(variants)})
        if "cells" not in result:
            entry.setdefault("crashes", []).append(f"{kind}: {result}")
            continue
        crashed = [c["crash"] for c in result["cells"] if "crash" in c]
        if crashed:
            entry.setdefault("crashes", []).append(f"{kind}: {crashed[0]}")
        if kind == "control":
            entry["control"] = result["cells"]
            continue
        entry[kind] = result["cells"][: len(cells)]
        entry[f"{kind}_variants"] = dict(zip(variants, result["cells"][len(cells):]))
    return out


def compiled_part(cell: dict[str, Any]) -> dict[str, Any]:
    """What nvcc would be handed: the architectures (or the refusal logged) and each spec's flags."""
    return {"archs": cell.get("archs"), "arch_warnings": cell.get("arch_warnings"), "modules": cell.get("modules")}


def cell_name(cell: dict[str, Any]) -> str:
    return f"torch {cell['torch']} toolkit {cell['toolkit_release']} sm{cell['gpu'][0]}{cell['gpu'][1]}"


def processes(cell: dict[str, Any]) -> list[list[str]]:
    return [e[1:] for e in cell.get("events", []) if e[0] == "process"]


def asks_version(argv: list[str]) -> bool:
    return argv[:1] == ["which"] or "--version" in argv


def grid_problems(release: str, grid: dict[str, Any]) -> list[str]:
    """Every way the patched wheel's nvcc side differs from upstream's on this release's grid."""
    problems = [f"{release}: the probe crashed: {c[:600]}" for c in grid.get("crashes", [])]
    if problems:
        return problems
    differing = [cell_name(c) for c, u, p in zip(grid["cells"], grid["upstream"], grid["patched"], strict=True)
                 if compiled_part(u) != compiled_part(p)]
    if differing:
        problems.append(f"{release}: {len(differing)} of {len(grid['cells'])} cells hand nvcc other flags or "
                        f"architectures than upstream: {', '.join(differing[:6])}")
    for cell, patched in zip(grid["cells"], grid["patched"], strict=True):
        asked = [p for p in processes(patched) if asks_version(p)]
        if asked:
            problems.append(f"{release}: {cell_name(cell)}: the patched wheel started {asked} to learn a version")
            break
    for name in grid["variant_names"]:
        if compiled_part(grid["patched_variants"][name]) != compiled_part(grid["upstream_variants"][name]):
            problems.append(f"{release}: toolkit layout {name!r}: nvcc would get other flags than upstream's")
    return problems


# --- the trace ladder ----------------------------------------------------------------------------


def trace_ladder(pairs: Sequence[Pair], entries: Sequence[str], *, quick: bool = False,
                 jobs: int | None = None) -> dict[str, dict[str, Any]]:
    """{release: {"upstream": probe result, "patched": probe result}} for the entry points given."""
    trees = [{"key": f"{p.release}/{kind}", "path": str(tree)}
             for p in pairs for kind, tree in (("upstream", p.upstream), ("patched", p.patched))]
    plan = {"trees": trees, "entries": list(entries), "gpus": [list(g) for g in TRACE_GPUS], "quick": quick,
            "jobs": jobs or os.cpu_count() or 1}
    out: dict[str, dict[str, Any]] = {}
    for key, result in run_probe("flashinfer_trace", plan).items():
        release, kind = key.split("/")
        out.setdefault(release, {})[kind] = result
    return out


def trace_problems(release: str, ladder: dict[str, Any], routed: Sequence[str]) -> list[str]:
    """Every way the patched wheel's routed entry points fail the ladder on this release."""
    upstream, patched = ladder["upstream"], ladder["patched"]
    for kind, result in (("upstream", upstream), ("patched", patched)):
        if "crash" in result:
            return [f"{release}: the {kind} probe crashed: {result['crash'][-800:]}"]
    problems = [f"{release}: the overlay routes {name}, which the ladder does not call (ROUTED_CANDIDATES)"
                for name in routed if name not in patched.get("probed", ROUTED_CANDIDATES)]
    for name in routed:
        info = patched["entries"].get(name)
        if info is None:
            continue  # not in this release
        if info["schema"] is None:
            problems.append(f"{release}: {name} is not routed (the overlay warned at import; no op)")
            continue
        if info["schema"] != info["signature"]:
            problems.append(f"{release}: {name}: the op takes {info['schema']}, upstream's signature is "
                            f"{info['signature']}: a parameter would not reach the op")
        for gpu in (f"{g[0]}.{g[1]}" for g in TRACE_GPUS):
            problems += _entry_problems(release, name, gpu, upstream[gpu].get(name, {}), patched[gpu].get(name, {}))
            ops = patched[gpu]["eager_ops"].get(name, {}).get("ops", [])
            if any(op.startswith("nvfp4_overlay::") for op in ops):
                problems.append(f"{release}: sm{gpu}: an eager {name} call went through the opaque op")
    for gpu in (f"{g[0]}.{g[1]}" for g in TRACE_GPUS):
        opt_in = patched[gpu].get("opt_in_fp4_op") or {}
        if opt_in.get("launches") is not None and opt_in["launches"] != opt_in.get("public"):
            problems.append(f"{release}: sm{gpu}: torch.ops.flashinfer.fp4_quantize(..., enable_pdl=True) launches "
                            f"{opt_in['launches']}, the public fp4_quantize {opt_in.get('public')} (patch 0003)")
    return problems


def _entry_problems(release: str, name: str, gpu: str, upstream: dict[str, Any],
                    patched: dict[str, Any]) -> list[str]:
    where = f"{release}: sm{gpu.replace('.', '')}: {name}"
    problems = []
    for case, run in patched.items():
        eager, compiled = run["eager"], run["compiled"]
        theirs = upstream.get(case, {}).get("eager")
        if theirs is not None and {k: theirs.get(k) for k in ("outputs", "launches", "error")} != {
                k: eager.get(k) for k in ("outputs", "launches", "error")}:
            problems.append(f"{where} [{case}]: an eager call differs from upstream's ({eager} vs {theirs})")
        if "error" in eager:
            # upstream refuses these arguments: the compiled call must refuse them too
            if "error" not in compiled:
                problems.append(f"{where} [{case}]: upstream raises {eager['error']}, the compiled call does not")
            continue
        if "error" in compiled:
            problems.append(f"{where} [{case}]: does not compile with fullgraph: {compiled['error'][0]}: "
                            f"{compiled['error'][1][:400]}")
            continue
        targets = compiled.get("targets", [])
        ours = [t for t in targets if t.startswith(OP_PREFIX)]
        if ours != [f"{OP_PREFIX}{name}.default"]:
            problems.append(f"{where} [{case}]: the graph holds {targets}, not one opaque {name} op")
        if compiled["trace_events"]:
            problems.append(f"{where} [{case}]: while tracing: {compiled['trace_events'][:3]}")
        if compiled["launches"] != eager["launches"]:
            problems.append(f"{where} [{case}]: the kernel gets {compiled['launches']} compiled, "
                            f"{eager['launches']} eager")
        if compiled.get("fake_outputs") != _flat_tensors(eager["outputs"]):
            problems.append(f"{where} [{case}]: the fake gives {compiled.get('fake_outputs')}, upstream's wrapper "
                            f"{eager['outputs']}")
        if compiled["outputs"] != eager["outputs"]:
            problems.append(f"{where} [{case}]: the compiled run returns {compiled['outputs']}, eager "
                            f"{eager['outputs']}")
    if not patched:
        problems.append(f"{where}: no case ran")
    elif all("error" in run["eager"] for run in patched.values()):
        first = next(iter(patched.values()))["eager"]["error"]
        problems.append(f"{where}: no case reached the kernel, every eager call raised (first: {first[0]}: "
                        f"{first[1][:200]})")
    return problems


def upstream_fails(ladder: dict[str, Any], name: str) -> dict[str, list[str] | None]:
    """For the upstream tree, per GPU: the first case's compile error (None: it compiled)."""
    out: dict[str, list[str] | None] = {}
    for gpu in (f"{g[0]}.{g[1]}" for g in TRACE_GPUS):
        runs = ladder["upstream"][gpu].get(name, {})
        first = next(iter(runs.values()), None)
        out[gpu] = None if first is None else first["compiled"].get("error")
    return out


def _flat_tensors(value: Any) -> list[Any]:
    if isinstance(value, list) and value and value[0] == "tensor":
        return [value]
    if isinstance(value, list) and value and isinstance(value[0], list):
        return [t for v in value for t in _flat_tensors(v)]
    return []


# --- a series, checked before it is written ---------------------------------------------------------


def check_series(target: Target, patches_dir: Path, overlay_dir: Path, source: fetch.Source, workdir: Path,
                 *, audit: Path | None = None, quick: bool = False) -> list[str]:
    """Build target from the series under patches_dir and hold it to its upstream wheel; the problems.

    flashinfer-python: every CUDA-version call site classified by the audit, the CUDA-version grid,
    the trace ladder of every routed entry point the release has. Other distributions: the build
    alone (their behaviour is checked by the tests of the stacks they belong to).
    """
    options = wheels.Options(patches_dir, overlay_dir, workdir / "dist", source)
    try:
        (built,) = wheels.build_targets([target], dataclasses.replace(options, source=dataclasses.replace(
            source, all_platforms=False)))
    except OverlayError as exc:
        return [f"{target}: the ported series does not build: {exc}"]
    if target.dist != "flashinfer-python":
        return []
    pinned = load_upstream(patches_dir, target)
    pin = next(w for w in pinned.wheels if w.filename == built.upstream_filename)
    upstream = fetch.upstream_wheel(pinned, pin, source)
    problems = _audit_problems(target, upstream, audit or patches_dir)
    pair = Pair(target.version, unpack(upstream, workdir / "upstream"), unpack(built.wheel, workdir / "patched"))
    grid = cuda_grid([pair], workdir / "toolkits")[target.version]
    problems += grid_problems(target.version, grid)
    ladder = trace_ladder([pair], ROUTED_CANDIDATES, quick=quick)[target.version]
    problems += trace_problems(target.version, ladder, routed(ladder))
    return problems


def routed(ladder: dict[str, Any]) -> list[str]:
    """The entry points the overlay routes (its entries.py, as the patched tree has it)."""
    return list(ladder["patched"].get("routed", []))


def _audit_problems(target: Target, upstream: Path, patches_dir: Path) -> list[str]:
    from . import cuda_audit

    with WheelReader(upstream) as reader:
        files = {n: reader.read(n).decode("utf-8", "replace") for n in reader.infos
                 if n.endswith(".py") and not n.startswith("flashinfer/data/")}
    changed = [f"{target}: {problem}" for problem in cuda_audit.lookup_changes(files)]
    missing = cuda_audit.unclassified_in(files, cuda_audit.load_audit(patches_dir))
    return changed + [f"{target}: {s.module} {s.qualname} calls {s.call}, which {patches_dir}/flashinfer-python/"
                      f"{cuda_audit.AUDIT} does not classify: say whether it decides what nvcc compiles"
                      for s in missing]
