"""The compile-list verdicts (oracle/compile_table.py) and docs/compile-list.md, rendered from the committed table.

A case compiles only when every call ran a compiled graph holding one opaque op per call and the
trace did none of the wheel's I/O: each way a run can fall short of that is a case below.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from nvfp4_overlay.oracle import compile_table
from nvfp4_overlay.probes.flashinfer.tables import compile_cases

ROOT = Path(__file__).resolve().parents[2]

COMPILED = {"eager": {"digest": "e1", "outputs": ["tensor", [4], [1], "torch.float32", "cpu"]},
            "compiled": {"counts": {"calls": 1, "compiled_runs": 1, "uncompiled": 0, "graphs": 1, "opaque_ops": 1,
                                    "ops": {"nvfp4_overlay.flashinfer_rmsnorm.default": 1}},
                         "fake_outputs": [["tensor", [4], [1], "torch.float32", "cpu"]], "trace_events": [],
                         "outputs": ["tensor", [4], [1], "torch.float32", "cpu"], "digest": "c1"}}
BROKEN = {"eager": {"digest": "e2"},
          "compiled": {"error": {"kind": "Unsupported", "reason": "Attempted to call function marked as skipped",
                                 "explanation": "Explanation: Dynamo does not know how to trace the builtin "
                                                "`posix.stat.` This function is either",
                                 "stack": ["flashinfer/norm/__init__.py:rmsnorm", "flashinfer/norm/__init__.py:get_norm_module",
                                           "flashinfer/jit/core.py:get_tmpdir",
                                           "<outside>/pathlib.py:stat"]},
                       "trace_events": [], "counts": {"calls": 1, "compiled_runs": 0, "uncompiled": 1}}}


def _with(run: dict[str, Any], **counts: Any) -> dict[str, Any]:
    changed = copy.deepcopy(run)
    changed["compiled"]["counts"].update(counts)
    return changed


@pytest.mark.parametrize(("run", "compiled"), [
    (COMPILED, True),
    (_with(COMPILED, opaque_ops=0, ops={}), False),  # the graph traced through: no opaque op
    (_with(COMPILED, compiled_runs=0, uncompiled=1), False),  # the call ran no graph: nothing compiled
    (_with(COMPILED, calls=0, compiled_runs=0), False),  # no call through the harness: no case
    (_with(COMPILED, opaque_ops=2), False),  # two opaque ops for one call: not one op per call
    ({**COMPILED, "compiled": {**COMPILED["compiled"], "trace_events": [["open", "jit/core.py"]]}}, False),
    ({**COMPILED, "compiled": {**COMPILED["compiled"], "fake_outputs": [["tensor", [4], [1], "torch.float16", "cpu"]]}},
     False),
    (BROKEN, False),
], ids=["one-op-a-call", "no-opaque-op", "ran-no-graph", "no-call", "two-ops", "io-while-tracing", "fake-differs",
        "error"])
def test_a_case_compiles_only_with_one_opaque_op_a_call_and_no_io(run: dict[str, Any], compiled: bool) -> None:
    assert compile_table.case_compiled(run) is compiled


def test_where_a_case_breaks_names_the_wheels_frame_and_what_dynamo_gave_up_on() -> None:
    assert compile_table.breaks_at(BROKEN) == "get_norm_module > get_tmpdir: posix.stat"
    kernel = copy.deepcopy(BROKEN)
    kernel["compiled"]["error"].update(explanation="Explanation: Skip calling function `<launch>` since it was wrapped "
                                                   "with `torch.compiler.disable`",
                                       stack=["flashinfer/decode.py:run", "flashinfer/decode.py:run_batch_decode"])
    assert compile_table.breaks_at(kernel) == "run_batch_decode: the kernel (foreign code)"
    assert compile_table.breaks_at(_with(COMPILED, opaque_ops=0)) == "compiled 1 of 1 calls, 0 opaque ops"


def test_a_verdict_counts_cases_and_keeps_each_eager_call() -> None:
    found = {"routed": True, "cases": {"default": COMPILED, "out": BROKEN}}
    assert compile_table.verdict("norm.rmsnorm", found) == {
        "cases": 2, "compiled": 1, "breaks": "get_norm_module > get_tmpdir: posix.stat",
        "eager": {"default": "e1", "out": "e2"}, "eager_refused": 1}
    assert compile_table.verdict("norm.rmsnorm", {"missing": True}) == {"absent": True}


def test_a_case_that_stays_upstreams_path_by_design_is_named_apart() -> None:
    """Sampling drawn from a host generator is eager-only: its case is not counted, and says why."""
    found = {"routed": True, "cases": {"default": BROKEN, "seed-offset-tensors": COMPILED}}
    cell = compile_table.verdict("sampling.sampling_from_probs", found)
    assert (cell["cases"], cell["compiled"], "breaks" in cell) == (1, 1, False)
    assert cell["eager_only"] == {"default": compile_cases.HOST_STATE}
    assert cell["eager"] == {"default": "e2", "seed-offset-tensors": "e1"}
    assert "1 eager-only: the generator state stays on the host" in compile_table.verdict_text(cell)


def test_the_table_names_every_function_of_the_list_in_every_release() -> None:
    table = json.loads((ROOT / "patches" / "flashinfer-python" / compile_table.AUDIT).read_text())
    assert table["gpu"] == "9.0"
    for release, sides in table["releases"].items():
        for side in ("upstream", "patched"):
            assert sorted(sides[side]) == sorted(compile_cases.every_name()), (release, side)


def test_the_document_is_rendered_from_the_table() -> None:
    document = ROOT / "docs" / "compile-list.md"
    table = compile_table.load_table(ROOT / "patches")
    assert compile_table.render_into(document.read_text(), table) == document.read_text(), \
        "run: make compile-list-docs"
    rows = [line for line in compile_table.markdown(table).splitlines()[2:]]
    assert {row.split(" | ")[1].strip("`") for row in rows} == set(compile_cases.every_name())


def test_the_list_is_upstreams_forty_functions() -> None:
    names = compile_cases.every_name()
    assert len(names) == len(set(names)) == 40
    assert {g: len(n) for g, n in compile_cases.COMPILE_LIST.items()} == {
        "activation": 3, "cascade": 6, "decode": 2, "gemm": 2, "norm": 4, "page": 1, "prefill": 3, "quantization": 1,
        "rope": 8, "sampling": 10}
