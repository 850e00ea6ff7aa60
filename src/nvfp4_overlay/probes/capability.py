"""The GPU a probe fakes: every binding of FlashInfer's get_compute_capability answers it (the doctor's
probe, the trace ladder and the SGLang region probe share this one)."""

from __future__ import annotations

import sys
from typing import Any


def fake_capability(torch: Any, capability: tuple[int, int]) -> None:
    """Every binding of get_compute_capability in FlashInfer: CPU tensors are otherwise refused."""
    torch.cuda.get_device_capability = lambda device=None: capability
    for name, module in list(sys.modules.items()):
        if name.startswith("flashinfer") and hasattr(module, "get_compute_capability"):
            vars(module)["get_compute_capability"] = lambda device=None: capability
