"""merge.three_way: merge3's regions, and the one case it leaves that refresh resolves itself."""

from __future__ import annotations

import pytest

from nvfp4_overlay.merge import three_way


def lines(*texts: str) -> list[str]:
    return [t + "\n" for t in texts]


BASE = lines("import torch", "", "", "@flashinfer_api", "def fp4_quantize(", "    pass", "", "", "def other():",
             "    pass")
DECORATED = lines("import torch", "", "", "# nvfp4-overlay", "@route", "@flashinfer_api", "def fp4_quantize(",
                  "    pass", "", "", "def other():", "    pass")


def test_a_change_upstream_did_not_touch_is_carried_over() -> None:
    upstream = lines("import torch", "import os", "", "", "@flashinfer_api", "def fp4_quantize(", "    pass", "",
                     "", "def other():", "    return 1")
    merged = three_way(BASE, DECORATED, upstream)
    assert merged.conflicts == ()
    assert merged.lines == tuple(lines("import torch", "import os", "", "", "# nvfp4-overlay", "@route",
                                       "@flashinfer_api", "def fp4_quantize(", "    pass", "", "", "def other():",
                                       "    return 1"))


def test_lines_added_above_a_line_upstream_rewrote_stay_above_it() -> None:
    upstream = [line.replace("@flashinfer_api", "@flashinfer_api(trace=t)") for line in BASE]
    merged = three_way(BASE, DECORATED, upstream)
    assert merged.lines is not None
    assert merged.lines[3:7] == tuple(lines("# nvfp4-overlay", "@route", "@flashinfer_api(trace=t)",
                                            "def fp4_quantize("))


def test_a_new_function_upstream_put_in_front_does_not_take_the_decorator() -> None:
    """0.6.18 added silu_and_mul_nvfp4_quantize right above fp4_quantize, its decorator rewritten too."""
    upstream = lines("import torch", "", "", "@flashinfer_api(trace=s)", "def silu_and_mul_nvfp4_quantize(",
                     "    pass", "", "", "@flashinfer_api(trace=t)", "def fp4_quantize(", "    pass", "", "",
                     "def other():", "    pass")
    merged = three_way(BASE, DECORATED, upstream)
    assert merged.lines is not None
    text = "".join(merged.lines)
    assert "# nvfp4-overlay\n@route\n@flashinfer_api(trace=t)\ndef fp4_quantize(\n" in text
    assert text.count("@route") == 1


@pytest.mark.parametrize(
    "upstream",
    [
        lines("import torch", "", "", "def fp4_quantize(", "    pass", "", "", "def other():", "    pass"),
        lines("import torch", "", "", "@flashinfer_api", "def fp4_quantize_v2(", "    pass", "", "", "def other():",
              "    pass"),
    ],
    ids=["decorator-deleted", "function-renamed"],
)
def test_a_region_both_sides_rewrote_is_a_conflict(upstream: list[str]) -> None:
    patched = [line.replace("def fp4_quantize(", "def fp4_quantize(  # patched") for line in BASE]
    if "fp4_quantize_v2" not in "".join(upstream):
        patched = DECORATED
    merged = three_way(BASE, patched, upstream)
    assert merged.lines is None
    (conflict,) = merged.conflicts
    assert "both change" in conflict.describe()


def test_lines_added_beside_a_region_that_became_other_code_are_a_conflict() -> None:
    upstream = [line.replace("@flashinfer_api", "x = compute_everything_else(1, 2, 3)") for line in BASE]
    merged = three_way(BASE, DECORATED, upstream)
    assert merged.lines is None


TWO = lines("@flashinfer_api", "def a(x):", "    return x", "", "", "@flashinfer_api", "def b(x):", "    return x")
TWO_ROUTED = lines("@route", "@flashinfer_api", "def a(x):", "    return x", "", "", "@route", "@flashinfer_api",
                   "def b(x):", "    return x")


def test_additions_follow_their_anchors_where_upstream_reordered_and_rewrote_the_code() -> None:
    """0.6.7 moved fp4_quantization.py and 0.6.16 rewrote the code around the routed functions: merge3
    gives one long conflict; each addition goes above upstream's version of the line it sat on."""
    upstream = lines("@flashinfer_api(trace=tb)", "def b(", "    x,", "    backend='cuda',", "):", "    return x + 1",
                     "", "", "def helper():", "    pass", "", "", "@flashinfer_api(trace=ta)", "def a(x):",
                     "    return 2 * x")
    merged = three_way(TWO, TWO_ROUTED, upstream)
    assert merged.conflicts == ()
    assert merged.lines == tuple(lines("@route", "@flashinfer_api(trace=tb)", "def b(", "    x,", "    backend='cuda',",
                                       "):", "    return x + 1", "", "", "def helper():", "    pass", "", "", "@route",
                                       "@flashinfer_api(trace=ta)", "def a(x):", "    return 2 * x"))


@pytest.mark.parametrize(
    "upstream",
    [
        lines("@flashinfer_api", "def b(x):", "    return -x", "", "", "@flashinfer_api", "def b(y):", "    return y",
              "", "", "def a(x):", "    return 2 * x"),
        lines("def b(x):", "    return -x", "", "", "def a(x):", "    return 2 * x"),
    ],
    ids=["anchor-twice", "decorator-gone"],
)
def test_an_addition_with_no_single_place_stays_a_conflict(upstream: list[str]) -> None:
    """The anchor rule alone (merge3 may align such small files its own way): `def a(x):` sits below
    another function's decorator, across a blank line; `def b(x):` has no decorator left above it."""
    from nvfp4_overlay.merge import _insertions_anchored

    assert _insertions_anchored(TWO, TWO_ROUTED, upstream) is None


def test_a_patch_that_changes_a_line_is_not_placed_by_anchors() -> None:
    patched = [line.replace("return x", "return x  # patched") for line in TWO_ROUTED]
    upstream = lines("@flashinfer_api(trace=tb)", "def b(x):", "    return x + 1", "", "", "@flashinfer_api(trace=ta)",
                     "def a(x):", "    return 2 * x")
    assert three_way(TWO, patched, upstream).lines is None
