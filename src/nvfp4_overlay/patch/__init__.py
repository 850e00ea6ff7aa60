"""The patch engine: pins and series read and checked, hunks applied, placed and merged in memory."""

from __future__ import annotations

from .manifest import (
           OverlayFile,
           Stack,
           Stacks,
           Target,
           Upstream,
           UpstreamWheel,
           all_targets,
           load_overlay,
           load_stacks,
           load_upstream,
           nearest,
           overlay_root,
           resolve_targets,
)
from .patching import Applied, HunkResult, Placement, Series, apply_hunks, apply_series, read_series
from .placement import BROKEN, HunkDrift, Read, State, drift_file, merge_file, moved_elsewhere
from .series import FilePatch, Patch, decode, split_lines

# What the other wings take, by what it is for (each name has a user outside patch/: wheel/, carry/,
# operate/, oracle/, audit/, cli/; tests/unit/test_layers.py holds them to this list).
__all__ = [
    # the pins: stacks.toml, upstream.toml, the overlay's files (every wing above)
    "OverlayFile", "Stack", "Stacks", "Target", "Upstream", "UpstreamWheel",
    "all_targets", "load_overlay", "load_stacks", "load_upstream", "nearest", "overlay_root", "resolve_targets",
    # a series read and applied (wheel/'s recipe, operate/'s verify, carry/'s refresh and matrix)
    "Applied", "FilePatch", "HunkResult", "Patch", "Series", "apply_series", "decode", "read_series", "split_lines",
    # a hunk placed on a release it was not written for (carry/drift.py alone)
    "BROKEN", "HunkDrift", "Placement", "Read", "State", "apply_hunks", "drift_file", "merge_file", "moved_elsewhere",
]
