"""FlashInfer's own compile list per release: the probe's runs (cached), their verdicts, the committed table and its docs.

``nvfp4-overlay generate compile-list [RELEASE...]`` runs the compile-list probe
(probes/flashinfer/compile_list.py) on the upstream and the patched tree of each carried
flashinfer-python release (default: all) and writes their verdicts into
patches/flashinfer-python/audit-compile-list.json; ``generate compile-list-docs [--check]`` renders docs/compile-list.md's
table from it (``--check``: writes nothing, exit 1 if the committed document differs). Each run is
kept in the result cache under its inputs (oracle.Results, as the trace ladder's), so the tests and
the table read the same runs.

A function's verdict on a side: how many of its cases compiled (every call ran a compiled graph with
one opaque op per call, no process started and no FlashInfer file opened while dynamo traced), and
where the first that did not broke: the innermost frame of the wheel's own code and what dynamo
gave up on there (a builtin, the kernel's foreign function, a refusal).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..formats import render_between
from ..probes.flashinfer.tables import compile_cases
from .oracle import Results, Side, eager_digest, key_of, release_sides
from .probe_runner import run_probe

PROBE = "compile_list"
GPU = (9, 0)  # the GPU the device lends: SM90 runs every function of the list
AUDIT = "audit-compile-list.json"  # under patches/flashinfer-python/
BEGIN, END = "<!-- audit:compile-list", "<!-- /audit:compile-list -->"


def compile_plan() -> dict[str, Any]:
    return {"functions": compile_cases.every_name(), "gpu": list(GPU)}


def runs_for(side: Side, wheel: Path, *, results: Results) -> dict[str, Any]:
    """One tree through the probe, compact (what the verdicts and the tests read), kept under its key.

    `wheel` is the release's upstream wheel: the probe reads the attention templates the trees leave
    out from it (no series touches flashinfer/data/)."""
    plan = compile_plan()

    def compute() -> dict[str, Any]:
        found = run_probe(PROBE, {**plan, "trees": [{"key": "tree", "path": str(side.tree()), "wheel": str(wheel)}]})
        return compact(found["tree"])

    result: dict[str, Any] = results.computed(PROBE, side, key_of(PROBE, side, plan), compute)
    return result


def compact(tree: Mapping[str, Any]) -> dict[str, Any]:
    """The probe's result without the launches' arguments (a digest of each eager and compiled call)."""
    if "crash" in tree:
        return dict(tree)
    out: dict[str, Any] = {"version": tree["version"], "warnings": tree["warnings"], "functions": {}}
    for name, found in tree["functions"].items():
        if "cases" not in found:
            out["functions"][name] = found
            continue
        cases = {}
        for case, run in found["cases"].items():
            compiled = dict(run["compiled"])
            if "error" in compiled:
                compiled["error"] = {k: compiled["error"][k] for k in ("kind", "reason", "explanation", "stack")}
            else:
                compiled["digest"] = eager_digest(compiled)
                del compiled["launches"]
            cases[case] = {"eager": {**({"outputs": run["eager"]["outputs"]} if "outputs" in run["eager"] else {}),
                                     "digest": eager_digest(run["eager"])}, "compiled": compiled}
        out["functions"][name] = {**{k: v for k, v in found.items() if k != "cases"}, "cases": cases}
    return out


# --- verdicts -----------------------------------------------------------------------------------------

def case_compiled(run: Mapping[str, Any]) -> bool:
    """Every call of the case ran a compiled graph holding one opaque op per call, nothing of the
    wheel's I/O happened while dynamo traced, and the graph's outputs as the trace saw them (the
    op's fake) are the tensors upstream's wrapper returned eagerly (shape, stride, dtype)."""
    compiled = run["compiled"]
    if "error" in compiled:
        return False
    counts = compiled["counts"]
    return (counts["calls"] > 0 and counts["compiled_runs"] == counts["calls"] and counts["uncompiled"] == 0
            and counts["opaque_ops"] == counts["calls"] and not compiled["trace_events"]
            and compiled["fake_outputs"] == tensors(run["eager"].get("outputs")))


def tensors(described: Any) -> list[Any]:
    """The tensors of a described result (recording.describe), flat, in order."""
    if isinstance(described, list) and described[:1] == ["tensor"]:
        return [described]
    if isinstance(described, list) and described[:1] != ["value"]:
        return [t for item in described for t in tensors(item)]
    return []


def breaks_at(run: Mapping[str, Any]) -> str:
    """Where a case that did not compile broke: the wheel's innermost frame and what dynamo gave up on;
    or, for one that compiled something else than one opaque op per call, what it did."""
    compiled = run["compiled"]
    if "error" not in compiled:
        counts = compiled["counts"]
        if compiled["trace_events"]:
            return f"compiled, with the wheel's I/O while tracing ({compiled['trace_events'][0][0]})"
        if counts["opaque_ops"] == counts["calls"] == counts["compiled_runs"] and counts["uncompiled"] == 0:
            return "compiled; the fake's outputs differ from upstream's wrapper's"
        return f"compiled {counts['compiled_runs']} of {counts['calls']} calls, {counts['opaque_ops']} opaque ops"
    error = compiled["error"]
    functions = [f.rsplit(":", 1)[1] for f in error["stack"] if not f.startswith("<outside>/")]
    where = functions[-1] if functions else "outside the wheel"
    loader = next((f for f in functions if _LOADER.match(f)), None)  # the JIT loader the trace went into
    return f"{loader + ' > ' if loader and loader != where else ''}{where}: {_gave_up_on(error)}"


_LOADER = re.compile(r"(get|gen)_\w*module$")


def _gave_up_on(error: Mapping[str, Any]) -> str:
    text = str(error["explanation"])
    if "torch.compiler.disable" in text:
        return "the kernel (foreign code)"
    for marker in ("builtin `", "builtin operator `"):
        if marker in text:
            return text.split(marker, 1)[1].split("`", 1)[0].rstrip(".")
    return str(error["reason"])


def verdict(name: str, found: Mapping[str, Any], by_design: bool = True) -> dict[str, Any]:
    """One function on one side: {"absent": True}, or its cases, those compiled, where the first other
    broke, and each case's eager call as a digest (the patched wheel's is upstream's where nothing changed)."""
    if found.get("missing"):
        return {"absent": True}
    eager_only_cases = compile_cases.EAGER_ONLY_CASES.get(name, {}) if by_design else {}
    runs = {case: run for case, run in found["cases"].items() if case not in eager_only_cases}
    refused = [c for c, r in runs.items() if "digest" in r["eager"] and "outputs" not in r["eager"]]
    out: dict[str, Any] = {"cases": len(runs), "compiled": sum(case_compiled(r) for r in runs.values()),
                           "eager": {case: run["eager"]["digest"] for case, run in found["cases"].items()}}
    eager_only = {case: eager_only_cases[case] for case in found["cases"] if case in eager_only_cases}
    if eager_only:
        out["eager_only"] = eager_only
    if refused:
        out["eager_refused"] = len(refused)
    first = next((r for r in runs.values() if not case_compiled(r)), None)
    if first is not None:
        out["breaks"] = breaks_at(first)
    return out


def release_entry(upstream: Mapping[str, Any], patched: Mapping[str, Any]) -> dict[str, Any]:
    # the cases the overlay leaves upstream's path by design are named apart on the patched side;
    # upstream's verdict counts every case
    return {side: {name: verdict(name, found, side == "patched") for name, found in runs["functions"].items()}
            for side, runs in (("upstream", upstream), ("patched", patched))}


# --- the committed table and docs/compile-list.md -------------------------------------------------------


def load_table(patches_dir: Path) -> dict[str, Any]:
    path = patches_dir / "flashinfer-python" / AUDIT
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"gpu": ".".join(map(str, GPU)),
                                                                                "releases": {}}


def verdict_text(cell: Mapping[str, Any]) -> str:
    if cell.get("absent"):
        return "absent"
    text = f"{cell['compiled']}/{cell['cases']} compiled" if cell["cases"] else "no case routes"
    if cell.get("eager_refused"):
        text += f" ({cell['eager_refused']} refused eagerly on the CPU)"
    if "breaks" in cell:
        text += f"; breaks in {cell['breaks']}"
    reasons = sorted(set(cell.get("eager_only", {}).values()))
    if reasons:
        text += f"; {len(cell['eager_only'])} eager-only: {'; '.join(reasons)}"
    return text


def markdown(table: Mapping[str, Any]) -> str:
    """Per function, runs of releases alike: the upstream wheel's verdict and the patched wheel's."""
    from packaging.version import Version

    releases = sorted(table["releases"], key=Version)
    rows = ["| group | function | releases | upstream | patched |", "| --- | --- | --- | --- | --- |"]
    for group, names in compile_cases.COMPILE_LIST.items():
        for name in names:
            runs: list[tuple[tuple[str, str], list[str]]] = []
            for release in releases:
                sides = table["releases"][release]
                texts = tuple(verdict_text(sides[s].get(name, {"absent": True})) for s in ("upstream", "patched"))
                if name in compile_cases.EAGER_ONLY and texts[1] != "absent":
                    texts = (texts[0], f"eager-only, {compile_cases.EAGER_ONLY[name]}: {texts[1]}")
                if runs and runs[-1][0] == texts:
                    runs[-1][1].append(release)
                else:
                    runs.append((texts, [release]))  # type: ignore[arg-type]
            for (up, ours), span in runs:
                releases_text = span[0] if len(span) == 1 else f"{span[0]}–{span[-1]}"
                rows.append(f"| {group} | `{name}` | {releases_text} | {_cell(up)} | {_cell(ours)} |")
    return "\n".join(rows) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def compile_safe(table: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Runs of releases alike: the functions of the list that compile on the patched wheel (every case
    that routes), and those that stay eager-only with why (the wrappers, sampling from a host
    generator), as `list` prints them; read from the committed table and the case table."""
    from packaging.version import Version

    runs: list[dict[str, Any]] = []
    for release in sorted(table["releases"], key=Version):
        safe, eager_only = [], {}
        for name, cell in table["releases"][release]["patched"].items():
            if cell.get("absent"):
                continue
            why = compile_cases.EAGER_ONLY.get(name)
            if why is None and not cell["cases"]:  # no case routes in this release: sampling before 0.6.4
                why = sorted(set(cell.get("eager_only", {}).values()))[0] + " (before 0.6.4 seed and offset are host ints)"
            if why is not None:
                eager_only[name] = why
            elif cell["compiled"] == cell["cases"]:
                safe.append(name)
        if runs and (runs[-1]["compile_safe"], runs[-1]["eager_only"]) == (sorted(safe), eager_only):
            runs[-1]["releases"].append(release)
        else:
            runs.append({"releases": [release], "compile_safe": sorted(safe), "eager_only": eager_only})
    return runs


def render_into(document: str, table: Mapping[str, Any]) -> str:
    return render_between(document, BEGIN, END, markdown(table), "the compile-list table")


def release_runs(patches_dir: Path, overlay_dir: Path, release: str, cache: Path,
                 work: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(upstream's runs, the patched wheel's) of a release, from the result cache or probed (the trees under work)."""
    from ..patch import Target, load_upstream
    from ..wheel import build, fetch
    from .probe_runner import unpack

    source = fetch.Source(cache)
    target = Target("flashinfer-python", release)
    upstream = load_upstream(patches_dir, target)
    (pin,) = fetch.select_wheels(upstream, source)
    wheel = fetch.upstream_wheel(upstream, pin, source)

    def patched_tree() -> Path:
        (built,) = build.build_targets([target], build.Options(patches_dir, overlay_dir, work / "dist", source))
        return unpack(built.wheel, work / "patched")

    up, ours = release_sides(release, pin.sha256, patches_dir, overlay_dir, "flashinfer-python",
                             lambda: unpack(wheel, work / "upstream"), patched_tree)
    results = Results(cache / "oracle")
    return runs_for(up, wheel, results=results), runs_for(ours, wheel, results=results)


def write_table(patches_dir: Path, overlay_dir: Path, versions: Sequence[str], cache: Path) -> Path:
    """Each release's verdicts, both sides, into the committed table (each release as it is done)."""
    from ..patch import all_targets

    path = patches_dir / "flashinfer-python" / AUDIT
    table = load_table(patches_dir)
    carried = [t.version for t in all_targets(patches_dir) if t.dist == "flashinfer-python"]
    for release in [v for v in carried if not versions or v in versions]:
        with tempfile.TemporaryDirectory(prefix=f"compile-list-{release}-") as tmp:
            table["releases"][release] = release_entry(*release_runs(patches_dir, overlay_dir, release, cache, Path(tmp)))
        path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"flashinfer-python {release}: compile list probed", file=sys.stderr)
    return path
