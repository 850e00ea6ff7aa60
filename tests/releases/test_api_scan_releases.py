"""The fast serving-API scan against its slow reference (a full parse) on real releases: 0.6.1 and
0.6.8.post1 on every run, every carried release with NVFP4_OVERLAY_FULL=1; and the statement cut held
to Python's own parse of every module of 0.6.1 (the layouts alone: tests/unit/test_api_scan.py)."""

from __future__ import annotations

import ast
import zipfile

import api_scan_reference as reference
import pytest
from helpers import FULL, PATCHES, cache_dir, fetch_upstream, flashinfer_releases

from nvfp4_overlay.audit import api_audit, api_graph
from nvfp4_overlay.audit.api_text import Source

REAL = flashinfer_releases() if FULL else ["0.6.1", "0.6.8.post1"]


def _files(release: str) -> dict[str, str]:
    wheel = fetch_upstream("flashinfer-python", release, patches_dir=PATCHES, cache_dir=cache_dir())
    with zipfile.ZipFile(wheel) as zf:
        return api_audit.scan_wheel_files({n: zf.read(n) for n in zf.namelist() if api_audit.scanned(n)})


@pytest.mark.upstream
@pytest.mark.parametrize("release", REAL)
def test_the_scan_of_a_real_release_is_the_full_parse(release: str) -> None:
    files = _files(release)
    fast = api_graph.reaching(files)
    assert reference.keys(fast) == reference.keys(reference.reaching(files))
    reference.chains_hold(fast, files)


@pytest.mark.upstream
def test_the_statement_cut_is_pythons() -> None:
    """Every top-level def, import and block the cut finds parses alone, and the defs are a parse's."""
    for path, text in _files("0.6.1").items():
        tree = ast.parse(text)
        chunks = Source(text).chunks()
        assert [c.name for c in chunks if c.kind == "def"] == [
            n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))], path
        for chunk in chunks:
            if chunk.kind != "other":
                ast.parse(text[chunk.start:chunk.end])
        assert "".join(text[c.start:c.end] for c in chunks) == text, path


