"""The oracle, one release and one side at a time: the trace ladder and the CUDA grid, cached by their inputs.

oracle/behaviour.py judges; this module computes what it judges. A side is one tree of one release: the
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

import ast
import contextlib
import fcntl
import hashlib
import json
import sys
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import files
from ..files import short_digest
from ..probes.flashinfer.tables.cases import ONLY_GPU
from ..probes.serve import probe_module
from .grid import compact_cell, grid_cells, grid_plan, with_toolkits
from .probe_runner import run_probe

PACKAGE = Path(__file__).resolve().parents[1]
PROBES = PACKAGE / "probes"  # whose source is part of every key
TRACE_GPUS = ((12, 0), (10, 0))
# SM121 (GB10, DGX Spark) takes FlashInfer's SM12x paths, and FlashInfer asks CUDA 12.9 or later of it
# (utils.is_sm121a_supported, is_sm12x_supported, compilation_context: "SM 12.1+ requires CUDA >= 12.9"):
# its rung runs with torch's CUDA at 13.0, as its aarch64 builds ship. A plan of its own, on some releases
# (docs/proof.md says which): the default plan, and so every key of tests/oracle/, stays as it is.
SM121_GPUS = ((12, 1),)
SM121_TORCH_CUDA = "13.0"
Gpus = Sequence[tuple[int, int]]


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


def probe_digest(probe: str) -> str:
    """The source of a probe and of every probes/ module it imports, however deep (not the others:
    a change to the SGLang probes leaves the FlashInfer results as they are)."""
    return digest_tree(PROBES, sorted(probe_sources(probe)))


def modules_digest(names: Sequence[str]) -> str:
    """The modules `names` (dotted, under the package) and every module of the package they import,
    however deep, by digest (their paths in the package and their bytes): what a probe run as a module
    (the whole-layer probes, probes/sglang/layer/) is made of."""
    return digest_tree(PACKAGE, sorted(_imported(names)))


def probe_sources(probe: str) -> set[str]:
    """probes/<probe>.py and the probes/ modules it imports, at any depth, as file names, and the
    interpreter every probe runs in (probes/serve.py: what it does before a fork, each run sees)."""
    # a probe a test writes inline (test_trace_sglang's) has no file of its own: serve.py alone, as before
    module = f"probes.{probe_module(probe)}" if any(PROBES.glob(f"*/{probe}.py")) else f"probes.{probe}"
    return {n.removeprefix("probes/") for n in _imported([module, "probes.serve"])}


def patched_inputs(wheel_sha256: str, patches_dir: Path, overlay_dir: Path, dist: str, version: str) -> dict[str, str]:
    """What a patched tree is made of, by digest: its upstream wheel, series, overlay and engine."""
    return {"wheel": wheel_sha256, "series": digest_tree(patches_dir / dist / version),
            "overlay": digest_tree(overlay_dir / dist), "engine": engine_digest()}


# What makes a patched tree: wheel.build.build_targets builds the wheel, probe_runner.unpack unpacks it.
ENGINE_ROOTS = ("wheel.build", "oracle.probe_runner")


def engine_digest() -> str:
    """The modules that apply a series, write the wheel and unpack it: those two and every module of
    the package they import, however deep (the audits, the oracle and the CLI shape no patched file:
    a change to them leaves every patched result as it is)."""
    return digest_tree(PACKAGE, sorted(engine_sources()))


def engine_sources() -> set[str]:
    """ENGINE_ROOTS and the package's top-level modules they import, at any depth, as file names."""
    return _imported(ENGINE_ROOTS)


def _imported(names: Sequence[str]) -> set[str]:
    """The modules `names` (dotted, under the package) and the package's modules they import, at any
    depth (module level and inside functions), as paths relative to the package's folder."""
    seen: dict[str, Path] = {}
    waiting = list(names)
    while waiting:
        name = waiting.pop()
        path = _module_path(name)
        if name in seen or path is None:
            continue
        seen[name] = path
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(node.module or "", node.level, package)
                if base is not None:
                    waiting += [_defining(base, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                waiting += [a.name.removeprefix("nvfp4_overlay.") for a in node.names
                            if a.name.startswith("nvfp4_overlay.")]
    return {path.relative_to(PACKAGE).as_posix() for path in seen.values()}


def _defining(module: str, name: str) -> str:
    """The module that `from module import name` runs for name: the submodule of that name, the
    module a package's face takes it from, or the module itself."""
    sub = f"{module}.{name}".lstrip(".")
    if _module_path(sub) is not None:
        return sub
    path = _module_path(module)
    if path is not None and path.name == "__init__.py":
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module                     and name in (a.asname or a.name for a in node.names):
                return f"{module}.{node.module}".lstrip(".")
    return module


def _module_path(name: str) -> Path | None:
    """A module of the package (dotted, under it; "" is the package) as its file; None: no such module."""
    path = PACKAGE.joinpath(*name.split(".")) if name else PACKAGE
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _absolute(module: str, level: int, package: str) -> str | None:
    """An import's module, dotted under the package; None: outside it."""
    if level:
        parts = package.split(".") if package else []
        parts = parts[:len(parts) - (level - 1)]
        return ".".join([*parts, *([module] if module else [])])
    if module == "nvfp4_overlay" or module.startswith("nvfp4_overlay."):
        return module.removeprefix("nvfp4_overlay").removeprefix(".")
    return None


# --- sides and the result cache ------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One tree of one release, as a probe sees it, and what it is made of."""

    release: str
    kind: str  # "upstream" or "patched"
    inputs: Mapping[str, str]  # digests: see patched_inputs; an upstream tree has its wheel's alone
    tree: Callable[[], Path] = field(compare=False)  # unpacks (and builds) the tree on first use


def release_sides(release: str, wheel_sha256: str, patches_dir: Path, overlay_dir: Path, dist: str,
                  upstream_tree: Callable[[], Path], patched_tree: Callable[[], Path]) -> tuple[Side, Side]:
    """A release's two sides, keyed as every caller keys them: upstream by its wheel, patched by
    patched_inputs (the series under patches_dir/dist/release)."""
    return (Side(release, "upstream", {"wheel": wheel_sha256}, upstream_tree),
            Side(release, "patched", patched_inputs(wheel_sha256, patches_dir, overlay_dir, dist, release), patched_tree))


class Results:
    """Probe results under root/<probe>/<release>-<kind>-<key>.json; None: nothing kept.

    A probe that crashed is not kept: the next run probes again. A result is computed under a lock of its own file, so parallel test workers that ask for the
    same one wait for the first instead of computing it twice.
    """

    def __init__(self, root: Path | None) -> None:
        self.root = root

    def computed(self, probe: str, side: Side, key: dict[str, Any], compute: Callable[[], Any],
                 keep: Callable[[Any], bool] | None = None) -> Any:
        """The result under key: kept, or computed and kept (unless it crashed, or keep says not)."""
        if self.root is None:
            return compute()
        path = self.root / probe / f"{side.release}-{side.kind}-{short_digest(key)}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path.with_suffix(".lock")):
            if path.is_file():
                with contextlib.suppress(ValueError):
                    return json.loads(path.read_text())["result"]
            result = compute()
            crashed = isinstance(result, dict) and "crash" in result  # a crash is news, not a fact to keep
            if not crashed and (keep is None or keep(result)):
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

    return {"probe": probe, "probe_source": probe_digest(probe), "plan": short_digest(plan), "inputs": dict(side.inputs),
            "side": side.kind + (f"/{variant}" if variant else ""), "torch": torch.__version__,
            "python": f"{sys.version_info[0]}.{sys.version_info[1]}"}


# --- running a probe -------------------------------------------------------------------------------


# --- the trace ladder ----------------------------------------------------------------------------------


def ladder_for(side: Side, entries: Sequence[str], *, quick: bool, results: Results, gpus: Gpus = TRACE_GPUS,
               torch_cuda: str | None = None) -> dict[str, Any]:
    """The trace ladder of one tree: compact for an upstream tree (always every case), full for a patched one."""
    upstream = side.kind == "upstream"
    plan = ladder_plan(entries, quick=quick and not upstream, gpus=gpus, torch_cuda=torch_cuda)

    def compute() -> dict[str, Any]:
        found = run_probe("flashinfer_trace", {**plan, "trees": [{"key": "tree", "path": str(side.tree())}]})["tree"]
        return compact_ladder(found) if upstream and "crash" not in found else found

    result: dict[str, Any] = results.computed("flashinfer_trace", side, key_of("flashinfer_trace", side, plan), compute)
    return result


def ladder_plan(entries: Sequence[str], *, quick: bool, gpus: Gpus = TRACE_GPUS,
                torch_cuda: str | None = None) -> dict[str, Any]:
    """What the probe runs: every entry point on `gpus`; torch's CUDA release named only where it is not
    the probe's 12.8. On the default GPUs, an entry point upstream runs on one other GPU alone
    (probes/flashinfer/tables/cases.py ONLY_GPU) runs on that GPU too, there alone."""
    plan: dict[str, Any] = {"entries": list(entries), "gpus": [list(g) for g in gpus], "quick": quick}
    alone: dict[str, list[str]] = {}
    for name in entries:
        if name in ONLY_GPU and tuple(gpus) == TRACE_GPUS:
            alone.setdefault(ONLY_GPU[name], []).append(name)
    if alone:
        plan["gpus"] += [[int(p) for p in gpu.split(".")] for gpu in sorted(alone)]
        plan["gpu_entries"] = alone
    return {**plan, "torch_cuda": torch_cuda} if torch_cuda else plan


def compact_ladder(result: dict[str, Any]) -> dict[str, Any]:
    """What the verdicts read of an upstream ladder: signatures, each eager call as a digest, the
    compile errors (kind, reason, the builtin, dynamo's user stack), the opt-in op's launches."""
    out = {k: result[k] for k in ("version", "routed", "probed", "lookups")}
    out["entries"] = {name: {"signature": info["signature"]} for name, info in result["entries"].items()}
    for gpu in gpu_keys(result):
        out[gpu] = {k: result[gpu][k] for k in ("opt_in_fp4_op",) if k in result[gpu]}
        for name in result["entries"]:
            if name in result[gpu]:
                out[gpu][name] = {case: _compact_run(run) for case, run in result[gpu][name].items()}
    if "error" in out["lookups"]:
        out["lookups"] = {"error": _compact_error(out["lookups"]["error"])}
    return out


def gpu_keys(result: Mapping[str, Any]) -> list[str]:
    """The GPUs a ladder ran on, as its keys ("12.0"), in the plan's order."""
    return [key for key in result if key.replace(".", "", 1).isdigit() and "." in key]


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


# --- the fakes against upstream's wrapper, at every rank ------------------------------------------------


def shapes_for(patched: Side, entries: Sequence[str], *, results: Results) -> dict[str, Any]:
    """A patched tree's routed entry points, fake against upstream's wrapper (probes/flashinfer/fake_shapes.py)."""
    plan = {"entries": list(entries), "gpus": [list(g) for g in TRACE_GPUS]}

    def compute() -> dict[str, Any]:
        found: dict[str, Any] = run_probe("fake_shapes", {**plan, "trees": [{"key": "tree", "path": str(patched.tree())}]})["tree"]
        return found

    result: dict[str, Any] = results.computed("fake_shapes", patched, key_of("fake_shapes", patched, plan), compute)
    return result


# --- the CUDA-version grid -------------------------------------------------------------------------


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

    def ladder(self, upstream: Side, patched: Side, entries: Sequence[str], *, quick: bool, gpus: Gpus = TRACE_GPUS,
               torch_cuda: str | None = None) -> dict[str, Any]:
        return {"upstream": self.upstream_ladder(upstream, entries, gpus, torch_cuda),
                "patched": ladder_for(patched, entries, quick=quick, results=self.results, gpus=gpus,
                                      torch_cuda=torch_cuda)}

    def shapes(self, patched: Side, entries: Sequence[str]) -> dict[str, Any]:
        return shapes_for(patched, entries, results=self.results)

    def upstream_ladder(self, upstream: Side, entries: Sequence[str], gpus: Gpus = TRACE_GPUS,
                        torch_cuda: str | None = None) -> dict[str, Any]:
        plan = ladder_plan(entries, quick=False, gpus=gpus, torch_cuda=torch_cuda)
        kept = self._committed(upstream, "ladder", key_of("flashinfer_trace", upstream, plan))
        return kept if kept is not None else ladder_for(upstream, entries, quick=False, results=self.results, gpus=gpus,
                                                        torch_cuda=torch_cuda)

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
