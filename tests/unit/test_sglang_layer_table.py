"""oracle/sglang_layer: the whole-layer table's entries per release, model and case, and its docs rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nvfp4_overlay.oracle import sglang_layer

WHOLE = {"whole": True, "allreduce_fusion": False, "ops": [],
         "pieces": [{"split": False, "ops": ["sglang.fp4_gemm"]},
                    {"split": True, "ops": ["sglang.unified_attention_with_output"]}]}
FAILED = {"whole": False, "allreduce_fusion": None, "pieces": [],
          "error": 'Unsupported: Import failure\n  File "/x/sglang/srt/utils/common.py", line 9, in is_musa'}


def _patches(tmp_path: Path) -> Path:
    (tmp_path / "sglang").mkdir()
    return tmp_path


def test_the_default_model_keeps_its_cases_and_the_others_go_by_model(tmp_path: Path) -> None:
    patches = _patches(tmp_path)
    sglang_layer.record(patches, "0.5.20", "0.6.18", "patched-sm120-flashinfer_cutlass", WHOLE)
    sglang_layer.record(patches, "0.5.20", "0.6.18", "upstream-sm120-flashinfer_cutlass", FAILED, "kimi-k2")
    sglang_layer.record(patches, "0.5.9", "0.6.3", "patched-sm100-flashinfer_trtllm", WHOLE, "glm4-moe")
    table: dict[str, Any] = json.loads((patches / "sglang" / sglang_layer.AUDIT).read_text())
    assert list(table["releases"]) == ["0.5.9", "0.5.20"]  # by version, not by text
    found = table["releases"]["0.5.20"]
    assert set(found["cases"]) == {"patched-sm120-flashinfer_cutlass"}
    assert found["models"]["kimi-k2"]["upstream-sm120-flashinfer_cutlass"]["where"] == (
        "Unsupported: Import failure (sglang/srt/utils/common.py is_musa)")
    assert set(sglang_layer.cases(found)) == {sglang_layer.DEFAULT_MODEL, "kimi-k2"}


def test_each_row_names_its_model(tmp_path: Path) -> None:
    patches = _patches(tmp_path)
    sglang_layer.record(patches, "0.5.20", "0.6.18", "patched-sm120-flashinfer_cutlass", WHOLE)
    sglang_layer.record(patches, "0.5.20", "0.6.18", "patched-sm120-flashinfer_cutlass", WHOLE, "kimi-k2")
    sglang_layer.record(patches, "0.5.20", "0.6.18", "upstream-sm120-flashinfer_cutlass", FAILED, "kimi-k2")
    rows = sglang_layer.markdown(sglang_layer.load_table(patches)).splitlines()
    assert rows[0].startswith("| SGLang | FlashInfer | model | stack |")
    assert rows[2].startswith("| 0.5.20 | 0.6.18 | qwen3-moe | patched | SM120 flashinfer_cutlass | yes |")
    assert rows[3].startswith("| 0.5.20 | 0.6.18 | kimi-k2 | patched | SM120 flashinfer_cutlass | yes |")
    assert rows[4].startswith("| 0.5.20 | 0.6.18 | kimi-k2 | upstream | SM120 flashinfer_cutlass | no: Unsupported")
    assert len(rows) == 5
