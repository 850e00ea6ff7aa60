"""The SGLang releases the region audit runs on: their pinned wheels, and the FlashInfer each one pins.

A release a series carries is pinned by its upstream.toml; one that ships unpatched (a stack's
``sglang = { version = "X", patched = false }``) by patches/sglang/upstream-pins.toml, one
``[[wheel]]`` per file (its filename names the release). That file is not a series: no
``patches/sglang/<version>/`` directory holds it, so ``list``, ``drift`` and ``build`` never see it.
"""

from __future__ import annotations

import email.parser
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..errors import ConfigError
from ..formats import read_toml
from ..patch import Target, Upstream, UpstreamWheel, load_stacks, load_upstream
from ..wheel import WheelReader, fetch

PINS = "upstream-pins.toml"
SGLANG = "sglang"


@dataclass(frozen=True)
class Release:
    """An SGLang release a stack installs, and whether a series patches it."""

    version: str
    carried: bool


def audit_releases(patches_dir: Path) -> list[Release]:
    """Every SGLang release of patches/stacks.toml, oldest first."""
    found: dict[str, bool] = {}
    for stack in load_stacks(patches_dir).stacks:
        for target in stack.targets:
            if target.dist == SGLANG:
                found[target.version] = True
        for target in stack.upstream:
            if target.dist == SGLANG:
                found.setdefault(target.version, False)
    return [Release(v, found[v]) for v in sorted(found, key=Version)]


def load_pins(patches_dir: Path) -> dict[str, Upstream]:
    """patches/sglang/upstream-pins.toml: release -> its pinned wheels (every problem collected first)."""
    path = patches_dir / SGLANG / PINS
    data = read_toml(path, missing="restore it from git: it pins the SGLang releases no series carries "
                                   "(see docs/sglang-regions.md)")
    problems: list[str] = []
    wheels: dict[str, list[UpstreamWheel]] = {}
    for i, table in enumerate(data.get("wheel", []), start=1):
        filename, digest = table.get("filename"), table.get("sha256")
        try:
            name, version, _, _ = parse_wheel_filename(str(filename))
        except ValueError:
            problems.append(f"[[wheel]] #{i}: {filename!r} is not a wheel filename")
            continue
        if name != SGLANG:
            problems.append(f"[[wheel]] #{i}: {filename} is not an SGLang wheel")
        if not isinstance(digest, str) or len(digest) != 64 or digest.strip("0123456789abcdef"):
            problems.append(f"[[wheel]] #{i} ({filename}): sha256 must be 64 lowercase hex digits, found {digest!r}")
        wheels.setdefault(str(version), []).append(UpstreamWheel(str(filename), str(digest)))
    if problems:
        msg = f"{path}:\n  " + "\n  ".join(problems)
        raise ConfigError(msg, path=path, item=problems[0])
    return {v: Upstream(Target(SGLANG, v), 0, tuple(w), path.parent) for v, w in wheels.items()}


def release_upstream(patches_dir: Path, release: Release) -> Upstream:
    """The pinned upstream wheels of an SGLang release: its series' upstream.toml, or the pins file."""
    if release.carried:
        return load_upstream(patches_dir, Target(SGLANG, release.version))
    pins = load_pins(patches_dir)
    if release.version not in pins:
        msg = (f"{patches_dir / SGLANG / PINS}: sglang {release.version} (a stack ships it unpatched) has no "
               f"pinned wheel")
        raise ConfigError(msg, path=patches_dir / SGLANG / PINS, item=release.version,
                          expected="a [[wheel]] of the release", found="none",
                          fix="add its [[wheel]] filename and sha256")
    return pins[release.version]


def upstream_wheel(patches_dir: Path, release: Release, source: fetch.Source) -> Path:
    """The release's wheel for this interpreter, from the cache or pip, its sha256 checked."""
    upstream = release_upstream(patches_dir, release)
    (pin,) = fetch.select_wheels(upstream, source)
    return fetch.upstream_wheel(upstream, pin, source)


def flashinfer_pin(wheel: Path) -> str:
    """The flashinfer-python release the wheel's METADATA pins (Requires-Dist ==X)."""
    with WheelReader(wheel) as reader:
        (metadata,) = [n for n in reader.infos if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
        text = reader.read(metadata).decode("utf-8")
    pins = []
    for line in email.parser.Parser().parsestr(text).get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) == "flashinfer-python" and requirement.marker is None:
            pins += [s.version for s in requirement.specifier if s.operator == "=="]
    if len(pins) != 1:
        msg = f"{wheel.name}: METADATA pins flashinfer-python {pins or 'nowhere'}; expected one ==X"
        raise ConfigError(msg, path=wheel, item="Requires-Dist: flashinfer-python", expected="==X",
                          found=", ".join(pins) or "none")
    return pins[0]


# --- running the region probe over a release's trees -------------------------------------------------

TREE_GPUS = {"sm120": (12, 0), "sm100": (10, 0)}
# SM121 (GB10, DGX Spark): SGLang's is_sm120_supported asks major 12 alone (and CUDA 12.8), so every
# SM120 branch is taken there; probed apart, on some releases (docs/proof.md), and held to the sm120 rows.
SM121_GPUS = {"sm121": (12, 1)}


def probe_release(sglang_trees: dict[str, Path], flashinfer_trees: dict[str, Path], scratch: Path,
                  jobs: int = 2, gpus: dict[str, tuple[int, int]] | None = None) -> dict[str, Any]:
    """{sglang tree: {flashinfer tree: {gpu: the probe's report}}}: one interpreter, a child per cell
    (gpus: TREE_GPUS unless named)."""
    from .probe_runner import run_probe

    trees = [{"key": f"{s}/{f}/{gpu}", "sglang": str(st), "flashinfer": str(ft), "gpu": list(cc),
              "scratch": str(scratch)}
             for s, st in sglang_trees.items() for f, ft in flashinfer_trees.items()
             for gpu, cc in (gpus or TREE_GPUS).items()]
    scratch.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    for key, report in run_probe("sglang_regions", {"trees": trees, "jobs": jobs}, timeout=1800).items():
        s, f, gpu = key.split("/")
        out.setdefault(s, {}).setdefault(f, {})[gpu] = report
    return out


def remaining_by_stack(patches_dir: Path, routes: Any) -> dict[str, dict[str, dict[str, list[str]]]]:
    """For `list` and `doctor`: stack -> region -> GPU -> what remains raw under the stack's patched
    FlashInfer with these routes (sglang_audit.read_routes of a patched tree, or of overlay/flashinfer-python
    for what the overlay source routes), in the regions a compiled region reaches (patches/sglang/
    region-reach.toml). Stacks with nothing left map to {}; stacks without SGLang are left out."""
    from ..audit import sglang_audit, sglang_reach

    table = sglang_audit.load_table(patches_dir)
    reach = sglang_reach.load_reach(patches_dir)
    carried = {r.version: r.carried for r in audit_releases(patches_dir)}
    out: dict[str, dict[str, dict[str, list[str]]]] = {}
    for stack in load_stacks(patches_dir).stacks:
        sglang = [t.version for t in (*stack.targets, *stack.upstream) if t.dist == SGLANG]
        if sglang:
            out[stack.name] = sglang_audit.stack_remaining(table, sglang[0], carried[sglang[0]], routes, reach)
    return out
