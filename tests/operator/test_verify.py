"""verify on the default stack's real wheels: every member explained, an edit with its RECORD row rewritten refused.

Each edited wheel is the built one with one member changed and its RECORD row rewritten to match (what
anyone who can write the file can do): RECORD alone passes it, so verify must hold the member to what
the build writes, with the pinned upstream wheel in the cache (the wheel planned again). Without it
(--offline, an empty cache) a wheel is never ok (exit 4): the digests its provenance carries still name
an edit the provenance does not know of (exit 3). tests/operator/test_trust.py rewrites the provenance too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import OVERLAY, PATCHES, cache_dir, edited_wheel, run_cli

from nvfp4_overlay import cli

EDITS = {  # member -> the kind verify names
    "flashinfer/_nvfp4_overlay/cuda.py": "overlay",
    "flashinfer/jit/cpp_ext.py": "patched",
    "flashinfer/__init__.py": "upstream",
    "flashinfer/added_by_hand.py": "unexplained",
    "sglang/srt/layers/quantization/opaque_fp4_quantize.py": "overlay",
    "sglang/srt/layers/quantization/modelopt_quant.py": "patched",
    "sglang/__init__.py": "upstream",
}


def verify(*args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_cli("verify", "--json", "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), *args)
    return code, json.loads(out), err


@pytest.fixture(scope="module")
def default_stack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default stack's wheels (flashinfer-python 0.6.8.post1, SGLang 0.5.11), built from the cached pinned wheels."""
    dist = tmp_path_factory.mktemp("dist")
    assert cli.main(["build", "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--dist-dir", str(dist),
                     "--cache-dir", str(cache_dir()), "--quiet"]) == 0
    return dist


@pytest.fixture
def built(default_stack: Path, request: pytest.FixtureRequest) -> Path:
    """The flashinfer-python wheel, or the wheel of the distribution whose member the test edits."""
    member = getattr(request, "param", "flashinfer/")
    return next(default_stack.glob("sglang-*.whl" if member.startswith("sglang/") else "flashinfer_python-*.whl"))


@pytest.mark.upstream
@pytest.mark.parametrize("built", ["flashinfer/", "sglang/"], ids=["flashinfer", "sglang"], indirect=True)
@pytest.mark.parametrize("cached", [True, False], ids=["upstream-cached", "offline"])
def test_the_built_wheel_is_explained_member_by_member(built: Path, tmp_path: Path, cached: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NVFP4_OVERLAY_CACHE", str(cache_dir() if cached else tmp_path / "empty"))
    code, document, _ = verify(*([] if cached else ["--offline"]), str(built))
    (wheel,) = document["wheels"]
    assert wheel["problems"] == []
    if cached:
        assert (code, wheel["verdict"], wheel["checked_against"]) == (0, "ok", "upstream")
    else:  # the build as it wrote it, and still not ok: nothing here vouches for it
        assert (code, wheel["verdict"], wheel["checked_against"]) == (4, "unverified", None)


@pytest.mark.upstream
@pytest.mark.parametrize("cached", [True, False], ids=["upstream-cached", "offline"])
@pytest.mark.parametrize("member", list(EDITS), ids=[f"{m.split('/')[0]}-{k}" for m, k in EDITS.items()])
def test_an_edited_member_with_its_record_row_rewritten_is_refused(default_stack: Path, tmp_path: Path, member: str,
                                                                     cached: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    built = next(default_stack.glob("sglang-*.whl" if member.startswith("sglang/") else "flashinfer_python-*.whl"))
    dist, release = built.name.split("-")[0].replace("_", "-"), "0.5.11" if member.startswith("sglang/") else "0.6.8.post1"
    wheel = edited_wheel(built, member, tmp_path / "edited")
    monkeypatch.setenv("NVFP4_OVERLAY_CACHE", str(cache_dir() if cached else tmp_path / "empty"))  # or --cache-dir
    code, document, err = verify(*([] if cached else ["--offline"]), str(wheel))
    (verdict,) = document["wheels"]
    assert code == 3 and verdict["ok"] is False
    assert not any("RECORD says" in p for p in verdict["problems"])  # RECORD itself agrees: only the build can tell
    (problem,) = verdict["members"]
    assert f"rebuild the wheel ('nvfp4-overlay build {dist}=={release}')" in problem["fix"]
    if cached or EDITS[member] in ("overlay", "patched"):  # named, with what it should be
        assert (problem["member"], problem["kind"]) == (member, EDITS[member])
        assert problem["expected"] != problem["found"]
    else:  # without the upstream wheel, the rows carried from upstream are one digest: the fix says how to name it
        assert problem["kind"] == "upstream"
        assert f"verify again where {dist.replace('-', '_')}-{release}-" in problem["fix"]
        assert "to name the member" in problem["fix"]


@pytest.mark.upstream
def test_a_wheel_whose_sha256sums_entry_disagrees_is_refused(built: Path, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    shutil.copy(built, dist)
    (dist / "SHA256SUMS").write_text(f"{'0' * 64}  {built.name}\n")
    code, document, _ = verify(str(dist / built.name))
    assert code == 3
    assert any("SHA256SUMS says " + "0" * 64 in p for p in document["wheels"][0]["problems"])


@pytest.mark.parametrize("name", ["README.md", "notes.txt", "flashinfer.zip"])
def test_a_file_that_is_not_a_wheel_is_a_usage_error(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("# not a wheel\n")
    code, document, err = verify(str(path))
    assert code == 2
    error = document["error"]
    assert (error["path"], error["found"]) == (str(path), "not a wheel")
    assert "name a wheel that build wrote" in error["fix"] and "download it again" not in error["message"]
    assert "Traceback" not in err
