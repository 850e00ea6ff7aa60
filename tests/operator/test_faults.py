"""A real build stopped mid-way, in a child process: SIGTERM removes what it wrote (cli/__init__.py), and what a
SIGKILL leaves the next build removes (files.sweep): the dist dir ends as it was, or as the next build writes it.

The upstream wheels are the real pinned ones (the shared cache, read as a --wheelhouse: never written); the
child's own cache is private. The signal goes once the dist dir holds a temporary wheel: the landing keeps
every wheel of the run under a temporary name until the last target is built, so the build is still
running then. tests/unit/test_hardening.py does the same for a download's folder in the cache.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import OVERLAY, PATCHES, cache_dir, fetch_upstream

# Large wheels first (0.7.4 is 101 MB), so that the first temporary appears with targets still to build.
TARGETS = ["flashinfer-python==0.7.4", "flashinfer-python==0.7.2", "flashinfer-python==0.6.18"]


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    for target in TARGETS:
        dist, version = target.split("==")
        fetch_upstream(dist, version, patches_dir=PATCHES, cache_dir=cache_dir())  # pip fills the cache where needed
    return cache_dir() / "wheels"


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for a folder), hidden temporaries too."""
    return {p.relative_to(root).as_posix(): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def build(tmp_path: Path, wheelhouse: Path, *targets: str) -> list[str]:
    return [sys.executable, "-m", "nvfp4_overlay.cli", "build", "--json", "--offline", "--patches-dir", str(PATCHES),
            "--overlay-dir", str(OVERLAY), "--dist-dir", str(tmp_path / "dist"), "--cache-dir", str(tmp_path / "cache"),
            "--wheelhouse", str(wheelhouse), *targets]


def stopped_once_writing(argv: list[str], dist: Path, how: signal.Signals) -> tuple[int, str, str]:
    """Run the build, send `how` once a temporary wheel is in the dist dir; its exit status and output."""
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while not any(dist.glob(".*.whl.*.tmp")) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert child.poll() is None, "the build ended before a temporary wheel was seen"
        child.send_signal(how)
        out, err = child.communicate(timeout=300)
    finally:
        child.kill()
    return child.returncode, out, err


@pytest.mark.upstream
def test_sigterm_leaves_the_dist_dir_and_the_cache_as_they_were(tmp_path: Path, wheelhouse: Path) -> None:
    """Before: Python's default for SIGTERM ended the build at once, silent, exit 143 as a shell reports it,
    and the temporary wheels stayed in the dist dir (85 MB for `build --stack all`)."""
    dist, cache = tmp_path / "dist", tmp_path / "cache"
    dist.mkdir()
    (dist / "SHA256SUMS").write_text("")  # a dist dir in use
    (cache / "wheels").mkdir(parents=True)
    before = tree(dist), tree(cache)
    code, out, err = stopped_once_writing(build(tmp_path, wheelhouse, *TARGETS), dist, signal.SIGTERM)
    assert code == 143, err
    assert json.loads(out)["error"]["kind"] == "Interrupted" and "terminated (SIGTERM)" in err
    assert (tree(dist), tree(cache)) == before


@pytest.mark.upstream
def test_what_a_killed_build_leaves_the_next_build_removes(tmp_path: Path, wheelhouse: Path) -> None:
    """SIGKILL cannot be handled: its temporary wheels stay; the next build sweeps them (no live process holds
    their lock), and the dist dir then holds what that build wrote and nothing else."""
    dist = tmp_path / "dist"
    code, _, _ = stopped_once_writing(build(tmp_path, wheelhouse, *TARGETS), dist, signal.SIGKILL)
    assert code == -signal.SIGKILL
    left = sorted(p.name for p in dist.glob(".*.tmp"))
    assert left, "a killed build leaves its temporaries"
    done = subprocess.run(build(tmp_path, wheelhouse, TARGETS[-1]), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    built = [Path(b["wheel"]).name for b in document["built"]]
    assert sorted(p.name for p in dist.iterdir()) == sorted([*built, "SHA256SUMS"])
    assert document["removed"] == [str(dist / name) for name in left]
