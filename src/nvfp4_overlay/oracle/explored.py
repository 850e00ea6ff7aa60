"""The explored space: every routed entry point's fake held to upstream's wrapper beyond the case table.

probes/flashinfer/fake_space.py answers each explored call (probes/flashinfer/tables/space.py: sizes around
every constant the wrapper's shape code uses, powers of two to 16k and odd sizes, every optional
parameter in each state) on one side: upstream's wrapper, eagerly on the upstream tree (a fact about
the wheel, kept in the result cache under its key like the ladder's upstream half), and the fake, on
the patched tree, for the calls upstream accepts. ``explore`` computes both halves, ``problems``
judges them: a call whose fake gives other than upstream's wrapper (a shape, a stride, a dtype, the
result's class, its fields, its arity) refuses the release, naming the entry point, the call and
both answers; so does a fake that leaves a fake tensor or a stand-in kernel behind in FlashInfer's
state. ``quick`` (refresh --quick, and make test's releases but the newest) explores the first row
of each entry point on the first GPU; the full space every row on every GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .oracle import TRACE_GPUS, Results, Side, gpu_keys, key_of
from .probe_runner import run_probe

PROBE = "fake_space"
SHOWN = 4  # the disagreements named per entry point and GPU; the others are counted


def plan(entries: Sequence[str], side: str, *, quick: bool,
         accepted: dict[str, Any] | None = None) -> dict[str, Any]:
    gpus = TRACE_GPUS[:1] if quick else TRACE_GPUS
    found: dict[str, Any] = {"entries": list(entries), "gpus": [list(g) for g in gpus], "side": side, "quick": quick}
    return {**found, "accepted": accepted} if accepted is not None else found


def explore_for(side: Side, entries: Sequence[str], *, results: Results, quick: bool,
                accepted: dict[str, Any] | None = None) -> dict[str, Any]:
    """One side's answers: upstream's wrapper on an upstream tree, the fake on a patched one."""
    which = "wrapper" if side.kind == "upstream" else "fake"
    asked = plan(entries, which, quick=quick, accepted=accepted)

    def compute() -> dict[str, Any]:
        found: dict[str, Any] = run_probe(PROBE, {**asked, "trees": [{"key": "tree", "path": str(side.tree())}]})["tree"]
        return found

    result: dict[str, Any] = results.computed(PROBE, side, key_of(PROBE, side, asked), compute)
    return result


def explore(upstream: Side, patched: Side, entries: Sequence[str], *, results: Results,
            quick: bool) -> dict[str, Any]:
    """Both halves: upstream's first, the fake then asked only the calls upstream accepts."""
    theirs = explore_for(upstream, entries, results=results, quick=quick)
    if "crash" in theirs:
        return {"upstream": theirs, "patched": {}}
    return {"upstream": theirs,
            "patched": explore_for(patched, entries, results=results, quick=quick, accepted=accepted(theirs))}


def accepted(wrapper: dict[str, Any]) -> dict[str, Any]:
    """Per GPU and entry point, the calls upstream's wrapper answers without refusing."""
    return {gpu: {name: [call for call, answer in runs["calls"].items() if not _refused(answer)]
                  for name, runs in wrapper[gpu].items()} for gpu in gpu_keys(wrapper) if "crash" not in wrapper[gpu]}


def problems(release: str, explored: dict[str, Any]) -> list[str]:
    """Every explored call whose fake differs from upstream's wrapper, and what the fakes left behind."""
    upstream, patched = explored["upstream"], explored["patched"]
    for kind, side in (("upstream", upstream), ("patched", patched)):
        if "crash" in side:
            return [f"{release}: the explored space's {kind} probe crashed: {str(side['crash'])[-800:]}"]
    found = []
    for gpu in gpu_keys(upstream):
        crashed = [(kind, side[gpu]["crash"]) for kind, side in (("upstream", upstream), ("patched", patched))
                   if "crash" in side.get(gpu, {})]
        if crashed:  # a GPU's child that crashed answers nothing to compare: the crash is the problem
            found += [f"{release}: sm{gpu.replace('.', '')}: the explored space's {kind} probe crashed: "
                      f"{str(crash)[-800:]}" for kind, crash in crashed]
            continue
        for name in patched.get("entries", []):
            theirs, ours = upstream[gpu].get(name), patched.get(gpu, {}).get(name)
            where = f"{release}: sm{gpu.replace('.', '')}: {name}"
            if theirs is None or ours is None:
                found.append(f"{where}: not explored on both sides (upstream's wrapper: {theirs is not None}, "
                             f"the fake: {ours is not None})")
                continue
            found += _entry_problems(where, theirs, ours)
    return found


def _entry_problems(where: str, theirs: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    derived = ours.get("derived", False)
    differ = [(call, ours["calls"].get(call, "not asked"), answer) for call, answer in theirs["calls"].items()
              if not _refused(answer) and ours["calls"].get(call) not in ("upstream", answer)]
    fix = ("the overlay's faking.py stands in for something this path reads back: give the entry point a "
           "hand-written fake (entries.py says how) or teach faking.py" if derived else
           "upstream's shape rule for this input changed; port it into the overlay's fakes.py (a named release "
           "constant), then refresh again")
    found = [f"{where} [{call}]: the fake gives {fake}, upstream's wrapper {wrapper}: {fix}"
             for call, fake, wrapper in differ[:SHOWN]]
    if len(differ) > SHOWN:
        found.append(f"{where}: and {len(differ) - SHOWN} more explored calls whose fake differs from upstream's wrapper")
    found += [f"{where}: the fakes left {left}: a derived fake must leave FlashInfer's state as it found it "
              "(faking.py)" for left in ours.get("left", [])]
    return found


def _refused(answer: Any) -> bool:
    return isinstance(answer, dict) and "error" in answer
