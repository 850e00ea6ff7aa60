"""pip, the only way to the index: `pip download` of a release's wheels, `pip index versions`.

Going through pip means the user's index configuration, mirrors, proxies and credentials apply.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Ran:
    """What pip did: its exit status and the last lines it wrote (for the message when it failed)."""

    returncode: int
    stdout: str
    tail: str


def _pip(*args: str) -> Ran:
    command = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check"]
    done = subprocess.run(command, capture_output=True, text=True)
    tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
    return Ran(done.returncode, done.stdout, tail)


def download(requirement: str, dest: Path, tag_args: Sequence[str] = ()) -> Ran:
    """`pip download --no-deps --only-binary=:all:` of one requirement into dest."""
    return _pip("download", "--no-deps", "--only-binary=:all:", "--dest", str(dest), *tag_args, requirement)


def index_versions(dist: str) -> tuple[list[str], Ran]:
    """The versions `pip index versions` lists (newest first, as pip prints them)."""
    ran = _pip("index", "versions", dist)
    for line in ran.stdout.splitlines():
        if line.startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",")], ran
    return [], ran
