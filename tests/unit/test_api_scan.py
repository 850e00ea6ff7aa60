"""The fast serving-API scan (api_graph, a statement at a time) against its slow reference (a full parse),
on the layouts Python allows.

tests/api_scan_reference.py parses every module of a release and walks every def; the scan reads
what can matter only. They must find the same public functions, reaching the same loaders. The chains
they name may differ (each names one of several), so each chain of the scan is held to the
reference's own call graph, step by step. On real releases: tests/releases/test_api_scan_releases.py."""

from __future__ import annotations

import api_scan_reference as reference

from nvfp4_overlay.audit import api_graph, api_scan
from nvfp4_overlay.audit.api_text import Source

LAYOUTS = {
    "flashinfer/__init__.py": "from .quant import public_alias as exported\nfrom . import quant\n",
    "flashinfer/jit/__init__.py": "",
    "flashinfer/jit/core.py": ("class JitSpec:\n    def build_and_load(self): return 1\ndef gen_spec(): return JitSpec()\n"
                               "def load(): return gen_spec().build_and_load()\n"),
    "flashinfer/jit/cubin_loader.py": "def get_cubin(name, sha): return b''\n",
    "flashinfer/reexport.py": "from .jit.core import load as renamed\n",
    "flashinfer/quant.py": '''
"""A module docstring that mentions gen_spec and
def not_a_function():
    return gen_spec()
"""
import functools
from typing import TYPE_CHECKING
from .jit import core as jc
from . import reexport
from .reexport import renamed
try:
    from .jit.cubin_loader import get_cubin
except ImportError:
    get_cubin = None
if TYPE_CHECKING:
    def in_block():
        return 0
else:  # the def bound last is the one a call gets
    def in_block():
        return jc.gen_spec().build_and_load()
alias = in_block
TEMPLATE = """
def template_def():
    return renamed()
"""


@functools.cache
def decorated(x):
    return x


def through_alias(x):
    return alias()


def through_reexported_module(x):
    return reexport.renamed()


def long_body(x):
    """A body long enough to be read a statement at a time."""
''' + "".join(f"    y{i} = x + {i}\n" for i in range(400)) + '''
    if x:
        return renamed()
    return y0


class Runner:
    def run(self):
        from .jit.cubin_loader import get_cubin as fetch
        return 1
''' + "".join(f"    def pad{i}(self):\n        return {i}\n" for i in range(300)) + '''
    def later(self):
        return fetch("a", "b")  # bound by run's lazy import: a walk of the class sees it


class Quiet:
''' + "".join(f"    def pad{i}(self):\n        return {i}\n" for i in range(300)) + '''


def continued(
    a=renamed,
):
    return a


def by_getattr(x):
    return getattr(jc, "load")()


def public_alias(x):
    return get_cubin("a", "b")


def broken_layout(x):
''' + "".join(f"    z{i} = {i}\n" for i in range(400)) + '''
    return foo(x,
    renamed())


def plain(x):
    return x + 1
''',
}


def test_the_scan_finds_what_a_full_parse_finds_on_every_layout() -> None:
    fast, slow = api_graph.reaching(LAYOUTS), reference.reaching(LAYOUTS)
    assert reference.keys(fast) == reference.keys(slow)
    q = "flashinfer.quant."
    for name in ("in_block", "through_alias", "through_reexported_module", "long_body", "Runner", "continued",
                 "by_getattr", "public_alias", "broken_layout"):
        assert q + name in reference.keys(fast), name
    for name in ("not_a_function", "template_def", "decorated", "Quiet", "plain"):
        assert q + name not in reference.keys(fast), name  # in strings, a decorator, or naming nothing that reaches
    assert reference.keys(fast)[q + "Runner"] == ("cubin",)


def test_the_chains_are_calls() -> None:
    found = api_graph.reaching(LAYOUTS)
    reference.chains_hold(found, LAYOUTS)
    assert all(f.via[-1] in ("jit", "cubin") for f in found)


def test_a_def_is_cut_into_its_header_and_statements() -> None:
    text = ('def f(a=(1, 2), *,\n      b: "x:y" = 3) -> int:  # c\n    """doc\nat column 0"""\n    x = [\n        1]\n'
            '    if a:\n        pass\n    else:\n        pass\n')
    units = Source(text).units(0, len(text))
    assert units is not None
    assert text[units[0][0]:units[0][1]].endswith("-> int:")
    assert [text[s:e].strip().split("\n")[0] for s, e in units[1:]] == ['"""doc', "x = [", "if a:"]
    assert Source("def f(): return 1\n").units(0, 18) is None  # a body on its header's line: parse it whole
    odd = "def f():\n    x = [\n1]\n"  # a continuation left of the body: parse it whole
    assert Source(odd).units(0, len(odd)) is None


def test_a_memo_carries_over_unchanged_modules() -> None:
    memo = api_scan.Memo()
    first = api_graph.reaching(LAYOUTS, memo)
    changed = {**LAYOUTS, "flashinfer/quant.py": LAYOUTS["flashinfer/quant.py"].replace(
        "def plain(x):\n    return x + 1", "def plain(x):\n    return renamed()")}
    second = api_graph.reaching(changed, memo)
    assert reference.keys(second) == reference.keys(reference.reaching(changed))
    assert set(reference.keys(second)) == set(reference.keys(first)) | {"flashinfer.quant.plain"}


def _has_word_by_find(text: str, word: str, start: int, end: int, heads: frozenset[str] | None = None,
                      quoted: bool = False) -> bool:
    """api_body.has_word as it was first written, one str.find after another: the reference of the
    remembered positions."""
    from nvfp4_overlay.audit.api_body import _back, _identifier, _word_before

    at = text.find(word, start, end)
    while at >= 0:
        if not _identifier(text, at - 1) and not _identifier(text, at + len(word)):
            if heads is None:
                return True
            before = _back(text, at)
            if before >= 0 and text[before] == "." and _word_before(text, before) in heads:
                return True
            if quoted and before >= 0 and text[before] in "\"'":
                return True
        at = text.find(word, at + 1, end)
    return False


def test_a_word_is_found_where_a_search_of_the_text_finds_it() -> None:
    """Every window of texts built from identifiers, their prefixes and suffixes, dots, quotes,
    digits, non-ASCII letters and line breaks: the same answer as the str.find search."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from nvfp4_overlay.audit.api_body import has_word, occurrences

    pieces = st.sampled_from(["gen", "gen_x", "x_gen", "core", ".", " ", "\n    ", "'", '"', "2", "é", "_", "(", "getattr"])

    @settings(max_examples=200, deadline=None)
    @given(st.lists(pieces, max_size=10).map("".join), st.sampled_from(["gen", "core", "gen_x", "getattr"]),
           st.booleans(), st.booleans())
    def check(text: str, word: str, with_heads: bool, quoted: bool) -> None:
        heads = frozenset({"core"}) if with_heads else None
        for start in range(len(text) + 1):  # every window
            for end in range(start, len(text) + 2):
                expected = _has_word_by_find(text, word, start, end, heads, quoted)
                assert has_word(text, word, start, end, heads, quoted) == expected, (text, word, start, end)
        found = [i for i in range(len(text)) if text.startswith(word, i)
                 and _has_word_by_find(text, word, i, i + len(word))]
        assert list(occurrences(text, word)) == found

    check()
