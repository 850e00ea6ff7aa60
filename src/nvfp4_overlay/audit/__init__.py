"""What upstream's source says: FlashInfer's serving API (api_*), CUDA versions (cuda_*), SGLang (sglang_*)."""

from __future__ import annotations

from . import (
    api_audit,
    api_rules,
    cuda_audit,
    inert,
    routes,
    sglang_audit,
    sglang_calls,
    sglang_launch,
    sglang_launch_table,
    sglang_models,
    sglang_raw,
    sglang_reach,
)
from .api_audit import Audit, PublicFunction, load_audit, new_apis

__all__ = ["Audit", "PublicFunction", "api_audit", "api_rules", "cuda_audit",
           "cuda_audit_make", "inert", "load_audit", "new_apis",
           "routes", "sglang_audit", "sglang_calls", "sglang_launch", "sglang_launch_table", "sglang_models", "sglang_raw", "sglang_reach"]
