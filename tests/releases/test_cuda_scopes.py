"""The scanner (audit/cuda_scan.py) and the run time (the overlay's cuda.py) name every call site alike.

tests/data/cuda_scopes/flashinfer/ is a small FlashInfer: jit/cpp_ext.py as patch 0001 leaves it, and
two modules that ask for the CUDA version from every scope Python has (module and class bodies,
lambdas, comprehensions, default arguments, nested functions and classes, methods of each kind,
generators, coroutines, aliases, getattr, functools.partial, forwarders). The scan of those files
names the call sites; then the files run for real, with the overlay's cuda.py and torch, under
tables made of what the scan named: listed as run-time sites, every case gets torch's release;
listed as toolkit sites, upstream's answer and no warning; listed nowhere, upstream's answer and one
warning per site, naming it. A site the two sides named differently would get the other answer, or
warn. The same again the way Python 3.10 names a frame (it has no co_qualname).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from typing import Any

import pytest
from helpers import OVERLAY, ROOT

from nvfp4_overlay.audit import cuda_scan

pytestmark = [pytest.mark.torch, pytest.mark.xdist_group("cuda-scopes")]  # one interpreter runs every case

DATA = ROOT / "tests" / "data" / "cuda_scopes"
S, OTHER = "flashinfer.scopes", "flashinfer.other"
C = "flashinfer.jit.cpp_ext"
FORWARDERS = {S: frozenset({"_forwarder", "_forward_value"}), C: frozenset({"is_cuda_version_at_least"})}
CASES = {  # case -> the call site it asks from: (module, innermost named scope)
    "case_module_level": (S, "<module>"),
    "case_class_body": (S, "AtClassBody"),
    "case_class_body_comprehension": (S, "AtClassBody"),
    "case_plain": (S, "case_plain"),
    "case_lambda": (S, "case_lambda"),
    "case_lambda_called_elsewhere": (S, "case_lambda_called_elsewhere"),
    "case_listcomp": (S, "case_listcomp"),
    "case_setcomp": (S, "case_setcomp"),
    "case_dictcomp": (S, "case_dictcomp"),
    "case_genexpr": (S, "case_genexpr"),
    "case_genexpr_consumed_elsewhere": (S, "case_genexpr_consumed_elsewhere"),
    "case_lambda_in_comprehension": (S, "case_lambda_in_comprehension"),
    "case_default_argument": (S, "case_default_argument"),
    "case_nested": (S, "case_nested.<locals>.inner"),
    "case_closure": (S, "_make.<locals>.made"),
    "case_method": (S, "Runner.method"),
    "case_staticmethod": (S, "Runner.static"),
    "case_classmethod": (S, "Runner.klass"),
    "case_property": (S, "Runner.prop"),
    "case_cached_method": (S, "Runner.cached"),
    "case_nested_class": (S, "Runner.Inner.method"),
    "case_class_in_function": (S, "case_class_in_function.<locals>.Local.method"),
    "case_generator": (S, "case_generator.<locals>.versions"),
    "case_coroutine": (S, "case_coroutine.<locals>.ask"),
    "case_alias_import": (S, "case_alias_import"),
    "case_alias_assignment": (S, "case_alias_assignment"),
    "case_alias_local": (S, "case_alias_local"),
    "case_attribute": (S, "case_attribute"),
    "case_getattr": (S, "case_getattr"),
    "case_getattr_at_import": (S, "case_getattr_at_import"),
    "case_partial": (S, "case_partial"),
    "case_partial_inline": (S, "case_partial_inline"),
    "case_forwarder": (S, "case_forwarder"),
    "case_forwarder_of_a_value": (S, "case_forwarder_of_a_value"),
    "case_forwarder_across_modules": (OTHER, "case_forwarder_across_modules"),
    "case_same_text_again": (S, "case_same_text_again"),
    "case_new_text_in_a_listed_function": (S, "case_new_text_in_a_listed_function"),
}
CASE_IDS = sorted(CASES)
# Calls no table lists, in functions whose other call every table lists: a call the audit does not
# list is new, whatever function it sits in (upstream's answer and a warning naming the call).
HELD_BACK = {(S, "case_same_text_again", "get_cuda_version()", 1),
             (S, "case_new_text_in_a_listed_function", 'is_cuda_version_at_least("13.0")', 0)}
NEW_CALLS = {"case_same_text_again", "case_new_text_in_a_listed_function"}
Identity = tuple[str, str, str, int]


def _files() -> dict[str, str]:
    return {str(p.relative_to(DATA)): p.read_text() for p in sorted(DATA.glob("flashinfer/**/*.py"))}


def _table(calls: set[Identity]) -> dict[str, dict[str, list[tuple[str, int]]]]:
    out: dict[str, dict[str, list[tuple[str, int]]]] = {}
    for module, qualname, call, nth in sorted(calls):
        out.setdefault(module, {}).setdefault(qualname, []).append((call, nth))
    return out


@pytest.fixture(scope="module")
def scanned() -> set[Identity]:
    return {s.identity for s in cuda_scan.call_sites(_files(), FORWARDERS)}


@pytest.fixture(scope="module")
def runs(scanned: set[Identity], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One interpreter runs every case under each mode's tables (run_scopes.py)."""
    tree = tmp_path_factory.mktemp("tree")
    shutil.copytree(DATA / "flashinfer", tree / "flashinfer")
    shutil.copy(DATA / "run_scopes.py", tree)  # a script's own directory comes first on sys.path
    overlay = OVERLAY / "flashinfer-python" / "flashinfer" / "_nvfp4_overlay"
    (tree / "flashinfer" / "_nvfp4_overlay").mkdir()
    for name in ("__init__.py", "cuda.py", "cuda_calls.py", "cuda_sites.py"):
        shutil.copy(overlay / name, tree / "flashinfer" / "_nvfp4_overlay" / name)
    toolkit = tmp_path_factory.mktemp("toolkit")
    (toolkit / "bin").mkdir()
    (toolkit / "bin" / "nvcc").write_text("#!/bin/sh\nexit 1\n")  # there, never run: version.json answers
    (toolkit / "version.json").write_text(json.dumps({"cuda": {"version": "13.0.48"}}))
    forwarding = {c for c in scanned if c[1] in FORWARDERS.get(c[0], ())}
    sites = _table(scanned - forwarding - HELD_BACK)
    # _forward_value calls a parameter, which no scan names: the table alone says that call forwards
    forwarders = _table(forwarding | {(S, "_forward_value", "lookup()", 0)})
    modes = []
    for search in (False, True):
        for name, run_time, toolkit_sites in (("run-time", sites, {}), ("toolkit", {}, sites), ("unaudited", {}, {})):
            modes.append({"name": name + (" (3.10)" if search else ""), "search": search, "run_time": run_time,
                          "toolkit": toolkit_sites, "forwarders": forwarders})
    env = {"PYTHONPATH": str(tree), "CUDA_HOME": str(toolkit), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(tree / "run_scopes.py")], input=json.dumps({"modes": modes}),
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_scan_names_every_site_and_no_other(scanned: set[Identity]) -> None:
    # A forwarder's own call is a site of the audit too (answered for its caller, as upstream's
    # is_cuda_version_at_least is); _forward_value calls a parameter, which no scan can name: only
    # the table says it forwards.
    assert {c[:2] for c in scanned} == set(CASES.values()) | {(S, "_forwarder"), (C, "is_cuda_version_at_least")}
    assert HELD_BACK < scanned and (S, "case_same_text_again", "get_cuda_version()", 0) in scanned


@pytest.mark.parametrize("search", [False, True], ids=["co_qualname", "3.10"])
@pytest.mark.parametrize("case", CASE_IDS)
def test_a_run_time_site_gets_torchs_release(runs: dict[str, Any], case: str, search: bool) -> None:
    run = runs["run-time (3.10)" if search else "run-time"]
    expected = "toolkit" if case in NEW_CALLS else "torch"  # the call no table lists: upstream's answer
    assert run["answers"][f"{CASES[case][0]}.{case}"] == expected, CASES[case]


@pytest.mark.parametrize("search", [False, True], ids=["co_qualname", "3.10"])
@pytest.mark.parametrize("case", CASE_IDS)
def test_an_audited_toolkit_site_gets_upstreams_answer(runs: dict[str, Any], case: str, search: bool) -> None:
    run = runs["toolkit (3.10)" if search else "toolkit"]
    assert run["answers"][f"{CASES[case][0]}.{case}"] == "toolkit", CASES[case]


@pytest.mark.parametrize("mode", ["run-time", "toolkit", "run-time (3.10)", "toolkit (3.10)"])
def test_an_audited_call_does_not_warn_and_a_new_one_beside_it_does(runs: dict[str, Any], mode: str) -> None:
    """Only the calls held back from the tables warn, each naming its function and its call."""
    named = [re.match(r"flashinfer: (\S+) (\S+) asks for the CUDA version \((.*?)\) and", w)
             for w in runs[mode]["warnings"]]
    assert all(named), runs[mode]["warnings"]
    found = sorted((m.group(1), m.group(2), m.group(3)) for m in named if m)
    if "3.10" in mode:  # a line alone: the new call is known as a call of its line the audit does not list
        assert [f[:2] for f in found] == sorted(c[:2] for c in HELD_BACK)
    else:
        assert found == sorted(c[:3] for c in HELD_BACK)


@pytest.mark.parametrize("search", [False, True], ids=["co_qualname", "3.10"])
def test_an_unaudited_site_gets_upstreams_answer_and_warns_once(runs: dict[str, Any], scanned: set[Identity],
                                                                 search: bool) -> None:
    run = runs["unaudited (3.10)" if search else "unaudited"]
    assert {a for a in run["answers"].values()} == {"toolkit"}
    named = [re.match(r"flashinfer: (\S+) (\S+) asks for the CUDA version", w) for w in run["warnings"]]
    assert all(named), run["warnings"]
    # Each case ran twice, each module body more than once: still one warning per call (3.11+; a
    # function with two calls, the class body's, the new-call cases', warns twice), per line on 3.10.
    warned = sorted((m.group(1), m.group(2)) for m in named if m)
    calls = sorted(c[:2] for c in scanned if c[:2] in set(CASES.values()))
    if search:
        assert set(warned) == set(calls) and len(warned) <= len(calls)
    else:
        assert warned == calls
