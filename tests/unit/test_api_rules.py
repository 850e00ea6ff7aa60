"""The serving-API audit's rules and committed files, without a wheel: the scan follows every way Python
names a function, each verdict is every rule tried, the routed rules are the overlay's entry points, a
stored scan is taken only for the same inputs, and docs/serving-api.md's table is the audit.

patches/flashinfer-python/audit-serving-api.json says, for each public function of each carried
release that reaches the JIT loader (JitSpec.build_and_load) or the cubin loader, whether the
overlay routes it, will route it (pending), or leaves it out of scope and why; on the real releases:
tests/releases/test_api_audit.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import PATCHES, ROOT

from nvfp4_overlay.audit import api_audit, api_graph

AUDIT = api_audit.load_audit(PATCHES)

SOURCE = {
    "flashinfer/__init__.py": "from ._private import exported as exported\nfrom .quant import *\n",
    "flashinfer/jit/__init__.py": "",
    "flashinfer/jit/core.py": "class JitSpec:\n    def build_and_load(self): return 1\ndef gen_spec(): return JitSpec()\n",
    "flashinfer/jit/cubin_loader.py": "def get_cubin(name, sha): return b''\n",
    "flashinfer/_private.py": "from .jit.core import gen_spec as g\ndef exported(): return g().build_and_load()\n",
    "flashinfer/quant.py": '''
import functools
from .jit import core as jc
from .jit import cubin_loader
@functools.cache
def get_module():
    return jc.gen_spec().build_and_load()
def by_alias(x): return get_module().run(x)
def by_lambda(x): return (lambda: get_module())()
def by_getattr(x): return getattr(cubin_loader, "get_cubin")("a", "b")
def by_lazy_import(x):
    from .jit.cubin_loader import get_cubin as fetch
    return fetch("a", "b")
def by_comprehension(xs): return [get_module() for _ in xs]
def nested(x):
    def inner(): return get_module()
    return inner()
class Wrapper:
    def run(self): return self._go()
    def _go(self): return get_module()
class Sub(Wrapper):
    pass
def pure(x): return x + 1
@functools.cache
def decorated_only(x): return x
def _private_helper(): return get_module()
''',
}


def test_the_scan_follows_every_way_python_names_a_function() -> None:
    found = {f.key: f for f in api_audit.reaching(SOURCE)}
    q = "flashinfer.quant."
    for name in ("get_module", "by_alias", "by_lambda", "by_comprehension", "nested", "Wrapper", "Sub"):
        assert found[q + name].loaders == ("jit",), name
    for name in ("by_getattr", "by_lazy_import"):
        assert found[q + name].loaders == ("cubin",), name
    assert "flashinfer._private.exported" in found  # re-exported by the package from a private module
    assert found["flashinfer._private.exported"].via[-1] == "jit"
    assert q + "pure" not in found and q + "decorated_only" not in found  # a decorator is not a call
    assert q + "_private_helper" not in found  # not public


def _verdict_by_every_rule(audit: api_audit.Audit, fn: api_audit.PublicFunction) -> api_audit.Rule | None:
    """Audit.verdict as it was written first, every rule tried: the reference of the indexed one."""
    exact = [r for r in audit.rules if not api_audit._is_glob(r.name) and r.matches(fn)]
    found = exact or [r for r in audit.rules if r.matches(fn)]
    return found[0] if found else None


def test_the_indexed_verdict_is_every_rule_tried() -> None:
    """Each rule's own (module, name), its glob's stars filled in, and a sample of rules' modules
    crossed with a sample of rules' names and names no rule spells: the verdict by name and then by
    glob is the first rule the full walk finds, the very same rule."""
    def concrete(pattern: str) -> str:
        return pattern.replace("*", "x").replace("?", "y")

    rules = AUDIT.rules
    pairs = {(concrete(r.module), concrete(r.name)) for r in rules}
    pairs |= {(concrete(a.module), name) for a in rules[::16]
              for name in [*(concrete(b.name) for b in rules[::16]), "fp4_quantize", "nvfp4_new_thing", "run"]}
    classified = 0
    for module, name in sorted(pairs):
        fn = api_audit.PublicFunction(module, name, ("jit",), ())
        expected = _verdict_by_every_rule(AUDIT, fn)
        assert AUDIT.verdict(fn) is expected, (module, name)
        classified += expected is not None
    assert len(pairs) > 1_500 and 0 < classified < len(pairs)


def test_a_glob_never_classifies_an_fp4_name() -> None:
    audit = api_audit.Audit((api_audit.Rule("flashinfer.quant*", "*", "out of scope", "family"),))
    fns = [api_audit.PublicFunction("flashinfer.quant", n, ("jit",), ()) for n in ("by_alias", "nvfp4_quantize_v2")]
    assert [f.name for f in api_audit.unclassified(fns, audit)] == ["nvfp4_quantize_v2"]


def test_the_routed_rules_are_the_overlays_entry_points() -> None:
    from nvfp4_overlay.audit.routes import routed_names

    assert AUDIT.routed() == frozenset(routed_names(ROOT / "overlay"))


def test_a_routed_name_in_an_opt_in_module_is_another_function() -> None:
    """0.7.1's cake_sampling.top_k_top_p_sampling_from_probs shares a routed name, not the route; the
    compile list's routed functions say where they are told apart (docs/compile-list.md)."""
    from nvfp4_overlay.audit import api_rules

    routed = ["top_k_top_p_sampling_from_probs", "fp4_quantize"]
    assert api_rules.verdict("flashinfer.cake_sampling.top_k_top_p_sampling_from_probs", routed)[0] == "out of scope"
    assert api_rules.verdict("flashinfer.sampling.top_k_top_p_sampling_from_probs", routed) == (
        "routed", api_rules.COMPILE_LIST_WHY)
    assert api_rules.verdict("flashinfer.fp4_quantization.fp4_quantize", routed) == (
        "routed", "routed to one opaque op while dynamo traces (entries.py)")


@pytest.fixture(scope="module")
def memo() -> api_audit.Memo:
    """What one release's scan learnt, for the next: the releases are scanned in order, in one worker."""
    return api_audit.Memo()


def test_a_stored_scan_is_taken_only_for_the_same_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store is a cache, never a second opinion: the same texts and scanner give the stored result
    (in a new process too: the in-process table emptied), one byte changed in a text or in a module
    of the scanner scans again; an unreadable entry is scanned again and rewritten."""
    scanned: list[int] = []

    def counting(files: Any, memo: Any = None) -> list[api_audit.PublicFunction]:
        scanned.append(1)
        return api_graph.reaching(files, memo)

    monkeypatch.setattr(api_audit, "reaching", counting)
    store = tmp_path / "api-scan"

    def scan(files: dict[str, str]) -> set[str]:
        monkeypatch.setattr(api_audit, "_REACHING", {})  # as a new process starts
        return {f.key for f in api_audit.scan(files, store=store)}

    expected = {f.key for f in api_graph.reaching(SOURCE)}
    assert "flashinfer.quant.by_alias" in expected
    assert scan(SOURCE) == expected and len(scanned) == 1
    assert scan(SOURCE) == expected and len(scanned) == 1  # stored
    changed = {**SOURCE, "flashinfer/quant.py": SOURCE["flashinfer/quant.py"].replace(
        "def by_alias(x): return get_module().run(x)", "def by_alias(x): return x")}
    assert scan(changed) == expected - {"flashinfer.quant.by_alias"} and len(scanned) == 2
    def stored(path: Path) -> set[str]:
        return {f"{f['module']}.{f['name']}" for f in json.loads(path.read_text())["functions"]}

    (entry,) = [p for p in store.iterdir() if "flashinfer.quant.by_alias" in stored(p)]  # SOURCE's, not changed's
    entry.write_text("{not json")
    assert scan(SOURCE) == expected and len(scanned) == 3  # unreadable: scanned again
    assert scan(SOURCE) == expected and len(scanned) == 3  # and rewritten
    real = api_audit.sha256_file
    monkeypatch.setattr(api_audit, "sha256_file", lambda path: real(path) + ("x" if path.name == "api_body.py" else ""))
    assert scan(SOURCE) == expected and len(scanned) == 4  # the scanner changed


def test_the_docs_table_is_the_audit() -> None:
    text = (ROOT / "docs" / "serving-api.md").read_text()
    assert api_audit.render_into(text, AUDIT) == text
