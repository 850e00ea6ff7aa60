"""The CUDA-version audit holds every call site of every carried release, and the overlay follows it.

patches/flashinfer-python/audit-cuda-versions.json classifies each call of get_cuda_version,
is_cuda_version_at_least, their forwarders and version_at_least(torch.version.cuda, ...) (what it
decides, which release answers it, why). These tests read the real upstream wheels: a call site the
audit does not classify fails here, so a new release cannot be carried with a lookup nobody looked
at. tests/releases/test_cuda_scopes.py holds the scan to the run time, scope by scope; the audit's
own rules and generated tables: tests/unit/test_cuda_scan.py."""

from __future__ import annotations

import ast
import datetime
import functools
from pathlib import Path
from typing import Any

import pytest
from helpers import FULL, OVERLAY, PATCHES, cache_dir, fetch_upstream, rotating_sample

from nvfp4_overlay.audit import cuda_audit, cuda_scan
from nvfp4_overlay.patch.manifest import all_targets
from nvfp4_overlay.wheel.archive import WheelReader

RELEASES = [t.version for t in all_targets(PATCHES) if t.dist == "flashinfer-python"]
AUDIT = cuda_audit.load_audit(PATCHES)
CUDA_SITES = OVERLAY / "flashinfer-python" / "flashinfer" / "_nvfp4_overlay" / "cuda_sites.py"


@functools.cache
def _python_files(release: str) -> dict[str, str]:
    wheel = fetch_upstream("flashinfer-python", release, patches_dir=PATCHES, cache_dir=cache_dir())
    with WheelReader(wheel) as reader:
        return {n: reader.read(n).decode() for n in reader.infos
                if n.endswith(".py") and not n.startswith("flashinfer/data/")}


@pytest.mark.upstream
@pytest.mark.parametrize("release", RELEASES)
def test_every_lookup_of_the_release_is_classified(release: str) -> None:
    files = dict(_python_files(release))
    sites = cuda_audit.call_sites(files, AUDIT.forwarders())
    assert any(s.key == ("flashinfer.jit.cpp_ext", "build_cuda_cflags") for s in sites)  # the scan sees
    missing = cuda_audit.unclassified(sites, AUDIT)
    assert missing == [], f"{release}: call sites the audit does not classify: {missing}"


@pytest.mark.upstream
@pytest.mark.parametrize("release", RELEASES if FULL else rotating_sample(RELEASES, 1, datetime.date.today().toordinal()))
def test_the_scan_skips_only_bodies_that_hold_no_site(release: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan leaves unwalked a def or class whose text names no lookup, forwarder or alias of one:
    what it finds is what a walk of every body finds (one release a day; every one under
    NVFP4_OVERLAY_FULL=1)."""
    files = _python_files(release)
    pruned = cuda_audit.call_sites(files, AUDIT.forwarders())
    monkeypatch.setattr(cuda_scan._Visitor, "may_call", lambda self, node, enclosing: True)
    monkeypatch.setattr(cuda_scan, "_SCANNED", {})  # walked anew, not the pruned walk's sites remembered
    assert cuda_audit.call_sites(files, AUDIT.forwarders()) == pruned


@pytest.mark.upstream
@pytest.mark.parametrize("release", RELEASES)
def test_the_lookups_0001_replaces_are_the_ones_cuda_py_mirrors(release: str) -> None:
    """get_cuda_path, get_cuda_version, is_cuda_version_at_least: one text in every carried release."""
    assert cuda_audit.lookup_changes(_python_files(release)) == []


NEW_CALLERS = {  # a release that adds one caller: the file it lands in, the text, the site it must name
    "a new caller of a forwarder": (
        "flashinfer/kda_prefill.py",
        "\n\ndef _select_new_target():\n    return _is_cuda_version_at_least('12.9')\n",
        ("flashinfer.kda_prefill", "_select_new_target")),
    "the check imported under an alias": (
        "flashinfer/jit/new_module.py",
        "from .cpp_ext import is_cuda_version_at_least as _at_least\n\n\n"
        "def gen_new_module():\n    return ['-gencode=arch=compute_120f'] if _at_least('12.9') else []\n",
        ("flashinfer.jit.new_module", "gen_new_module")),
    "getattr on cpp_ext": (
        "flashinfer/jit/new_module.py",
        "from . import cpp_ext\n\n\ndef gen_new_module():\n    return getattr(cpp_ext, 'get_cuda_version')()\n",
        ("flashinfer.jit.new_module", "gen_new_module")),
    "a partial of the check": (
        "flashinfer/jit/new_module.py",
        "import functools\nfrom .cpp_ext import is_cuda_version_at_least\n\n"
        "_AT_12_9 = functools.partial(is_cuda_version_at_least, '12.9')\n\n\n"
        "def gen_new_module():\n    return _AT_12_9()\n",
        ("flashinfer.jit.new_module", "gen_new_module")),
    "a lambda in a new function": (
        "flashinfer/jit/new_module.py",
        "from .cpp_ext import get_cuda_version\n\n\n"
        "def gen_new_module():\n    major = lambda: get_cuda_version().major\n    return major()\n",
        ("flashinfer.jit.new_module", "gen_new_module")),
}


@pytest.mark.upstream
@pytest.mark.parametrize("case", sorted(NEW_CALLERS))
def test_a_new_caller_in_a_release_is_unclassified(case: str) -> None:
    """0.7.4 with one caller added: the audit does not know it, so refresh refuses the release."""
    path, text, site = NEW_CALLERS[case]
    before = {path: _python_files("0.7.4").get(path, "")}  # the scan reads a file on its own
    assert cuda_audit.unclassified_in(before, AUDIT) == []
    after = {path: before[path] + text}
    assert [s.key for s in cuda_audit.unclassified_in(after, AUDIT)] == [site]


@pytest.mark.upstream
def test_the_audit_is_what_the_carried_releases_scans_give() -> None:
    """make cuda-audit's output is the committed file: every call of the 38 releases, with the releases
    each is in, every verdict kept (what 'nvfp4-overlay generate cuda-audit --check' holds)."""
    scans = {r: cuda_audit.call_sites(_python_files(r), AUDIT.forwarders()) for r in RELEASES}
    assert cuda_audit.as_json(cuda_audit.regenerated(AUDIT, scans)) == (PATCHES / "flashinfer-python" / cuda_audit.AUDIT).read_text()


@pytest.mark.upstream  # 0.7.4's wheel, read
def test_a_new_call_inside_an_audited_run_time_function_is_unclassified() -> None:
    """0.7.4's mm_fp4 backend heuristic (answered from torch) with a second lookup: the call is new,
    whatever function it sits in; a line added above the listed call changes nothing."""
    path = "flashinfer/gemm/gemm_base.py"
    text = _python_files("0.7.4")[path]
    at = text.index("    if batch_invariant:\n", text.index("def _heuristic_func_mm_fp4("))
    shifted = {path: text[:at] + "    pass\n\n" + text[at:]}
    assert cuda_audit.unclassified_in(shifted, AUDIT) == []
    added = {path: text[:at] + "    arch = '120f' if is_cuda_version_at_least('12.9') else '120a'\n" + text[at:]}
    (new,) = cuda_audit.unclassified_in(added, AUDIT)
    assert new.identity == ("flashinfer.gemm.gemm_base", "_heuristic_func_mm_fp4", "is_cuda_version_at_least('12.9')", 0)
    assert "other calls the audit answers torch" in cuda_audit.new_call_problem(new, AUDIT, PATCHES)


def _overlay_cuda() -> dict[str, Any]:
    """The overlay's cuda_calls.py (the run time's call finder) as a namespace: it imports nothing of the overlay."""
    path = CUDA_SITES.parent / "cuda_calls.py"
    namespace: dict[str, Any] = {"__name__": "overlay_cuda_calls_under_test"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


@pytest.mark.upstream
def test_the_run_time_names_each_call_as_the_scan_does(tmp_path: Path) -> None:
    """Every call site of 0.7.4 in a function: the overlay's cuda_calls.py, reading that function's own lines
    (as it does at run time) and reading the whole file (its reference), names the call by the text
    and ordinal the scan gives it, which the audit is keyed by."""
    cuda = _overlay_cuda()
    files = _python_files("0.7.4")
    checked = 0
    for site in cuda_audit.call_sites(files, AUDIT.forwarders()):
        path = next(p for p in files if cuda_scan.module_name(p) == site.module or
                    cuda_scan.module_matches(site.module, cuda_scan.module_name(p)) and site.call in files[p])
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(files[path])
        defs = {n: n for n in ast.walk(ast.parse(files[path])) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        scope = next((n for n in defs if n.name == site.qualname.rsplit(".", 1)[-1]
                      and n.lineno <= site.position[0] <= (n.end_lineno or 0)), None)
        whole = cuda["_calls_in"](str(target), 0)
        ends = [e for e, (_, node) in whole.by_end.items() if (node.lineno, node.col_offset) == site.position]
        assert len(ends) == 1 and whole.ending_at(ends[0]) == (site.call, site.nth), site
        if scope is not None:
            first = min([scope.lineno, *(d.lineno for d in scope.decorator_list)])
            assert cuda["_calls_in"](str(target), first).ending_at(ends[0]) == (site.call, site.nth), site
            checked += 1
    assert checked > 50
