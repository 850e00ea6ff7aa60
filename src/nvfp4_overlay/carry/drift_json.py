"""The drift matrix as a JSON document (`drift --json`): every cell, patch and hunk, and the counts."""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from ..audit import PublicFunction
from .drift import HunkDrift, State
from .matrix import Cell, Matrix, Verdict


def document(matrix: Matrix) -> dict[str, Any]:
    return {
        "exit_code": matrix.exit_code,
        "needs_person": sum(1 for c in matrix.cells if c.fails for p in c.patches if p.state.needs_person),
        "cells_needing_a_person": sum(1 for c in matrix.cells if c.fails),
        "news": sum(1 for c in matrix.cells if c.news),
        "not_needed": sum(1 for c in matrix.cells if c.verdict is Verdict.NOT_NEEDED),
        "merges": sum(1 for c in matrix.cells for p in c.patches if p.state is State.MERGES),
        "wheels": wheels(matrix),
        "skipped": {str(t): why for t, why in matrix.skipped.items()},
        "new_apis": {str(t): [new_api_json(f) for f in fns] for t, fns in matrix.new_apis.items()},
        "new_cuda_calls": {str(t): list(calls) for t, calls in matrix.new_cuda_calls.items()},
        "cells": [{**_cell_json(c), "new_apis": [f.key for f in matrix.new_apis.get(c.release.target, ())]}
                  for c in matrix.cells],
    }


def new_api_json(fn: PublicFunction) -> dict[str, Any]:
    return {"function": fn.key, "loaders": list(fn.loaders), "via": list(fn.via)}


def wheels(matrix: Matrix) -> list[dict[str, Any]]:
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
        "verdict": cell.verdict.value,
        "news": cell.news,
        "by_design": cell.by_design or None,
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
