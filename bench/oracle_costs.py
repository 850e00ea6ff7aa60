"""Where a results-cold `make test` goes, one release at a time: what the oracle's probes cost, alone.

    .venv/bin/python bench/oracle_costs.py flashinfer 0.6.12 0.7.2   # a patched half: build, ladder, grid, control
    .venv/bin/python bench/oracle_costs.py memo 0.7.2                # the grid with and without its path memo
    .venv/bin/python bench/oracle_costs.py sglang 0.5.20             # SGLang's regions under the patched FlashInfer

Every probe runs as the tests run it (a fork of the warm probe interpreter, probes/serve.py), with no
result cache: the figure is what a release costs when the overlay, a probe or the engine changed.
The ladder is the one `make test` runs (every case on a release a stack pins, the first case of each
entry point elsewhere). `--repeat N` runs each figure N times, interleaved (memo: off, on, off, on).
To compare two commits, run this script against each (PYTHONPATH=<other checkout>/src, from that
checkout), alternating: the machine's speed drifts by a quarter within an hour.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # helpers: the tests' trees and sides

import helpers  # noqa: E402

from nvfp4_overlay.oracle import behaviour, grid, oracle, probe_runner, sglang_releases
from nvfp4_overlay.wheel import fetch  # noqa: E402


def timed(work: Callable[[], Any]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def flashinfer(releases: Sequence[str], repeat: int, root: Path) -> None:
    pinned = helpers.pinned_releases("flashinfer-python")
    toolkits = root / "toolkits"
    print("release\tladder\tbuild+unpack s\tladder s\tgrid s\tcontrol s")
    for _ in range(repeat):
        for release in releases:
            trees = helpers.wheel_trees(Path(tempfile.mkdtemp(dir=root)))
            _, patched = helpers.ReleaseOracle(trees, toolkits).sides(release)
            none = oracle.Results(None)
            quick = release not in pinned
            row = [timed(patched.tree),
                   timed(lambda: oracle.ladder_for(patched, list(behaviour.ROUTED_CANDIDATES), quick=quick, results=none)),
                   timed(lambda: oracle.grid_for(patched, results=none, toolkits=toolkits)),
                   timed(lambda: oracle.grid_for(patched, results=none, toolkits=toolkits, control=True))]
            print(release, "quick" if quick else "every case", *(f"{t:.1f}" for t in row), sep="\t", flush=True)


def memo(releases: Sequence[str], repeat: int, root: Path) -> None:
    cells = grid.with_toolkits(grid.grid_plan(control=False)["cells"], root / "toolkits")
    print("release\tpath memo\tgrid s (65 cells)")
    for release in releases:
        tree = {"key": "tree", "path": str(helpers.wheel_trees(root)("flashinfer-python", release)), "control_module": True}
        probe_runner.run_probe("cuda_grid", {"trees": [tree], "cells": cells[:1]})  # the tree's bytecode written
        for _ in range(repeat):
            for on in (False, True):
                seconds = timed(lambda on=on: probe_runner.run_probe(
                    "cuda_grid", {"trees": [{**tree, "memo_paths": on}], "cells": cells}))
                print(release, "on" if on else "off", f"{seconds:.2f}", sep="\t", flush=True)


def sglang(versions: Sequence[str], repeat: int, root: Path) -> None:
    releases = {r.version: r for r in sglang_releases.audit_releases(helpers.PATCHES)}
    pins = helpers.sglang_flashinfer_pins()
    print("sglang\tSGLang trees\tregions s (patched FlashInfer, both GPUs)")
    for _ in range(repeat):
        for version in versions:
            release, trees = releases[version], helpers.wheel_trees(Path(tempfile.mkdtemp(dir=root)))
            wheel = sglang_releases.upstream_wheel(helpers.PATCHES, release, fetch.Source(helpers.cache_dir()))
            sglang_trees = {"upstream": probe_runner.unpack(wheel, Path(tempfile.mkdtemp(dir=root)))}
            if release.carried:
                sglang_trees["patched"] = trees("sglang", version, patched=True)
            flashinfer_tree = {"patched": trees("flashinfer-python", pins[version], patched=True)}
            seconds = timed(lambda: sglang_releases.probe_release(sglang_trees, flashinfer_tree, root / "scratch", jobs=1))
            print(version, len(sglang_trees), f"{seconds:.1f}", sep="\t", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("flashinfer", "memo", "sglang"))
    parser.add_argument("releases", nargs="+")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nvfp4-oracle-costs-") as tmp:
        {"flashinfer": flashinfer, "memo": memo, "sglang": sglang}[args.what](args.releases, args.repeat, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
