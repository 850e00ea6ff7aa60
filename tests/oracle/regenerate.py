"""Write upstream's half of the oracle for every carried flashinfer-python release (`make oracle`).

tests/oracle/flashinfer-python/<release>.json holds what the trace ladder and the CUDA grid find in
the pinned upstream wheel, compact (oracle.compact_ladder, oracle.compact_grid), under the key it
was computed with (the wheel's sha256, the probes' source, the plan, torch's and Python's versions).
The tests take it from there while its key holds and compute it again on a rotating sample; run
this after a change to the probes, the plan or the pinned torch, or for a new release:

    make oracle                      every carried release
    make oracle ARGS="0.7.4 0.6.18"  some
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for helpers

from helpers import COMMITTED_ORACLE, ReleaseOracle, cache_dir, flashinfer_releases, wheel_trees

from nvfp4_overlay.oracle import oracle
from nvfp4_overlay.probes.flashinfer.tables.cases import CANDIDATES


def main(argv: list[str]) -> int:
    releases = argv or flashinfer_releases()
    unknown = sorted(set(releases) - set(flashinfer_releases()))
    if unknown:
        print(f"not carried: {', '.join(unknown)}; 'python build_wheels.py list' shows the releases", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="nvfp4-oracle-") as tmp:
        checks = ReleaseOracle(wheel_trees(Path(tmp) / "trees"), Path(tmp) / "toolkits")
        results = oracle.Results(cache_dir() / "oracle")

        def write(release: str) -> str:
            upstream, _ = checks.sides(release)
            record = oracle.upstream_record(upstream, CANDIDATES, results=results, toolkits=Path(tmp) / "toolkits")
            path = COMMITTED_ORACLE / f"{release}.json"
            path.write_text(dump(record) + "\n")
            return f"wrote {path.relative_to(COMMITTED_ORACLE.parent.parent.parent)}"

        COMMITTED_ORACLE.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # each release is a child process
            for line in pool.map(write, releases):
                print(line, flush=True)
    return 0


def dump(value: object, depth: int = 0, indent: str = "") -> str:
    """JSON with one line per case and per cell (four levels down), so that a diff shows what changed."""
    if depth >= 4 or not isinstance(value, (dict, list)) or not value:
        return json.dumps(value, sort_keys=True)
    inner = indent + " "
    if isinstance(value, list):
        items = [inner + dump(v, depth + 1, inner) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    items = [f"{inner}{json.dumps(k)}: {dump(v, depth + 1, inner)}" for k, v in sorted(value.items())]
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
