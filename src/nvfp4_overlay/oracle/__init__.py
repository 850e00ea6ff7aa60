"""The oracle: probes run over upstream and patched trees, results kept by input, the behaviour checks."""

from __future__ import annotations

from . import behaviour, sglang_launch_runs, sglang_releases
from .sglang_releases import SGLANG, audit_releases

__all__ = ["SGLANG", "audit_releases", "behaviour", "compile_table", "sglang_launch_runs", "sglang_releases",
           "sglang_table"]


def __getattr__(name: str) -> object:
    """The committed tables' generators on first use: only `nvfp4-overlay generate` and `list` need them."""
    if name in ("compile_table", "sglang_table"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(name)
