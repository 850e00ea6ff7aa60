"""doctor --sglang-args: whether the examined environment's SGLang runs a fullgraph region for a launch line.

Reads what doctor found (the installed SGLang's release, the installed FlashInfer's routes as doctor read
them from this checkout's overlay, the GPU) and asks sglang_launch, a pure table; adds the answer to
doctor's document and one note.
"""

from __future__ import annotations

from typing import Any

from ..audit import sglang_launch, sglang_raw


def judge(document: dict[str, Any], args: str, arch: str | None) -> dict[str, Any] | None:
    """document["sglang_launch"]: {"runs", "why", "raw_left"}; None (and a note) without an SGLang."""
    sglang = document["distributions"].get("sglang", {})
    if not sglang.get("installed"):
        document["notes"].append("--sglang-args: sglang is not installed there; nothing to judge")
        return None
    gpu = _gpu(document.get("gpu"))
    region = sglang_launch.fullgraph_region(sglang["version"], args, gpu=gpu, arch=arch)
    routes = document.get("routes")  # doctor's: this checkout's overlay, never the installed entries.py run here
    raw = sglang_launch.raw_left(region, sglang_raw.conditional_calls(routes), args, gpu)
    answer = {"runs": region["runs"], "why": region["why"], "raw_left": raw, "gpu": gpu, "arch": arch}
    said = {True: "runs a fullgraph region", False: "runs no fullgraph region", None: "cannot be judged"}[region["runs"]]
    left = (f"; raw FlashInfer left in it: {', '.join(raw)}" if raw else
            "; nothing raw left in it that these checks know of" if region["runs"] else "")
    document["notes"].append(f"this launch line {said} ({'; '.join(region['why'])}){left}")
    document["sglang_launch"] = answer
    return answer


def _gpu(gpu: dict[str, Any] | None) -> str | None:
    """The first device's compute capability ("9.0"), None where doctor saw no GPU."""
    devices = (gpu or {}).get("devices") or []
    return ".".join(map(str, devices[0]["capability"])) if devices else None
