"""The serving-API audit on the real releases: every public FlashInfer function that reaches a kernel loader is classified.

patches/flashinfer-python/audit-serving-api.json says, for each public function of each carried
release that reaches the JIT loader (JitSpec.build_and_load) or the cubin loader, whether the
overlay routes it, will route it (pending), or leaves it out of scope and why. A release with a new
one fails here, and api_audit.unclassified names it for refresh, drift and doctor. The rules and the
committed files alone: tests/unit/test_api_rules.py."""

from __future__ import annotations

import zipfile

import pytest
from helpers import PATCHES, cache_dir, fetch_upstream
from packaging.version import Version

from nvfp4_overlay.audit import api_audit
from nvfp4_overlay.patch.manifest import all_targets
from nvfp4_overlay.wheel import fetch

RELEASES = sorted((t.version for t in all_targets(PATCHES) if t.dist == "flashinfer-python"), key=Version)
AUDIT = api_audit.load_audit(PATCHES)


@pytest.fixture(scope="module")
def memo() -> api_audit.Memo:
    """What one release's scan learnt, for the next: the releases are scanned in order, in one worker."""
    return api_audit.Memo()


def _scan(release: str, memo: api_audit.Memo) -> list[api_audit.PublicFunction]:
    """The scan of a release's own wheel (0.7.4, 113 MB of Python: seconds), or what the cache's
    store kept of it under the same texts and scanner (test_a_stored_scan_is_taken_only_for_the_same_inputs)."""
    wheel = fetch_upstream("flashinfer-python", release, patches_dir=PATCHES, cache_dir=cache_dir())
    with zipfile.ZipFile(wheel) as zf:
        return api_audit.scan(api_audit.scan_wheel_files({n: zf.read(n) for n in zf.namelist() if api_audit.scanned(n)}),
                              memo, fetch.Source(cache_dir()).scans_dir)


@pytest.mark.upstream
@pytest.mark.parametrize("release", [pytest.param(v, marks=pytest.mark.xdist_group("api-audit")) for v in RELEASES])
def test_every_function_of_the_release_that_reaches_a_loader_is_classified(release: str, memo: api_audit.Memo) -> None:
    found = _scan(release, memo)
    assert any(f.name == "fp4_quantize" for f in found)  # the scan sees the family it is for
    missing = api_audit.unclassified(found, AUDIT)
    assert missing == [], f"{release}: public functions that reach a loader and that {api_audit.AUDIT} " \
                          f"does not classify: {[f.key for f in missing]}"


NEW_API = '''

@flashinfer_api
def nvfp4_quantize_v2(a, a_global_sf, sf_vec_size=16):
    """A new public quantizer of a release after the carried ones, on the same JIT loader."""
    major, minor = get_compute_capability(a.device)
    return get_fp4_quantization_module(f"{major * 10 + minor}").fp4_quantize_sm100(a, a_global_sf, sf_vec_size)
'''


@pytest.mark.upstream
def test_a_new_public_quantizer_on_the_same_loader_is_flagged() -> None:
    """0.7.4's own files, with what a 0.7.5 could add: a public nvfp4_quantize_v2 beside
    nvfp4_quantize. Only the families the loaders and this module live in are scanned (the
    experimental and Cake programs are 95% of 0.7.4's bytes and name neither)."""
    wheel = fetch_upstream("flashinfer-python", "0.7.4", patches_dir=PATCHES, cache_dir=cache_dir())
    with zipfile.ZipFile(wheel) as zf:
        files = api_audit.scan_wheel_files({n: zf.read(n) for n in zf.namelist()
                                            if n.startswith(("flashinfer/jit/", "flashinfer/quantization/"))
                                            or n.count("/") == 1})
    target = "flashinfer/quantization/fp4_quantization.py"
    before = api_audit.unclassified(api_audit.reaching(files), AUDIT)
    files[target] += NEW_API
    after = api_audit.unclassified(api_audit.reaching(files), AUDIT)
    new = [f for f in after if f not in before]
    assert [f.key for f in new] == ["flashinfer.quantization.fp4_quantization.nvfp4_quantize_v2"]
    assert new[0].loaders == ("jit",) and "get_fp4_quantization_module" in new[0].via[1]


