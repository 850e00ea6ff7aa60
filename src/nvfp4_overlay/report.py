"""The drift matrix as people and programs read it: a terminal table, Markdown, and a JSON document."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from typing import Any

from packaging.version import Version

from .api_audit import PublicFunction
from .drift import BROKEN, HunkDrift, PatchDrift, State
from .manifest import Target
from .matrix import Cell, Matrix

LEGEND = (
    "exact: applies at its line; offset: exact context, moved; upstream: already in the release; "
    "partly-upstream: some hunks upstream, the rest apply; obsolete: its Applied-Upstream release is out; "
    "merges: ports by three-way merge (refresh writes it; the build refuses until then); "
    "fuzzy: applies only if context is ignored (the build refuses); conflict: does not apply; "
    "missing-file: the file is gone"
)

Row = tuple[Target, str]  # (the series, a patch name)


def _layout(matrix: Matrix) -> dict[str, tuple[list[str], list[Row], dict[tuple[Row, str], PatchDrift]]]:
    """Per distribution: release columns, (series, patch) rows, and the patch drift in each cell."""
    out: dict[str, tuple[list[str], list[Row], dict[tuple[Row, str], PatchDrift]]] = {}
    for series_target in sorted(matrix.series, key=lambda t: (t.dist, Version(t.version))):
        columns, rows, cells = out.setdefault(series_target.dist, ([], [], {}))
        rows += [(series_target, p.name) for p in matrix.series[series_target].patches]
    for cell in matrix.cells:
        columns, rows, cells = out[cell.series.dist]
        if cell.release.target.version not in columns:
            columns.append(cell.release.target.version)
        for patch in cell.patches:
            cells[((cell.series, patch.name), cell.release.target.version)] = patch
    for columns, _, _ in out.values():
        columns.sort(key=Version)
    return out


Span = tuple[State, str, str]  # a state, and the first and last release of a run in it


def _spans(row: Row, columns: Sequence[str], cells: dict[tuple[Row, str], PatchDrift]) -> Iterator[Span]:
    """Runs of consecutive releases in one state."""
    run: Span | None = None
    for version in columns:
        patch = cells.get((row, version))
        if patch is None:
            continue
        if run and run[0] is patch.state:
            run = (run[0], run[1], version)
        else:
            if run:
                yield run
            run = (patch.state, version, version)
    if run:
        yield run


def _first_trouble(
    row: Row, columns: Sequence[str], cells: dict[tuple[Row, str], PatchDrift]
) -> tuple[str, PatchDrift] | None:
    for version in columns:
        patch = cells.get((row, version))
        if patch is not None and patch.state.needs_person:
            return version, patch
    return None


def _span_text(spans: Sequence[tuple[State, str, str]]) -> str:
    return ", ".join(f"{s.value} {a}" if a == b else f"{s.value} {a}..{b}" for s, a, b in spans)


# --- terminal --------------------------------------------------------------------------------------


def table(matrix: Matrix, width: int | None = None) -> str:
    """Release across, patch down, the patch's state (its worst hunk) in the cell; then what to do."""
    width = width or shutil.get_terminal_size((120, 24)).columns
    lines: list[str] = []
    for dist, (columns, rows, cells) in _layout(matrix).items():
        label = max([len(dist)] + [len(f"{t.version}  {name}") for t, name in rows])
        cell_width = max([len(c) for c in columns] + [len("partly-upstream")]) + 2
        per_block = max(1, (width - label - 2) // cell_width)
        for start in range(0, max(len(columns), 1), per_block):
            block = columns[start : start + per_block]
            lines.append(f"{dist:<{label}}  " + "".join(f"{c:<{cell_width}}" for c in block).rstrip())
            for row in rows:
                if not any((row, c) in cells for c in block):
                    continue  # a series with nothing to show in these releases
                texts = [_cell_text(cells.get((row, c))) for c in block]
                lines.append(
                    f"{row[0].version + '  ' + row[1]:<{label}}  "
                    + "".join(f"{t:<{cell_width}}" for t in texts).rstrip()
                )
            lines.append("")
        lines += _attention(rows, columns, cells)
    lines += placement_lines(matrix)
    lines += new_api_lines(matrix)
    lines += new_cuda_call_lines(matrix)
    lines += [f"skipped {t}: {why.splitlines()[0]}" for t, why in matrix.skipped.items()]
    lines.append(_verdict(matrix))
    return "\n".join(lines).rstrip()


NEW_API = ("new API: public FlashInfer functions that reach a kernel loader and that the serving-API audit "
           "(patches/flashinfer-python/audit-serving-api.json) does not classify; unrouted, each breaks "
           "torch.compile(fullgraph=True): route it or declare it out of scope there (a person)")


def new_api_lines(matrix: Matrix) -> list[str]:
    """Per release without a series of its own that adds any: each new public function, its loaders, the calls."""
    found = {t: fns for t, fns in matrix.new_apis.items() if fns}
    if not found:
        return []
    lines = [NEW_API + ":"]
    for target, fns in sorted(found.items(), key=lambda kv: (kv[0].dist, Version(kv[0].version))):
        lines.append(f"{target}: {len(fns)} new")
        lines += [f"  {f.key}: {', '.join(f.loaders)} (through {' > '.join(f.via[1:-1]) or 'itself'})" for f in fns]
    return [*lines, ""]


def new_cuda_call_lines(matrix: Matrix) -> list[str]:
    """Per release without a series of its own: each CUDA-version call the CUDA audit does not list."""
    found = [p for _, problems in sorted(matrix.new_cuda_calls.items(), key=lambda kv: Version(kv[0].version))
             for p in problems]
    return ["new CUDA-version calls (a person classifies each before a port):", *[f"  {p}" for p in found], ""] \
        if found else []


def _cell_text(patch: PatchDrift | None) -> str:
    if patch is None:
        return "."
    return patch.state.value.upper() if patch.state in BROKEN else patch.state.value


def _attention(
    rows: Sequence[Row], columns: Sequence[str], cells: dict[tuple[Row, str], PatchDrift]
) -> list[str]:
    lines = []
    for row in rows:
        trouble = _first_trouble(row, columns, cells)
        if trouble is None:
            continue
        version, patch = trouble
        lines.append(f"{row[0].version}  {row[1]}: {_span_text(list(_spans(row, columns, cells)))}")
        lines.append(f"  first needs a person at {version} ({patch.state.value}): {patch.reason()}")
    return lines + ([""] if lines else [])


PLACEMENT = (
    "how each hunk is placed: exact, offset (the build's applier); merge3 (three-way merge); by-name (above "
    "the function of its name); upstream (already there); fuzz, none (not placed: a person)"
)


def placement_lines(matrix: Matrix) -> list[str]:
    """Per series and patch, each file's hunks and how they are placed on each run of releases."""
    lines = []
    for columns, rows, cells in _layout(matrix).values():
        for row in rows:
            runs = _hunk_runs(row, columns, cells)
            if runs:
                lines.append(f"{row[0].version}  {row[1]}")
                lines += [f"  {path} {_numbers(numbers)}: {spans}" for path, numbers, spans in runs]
    return [PLACEMENT + ":", *lines, ""] if lines else []


def _hunk_runs(row: Row, columns: Sequence[str], cells: dict[tuple[Row, str], PatchDrift]
               ) -> list[tuple[str, list[int], str]]:
    """(file, hunk numbers, runs of releases by placement): hunks of a file placed alike share a line."""
    labels: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for version in columns:
        patch = cells.get((row, version))
        for h in patch.hunks if patch else ():
            moved = f" into {h.path}" if h.moved_from else ""
            labels.setdefault((h.moved_from or h.path, h.number), []).append((h.placed + moved, version))
    grouped: dict[tuple[str, str], list[int]] = {}
    for (path, number), seen in labels.items():
        runs: list[tuple[str, str, str]] = []
        for label, version in seen:
            if runs and runs[-1][0] == label:
                runs[-1] = (label, runs[-1][1], version)
            else:
                runs.append((label, version, version))
        text = ", ".join(f"{lab} {a}" if a == b else f"{lab} {a}..{b}" for lab, a, b in runs)
        grouped.setdefault((path, text), []).append(number)
    return [(path, numbers, text) for (path, text), numbers in grouped.items()]


def _numbers(numbers: Sequence[int]) -> str:
    """hunk 3, hunks 1-4, hunks 1-2, 5."""
    parts: list[list[int]] = []
    for n in sorted(numbers):
        if parts and n == parts[-1][-1] + 1:
            parts[-1].append(n)
        else:
            parts.append([n])
    text = ", ".join(str(p[0]) if len(p) == 1 else f"{p[0]}-{p[-1]}" for p in parts)
    return f"hunk {text}" if len(numbers) == 1 else f"hunks {text}"


def _verdict(matrix: Matrix) -> str:
    text = _patch_verdict(matrix)
    new = sum(len(fns) for fns in matrix.new_apis.values())
    if new:
        releases = ", ".join(str(t) for t, fns in matrix.new_apis.items() if fns)
        text += f"; {new} new public API function(s) the audit does not classify need a person ({releases})"
    calls = sum(len(c) for c in matrix.new_cuda_calls.values())
    if calls:
        text += f"; {calls} new CUDA-version call(s) the CUDA audit does not list need a person"
    return text


def _patch_verdict(matrix: Matrix) -> str:
    pairs = [p for c in matrix.cells for p in c.patches]
    bad = sum(1 for c in matrix.cells if not c.news for p in c.patches if p.state.needs_person)
    merges = sum(1 for p in pairs if p.state is State.MERGES)
    releases = len({c.release.target for c in matrix.cells})
    checked = f"{len(matrix.series)} series on {releases} releases"
    failing = sum(c.needs_person and not c.news for c in matrix.cells)
    cells = f"; cells: {failing} of {len(matrix.cells)} (series, release) need a person"
    merged = f", {merges} port by three-way merge" if merges else ""
    news = sum(c.news for c in matrix.cells)
    told = (f"; news, not a failure: {news} of {len(matrix.cells)} (series, release) cells need a person on "
            f"releases that carry their own series") if news else ""
    if matrix.exit_code == 0 and not news:
        return f"no patch needs a person ({len(pairs)} (patch, release) pairs{merged}, {checked})"
    if matrix.exit_code == 0:
        return (f"no failure: every series applies to its own release and to every release without a series "
                f"of its own ({checked}{merged}){told}")
    skipped = f"; {len(matrix.skipped)} releases skipped" if matrix.skipped else ""
    return f"{bad} of {len(pairs)} (patch, release) pairs need a person{merged} ({checked}){cells}{told}{skipped}"


# --- Markdown --------------------------------------------------------------------------------------


def markdown(matrix: Matrix) -> str:
    lines = ["## Drift of the patch series against upstream releases", "", f"_{LEGEND}._", ""]
    for dist, (columns, rows, cells) in _layout(matrix).items():
        lines += [
            f"### {dist}",
            "",
            "| series | patch | " + " | ".join(columns) + " |",
            "| --- | --- |" + " --- |" * len(columns),
        ]
        for row in rows:
            texts = [_md_cell(cells.get((row, c))) for c in columns]
            lines.append(f"| {row[0].version} | `{row[1]}` | " + " | ".join(texts) + " |")
        lines.append("")
        for row in rows:
            trouble = _first_trouble(row, columns, cells)
            if trouble:
                version, patch = trouble
                lines.append(
                    f"- {row[0].version} `{row[1]}`: {_span_text(list(_spans(row, columns, cells)))}. "
                    f"First needs a person at **{version}** ({patch.state.value}): "
                    f"{_md_escape(patch.reason())}"
                )
        lines.append("")
    lines += _placement_markdown(matrix)
    new = new_api_lines(matrix)
    if new:
        lines += ["### New API", "", f"_{_md_escape(NEW_API)}._", ""]
        lines += [f"- `{line.strip().split(':', 1)[0]}`:{_md_escape(line.strip().split(':', 1)[1])}" if line.startswith("  ")
                  else f"**{_md_escape(line)}**" for line in new[1:-1]]
        lines.append("")
    calls = new_cuda_call_lines(matrix)
    if calls:
        lines += ["### New CUDA-version calls", "", *[f"- {_md_escape(line.strip())}" for line in calls[1:-1]], ""]
    wheels = _wheels(matrix)
    lines += [
        "<details><summary>Wheels read</summary>",
        "",
        "| wheel | sha256 | trust |",
        "| --- | --- | --- |",
    ]
    lines += [
        f"| {w['filename']} | `{w['sha256']}` | {'pinned' if w['pinned'] else 'index (unpinned)'} |"
        for w in wheels
    ]
    lines += ["", "</details>", ""]
    lines += [f"- skipped {t}: {_md_escape(why.splitlines()[0])}" for t, why in matrix.skipped.items()]
    lines += ["", f"**{_verdict(matrix)}**", ""]
    return "\n".join(lines)


def _placement_markdown(matrix: Matrix) -> list[str]:
    placed = placement_lines(matrix)
    if not placed:
        return []
    lines = ["<details><summary>How each hunk is placed</summary>", "", f"_{placed[0].rstrip(':')}._", ""]
    for line in placed[1:-1]:
        lines += [f"- {_md_escape(line.strip())}"] if line.startswith("  ") else ["", f"**{_md_escape(line)}**", ""]
    return [*lines, "", "</details>", ""]


def _md_cell(patch: PatchDrift | None) -> str:
    if patch is None:
        return ""
    return f"**{patch.state.value}**" if patch.state.needs_person else patch.state.value


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# --- JSON ------------------------------------------------------------------------------------------


def document(matrix: Matrix) -> dict[str, Any]:
    return {
        "exit_code": matrix.exit_code,
        "needs_person": sum(1 for c in matrix.cells for p in c.patches if p.state.needs_person),
        "cells_needing_a_person": sum(1 for c in matrix.cells if c.needs_person),
        "news": sum(1 for c in matrix.cells if c.news),
        "merges": sum(1 for c in matrix.cells for p in c.patches if p.state is State.MERGES),
        "wheels": _wheels(matrix),
        "skipped": {str(t): why for t, why in matrix.skipped.items()},
        "new_apis": {str(t): [new_api_json(f) for f in fns] for t, fns in matrix.new_apis.items()},
        "new_cuda_calls": {str(t): list(calls) for t, calls in matrix.new_cuda_calls.items()},
        "cells": [{**_cell_json(c), "new_apis": [f.key for f in matrix.new_apis.get(c.release.target, ())]}
                  for c in matrix.cells],
    }


def new_api_json(fn: PublicFunction) -> dict[str, Any]:
    return {"function": fn.key, "loaders": list(fn.loaders), "via": list(fn.via)}


def _wheels(matrix: Matrix) -> list[dict[str, Any]]:
    seen = {c.release.filename: c.release for c in matrix.cells}
    return [
        {
            "dist": w.target.dist,
            "version": w.target.version,
            "filename": w.filename,
            "sha256": w.sha256,
            "pinned": w.pinned,
        }
        for w in sorted(seen.values(), key=lambda w: (w.target.dist, Version(w.target.version), w.filename))
    ]


def _cell_json(cell: Cell) -> dict[str, Any]:
    return {
        "news": cell.news,
        "dist": cell.series.dist,
        "series": cell.series.version,
        "release": cell.release.target.version,
        "wheel": cell.release.filename,
        "state": max((p.state for p in cell.patches), key=lambda s: s.rank, default=State.EXACT).value,
        "patches": [
            {
                "patch": p.name,
                "state": p.state.value,
                "applied_upstream": p.applied_upstream,
                "reason": p.reason(),
                "hunks": [hunk_json(h) for h in p.hunks],
            }
            for p in cell.patches
        ],
    }


def hunk_json(h: HunkDrift) -> dict[str, Any]:
    m = h.mismatch
    return {
        "file": h.path,
        "hunk": h.number,
        "header": h.header,
        "state": h.state.value,
        "placed": h.placed,
        "moved_from": h.moved_from,
        "offset": h.offset,
        "fuzz": h.fuzz,
        "line": h.line,
        "first_difference": None if m is None else {"line": m.line, "expected": m.expected, "found": m.found},
        "moved_to": h.moved_to,
        "occurrences": h.occurrences,
        "note": h.note,
    }


# --- drift --check: do the ports to new releases work? ---------------------------------------------


def works_table(works: dict[str, Any]) -> str:
    if not works:
        return ""
    lines = ["", "newer releases, the newest series ported there and checked by behaviour:"]
    for release, found in works.items():
        state = "works" if found["works"] else "DOES NOT WORK"
        lines.append(f"  {release} (from {found['from']}): {state}")
        lines += [f"    - {p}" for p in found["problems"][:10]]
    return "\n".join(lines)


def works_markdown(works: dict[str, Any]) -> str:
    if not works:
        return ""
    lines = ["### Newer releases: applies and works?", "", "| release | ported from | works | problems |",
             "| --- | --- | --- | --- |"]
    for release, found in works.items():
        problems = _md_escape("; ".join(found["problems"][:3])) if found["problems"] else ""
        lines.append(f"| {release} | {found['from']} | {'yes' if found['works'] else '**no**'} | {problems} |")
    return "\n".join(lines) + "\n"
