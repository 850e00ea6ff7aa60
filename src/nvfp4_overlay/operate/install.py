"""The commands that put a stack into a serving environment with pip or uv (pure).

Installing is two steps, so that no resolver ever has to choose between two indexes for one project:
first the stack's upstream releases from the user's own index, with their whole dependency tree
(torch, CUDA libraries: what SGLang and FlashInfer pin); then the patched wheels over them with
--no-deps, from the dist dir alone (--no-index) or from the fleet's index. The patched wheels keep
upstream's Requires-Dist, so what the first step resolved satisfies them and `pip check` stays clean.
For uv the fleet index goes in --extra-index-url: uv searches it before any other index and, by its
default first-index strategy, takes each project from the first index that has it; the pins are
local versions (`+nvfp4.N`) that no public index can hold, so they come from the fleet alone, and
--index-strategy unsafe-best-match is neither needed nor wanted.

Rolling back is rollback.py's; operate/cubins.py says why the hashed cubin step goes first.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..patch import Stack, Target


@dataclass(frozen=True)
class Step:
    """One command of the sequence, and why it is there."""

    why: str
    argv: tuple[str, ...]
    stdin: str | None = None  # a requirements file the command reads from /dev/stdin (pip's --hash lives only there)

    @property
    def shell(self) -> str:
        """The command as a shell runs it; a requirements file on stdin as printf's arguments, a line each."""
        if self.stdin is None:
            return shlex.join(self.argv)
        lines = " ".join(shlex.quote(line) for line in self.stdin.splitlines())
        return f"printf '%s\\n' {lines} | {shlex.join(self.argv)}"


@dataclass(frozen=True)
class Tool:
    """pip or uv, aimed at one environment's interpreter (None: whatever `pip` / `uv` finds)."""

    uv: bool = False
    python: str | None = None

    def command(self, verb: str) -> list[str]:
        if self.uv:
            return ["uv", "pip", verb, *(["--python", self.python] if self.python else [])]
        return [self.python, "-m", "pip", verb] if self.python else ["pip", verb]

    @property
    def reinstall(self) -> str:
        """The flag that installs a requirement even where the installed version satisfies it: neither pip nor uv
        checks an installed distribution against --hash, only a file it downloads."""
        return "--reinstall" if self.uv else "--force-reinstall"

    def check(self) -> Step:
        return Step("check that every installed distribution's requirements are met", tuple(self.command("check")))


def install_steps(stack: Stack, local_versions: dict[Target, str], tool: Tool, *, dist_dir: Path | None = None,
                  fleet_index: str | None = None) -> list[Step]:
    """Upstream releases with their dependencies from the user's index, the patched wheels over them, a check."""
    upstream = [str(t) for t in (*stack.targets, *stack.upstream)]
    pins = [f"{t.dist}=={local_versions[t]}" for t in stack.targets]
    if fleet_index is not None:
        where = ["--extra-index-url", fleet_index] if tool.uv else ["--index-url", fleet_index]
        source = f"from the index {fleet_index}"
    else:
        assert dist_dir is not None
        where, source = ["--no-index", "--find-links", str(dist_dir)], f"from {dist_dir} alone"
    return [
        Step(f"stack {stack.name}: its upstream releases and their whole dependency tree, from your index",
             tuple(tool.command("install") + upstream)),
        Step(f"the patched wheels over them, {source}; their dependencies are upstream's, already installed",
             tuple(tool.command("install") + ["--no-deps", *where] + pins)),
        tool.check(),
    ]


def missing_wheels(dist_dir: Path, stems: Sequence[tuple[str, str]]) -> list[str]:
    """The (wheel stem, local version) pairs the dist dir holds no wheel of, as glob patterns."""
    patterns = [f"{stem}-{version}-*.whl" for stem, version in stems]
    return [p for p in patterns if not any(dist_dir.glob(p))]
