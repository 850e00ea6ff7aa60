"""overlay/<dist>/releases.toml on the pinned SGLang wheels: 0.5.8-0.5.11's series import
opaque_fp4_quantize.py and get it, 0.5.16's does not and does not; 0.5.9's imports indexer_split.py and
gets it, 0.5.8's and 0.5.11's do not (the rule itself: tests/unit/test_overlay_files.py)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from helpers import OVERLAY, PATCHES, cache_dir

from nvfp4_overlay import cli

OPAQUE = "sglang/srt/layers/quantization/opaque_fp4_quantize.py"
INDEXER_SPLIT = "sglang/srt/layers/attention/nsa/indexer_split.py"


@pytest.mark.upstream
@pytest.mark.parametrize(("version", "module", "gets"), [
    ("0.5.8", OPAQUE, True), ("0.5.11", OPAQUE, True), ("0.5.16", OPAQUE, False),
    ("0.5.9", INDEXER_SPLIT, True), ("0.5.8", INDEXER_SPLIT, False), ("0.5.11", INDEXER_SPLIT, False)])
def test_sglang_wheels_get_an_overlay_module_where_their_series_imports_it(
        tmp_path: Path, version: str, module: str, gets: bool, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--dist-dir", str(tmp_path),
            "--cache-dir", str(cache_dir())]
    assert cli.main(["build", *args, "--json", f"sglang=={version}"]) == 0
    capsys.readouterr()
    (wheel,) = tmp_path.glob(f"sglang-{version}+nvfp4.*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        dotted = module.removesuffix(".py").rsplit("/", 1)[-1].encode()
        imports = [n for n in names if n.endswith(".py") and dotted in zf.read(n) and n != module]
    assert (module in names) is gets
    assert bool(imports) is gets  # the module is there exactly where the patched code imports it
    (provenance,) = [n for n in names if n.endswith(".dist-info/NVFP4_OVERLAY.json")]
    with zipfile.ZipFile(wheel) as zf:
        overlay = json.loads(zf.read(provenance))["overlay"]
    assert (module in overlay) is gets
