"""jit-cache builds one at a time in a workspace (wheel/jit_cache.py _exclusive): two builds of the same wheel,
GPU and toolkit at once removed each other's nvcc intermediates (`make test` on two workers: cc1plus could not
open its output in the other build's --keep-dir)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from nvfp4_overlay.wheel import jit_cache


def test_a_second_build_in_the_same_workspace_waits_for_the_first(tmp_path: Path) -> None:
    work = tmp_path / "jit-cache" / "0123456789abcdef-sm120-cuda13.0"
    with jit_cache._exclusive(work):
        other = os.open(work / ".lock", os.O_RDWR)  # another build's descriptor: flock is per open file
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    other = os.open(work / ".lock", os.O_RDWR)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once the first is done
    finally:
        os.close(other)
