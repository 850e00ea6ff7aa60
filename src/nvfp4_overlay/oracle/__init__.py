"""The oracle: probes run over upstream and patched trees, results kept by input, the behaviour checks."""

from __future__ import annotations

from . import behaviour, sglang_launch_runs, sglang_releases
from .sglang_releases import SGLANG, audit_releases

__all__ = ["SGLANG", "audit_releases", "behaviour", "compile_table", "sglang_launch_runs", "sglang_releases"]


def __getattr__(name: str) -> object:
    """compile_table on first use: it is also run as a module (python -m ...compile_table), which an
    import here would load twice."""
    if name == "compile_table":
        import importlib

        return importlib.import_module(f"{__name__}.compile_table")
    raise AttributeError(name)
