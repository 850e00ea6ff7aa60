"""flashinfer-cubin: the trtllm-gen cubins a stack's serving path loads, pinned to its FlashInfer release.

Without it, FlashInfer's cubin loader fetches each cubin over the network at its first use
(flashinfer/jit/cubin_loader.py; offline, the call fails). flashinfer-cubin ships them all for one
release, and FlashInfer refuses one of another release at import (jit/env.py: exact version match).
The pin is the public version of the patched FlashInfer (0.6.8.post1 for 0.6.8.post1+nvfp4.7).
"""

from __future__ import annotations

from packaging.version import Version

from .install import Step, Tool
from .manifest import Stack

# The releases the index holds a flashinfer-cubin of (pip index versions flashinfer-cubin, 2026-12-04:
# 0.4.0-0.6.13): a stack whose FlashInfer is newer fetches its cubins at run time, as upstream does.
PUBLISHED = frozenset(Version(v) for v in (
    "0.4.0 0.4.1 0.5.0 0.5.1 0.5.2 0.5.3 0.6.0 0.6.1 0.6.2 0.6.3 0.6.4 0.6.5 0.6.6 0.6.7 0.6.7.post1 0.6.7.post2 "
    "0.6.7.post3 0.6.8 0.6.8.post1 0.6.9 0.6.10 0.6.10.post1 0.6.11 0.6.11.post1 0.6.11.post2 0.6.11.post3 "
    "0.6.12 0.6.13").split())


def requirement(stack: Stack) -> str | None:
    """flashinfer-cubin==X for the stack's FlashInfer, or None where no such release is published."""
    target = next((t for t in stack.targets if t.dist == "flashinfer-python"), None)
    if target is None or Version(target.version) not in PUBLISHED:
        return None
    return f"flashinfer-cubin=={Version(target.version).public}"


def install_step(stack: Stack, tool: Tool) -> Step | None:
    pin = requirement(stack)
    if pin is None:
        return None
    return Step(f"the trtllm-gen cubins of FlashInfer's release, so that no call fetches them at run time ({pin}, "
                f"about 300 MB; from your index or its mirror)", tuple(tool.command("install") + ["--no-deps", pin]))
