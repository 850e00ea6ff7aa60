"""The oracle: probes run over upstream and patched trees, results kept by input, the behaviour checks."""

from __future__ import annotations

from . import behaviour, sglang_launch_runs, sglang_releases
from .sglang_releases import SGLANG, audit_releases

__all__ = ["SGLANG", "audit_releases", "behaviour", "sglang_launch_runs", "sglang_releases"]
