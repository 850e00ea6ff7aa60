"""overlay/<dist>/releases.toml on the pinned SGLang wheels: 0.5.8-0.5.11's series import
opaque_fp4_quantize.py and get it, 0.5.16's does not and does not (the rule itself: tests/unit/test_overlay_files.py)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from helpers import OVERLAY, PATCHES, cache_dir

from nvfp4_overlay import cli


@pytest.mark.upstream
@pytest.mark.parametrize(("version", "gets"), [("0.5.8", True), ("0.5.11", True), ("0.5.16", False)])
def test_sglang_wheels_get_opaque_fp4_quantize_where_their_series_imports_it(
        tmp_path: Path, version: str, gets: bool, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--dist-dir", str(tmp_path),
            "--cache-dir", str(cache_dir())]
    assert cli.main(["build", *args, "--json", f"sglang=={version}"]) == 0
    capsys.readouterr()
    (wheel,) = tmp_path.glob(f"sglang-{version}+nvfp4.*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        imports = [n for n in names if n.endswith(".py") and b"opaque_fp4_quantize" in zf.read(n)
                   and not n.endswith("opaque_fp4_quantize.py")]
    assert ("sglang/srt/layers/quantization/opaque_fp4_quantize.py" in names) is gets
    assert bool(imports) is gets  # the module is there exactly where the patched code imports it
    (provenance,) = [n for n in names if n.endswith(".dist-info/NVFP4_OVERLAY.json")]
    with zipfile.ZipFile(wheel) as zf:
        overlay = json.loads(zf.read(provenance))["overlay"]
    assert ("sglang/srt/layers/quantization/opaque_fp4_quantize.py" in overlay) is gets
