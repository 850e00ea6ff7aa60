"""The CUDA-version audit without a wheel: one answer per call site, each entry saying what it decides and
why, the scanner's text of a call and its per-process memo, and the generated tables (the overlay's
cuda_sites.py, docs/patches.md) equal to the committed audit.

patches/flashinfer-python/audit-cuda-versions.json classifies each call of get_cuda_version,
is_cuda_version_at_least, their forwarders and version_at_least(torch.version.cuda, ...) (what it
decides, which release answers it, why); on the real upstream wheels: tests/releases/test_cuda_audit.py."""

from __future__ import annotations

import ast

import pytest
from helpers import OVERLAY, PATCHES

from nvfp4_overlay.audit import cuda_audit, cuda_scan

AUDIT = cuda_audit.load_audit(PATCHES)
CUDA_SITES = OVERLAY / "flashinfer-python" / "flashinfer" / "_nvfp4_overlay" / "cuda_sites.py"


def test_the_overlay_tables_are_the_audits() -> None:
    """cuda_sites.py is rendered from the audit (make docs): the run-time list, the toolkit sites, the forwarders."""
    assert CUDA_SITES.read_text() == cuda_audit.overlay_table(AUDIT)


def test_a_call_site_has_one_answer() -> None:
    tables = [AUDIT.run_time_sites(), AUDIT.toolkit_sites(), AUDIT.forwarders()]
    keys = [{(m, q) for m, qs in t.items() for q in qs} for t in tables]
    assert keys[0] & keys[1] == set() and keys[0] & keys[2] == set() and keys[1] & keys[2] == set()
    assert len(keys[0]) >= 18 and len(keys[2]) == 7  # what the audit of 0.6.1-0.7.4 found


def test_every_entry_says_what_it_decides_and_why() -> None:
    for entry in AUDIT.entries:
        assert entry["answer"] in ("toolkit", "torch", "per caller", "n/a (TVM's own function)"), entry
        assert entry["decides"].strip() and entry["why"].strip(), entry
        assert (entry["answer"] == "per caller") == (entry["class"] == "wrapper"), entry


def test_a_file_is_scanned_once_a_process_and_again_when_its_text_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan remembers each file's sites by path, text and forwarders: a release one file away
    from the last parses that file alone, and the sites are what a scan of nothing remembered finds."""
    files = {"flashinfer/a.py": "from .jit.cpp_ext import get_cuda_version\ndef f():\n    return get_cuda_version()\n",
             "flashinfer/b.py": "from .jit.cpp_ext import is_cuda_version_at_least as at\nX = at('12.8')\n",
             "flashinfer/c.py": "def g():\n    return 1\n"}
    monkeypatch.setattr(cuda_scan, "_SCANNED", {})
    parsed: list[str] = []
    real = cuda_scan._file_sites
    monkeypatch.setattr(cuda_scan, "_file_sites", lambda path, *a: parsed.append(path) or real(path, *a))
    first = cuda_scan.call_sites(files)
    assert [s.key for s in first] == [("flashinfer.a", "f"), ("flashinfer.b", "<module>")]
    assert cuda_scan.call_sites(files) == first and parsed == ["flashinfer/a.py", "flashinfer/b.py"]
    changed = {**files, "flashinfer/a.py": files["flashinfer/a.py"].replace("def f():", "def h():")}
    assert [s.key for s in cuda_scan.call_sites(changed)] == [("flashinfer.a", "h"), ("flashinfer.b", "<module>")]
    assert parsed == ["flashinfer/a.py", "flashinfer/b.py", "flashinfer/a.py"]
    assert [s.key for s in cuda_scan.call_sites(files, {"flashinfer.c": frozenset({"g"})})][:1] == [("flashinfer.a", "f")]
    assert len(parsed) == 6  # other forwarders: every candidate scanned again (c.py names g now)
    monkeypatch.setattr(cuda_scan, "_SCANNED", {})
    assert cuda_scan.call_sites(changed) == cuda_scan.call_sites(changed)  # nothing remembered: the same


def test_a_call_s_text_is_what_ast_gives() -> None:
    """The scan's own source segments (the text split once) against ast.get_source_segment, on lines
    ended by \\n, \\r\\n and \\r, a form feed inside a line, and non-ASCII text before a call."""
    text = ('x = get_cuda_version()\r\ny = "\u00e9\u00e9"; z = f(a,\r  b)\n\x0cw = g(\n  "\u2603",\n  c)\r'
            'v = [h(i) for i in range(2)]\n')
    source = cuda_scan._Source(text)
    nodes = [n for n in ast.walk(ast.parse(text)) if hasattr(n, "end_col_offset")]
    assert len(nodes) > 20
    for node in nodes:
        assert source.segment(node) == ast.get_source_segment(text, node), ast.dump(node)


def test_the_docs_table_is_the_audit() -> None:
    """docs/patches.md shows the committed audit (make docs renders it anew)."""
    text = (PATCHES.parent / "docs" / "patches.md").read_text()
    assert cuda_audit.render_into(text, AUDIT) == text
    assert text.count("| toolkit (nvcc)") >= 60


def test_a_second_call_of_a_text_gets_an_entry_of_its_own_with_the_first_ones_verdict() -> None:
    entry = {"first": "0.1", "last": "0.1", "file": "flashinfer/a.py", "module": "flashinfer.a", "qualname": "f",
             "call": "get_cuda_version()", "nth": 0, "class": "nvcc", "answer": "toolkit", "decides": "d", "why": "w"}
    audit = cuda_audit.Audit((entry,))
    text = "from .jit.cpp_ext import get_cuda_version\ndef f():\n    get_cuda_version()\n    return get_cuda_version()\n"
    once = {"flashinfer/a.py": text.replace("    get_cuda_version()\n", "", 1)}
    scans = {"0.1": cuda_audit.call_sites(once), "0.2": cuda_audit.call_sites({"flashinfer/a.py": text}),
             "0.3": cuda_audit.call_sites(once)}
    made = cuda_audit.regenerated(audit, scans)
    assert [(e["nth"], e["first"], e["last"], e.get("releases"), e["answer"]) for e in made] == [
        (0, "0.1", "0.3", None, "toolkit"), (1, "0.2", "0.2", None, "toolkit")]
    assert cuda_audit.regenerated(cuda_audit.Audit(tuple(made)), scans) == made  # made anew: the same
    (new,) = cuda_audit.unclassified(scans["0.2"], audit)
    assert new.describe() == "flashinfer.a f calls get_cuda_version() (the call of that text number 2 in it)"


