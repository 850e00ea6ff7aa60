"""Behaviour checks: a patched wheel against its upstream wheel, by what they do, not by their text.

Upstream is the oracle. oracle/oracle.py computes, per release and side, what the probes (probes/) see;
this module judges it, as lists of problems (sentences a maintainer can act on; no problem: the
patched wheel behaves). refresh runs these before it writes a ported series; the tests run them
for every carried release. Pure but for check_series, which builds and probes a series.

- The CUDA-version grid: the same TARGET_CUDA_ARCHS and nvcc flags as upstream for every torch
  CUDA x toolkit x GPU cell, and no process started to learn a version.
- The trace ladder, per routed entry point and GPU (SM120, SM100 faked): upstream fails under
  torch.compile(fullgraph=True); patched compiles to one opaque op, starts no process and opens no
  FlashInfer file while tracing, hands the kernel what an eager call hands it, and its fake returns
  what upstream's wrapper allocates; every upstream parameter is in the op's schema.
- The explored space (oracle/explored.py): every fake against upstream's wrapper at sizes around the
  constants of the wrapper's own shape code, with every optional parameter in each state, to the
  result's exact type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import OverlayError
from ..patch import Target, load_upstream
from ..probes.flashinfer.tables import compile_cases
from ..probes.flashinfer.tables.cases import CANDIDATES, ONLY_GPU, has_kernel, kernel_gpus, ladder_gpus
from ..wheel import WheelReader, build, fetch
from . import explored, oracle
from .grid import compiled_digest, processes
from .oracle import TRACE_GPUS, eager_digest, gpu_keys
from .probe_runner import unpack

ROUTED_CANDIDATES = CANDIDATES  # the entry points the trace ladder calls (probes/flashinfer/tables/cases.py)
# The public names of FlashInfer's own compile list (probes/flashinfer/tables/compile_cases.py), which the
# compile-list probe holds the overlay to.
COMPILE_LIST = frozenset(name.rsplit(".", 1)[1] for name in compile_cases.every_name())
OP_PREFIX = "nvfp4_overlay.flashinfer_"
DEFAULT_GPUS = tuple(f"{g[0]}.{g[1]}" for g in TRACE_GPUS)


# --- the CUDA-version grid -----------------------------------------------------------------------


def cell_name(cell: dict[str, Any]) -> str:
    return f"torch {cell['torch']} toolkit {cell['toolkit_release']} sm{cell['gpu'][0]}{cell['gpu'][1]}"


def asks_version(argv: list[str]) -> bool:
    return argv[:1] == ["which"] or "--version" in argv


def grid_problems(release: str, grid: dict[str, Any]) -> list[str]:
    """Every way the patched wheel's nvcc side differs from upstream's on this release's grid."""
    problems = [f"{release}: the probe crashed: {c[:600]}" for c in grid.get("crashes", [])]
    if problems:
        return problems
    differing = [cell_name(c) for c, u, p in zip(grid["cells"], grid["upstream"], grid["patched"], strict=True)
                 if compiled_digest(u) != compiled_digest(p)]
    if differing:
        problems.append(f"{release}: {len(differing)} of {len(grid['cells'])} cells hand nvcc other flags or "
                        f"architectures than upstream: {', '.join(differing[:6])}")
    for cell, patched in zip(grid["cells"], grid["patched"], strict=True):
        asked = [p for p in processes(patched) if asks_version(p)]
        if asked:
            problems.append(f"{release}: {cell_name(cell)}: the patched wheel started {asked} to learn a version")
            break
    for name in grid["variant_names"]:
        if compiled_digest(grid["patched_variants"][name]) != compiled_digest(grid["upstream_variants"][name]):
            problems.append(f"{release}: toolkit layout {name!r}: nvcc would get other flags than upstream's")
    return problems


# --- the trace ladder ----------------------------------------------------------------------------


def trace_problems(release: str, ladder: dict[str, Any], routed: Sequence[str]) -> list[str]:
    """Every way the patched wheel's routed entry points fail the ladder on this release (on every GPU
    the patched ladder ran on: TRACE_GPUS, or a plan of its own such as oracle.SM121_GPUS)."""
    upstream, patched = ladder["upstream"], ladder["patched"]
    for kind, result in (("upstream", upstream), ("patched", patched)):
        if "crash" in result:
            return [f"{release}: the {kind} probe crashed: {str(result['crash'])[-800:]}"]
    gpus = gpu_keys(upstream)
    if not gpus or sorted(gpu_keys(patched)) != sorted(gpus):  # a side that skipped a GPU would pass it unseen
        # (sorted: a committed upstream half keeps its keys sorted, a fresh result in the plan's order)
        return [f"{release}: the patched ladder ran on {gpu_keys(patched)}, upstream's on {gpus}"]
    base = _base_gpus(upstream)
    problems = lookup_problems(release, patched.get("lookups") or {})
    problems += [f"{release}: the overlay routes {name}, which the ladder does not call (ROUTED_CANDIDATES)"
                 for name in routed if name not in patched.get("probed", ROUTED_CANDIDATES)]
    for name in routed:
        info = patched["entries"].get(name)
        if info is None:
            continue  # not in this release
        if info["schema"] is None:
            said = [w for w in patched.get("warnings", []) if f".{name} is not routed" in w]
            why = said[0] if said else "the overlay warned at import"
            problems.append(f"{release}: {name} is not routed ({why}; no op)")
            continue
        if info["schema"] != info["signature"]:
            problems.append(f"{release}: {name}: the op takes {info['schema']}, upstream's signature is "
                            f"{info['signature']}: a parameter would not reach the op")
        for gpu in ladder_gpus(name, base):
            if gpu not in gpus:
                if gpu == ONLY_GPU.get(name) and base != DEFAULT_GPUS:
                    continue  # a plan of its own (oracle.SM121_GPUS) runs no entry point alone elsewhere
                problems.append(f"{release}: sm{gpu.replace('.', '')}: {name}: the ladder did not run there")
                continue
            problems += _entry_problems(release, name, gpu, upstream[gpu].get(name, {}), patched[gpu].get(name, {}))
            ops = patched[gpu]["eager_ops"].get(name, {}).get("ops", [])
            if any(op.startswith("nvfp4_overlay::") for op in ops):
                problems.append(f"{release}: sm{gpu}: an eager {name} call went through the opaque op")
    for gpu in gpus:
        opt_in = patched[gpu].get("opt_in_fp4_op") or {}
        if opt_in.get("launches") is not None and opt_in["launches"] != opt_in.get("public"):
            problems.append(f"{release}: sm{gpu}: torch.ops.flashinfer.fp4_quantize(..., enable_pdl=True) launches "
                            f"{opt_in['launches']}, the public fp4_quantize {opt_in.get('public')} (patch 0003)")
    return problems


def _base_gpus(result: dict[str, Any]) -> tuple[str, ...]:
    """The GPUs a ladder ran every entry point on: its keys less those an entry point runs on alone."""
    return tuple(g for g in gpu_keys(result) if g not in ONLY_GPU.values())


def lookup_problems(release: str, lookups: dict[str, Any]) -> list[str]:
    """Patch 0001 exists so that get_cuda_version() and is_cuda_version_at_least() trace under
    torch.compile(fullgraph=True) with no process and no file opened: if the patched wheel's do not,
    the patch no longer acts (inert), whatever its hunks say."""
    error, events = lookups.get("error"), lookups.get("events", [])
    if error is None and not events:
        return []
    what = (f"fail torch.compile(fullgraph=True) ({error['kind']}: {error.get('reason', '')}, in "
            f"{' > '.join(error.get('stack', [])[-3:])})" if error else f"start or open {events[:2]} while traced")
    return [f"{release}: inert: the patched wheel's get_cuda_version()/is_cuda_version_at_least() {what}, as "
            f"upstream's do: callers reach another lookup than the one patch 0001 replaces. Run 'nvfp4-overlay drift "
            f"--against {release}' to see the name upstream re-binds, move 0001's decorator onto what it binds (or "
            f"port the new lookup into the overlay's cuda.py), then refresh again"]


def _entry_problems(release: str, name: str, gpu: str, upstream: dict[str, Any],
                    patched: dict[str, Any]) -> list[str]:
    where = f"{release}: sm{gpu.replace('.', '')}: {name}"
    problems = []
    for case, run in patched.items():
        eager, compiled = run["eager"], run["compiled"]
        theirs = upstream.get(case, {}).get("eager")
        if theirs is not None and eager_digest(theirs) != eager_digest(eager):
            problems.append(f"{where} [{case}]: an eager call differs from upstream's (here: {eager})")
        if "error" in eager:
            # upstream refuses these arguments: the compiled call must refuse them too
            if "error" not in compiled:
                problems.append(f"{where} [{case}]: upstream raises {eager['error']}, the compiled call does not")
            continue
        if "error" in compiled:
            error = compiled["error"]
            problems.append(f"{where} [{case}]: does not compile with fullgraph: {error['kind']}: "
                            f"{error['head'][:400]} (in {' > '.join(error['stack'][-4:])})")
            continue
        targets = compiled.get("targets", [])  # the graph's, which may hold the other entry points' calls too
        if f"{OP_PREFIX}{name}.default" not in targets or compiled.get("op_calls") != compiled.get("calls"):
            problems.append(f"{where} [{case}]: the graph holds {targets} ({compiled.get('op_calls')} {name} op "
                            f"calls for {compiled.get('calls')} calls of it), not one opaque {name} op per call")
        if compiled["trace_events"]:
            problems.append(f"{where} [{case}]: while tracing: {compiled['trace_events'][:3]}")
        if any(tracing for _, tracing in compiled.get("tactics", [])):
            problems.append(f"{where} [{case}]: the AutoTuner chose a tactic while dynamo traced")
        if compiled["launches"] != eager["launches"]:
            problems.append(f"{where} [{case}]: the kernel gets {compiled['launches']} compiled, "
                            f"{eager['launches']} eager")
        if compiled.get("fake_outputs") != _flat_tensors(eager["outputs"]):
            problems.append(f"{where} [{case}]: the fake gives {compiled.get('fake_outputs')}, upstream's wrapper "
                            f"{eager['outputs']}")
        if compiled["outputs"] != eager["outputs"]:
            problems.append(f"{where} [{case}]: the compiled run returns {compiled['outputs']}, eager "
                            f"{eager['outputs']}")
    reached = [case for case, run in patched.items() if "error" not in run["eager"]]
    if not patched:
        problems.append(f"{where}: no case ran")
    elif not has_kernel(name, _family(gpu), release):  # every call refuses: upstream has no kernel there
        if reached:
            problems.append(f"{where}: {reached[0]} reached the kernel, where probes/flashinfer/tables/cases.py NO_KERNEL says "
                            f"upstream has none: drop the release from NO_KERNEL")
    elif not reached:
        first = next(iter(patched.values()))["eager"]["error"]
        problems.append(f"{where}: no case reached the kernel, every eager call raised (first: {first[0]}: "
                        f"{first[1][:200]})")
    return problems


def _family(gpu: str) -> str:
    """The GPU NO_KERNEL (probes/flashinfer/tables/cases.py) names for this one: upstream's JIT modules ask the major alone
    (supported_major_versions=[10, 12]), so SM121 has a kernel where SM120 has one."""
    major = gpu.split(".")[0]
    return "12.0" if major == "12" else gpu


def shape_problems(release: str, shapes: dict[str, Any]) -> list[str]:
    """Every call, a case of probes/flashinfer/tables/cases.py at some rank, whose fake gives other outputs than upstream's
    wrapper (with a no-op kernel) where the wrapper accepts it: the compiled graph would be built on a
    shape the run does not return. A call upstream refuses is the trace ladder's to hold."""
    if "crash" in shapes:
        return [f"{release}: the fake-shape probe crashed: {str(shapes['crash'])[-800:]}"]
    problems = []
    for gpu in (f"{g[0]}.{g[1]}" for g in TRACE_GPUS):
        found = shapes.get(gpu, {})
        if "crash" in found:  # one GPU's child died (a case table that refuses the release, say)
            problems.append(f"{release}: sm{gpu.replace('.', '')}: the fake-shape probe crashed: "
                            f"{str(found['crash'])[-800:]}")
            continue
        for name, runs in found.items():
            for case, run in runs.items():
                wrapper, fake = run["wrapper"], run["fake"]
                if isinstance(wrapper, dict) or fake == "upstream" or fake == wrapper:
                    continue  # upstream refuses; the op does not take it (upstream's path); the same
                base = runs.get(case.rsplit("@", 1)[0] + "@" + _rank_of(runs, case))
                if isinstance(fake, dict) and base is not None and isinstance(base["fake"], dict):
                    continue  # the fake cannot run this row at any rank (a host value it reads back)
                problems.append(f"{release}: sm{gpu.replace('.', '')}: {name} [{case}]: the fake gives {fake}, "
                                f"upstream's wrapper {wrapper}: upstream's shape rule for this input changed; "
                                f"port it into the overlay's fakes.py (a named release constant), then refresh again")
    return problems


def _rank_of(runs: dict[str, Any], case: str) -> str:
    """The rank the row itself is written at (the first of its variants probes/flashinfer/fake_shapes.py lists)."""
    row = case.rsplit("@", 1)[0]
    return next((c.rsplit("@", 1)[1] for c in runs if c.rsplit("@", 1)[0] == row), "")


def upstream_fails(ladder: dict[str, Any], name: str) -> dict[str, dict[str, Any] | None]:
    """For the upstream tree, per GPU: the first case's compile error, as the probe summed it up
    (kind, reason, explanation, dynamo's user stack); None: it compiled."""
    out: dict[str, dict[str, Any] | None] = {}
    base = _base_gpus(ladder["upstream"])
    for gpu in (g for g in kernel_gpus(name, base) if g in ladder["upstream"]):  # where upstream refuses
        # before any kernel, no loader is reached
        runs = ladder["upstream"][gpu].get(name, {})
        first = next((run for run in runs.values() if "compiled" in run), None)  # upstream compiles one case
        out[gpu] = None if first is None or "compiled" not in first else first["compiled"].get("error")
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

    flashinfer-python, cheapest first: every public function that reaches a kernel loader
    classified by the serving-API audit (else only that is said: a person first), the audits read
    from the release's text (every CUDA-version call site classified, upstream's own lookups
    unchanged), then, if they pass, the CUDA-version grid and the trace ladder of every routed entry
    point the release has. Other distributions: the build alone (their behaviour is checked by the
    tests of the stacks they belong to).
    """
    if target.dist == "flashinfer-python":
        # A public function that reaches a kernel loader and that the serving-API audit does not classify:
        # the ladder knows nothing of it, so nothing below could judge the port; a person first.
        new = _new_api_problems(target, patches_dir, overlay_dir, source, audit or patches_dir)
        if new:
            return new
    options = build.Options(patches_dir, overlay_dir, workdir / "dist", source)
    try:
        (built,) = build.build_targets([target], dataclasses.replace(options, source=dataclasses.replace(
            source, all_platforms=False)))
    except OverlayError as exc:
        return [f"{target}: the ported series does not build: {exc}"]
    if target.dist != "flashinfer-python":
        return []
    pinned = load_upstream(patches_dir, target)
    pin = next(w for w in pinned.wheels if w.filename == built.upstream_filename)
    upstream_wheel = fetch.upstream_wheel(pinned, pin, source)
    problems = _audit_problems(target, upstream_wheel, audit or patches_dir)
    if problems:  # the text already refuses the port: no need to probe it (the probes take a minute)
        return [*problems, f"{target}: the CUDA grid and the trace ladder were not run: the audits above refuse first"]
    upstream, patched = oracle.release_sides(target.version, pin.sha256, patches_dir, overlay_dir, target.dist,
                                             lambda: unpack(upstream_wheel, workdir / "upstream"),
                                             lambda: unpack(built.wheel, workdir / "patched"))
    # The same cache as the tests': a release probed once is not probed again for the same inputs.
    checks = oracle.Oracle(oracle.Results(source.cache_dir / "oracle"), workdir / "toolkits")
    problems += grid_problems(target.version, checks.grid(upstream, patched))
    ladder = checks.ladder(upstream, patched, ROUTED_CANDIDATES, quick=quick)
    problems += trace_problems(target.version, ladder, routed(ladder))
    # Every row at every rank, fake against upstream's wrapper, also under --quick: no trace, seconds.
    problems += shape_problems(target.version, checks.shapes(patched, ROUTED_CANDIDATES))
    if problems:  # the explored space is the dearest check: a port refused already is refused
        return problems
    # Sizes around every constant of each wrapper's shape code, every optional parameter in each state,
    # the result's exact type (oracle/explored.py); under --quick the first row on the first GPU.
    return explored.problems(target.version, explored.explore(upstream, patched, ROUTED_CANDIDATES,
                                                              results=checks.results, quick=quick))


def routed(ladder: dict[str, Any]) -> list[str]:
    """The entry points the overlay routes (its entries.py, as the patched tree has it) that the ladder
    holds it to: FlashInfer's own compile list (its compile_list.py) is the compile-list probe's
    (oracle/compile_table.py)."""
    return [name for name in ladder["patched"].get("routed", []) if name not in COMPILE_LIST]


def _new_api_problems(target: Target, patches_dir: Path, overlay_dir: Path, source: fetch.Source,
                      audit: Path) -> list[str]:
    """New API the audit does not classify; a function the overlay routes is not new (the ladder holds it,
    and `make audit-api` records it once the release is carried: carry/refresh.py's _no_new_api)."""
    from ..audit import api_audit, api_rules, new_apis, routes

    pinned = load_upstream(patches_dir, target)
    pin = pinned.wheels[0]  # the public API is the same in each wheel of a release (pure Python)
    routed_here = routes.routed_names(overlay_dir)
    with WheelReader(fetch.upstream_wheel(pinned, pin, source)) as reader:
        found = new_apis(lambda n: reader.read(n) if n in reader.infos else None, sorted(reader.infos),
                         api_audit.load_audit(audit), source.scans_dir)
    return [f"{target}: {api_audit.problem(target.version, fn, audit)}" for fn in found
            if not api_rules.is_routed(fn.key, routed_here)]


def _audit_problems(target: Target, upstream: Path, patches_dir: Path) -> list[str]:
    from ..audit import cuda_audit

    with WheelReader(upstream) as reader:
        files = {n: reader.read(n).decode("utf-8", "replace") for n in reader.infos
                 if n.endswith(".py") and not n.startswith("flashinfer/data/")}
    changed = [f"{target}: {problem}" for problem in cuda_audit.lookup_changes(files)]
    audit = cuda_audit.load_audit(patches_dir)
    missing = cuda_audit.unclassified_in(files, audit)
    return changed + [f"{target}: {cuda_audit.new_call_problem(s, audit, patches_dir)}" for s in missing]
