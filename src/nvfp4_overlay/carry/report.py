"""The drift matrix as people and programs read it: a terminal table, Markdown, and a JSON document."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from typing import Any

from packaging.version import Version

from ..patch import Target
from . import drift_json
from .drift import BROKEN, PatchDrift, State
from .matrix import Cell, Matrix, Verdict

LEGEND = (
    "exact: applies at its line; offset: exact context, moved; upstream: already in the release; "
    "partly-upstream: some hunks upstream, the rest apply; obsolete: its Applied-Upstream release is out; "
    "merges: ports by three-way merge (refresh writes it; the build refuses until then); "
    "fuzzy: applies only if context is ignored (the build refuses); conflict: does not apply; "
    "missing-file: the file is gone"
)

Row = tuple[Target, str]  # (the series, a patch name)
Verdicts = dict[tuple[Target, str], Cell]  # (the series, a release) -> its cell


def _verdicts(matrix: Matrix) -> Verdicts:
    return {(c.series, c.release.target.version): c for c in matrix.cells}


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


def _troubles(row: Row, columns: Sequence[str], cells: dict[tuple[Row, str], PatchDrift], verdicts: Verdicts,
              verdict: Verdict) -> list[tuple[str, PatchDrift]]:
    """The releases where the row's patch does not carry over and its cell has this verdict."""
    out = []
    for version in columns:
        patch, cell = cells.get((row, version)), verdicts.get((row[0], version))
        if patch is not None and patch.state.needs_person and cell is not None and cell.verdict is verdict:
            out.append((version, patch))
    return out


def _trouble_lines(row: Row, columns: Sequence[str], cells: dict[tuple[Row, str], PatchDrift],
                   verdicts: Verdicts, bold: str = "") -> list[str]:
    """What the row asks: the first release it needs a person at; the releases it is not needed at
    (shipped unpatched by design) and those that carry their own series (news), each said as such."""
    lines = []
    failing = _troubles(row, columns, cells, verdicts, Verdict.NEEDS_PERSON)
    if failing:
        version, patch = failing[0]
        lines.append(f"first needs a person at {bold}{version}{bold} ({patch.state.value}): {patch.reason()}")
    unneeded = _troubles(row, columns, cells, verdicts, Verdict.NOT_NEEDED)
    if unneeded:
        lines.append(f"not needed at {', '.join(v for v, _ in unneeded)}, not a failure ({unneeded[0][1].state.value} "
                     f"there): shipped unpatched by design (below)")
    news = _troubles(row, columns, cells, verdicts, Verdict.NEWS)
    if news:
        version, patch = news[0]
        lines.append(f"news at {', '.join(v for v, _ in news)}, not a failure ({patch.state.value} there): those "
                     f"releases carry their own series, which is what ships there")
    return lines


def _span_text(spans: Sequence[tuple[State, str, str]]) -> str:
    return ", ".join(f"{s.value} {a}" if a == b else f"{s.value} {a}..{b}" for s, a, b in spans)


# --- terminal --------------------------------------------------------------------------------------


def table(matrix: Matrix, width: int | None = None) -> str:
    """Release across, patch down, the patch's state (its worst hunk) in the cell; then what to do."""
    width = width or shutil.get_terminal_size((120, 24)).columns
    lines: list[str] = []
    verdicts = _verdicts(matrix)
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
                texts = [_cell_text(cells.get((row, c)), verdicts.get((row[0], c))) for c in block]
                lines.append(
                    f"{row[0].version + '  ' + row[1]:<{label}}  "
                    + "".join(f"{t:<{cell_width}}" for t in texts).rstrip()
                )
            lines.append("")
        lines += _attention(rows, columns, cells, verdicts)
    lines += placement_lines(matrix)
    lines += by_design_lines(matrix)
    lines += new_api_lines(matrix)
    lines += new_cuda_call_lines(matrix)
    lines += [f"skipped {t}: {why.splitlines()[0]}" for t, why in matrix.skipped.items()]
    lines.append(_verdict(matrix))
    return "\n".join(lines).rstrip()


def by_design_lines(matrix: Matrix) -> list[str]:
    """The releases shipped unpatched by design where some series does not carry, and the data that says so."""
    found = {c.release.target: c.by_design for c in matrix.cells if c.verdict is Verdict.NOT_NEEDED}
    if not found:
        return []
    lines = ["shipped unpatched by design, a series is not needed there:"]
    lines += [f"  {t}: {why}" for t, why in sorted(found.items(), key=lambda kv: _key(str(kv[0])))]
    return [*lines, ""]


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


def _cell_text(patch: PatchDrift | None, cell: Cell | None) -> str:
    if patch is None:
        return "."
    if cell is not None and cell.verdict is Verdict.NOT_NEEDED and patch.state.needs_person:
        return "not-needed"
    return patch.state.value.upper() if patch.state in BROKEN else patch.state.value


def _attention(
    rows: Sequence[Row], columns: Sequence[str], cells: dict[tuple[Row, str], PatchDrift], verdicts: Verdicts
) -> list[str]:
    lines = []
    for row in rows:
        said = _trouble_lines(row, columns, cells, verdicts)
        if said:
            lines.append(f"{row[0].version}  {row[1]}: {_span_text(list(_spans(row, columns, cells)))}")
            lines += [f"  {line}" for line in said]
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
    """The summary line: failures (need a person) said apart from what is not a failure, in other words."""
    pairs = [p for c in matrix.cells for p in c.patches]
    by = {v: [c for c in matrix.cells if c.verdict is v] for v in Verdict}
    bad = sum(1 for c in by[Verdict.NEEDS_PERSON] for p in c.patches if p.state.needs_person)
    merges = sum(1 for p in pairs if p.state is State.MERGES)
    checked = f"{len(matrix.series)} series on {len({c.release.target for c in matrix.cells})} releases"
    merged = f", {merges} port by three-way merge" if merges else ""
    of = f"{{}} of {len(matrix.cells)} (series, release) cells"
    unneeded = by[Verdict.NOT_NEEDED]
    besides = (f"; not needed there, not a failure: {of.format(len(unneeded))} do not carry to a release shipped "
               f"unpatched by design ({', '.join(sorted({str(c.release.target) for c in unneeded}, key=_key))})"
               if unneeded else "")
    besides += (f"; news, not a failure: {of.format(len(by[Verdict.NEWS]))} do not carry to a release that carries "
                f"its own series" if by[Verdict.NEWS] else "")
    if matrix.exit_code == 0 and not besides:
        return f"no patch needs a person ({len(pairs)} (patch, release) pairs{merged}, {checked})"
    if matrix.exit_code == 0:
        return (f"no failure: every series applies to its own release and to every release it is needed on "
                f"({checked}{merged}){besides}")
    skipped = f"; {len(matrix.skipped)} releases skipped" if matrix.skipped else ""
    return (f"needs a person: {of.format(len(by[Verdict.NEEDS_PERSON]))} ({bad} of {len(pairs)} (patch, release) "
            f"pairs{merged}; {checked}){besides}{skipped}")


def _key(target: str) -> tuple[str, Version]:
    dist, _, version = target.partition("==")
    return dist, Version(version)


# --- Markdown --------------------------------------------------------------------------------------


def markdown(matrix: Matrix) -> str:
    lines = ["## Drift of the patch series against upstream releases", "", f"_{LEGEND}._", ""]
    verdicts = _verdicts(matrix)
    for dist, (columns, rows, cells) in _layout(matrix).items():
        lines += [
            f"### {dist}",
            "",
            "| series | patch | " + " | ".join(columns) + " |",
            "| --- | --- |" + " --- |" * len(columns),
        ]
        for row in rows:
            texts = [_md_cell(cells.get((row, c)), verdicts.get((row[0], c))) for c in columns]
            lines.append(f"| {row[0].version} | `{row[1]}` | " + " | ".join(texts) + " |")
        lines.append("")
        for row in rows:
            said = _trouble_lines(row, columns, cells, verdicts, bold="**")
            if said:
                lines.append(f"- {row[0].version} `{row[1]}`: {_span_text(list(_spans(row, columns, cells)))}. "
                             + " ".join(_md_escape(line[0].upper() + line[1:]) + "." for line in said))
        lines.append("")
    lines += _placement_markdown(matrix)
    unneeded = by_design_lines(matrix)
    if unneeded:
        lines += [f"### {unneeded[0].rstrip(':').capitalize()}", ""]
        lines += [f"- {_md_escape(line.strip())}" for line in unneeded[1:-1]] + [""]
    new = new_api_lines(matrix)
    if new:
        lines += ["### New API", "", f"_{_md_escape(NEW_API)}._", ""]
        lines += [f"- `{line.strip().split(':', 1)[0]}`:{_md_escape(line.strip().split(':', 1)[1])}" if line.startswith("  ")
                  else f"**{_md_escape(line)}**" for line in new[1:-1]]
        lines.append("")
    calls = new_cuda_call_lines(matrix)
    if calls:
        lines += ["### New CUDA-version calls", "", *[f"- {_md_escape(line.strip())}" for line in calls[1:-1]], ""]
    wheels = drift_json.wheels(matrix)
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


def _md_cell(patch: PatchDrift | None, cell: Cell | None) -> str:
    if patch is None:
        return ""
    if cell is not None and cell.verdict is Verdict.NOT_NEEDED and patch.state.needs_person:
        return f"not needed ({patch.state.value})"
    return f"**{patch.state.value}**" if patch.state.needs_person else patch.state.value


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


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
