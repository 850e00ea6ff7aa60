"""The SGLang region audit: which FlashInfer functions each compiled region calls raw, and what remains raw per stack.

patches/sglang/audit-regions.json holds, per SGLang release and tree (``upstream``; ``patched``
where a series carries the release), per region (probes/sglang/sglang_drivers.py) and GPU, what the region
probe found: either ``{"absent": why}`` or a cell

- ``calls``: the FlashInfer functions the region enters, in order, each with the scalar arguments
  it binds, its call site and ``upstream``: ``fails`` (dynamo gives up inside it, upstream),
  ``traces`` (dynamo traces it through), or ``null`` (no upstream run got that far; a run with the
  patched FlashInfer did, past the calls before it);
- ``sglang_break``: where SGLang's own code stops ``fullgraph=True`` (a first line), if it does;
- ``frontier``: ``null`` when some run traced the region to its end, else where every run stopped
  (``flashinfer`` in the last call, ``sglang`` in SGLang's code): what follows is not known yet.

A call is routed by a patched FlashInfer when its overlay's ENTRIES has the function and each
parameter the entry routes on holds a routed value (``read_routes`` reads ENTRIES from a patched
tree). The calls that remain raw under a stack are the others that do not trace through. Pure,
but for reading the committed files and a tree's entries.py.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..formats import read_json, read_toml
from .sglang_reach import Unreached, unreached

AUDIT = "audit-regions.json"
CLAIMS = "stack-claims.toml"
GPUS = ("sm120", "sm100")
ENTRIES_PY = "flashinfer/_nvfp4_overlay/entries.py"
Routes = Mapping[str, Mapping[str, Sequence[Any]]]
CALL_KEYS = ("function", "module", "args", "site")


def load_table(patches_dir: Path) -> dict[str, Any]:
    path = patches_dir / "sglang" / AUDIT
    table: dict[str, Any] = read_json(path, what="the SGLang region audit",
                                      missing="write it with `make sglang-regions-table`",
                                      fix="write it anew with `make sglang-regions-table`")
    return table


def load_claims(patches_dir: Path) -> dict[str, frozenset[str]]:
    """patches/sglang/stack-claims.toml: stack -> the regions its patched wheels keep whole."""
    path = patches_dir / "sglang" / CLAIMS
    data = read_toml(path, missing="restore it from git: it lists, per stack, `covers = [regions]`")
    return {name: frozenset(table.get("covers", [])) for name, table in data.get("stacks", {}).items()}


def read_routes(tree: Path) -> dict[str, dict[str, list[Any]]] | None:
    """ENTRIES of the patched FlashInfer unpacked at tree (None: no overlay there, an upstream tree).

    entries.py is run as it is, with a stand-in for the fakes module it imports (its functions are
    only referenced there) and its codecs.py and results.py beside it, so no torch is needed: entry point -> parameter -> the routed values.
    Run in this process: name only this checkout's overlay or a tree this tool built from it, never an
    environment under examination (doctor reads the routes from the overlay it held the install to:
    operate/doctor.py installed_routes).
    """
    path = tree / ENTRIES_PY
    if not path.is_file():
        return None
    package = types.ModuleType("_nvfp4_overlay_entries")
    package.__path__ = [str(path.parent)]  # its own codecs.py and results.py (standard library only) import
    package.fakes = _Anything()  # type: ignore[attr-defined]
    module = types.ModuleType(f"{package.__name__}.entries")
    module.__package__ = package.__name__
    sys.modules[package.__name__], sys.modules[module.__name__] = package, module
    try:  # dont_inherit: this module's `from __future__ import annotations` is not entries.py's
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec", dont_inherit=True), vars(module))
    finally:
        for name in [n for n in sys.modules if n == package.__name__ or n.startswith(f"{package.__name__}.")]:
            del sys.modules[name]
    entries = vars(module)["ENTRIES"]
    return {name: {param: sorted(values, key=repr) for param, values in entry.routes.items()}
            for name, entry in sorted(entries.items())}


class _Anything:
    def __getattr__(self, name: str) -> str:
        return name


# --- the verdict ----------------------------------------------------------------------------------


def routed(call: Mapping[str, Any], routes: Routes | None) -> bool:
    """Whether the patched FlashInfer turns this call into its opaque op."""
    entry = (routes or {}).get(call["function"])
    if entry is None:
        return False
    args = call.get("args", {})
    return all(args[param] in values for param, values in entry.items() if param in args)


def remaining(cell: Mapping[str, Any], routes: Routes | None) -> list[str]:
    """What still breaks fullgraph in the region under a FlashInfer with these routes (empty: nothing
    known): the raw calls, in order, then SGLang's own break, then the frontier if one is left."""
    if "absent" in cell:
        return []
    out = [describe(c) for c in cell["calls"] if c.get("upstream") != "traces" and not routed(c, routes)]
    if cell.get("sglang_break"):
        out.append(f"SGLang's own code: {cell['sglang_break']}")
    elif cell.get("frontier") and not out:
        out.append("not known past the last call (no run traced further)")
    return out


def describe(call: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in call.get("args", {}).items() if k in _SHOWN_ARGS}
    args = ", ".join(f"{k}={v!r}" for k, v in shown.items())
    return f"{call['module']}.{call['function']}({args}) at {call['site']}"


# The arguments worth naming in a sentence (they decide a route); the table keeps them all.
_SHOWN_ARGS = ("backend", "per_token_activation", "do_shuffle", "batch_invariant")


def cells(table: Mapping[str, Any], release: str, tree: str) -> dict[str, Any]:
    """region -> {"absent": why} or {gpu: cell} for one release and SGLang tree of the table."""
    try:
        found: dict[str, Any] = table["releases"][release]["sglang"][tree]
    except KeyError as exc:
        msg = f"patches/sglang/{AUDIT}: no {tree} SGLang tree of {release}"
        raise ConfigError(msg, item=f"{release}/{tree}",
                          fix="write the table anew with `make sglang-regions-table`") from exc
    return found


def stack_remaining(table: Mapping[str, Any], release: str, carried: bool, routes: Routes | None,
                    reach: Sequence[Unreached] = ()) -> dict[str, dict[str, list[str]]]:
    """For the stack of an SGLang release (its patched SGLang if carried, with a FlashInfer of these
    routes): region -> GPU -> what remains raw; regions with nothing left are left out, and so are the
    regions `reach` says no compiled region of the release reaches (without it: what the trace shows)."""
    out: dict[str, dict[str, list[str]]] = {}
    for region, by_gpu in cells(table, release, "patched" if carried else "upstream").items():
        if "absent" in by_gpu or unreached(reach, release, region):
            continue
        left = {gpu: remaining(cell, routes) for gpu, cell in by_gpu.items()}
        if any(left.values()):
            out[region] = {gpu: calls for gpu, calls in left.items() if calls}
    return out


# --- the table, from the probe's runs ----------------------------------------------------------------


def cell_from_runs(upstream: Mapping[str, Any], patched: Mapping[str, Any]) -> dict[str, Any]:
    """One region on one GPU, from its runs with the upstream and the patched FlashInfer (same SGLang)."""
    if "absent" in upstream or "absent" in patched:
        return {"absent": upstream.get("absent") or patched.get("absent")}
    for kind, run in (("upstream", upstream), ("patched", patched)):
        if "ok" not in run:
            what = run.get("setup_error") or run.get("crash") or str(run)
            msg = f"with the {kind} FlashInfer the region probe could not build or trace the region: {what[-2500:]}"
            raise ConfigError(msg)
    seen = [dict(c) for c in patched["calls"]]
    if len(upstream["calls"]) > len(seen):
        seen = [dict(c) for c in upstream["calls"]]
    calls = []
    for i, call in enumerate(seen):
        theirs = upstream["calls"][i] if i < len(upstream["calls"]) else None
        outcome = None if theirs is None else {"failed": "fails", "traced": "traces"}.get(theirs["outcome"], "fails")
        calls.append({**{k: call[k] for k in CALL_KEYS}, "upstream": outcome})
    furthest = patched if len(patched["calls"]) >= len(upstream["calls"]) else upstream
    broke = _sglang_break(furthest)
    frontier = None
    if not (upstream["ok"] or patched["ok"]):
        frontier = "sglang" if broke else "flashinfer"
    return {"calls": calls, "sglang_break": broke, "frontier": frontier}


def _sglang_break(run: Mapping[str, Any]) -> str | None:
    """The first line of a run's error when it stopped outside every FlashInfer call (in SGLang's code)."""
    if run["ok"] or any(c["outcome"] == "failed" for c in run["calls"]):
        return None
    lines = [line.strip() for line in run.get("error", "").splitlines() if line.strip()]
    why = next((line.removeprefix("Explanation: ") for line in lines if line.startswith("Explanation: ")), "")
    where = [line for line in lines if line.startswith("File ") and "/sglang/" in line]
    site = where[-1].split("/sglang/", 1)[-1].replace('", line ', ":").split(",")[0] if where else "?"
    head = lines[0] if lines else "?"
    return f"{head}{': ' + why[:160] if why else ''} (sglang/{site})"


# --- observed runs against the table and a FlashInfer's routes --------------------------------------


def upstream_problems(cell: Mapping[str, Any], run: Mapping[str, Any]) -> list[str]:
    """How a run with the upstream FlashInfer disagrees with the table (upstream stack, or the patched SGLang)."""
    return _defects("upstream", cell, run) or ([] if "absent" in cell else _upstream_problems(cell, run))


def patched_problems(cell: Mapping[str, Any], run: Mapping[str, Any], routes: Routes | None) -> list[str]:
    """How a run with the patched FlashInfer disagrees with the table and what its routes make of it."""
    return _defects("patched", cell, run) or ([] if "absent" in cell else _patched_problems(cell, run, routes))


def _defects(kind: str, cell: Mapping[str, Any], run: Mapping[str, Any]) -> list[str]:
    if "absent" in cell:
        return [] if run.get("absent") == cell["absent"] else [
            f"the table says absent ({cell['absent']}); with the {kind} FlashInfer the probe found "
            f"{run.get('absent') or 'the region'}"]
    if "ok" not in run:
        return [f"with the {kind} FlashInfer the region did not trace: {str(run)[-1200:]}"]
    permissive = [s for s in run["stand_ins"] if s.split(".")[0] in ("_StubMeta", "Stub", "StubModule")]
    if permissive:
        return [f"with the {kind} FlashInfer the region traced into stand-ins of absent modules {permissive}"]
    return []


def _same(observed: Mapping[str, Any], known: Mapping[str, Any]) -> bool:
    return all(observed[k] == known[k] for k in CALL_KEYS)


def _upstream_problems(cell: Mapping[str, Any], run: Mapping[str, Any]) -> list[str]:
    known = cell["calls"]
    problems = [f"upstream call {i + 1}: {describe(c)} ({c['outcome']}), the table has "
                f"{describe(known[i]) if i < len(known) else 'no more calls'}"
                for i, c in enumerate(run["calls"])
                if i >= len(known) or not _same(c, known[i]) or known[i]["upstream"] != _outcome(c)]
    fails = next((c for c in known if c["upstream"] == "fails"), None)
    if run["ok"] and (fails or cell["sglang_break"]):
        problems.append("the upstream stack compiles with fullgraph=True; the table says it fails "
                        f"({describe(fails) if fails else cell['sglang_break']})")
    elif not run["ok"] and not fails and not cell["sglang_break"] and not cell["frontier"]:
        problems.append(f"the upstream stack fails ({run['error'][:300]}); the table says it compiles")
    return problems


def _outcome(call: Mapping[str, Any]) -> str:
    return "traces" if call["outcome"] == "traced" else "fails"


def _patched_problems(cell: Mapping[str, Any], run: Mapping[str, Any], routes: Routes | None) -> list[str]:
    observed, known = run["calls"], cell["calls"]
    for i, call in enumerate(known):
        if i >= len(observed):
            return [f"the patched stack stopped before {describe(call)}: {run.get('error', 'it compiled')[:300]}"]
        if not _same(observed[i], call):
            return [f"patched call {i + 1}: {describe(observed[i])}, the table has {describe(call)}"]
        expected = "opaque" if routed(call, routes) else "traced" if call["upstream"] == "traces" else "failed"
        if observed[i]["outcome"] != expected:
            return [f"{describe(call)}: the patched FlashInfer's routes say {expected}, the probe saw "
                    f"{observed[i]['outcome']}"]
        if expected == "failed":
            return [] if not run["ok"] and i == len(observed) - 1 else [f"the patched stack went on past {describe(call)}"]
    new = observed[len(known):]
    if cell["sglang_break"]:
        return [] if not run["ok"] and not new else [f"the patched stack does not stop at {cell['sglang_break']}"]
    if not cell["frontier"]:
        return [] if run["ok"] and not new else [f"the patched stack fails where the table says it compiles: "
                                                 f"{run.get('error', '')[:300]}"]
    if run["ok"] and all(c["outcome"] == "opaque" for c in new):
        return []  # it now traces past the table's frontier: more is known than the table says
    past = describe(new[0]) if new else run.get("error", "")[:300]
    return [f"past the table's last call the patched stack meets {past}: the table is out of date there; "
            f"write it anew with `make sglang-regions-table`"]


def release_entry(flashinfer: str, results: Mapping[str, Any]) -> dict[str, Any]:
    """A release's part of the table from probe_release's results ({sglang: {flashinfer: {gpu: report}}})."""
    entry: dict[str, Any] = {"flashinfer": flashinfer, "sglang": {}, "stand_ins": {}}
    for tree, by_flashinfer in sorted(results.items()):
        upstream, patched = by_flashinfer["upstream"], by_flashinfer["patched"]
        regions: dict[str, Any] = {}
        for region in upstream[GPUS[0]]["regions"]:
            by_gpu = {}
            for gpu in GPUS:
                try:
                    by_gpu[gpu] = cell_from_runs(upstream[gpu]["regions"][region], patched[gpu]["regions"][region])
                except ConfigError as exc:
                    msg = f"{tree} SGLang, {region}, {gpu}: {exc}"
                    raise ConfigError(msg, item=f"{tree}/{region}/{gpu}") from exc
            absent = {c.get("absent") for c in by_gpu.values()}
            regions[region] = by_gpu[GPUS[0]] if len(absent) == 1 and None not in absent else by_gpu
        entry["sglang"][tree] = regions
        for report in (*upstream.values(), *patched.values()):
            entry["stand_ins"].update(report.get("stubbed", {}))
    entry["stand_ins"] = dict(sorted(entry["stand_ins"].items()))
    return entry


def version_key(version: str) -> tuple[int, ...]:
    from packaging.version import Version

    return tuple(Version(version).release) + ((Version(version).post or 0),)
