"""merge.three_way: merge3's regions, and the one rule for the lines a patch adds: above the function of its name."""

from __future__ import annotations

import pytest

from nvfp4_overlay.patch.merge import BY_NAME, MERGE3, three_way


def lines(*texts: str) -> list[str]:
    return [t + "\n" for t in texts]


BASE = lines("import torch", "", "", "@flashinfer_api", "def fp4_quantize(x):", "    pass", "", "", "def other():",
             "    pass")
DECORATED = lines("import torch", "", "", "# nvfp4-overlay", "@route", "@flashinfer_api", "def fp4_quantize(x):",
                  "    pass", "", "", "def other():", "    pass")


def test_a_change_upstream_did_not_touch_is_carried_over() -> None:
    upstream = lines("import torch", "import os", "", "", "@flashinfer_api", "def fp4_quantize(x):", "    pass", "",
                     "", "def other():", "    return 1")
    merged = three_way(BASE, DECORATED, upstream)
    assert (merged.conflicts, merged.how) == ((), MERGE3)
    assert merged.lines == tuple(lines("import torch", "import os", "", "", "# nvfp4-overlay", "@route",
                                       "@flashinfer_api", "def fp4_quantize(x):", "    pass", "", "", "def other():",
                                       "    return 1"))


def test_lines_added_above_a_decorator_upstream_rewrote_stay_above_it() -> None:
    upstream = [line.replace("@flashinfer_api", "@flashinfer_api(trace=t)") for line in BASE]
    merged = three_way(BASE, DECORATED, upstream)
    assert merged.lines is not None and merged.how == BY_NAME
    assert merged.lines[3:7] == tuple(lines("# nvfp4-overlay", "@route", "@flashinfer_api(trace=t)",
                                            "def fp4_quantize(x):"))


def test_a_new_function_upstream_put_in_front_does_not_take_the_decorator() -> None:
    """0.6.18 added silu_and_mul_nvfp4_quantize right above fp4_quantize, its decorator rewritten too."""
    upstream = lines("import torch", "", "", "@flashinfer_api(trace=s)", "def silu_and_mul_nvfp4_quantize(x):",
                     "    pass", "", "", "@flashinfer_api(trace=t)", "def fp4_quantize(x):", "    pass", "", "",
                     "def other():", "    pass")
    merged = three_way(BASE, DECORATED, upstream)
    assert merged.lines is not None
    text = "".join(merged.lines)
    assert "\n\n# nvfp4-overlay\n@route\n@flashinfer_api(trace=t)\ndef fp4_quantize(x):\n" in text
    assert text.count("@route") == 1


def test_a_region_both_sides_rewrote_is_a_conflict() -> None:
    patched = [line.replace("def fp4_quantize(x):", "def fp4_quantize(x):  # patched") for line in BASE]
    upstream = [line.replace("def fp4_quantize(x):", "def fp4_quantize_v2(x):") for line in BASE]
    merged = three_way(BASE, patched, upstream)
    assert merged.lines is None
    (conflict,) = merged.conflicts
    assert "both change line 5 of the old release (upstream has 'def fp4_quantize_v2(x):' there)" in conflict.describe()


@pytest.mark.parametrize(
    ("upstream", "why"),
    [
        (lines("import torch", "", "", "def fp4_quantize(x):", "    pass", "", "", "def other():", "    pass"),
         "upstream's fp4_quantize has no @flashinfer_api to put them above"),
        (lines("import torch", "", "", "x = compute_everything_else(1, 2, 3)", "def fp4_quantize(x):", "    pass", "",
               "", "def other():", "    pass"),
         "upstream's fp4_quantize has no @flashinfer_api to put them above"),
        (lines("import torch", "", "", "@flashinfer_api", "def fp4_quantize_v2(x):", "    pass", "", "",
               "def other():", "    pass"),
         "upstream's file has no fp4_quantize; merge3 would place the insertion above fp4_quantize_v2 "
         "(at @flashinfer_api)"),
    ],
    ids=["decorator-deleted", "decorator-became-other-code", "function-renamed"],
)
def test_an_insertion_whose_function_or_decorator_is_gone_is_a_conflict(upstream: list[str], why: str) -> None:
    merged = three_way(BASE, DECORATED, upstream)
    assert merged.lines is None
    (conflict,) = merged.conflicts
    assert conflict.describe() == f"the 2 lines the patch adds above fp4_quantize (at @flashinfer_api): {why}"
    assert conflict.base_line == 4  # where they were, in the old release: drift names the hunk by it


def quantize(name: str, decorator: str = "@flashinfer_api") -> list[str]:
    """Two functions with one parameter list, as fp4_quantize and nvfp4_quantize share theirs."""
    return [decorator, f"def {name}(", "    input,", "    global_scale=None,", "    sf_vec_size=16,", "):",
            "    return _quantize(input, global_scale, sf_vec_size)"]


ROUTE = ["# nvfp4-overlay: one opaque op", "@route"]
PAIR = lines("import torch", "", "", *quantize("fp4_quantize"), "", "", *quantize("nvfp4_quantize"))
PAIR_ROUTED = lines("import torch", "", "", *ROUTE, *quantize("fp4_quantize"), "", "", *quantize("nvfp4_quantize"))


@pytest.mark.parametrize(
    "upstream",
    [
        lines("import torch", "", "", *quantize("nvfp4_quantize")),
        lines("import torch", "import os", "", "", *quantize("nvfp4_quantize", "@flashinfer_api(trace=t)")),
    ],
    ids=["dropped", "dropped-and-decorator-rewritten"],
)
def test_an_insertion_never_lands_on_another_function_alike_its_own(upstream: list[str]) -> None:
    """Upstream moved fp4_quantize out of the file: its route must not go to nvfp4_quantize, whose lines
    are alike (the rule that placed lines beside "alike" regions did exactly that)."""
    merged = three_way(PAIR, PAIR_ROUTED, upstream)
    assert merged.lines is None
    (conflict,) = merged.conflicts
    text = conflict.describe()
    assert text.startswith("the 2 lines the patch adds above fp4_quantize (at @flashinfer_api): "
                           "upstream's file has no fp4_quantize")
    assert "at that place upstream has nvfp4_quantize" in text


def test_merge3_placing_an_insertion_above_a_renamed_function_is_a_conflict() -> None:
    """merge3 merges this cleanly (the decorators above the def are unchanged): the rule refuses it."""
    base = lines("import torch", "", "", "@api", "@functools.cache", "@other(1)", "def b(x):", "    return x")
    patched = lines("import torch", "", "", "@route", "@api", "@functools.cache", "@other(1)", "def b(x):",
                    "    return x")
    upstream = [line.replace("def b(", "def b_v2(") for line in base]
    merged = three_way(base, patched, upstream)
    assert merged.lines is None
    (conflict,) = merged.conflicts
    assert conflict.describe() == ("the line the patch adds above b (at @api): upstream's file has no b; "
                                   "merge3 would place the insertion above b_v2 (at @api)")


TWO = lines("@flashinfer_api", "def a(x):", "    return x", "", "", "@flashinfer_api", "def b(x):", "    return x")
TWO_ROUTED = lines("@route", "@flashinfer_api", "def a(x):", "    return x", "", "", "@route", "@flashinfer_api",
                   "def b(x):", "    return x")


def test_insertions_follow_their_functions_where_upstream_reordered_and_rewrote_the_code() -> None:
    """0.6.7 moved fp4_quantization.py and 0.6.16 rewrote the code around the routed functions: merge3
    gives one long conflict; each insertion goes above upstream's version of the decorator it sat on."""
    upstream = lines("@flashinfer_api(trace=tb)", "def b(", "    x,", "    backend='cuda',", "):", "    return x + 1",
                     "", "", "def helper():", "    pass", "", "", "@flashinfer_api(trace=ta)", "def a(x):",
                     "    return 2 * x")
    merged = three_way(TWO, TWO_ROUTED, upstream)
    assert (merged.conflicts, merged.how) == ((), BY_NAME)
    assert merged.lines == tuple(lines("@route", "@flashinfer_api(trace=tb)", "def b(", "    x,", "    backend='cuda',",
                                       "):", "    return x + 1", "", "", "def helper():", "    pass", "", "", "@route",
                                       "@flashinfer_api(trace=ta)", "def a(x):", "    return 2 * x"))


def test_the_enclosing_class_is_part_of_the_name() -> None:
    base = lines("class A:", "    @api", "    def run(self):", "        pass", "", "", "class B:", "    @api",
                 "    def run(self):", "        pass")
    patched = lines("class A:", "    @route", "    @api", "    def run(self):", "        pass", "", "", "class B:",
                    "    @api", "    def run(self):", "        pass")
    swapped = lines("class B:", "    @api(t)", "    def run(self):", "        pass", "", "", "class A:", "    @api(t)",
                    "    def run(self):", "        return 1")
    merged = three_way(base, patched, swapped)
    assert merged.lines is not None
    assert "".join(merged.lines).endswith("class A:\n    @route\n    @api(t)\n    def run(self):\n        return 1\n")
    without_a = lines("class B:", "    @api(t)", "    def run(self):", "        pass")
    (conflict,) = three_way(base, patched, without_a).conflicts
    assert "upstream's file has no A.run" in conflict.describe()


@pytest.mark.parametrize(
    ("upstream", "why"),
    [
        (lines("@flashinfer_api", "def b(x):", "    return -x", "", "", "@flashinfer_api", "def b(y):", "    return y",
               "", "", "def a(x):", "    return 2 * x"),
         ["upstream's a has no @flashinfer_api", "upstream's file defines b 2 times"]),
        (lines("def b(x):", "    return -x", "", "", "def a(x):", "    return 2 * x"),
         ["upstream's a has no @flashinfer_api", "upstream's b has no @flashinfer_api"]),
    ],
    ids=["function-twice", "decorators-gone"],
)
def test_an_insertion_with_no_single_place_stays_a_conflict(upstream: list[str], why: list[str]) -> None:
    merged = three_way(TWO, TWO_ROUTED, upstream)
    assert merged.lines is None
    assert [next(w for w in why if w in c.describe()) for c in merged.conflicts] == why


def test_overload_stubs_are_not_the_function() -> None:
    """0.7.1 typed single_decode_with_kv_cache's return_lse with two @overload stubs above the def:
    the route lines go above the def (its @flashinfer_api), not a conflict over three definitions."""
    base = lines("import torch", "", "", "@flashinfer_api", "def decode(q, return_lse=False):", "    pass")
    patched = lines("import torch", "", "", "@route", "@flashinfer_api", "def decode(q, return_lse=False):", "    pass")
    upstream = lines("import torch", "", "", "@overload", "def decode(q, return_lse: Literal[False]): ...", "", "",
                     "@typing.overload", "def decode(q, return_lse: Literal[True]): ...", "", "",
                     "@flashinfer_api(trace=t)", "def decode(q, return_lse=False):", "    return 1")
    merged = three_way(base, patched, upstream)
    assert merged.lines is not None and merged.how == BY_NAME, [c.describe() for c in merged.conflicts]
    assert "".join(merged.lines).endswith("@route\n@flashinfer_api(trace=t)\ndef decode(q, return_lse=False):\n"
                                          "    return 1\n")
    assert "".join(merged.lines).count("@route") == 1


def test_a_patch_that_changes_a_line_is_not_placed_by_name() -> None:
    patched = [line.replace("return x", "return x  # patched") for line in TWO_ROUTED]
    upstream = lines("@flashinfer_api(trace=tb)", "def b(x):", "    return x + 1", "", "", "@flashinfer_api(trace=ta)",
                     "def a(x):", "    return 2 * x")
    assert three_way(TWO, patched, upstream).lines is None


def test_a_file_that_is_not_python_is_merged_by_merge3_alone() -> None:
    base = lines("[section]", "a = 1", "", "[other]", "b = 2")
    patched = lines("[section]", "a = 1", "added = yes", "", "[other]", "b = 2")
    upstream = lines("[section]", "a = 1", "", "[other]", "b = 3")
    merged = three_way(base, patched, upstream)
    assert merged.lines == tuple(lines("[section]", "a = 1", "added = yes", "", "[other]", "b = 3"))
