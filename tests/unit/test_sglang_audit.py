"""The SGLang region audit's verdicts on synthetic probe runs, the pins file, and the METADATA pin reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import OVERLAY, write_wheel

from nvfp4_overlay.audit import sglang_audit
from nvfp4_overlay.errors import ConfigError
from nvfp4_overlay.oracle import sglang_releases, sglang_table

SITE = "sglang/srt/layers/layernorm.py:976 forward_with_per_tensor_quant_fusion"


def call(function: str, outcome: str, **args: Any) -> dict[str, Any]:
    return {"function": function, "module": "flashinfer.x", "args": args, "site": SITE, "outcome": outcome,
            "upstream_code": outcome != "opaque", "overlay_ops": []}


def run(*calls: dict[str, Any], ok: bool = False, error: str = "Unsupported: in flashinfer") -> dict[str, Any]:
    return {"ok": ok, "calls": list(calls), "stand_ins": [], "events": [], "ops": [],
            **({} if ok else {"error": error})}


ROUTES = {"nvfp4_quantize": {"backend": ["auto", "cuda"], "per_token_activation": [False]}, "fp4_quantize": {}}


@pytest.mark.parametrize(("name", "args", "routed"), [
    ("nvfp4_quantize", {"backend": "cuda", "per_token_activation": False}, True),
    ("nvfp4_quantize", {"backend": "cute-dsl", "per_token_activation": True}, False),
    ("nvfp4_quantize", {"backend": "cuda", "per_token_activation": True}, False),
    ("nvfp4_quantize", {}, True),  # a parameter the release does not bind: no constraint
    ("fp4_quantize", {"sf_vec_size": 16}, True),
    ("rmsnorm_quant", {"eps": 1e-6}, False),
], ids=["cuda", "cute-dsl-per-token", "per-token", "unbound", "unconstrained", "not-an-entry"])
def test_routed_follows_the_entries_routes(name: str, args: dict[str, Any], routed: bool) -> None:
    assert sglang_audit.routed({"function": name, "args": args}, ROUTES) is routed
    assert sglang_audit.routed({"function": name, "args": args}, None) is False


def test_a_cell_from_runs_keeps_what_upstream_failed_in_and_what_the_patched_run_saw_past_it() -> None:
    first, second = call("fp4_quantize", "failed"), call("rmsnorm_quant", "failed", eps=1e-6)
    cell = sglang_audit.cell_from_runs(run(first), run({**first, "outcome": "opaque"}, second))
    assert [c["function"] for c in cell["calls"]] == ["fp4_quantize", "rmsnorm_quant"]
    assert [c["upstream"] for c in cell["calls"]] == ["fails", None]
    assert cell["frontier"] == "flashinfer" and cell["sglang_break"] is None


def test_the_remaining_raw_calls_move_with_the_routes() -> None:
    first, second = call("fp4_quantize", "failed"), call("rmsnorm_quant", "failed", eps=1e-6)
    cell = sglang_audit.cell_from_runs(run(first), run({**first, "outcome": "opaque"}, second))
    assert [r.split("(")[0] for r in sglang_audit.remaining(cell, None)] == ["flashinfer.x.fp4_quantize",
                                                                             "flashinfer.x.rmsnorm_quant"]
    assert [r.split("(")[0] for r in sglang_audit.remaining(cell, ROUTES)] == ["flashinfer.x.rmsnorm_quant"]
    grown = {**ROUTES, "rmsnorm_quant": {}}
    assert sglang_audit.remaining(cell, grown) == ["not known past the last call (no run traced further)"]
    # The patched stack with the grown routes: both opaque, then it compiles past the old frontier.
    later = run({**first, "outcome": "opaque"}, {**second, "outcome": "opaque"}, ok=True)
    assert sglang_audit.patched_problems(cell, later, grown) == []
    # ... or it meets a raw call the table has never seen: the table is out of date there.
    worse = run({**first, "outcome": "opaque"}, {**second, "outcome": "opaque"}, call("mm_fp4", "failed"))
    (problem,) = sglang_audit.patched_problems(cell, worse, grown)
    assert "out of date" in problem and "mm_fp4" in problem


def test_the_patched_verdict_refuses_a_run_that_the_routes_do_not_explain() -> None:
    first = call("fp4_quantize", "failed")
    cell = sglang_audit.cell_from_runs(run(first), run({**first, "outcome": "opaque"}, ok=True))
    assert sglang_audit.patched_problems(cell, run({**first, "outcome": "opaque"}, ok=True), ROUTES) == []
    # ENTRIES that do not route it: the probe's opaque op contradicts them.
    (problem,) = sglang_audit.patched_problems(cell, run({**first, "outcome": "opaque"}, ok=True), {})
    assert "routes say failed" in problem
    # A call with other arguments than the table's.
    (problem,) = sglang_audit.patched_problems(cell, run({**first, "args": {"x": 1}, "outcome": "opaque"}, ok=True),
                                               ROUTES)
    assert "the table has" in problem


def test_the_upstream_verdict_holds_the_stack_to_where_the_table_says_it_fails() -> None:
    first = call("fp4_quantize", "failed")
    cell = sglang_audit.cell_from_runs(run(first), run({**first, "outcome": "opaque"}, ok=True))
    assert sglang_audit.upstream_problems(cell, run(first)) == []
    (problem,) = sglang_audit.upstream_problems(cell, run(ok=True))
    assert "compiles" in problem
    assert sglang_audit.upstream_problems(cell, run(call("nvfp4_quantize", "failed")))


def test_sglangs_own_break_is_kept_and_remains_whatever_flashinfer_routes() -> None:
    error = ("Unsupported: Unsupported method call\n  Explanation: Dynamo does not know how to trace method `get` of "
             'class `ContextVar`\nfrom user code:\n  File "/t/sglang/srt/layers/moe/x.py", line 1103, in f\n')
    cell = sglang_audit.cell_from_runs(run(error=error), run(error=error))
    assert cell["calls"] == [] and cell["frontier"] == "sglang"
    assert "ContextVar" in cell["sglang_break"] and "sglang/srt/layers/moe/x.py:1103" in cell["sglang_break"]
    assert sglang_audit.remaining(cell, {**ROUTES, "anything": {}}) == [f"SGLang's own code: {cell['sglang_break']}"]


def test_a_run_through_a_permissive_stand_in_is_a_defect() -> None:
    cell = sglang_audit.cell_from_runs(run(ok=True), run(ok=True))
    used = {**run(ok=True), "stand_ins": ["_StubMeta.__call__"]}
    (problem,) = sglang_audit.upstream_problems(cell, used)
    assert "stand-ins of absent modules" in problem
    assert sglang_audit.upstream_problems(cell, {**run(ok=True), "stand_ins": ["FakeGpu.setup.<locals>.is_available"]}) == []


def test_an_absent_region_must_be_absent_in_the_runs() -> None:
    cell = sglang_audit.cell_from_runs({"absent": "no such file"}, {"absent": "no such file"})
    assert cell == {"absent": "no such file"}
    assert sglang_audit.patched_problems(cell, {"absent": "no such file"}, ROUTES) == []
    assert sglang_audit.patched_problems(cell, run(ok=True), ROUTES)


def test_the_overlays_entries_read_without_torch() -> None:
    routes = sglang_audit.read_routes(OVERLAY / "flashinfer-python")
    assert routes is not None and "fp4_quantize" in routes and "nvfp4_quantize" in routes
    assert routes["nvfp4_quantize"]["per_token_activation"] == [False, True]
    assert "cute-dsl" in routes["nvfp4_quantize"]["backend"] and "cake" not in routes["nvfp4_quantize"]["backend"]


def test_an_upstream_tree_has_no_routes(tmp_path: Path) -> None:
    assert sglang_audit.read_routes(tmp_path) is None


def test_the_document_table_goes_between_its_markers() -> None:
    doc = f"intro\n{sglang_table.BEGIN} (generated) -->\nold\n{sglang_table.END}\nafter\n"
    assert sglang_table.render_into(doc, "new\n") == f"intro\n{sglang_table.BEGIN} (generated) -->\nnew\n" \
                                                    f"{sglang_table.END}\nafter\n"
    with pytest.raises(ConfigError, match="no <!-- audit:sglang-regions"):
        sglang_table.render_into("no markers", "new\n")


def test_the_pins_file_refuses_bad_entries_all_at_once(tmp_path: Path) -> None:
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / sglang_releases.PINS).write_text(
        '[[wheel]]\nfilename = "sglang-0.5.12-cp311-cp311-manylinux_2_34_x86_64.whl"\nsha256 = "abc"\n'
        '[[wheel]]\nfilename = "torch-2.13.0-py3-none-any.whl"\nsha256 = "' + "0" * 64 + '"\n')
    with pytest.raises(ConfigError) as raised:
        sglang_releases.load_pins(tmp_path)
    assert "sha256 must be 64 lowercase hex digits" in str(raised.value)
    assert "is not an SGLang wheel" in str(raised.value)


@pytest.mark.parametrize(("requires", "pin"), [
    ("Requires-Dist: flashinfer_python==0.6.1\nRequires-Dist: flashinfer_cubin==0.6.1", "0.6.1"),
    ("Requires-Dist: flashinfer_python[cu13]==0.6.12", "0.6.12"),
    ("Requires-Dist: flashinfer_python>=0.6", None),
], ids=["plain", "extra", "no-exact-pin"])
def test_the_flashinfer_pin_is_read_from_metadata(tmp_path: Path, requires: str, pin: str | None) -> None:
    wheel = write_wheel(tmp_path, "sglang", "0.5.12", {"sglang/__init__.py": ""}, extra_metadata=requires)
    if pin is None:
        with pytest.raises(ConfigError, match="expected one ==X"):
            sglang_releases.flashinfer_pin(wheel)
    else:
        assert sglang_releases.flashinfer_pin(wheel) == pin


def test_the_document_table_groups_releases_alike_and_says_what_remains() -> None:
    raw = {"calls": [{**call("rmsnorm_quant", "failed"), "site": SITE, "upstream": "fails"}], "sglang_break": None,
           "frontier": "flashinfer"}
    whole = {"calls": [], "sglang_break": None, "frontier": None}
    release = {"flashinfer": "0.6.18", "sglang": {"upstream": {"norm": {"sm120": raw, "sm100": raw},
                                                               "linear": {"sm120": whole, "sm100": whole}}}}
    table = {"releases": {"0.5.19": release, "0.5.20": release, "0.5.8": {
        "flashinfer": "0.6.1", "sglang": {"upstream": {"linear": {"sm120": raw, "sm100": whole}, "norm": {"absent": "x"}},
                                          "patched": {"linear": {"sm120": whole, "sm100": whole},
                                                      "norm": {"absent": "x"}}}}}}
    rows = sglang_table.markdown_table(table, {"0.5.8": True}, {}).splitlines()[2:]
    assert rows[0].startswith("| `linear` | 0.5.8 | 0.6.1 | SM120: flashinfer.x.rmsnorm_quant() at "
                              "sglang/srt/layers/layernorm.py forward_with_per_tensor_quant_fusion; SM100: none | none |")
    assert rows[1] == "| `linear` | 0.5.19–0.5.20 | 0.6.18 | none | none |"
    assert rows[2].startswith("| `norm` | 0.5.19–0.5.20 | 0.6.18 | flashinfer.x.rmsnorm_quant()")
    assert rows[2].endswith("| flashinfer.x.rmsnorm_quant() at sglang/srt/layers/layernorm.py "
                            "forward_with_per_tensor_quant_fusion |")
    grown = sglang_table.markdown_table(table, {"0.5.8": True}, {"rmsnorm_quant": {}}).splitlines()[4]
    assert grown.endswith("| not known past the last call (no run traced further) |")
