"""The CUDA-version audit holds every call site of every carried release, and the overlay follows it.

patches/flashinfer-python/audit-cuda-versions.json classifies each call of get_cuda_version,
is_cuda_version_at_least and version_at_least(torch.version.cuda, ...) (what it decides, which
release answers it, why). These tests read the real upstream wheels: a call site the audit does not
classify fails here, so a new release cannot be carried with a lookup nobody looked at.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from helpers import OVERLAY, PATCHES, cache_dir, fetch_upstream

from nvfp4_overlay import cuda_audit
from nvfp4_overlay.archive import WheelReader
from nvfp4_overlay.manifest import all_targets

RELEASES = [t.version for t in all_targets(PATCHES) if t.dist == "flashinfer-python"]
AUDIT = cuda_audit.load_audit(PATCHES)


def _nvcc_facing() -> dict[str, frozenset[str]]:
    path = OVERLAY / "flashinfer-python" / "flashinfer" / "_nvfp4_overlay" / "nvcc_facing.py"
    module = types.ModuleType("nvcc_facing")
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return dict(module.NVCC_FACING)


def test_the_overlay_table_is_the_audits_toolkit_column() -> None:
    assert _nvcc_facing() == AUDIT.toolkit_sites()


def test_every_entry_says_what_it_decides_and_why() -> None:
    for entry in AUDIT.entries:
        assert entry["answer"] in ("toolkit", "torch", "per caller", "n/a (TVM's own function)"), entry
        assert entry["decides"].strip() and entry["why"].strip(), entry


@pytest.mark.upstream
@pytest.mark.parametrize("release", RELEASES)
def test_every_lookup_of_the_release_is_classified(release: str) -> None:
    wheel = fetch_upstream("flashinfer-python", release, patches_dir=PATCHES, cache_dir=cache_dir())
    with WheelReader(wheel) as reader:
        files = {n: reader.read(n).decode() for n in reader.infos
                 if n.endswith(".py") and not n.startswith("flashinfer/data/")}
    sites = cuda_audit.call_sites(files)
    assert any(s.key == ("flashinfer.jit.cpp_ext", "build_cuda_cflags") for s in sites)  # the scan sees
    missing = cuda_audit.unclassified(sites, AUDIT)
    assert missing == [], f"{release}: call sites the audit does not classify: {missing}"


SOURCE = '''
import functools
def get_cuda_version(): return CODES.append(__import__("sys")._getframe(1).f_code)
def is_cuda_version_at_least(v): return CODES.append(__import__("sys")._getframe(1).f_code)
CODES = []
get_cuda_version()
class Runner:
    def _check_support(self):
        return is_cuda_version_at_least("12.8")
    @functools.cache
    def cached(self):
        return [get_cuda_version() for _ in range(1)]
def detect():
    def has_sm():
        return get_cuda_version()
    return has_sm()
Runner()._check_support(); Runner().cached(); detect()
'''


def test_scanned_names_are_cpythons_qualified_names(tmp_path: Path) -> None:
    """What cuda.py reads from the frame (co_qualname) is what the scan writes into the audit."""
    namespace: dict[str, object] = {}
    exec(compile(SOURCE, "flashinfer/demo.py", "exec"), namespace)
    seen = [code.co_qualname for code in namespace["CODES"]]  # type: ignore[attr-defined]
    scanned = [s.qualname for s in cuda_audit.call_sites({"flashinfer/demo.py": SOURCE})
               if s.qualname != "get_cuda_version"]
    # The comprehension's own frame is named "<listcomp>" in 3.11; cuda.py walks out of it to the
    # function, which is the name the scan gives.
    assert [q if not q.endswith("<listcomp>") else q.rsplit(".<locals>.", 1)[0] for q in seen] == scanned
    assert scanned == ["<module>", "Runner._check_support", "Runner.cached", "detect.<locals>.has_sm"]


def test_the_docs_table_is_the_audit() -> None:
    """docs/patches.md shows the committed audit (make docs renders it anew)."""
    text = (PATCHES.parent / "docs" / "patches.md").read_text()
    assert cuda_audit.render_into(text, AUDIT) == text
    assert text.count("| toolkit (nvcc)") >= 60
