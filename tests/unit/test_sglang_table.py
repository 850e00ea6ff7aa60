"""The SGLang region table and its committed files, without a wheel: every stack's release pinned once,
the table holding every release with its pin, patches/sglang/stack-claims.toml naming stacks and
regions that exist, what remains raw per stack, docs/sglang-regions.md rendered from the table, and
the guarded-line finder's memo. The regions traced on the real releases: tests/releases/test_sglang_regions.py."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import PATCHES, ROOT, sglang_flashinfer_pins, sglang_stack_releases

from nvfp4_overlay.audit import sglang_audit, sglang_reach
from nvfp4_overlay.oracle import sglang_releases, sglang_table
from nvfp4_overlay.patch.manifest import load_stacks

RELEASES = sglang_releases.audit_releases(PATCHES)
BY_VERSION = {r.version: r for r in RELEASES}
STACK_PIN = sglang_flashinfer_pins()
VERSIONS = [r.version for r in RELEASES]
# The releases whose upstream stack (upstream SGLang, upstream FlashInfer) is probed afresh and held to
# the committed table: two a day, every one with NVFP4_OVERLAY_FRESH=1 (make test-releases, weekly).
TABLE = sglang_audit.load_table(PATCHES)
DOC = ROOT / "docs" / "sglang-regions.md"


# --- the pins and the table, without torch ----------------------------------------------------------------


def test_every_stack_release_is_pinned_once() -> None:
    pins = sglang_releases.load_pins(PATCHES)
    for release in RELEASES:
        if release.carried:
            assert release.version not in pins, f"sglang {release.version} has a series and a pin in the pins file"
        else:
            assert release.version in pins, f"sglang {release.version} ships unpatched and has no pinned wheel"
    assert set(pins) <= {r.version for r in RELEASES}, "the pins file pins a release no stack installs"
    assert [r.version for r in RELEASES][:1] == ["0.5.8"] and VERSIONS[-1] == sglang_stack_releases()[-1]


def test_the_table_holds_every_release_with_its_pin() -> None:
    assert list(TABLE["releases"]) == VERSIONS
    for version in VERSIONS:
        entry = TABLE["releases"][version]
        assert entry["flashinfer"] == STACK_PIN[version], version
        assert set(entry["sglang"]) == ({"upstream", "patched"} if BY_VERSION[version].carried else {"upstream"})


def test_stack_claims_name_stacks_and_regions_that_exist() -> None:
    claims = sglang_audit.load_claims(PATCHES)
    names = {s.name for s in load_stacks(PATCHES).stacks}
    regions = {r for entry in TABLE["releases"].values() for r in entry["sglang"]["upstream"]}
    assert set(claims) <= names
    for stack, covered in claims.items():
        assert covered <= regions, f"{stack} claims regions the probe does not know: {covered - regions}"


def test_remaining_by_stack_names_every_sglang_stack() -> None:
    routes = sglang_audit.read_routes(ROOT / "overlay" / "flashinfer-python")
    left = sglang_releases.remaining_by_stack(PATCHES, routes)
    assert set(left) == {s.name for s in load_stacks(PATCHES).stacks
                         if any(t.dist == "sglang" for t in (*s.targets, *s.upstream))}
    claims = sglang_audit.load_claims(PATCHES)
    for stack, regions in left.items():
        assert not claims.get(stack, frozenset()) & set(regions), f"{stack} claims a region raw calls remain in"


def test_the_document_renders_the_committed_table() -> None:
    carried = {r.version: r.carried for r in RELEASES}
    routes = sglang_audit.read_routes(ROOT / "overlay" / "flashinfer-python")
    rendered = sglang_table.markdown_table(TABLE, carried, routes, sglang_reach.load_reach(PATCHES))
    text = DOC.read_text(encoding="utf-8")
    assert sglang_table.render_into(text, rendered) == text, "run `make sglang-regions-docs`"


def test_guarded_lines_are_found_once_per_text(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where an absent module's import is guarded (inside a try that catches ImportError) is found once
    per file text, wherever the file sits and in whichever child: the patched SGLang tree's copy of an
    upstream file, or the next child's, is not parsed again; a file that differs is."""
    from nvfp4_overlay.probes.sglang import sglang_imports

    monkeypatch.setattr(sglang_imports, "GUARDED", {})
    monkeypatch.setattr(sglang_imports, "_BY_PATH", {})
    parsed: list[bytes] = []
    find = sglang_imports._find_guarded_lines
    monkeypatch.setattr(sglang_imports, "_find_guarded_lines", lambda source: parsed.append(source) or find(source))
    text = "import os\ntry:\n    import zmq\n    x = 1\nexcept ImportError:\n    zmq = None\nimport PIL\n"
    changed = text.replace("try:\n", "try:\n    import pydantic\n")
    for name, body in (("upstream", text), ("patched", text), ("changed", changed)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.py").write_text(body)
    upstream, patched, other = (str(tmp_path / name / "m.py") for name in ("upstream", "patched", "changed"))
    assert [sglang_imports._guarded(upstream, n) for n in range(1, 8)] == [False, False, True, True, False, False, False]
    monkeypatch.setattr(sglang_imports, "_BY_PATH", {})  # the next child: GUARDED handed down, no path seen
    assert [sglang_imports._guarded(patched, n) for n in range(1, 8)] == [False, False, True, True, False, False, False]
    assert len(parsed) == 1
    assert [sglang_imports._guarded(other, n) for n in range(1, 9)] == [False, False, True, True, True, False, False, False]
    assert len(parsed) == 2


