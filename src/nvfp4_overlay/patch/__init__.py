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

__all__ = ["Applied", "BROKEN", "FilePatch", "HunkDrift", "HunkResult", "OverlayFile", "Patch", "Placement", "Read",
           "Series", "Stack", "Stacks", "State", "Target", "Upstream", "UpstreamWheel", "all_targets", "apply_hunks",
           "apply_series", "decode", "drift_file", "load_overlay", "load_stacks", "load_upstream", "merge_file",
           "moved_elsewhere", "nearest", "overlay_root", "read_series", "resolve_targets", "split_lines"]
