"""doctor's and rollback's second look at an environment, inside its interpreter, standard library only:
the RECORD each patched build was installed with, held to the provenance the build wrote.

`python -m nvfp4_overlay.probes.doctor.doctor_files DIST...` prints the interpreter and, for each distribution,
its version and provenance (what rollback reads) and, for a patched build, `against_provenance`
(what doctor judges: operate/installed.py). Kept apart from doctor_env.py, which the trace probes import too.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from nvfp4_overlay import records
from nvfp4_overlay.probes.doctor.doctor_env import PROVENANCE, python_facts


def distribution_facts(name: str) -> dict[str, Any]:
    """Version, place, provenance and, for a patched build, its RECORD against the provenance (no file hashed)."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return {"installed": False}
    facts: dict[str, Any] = {"installed": True, "version": dist.version, "location": str(dist.locate_file(""))}
    try:
        provenance = json.loads(dist.read_text(PROVENANCE) or "null")
    except ValueError:
        provenance = {"error": "unreadable"}
    facts["provenance"] = provenance if isinstance(provenance, dict) or provenance is None else {"error": "unreadable"}
    if isinstance(provenance, dict) and "error" not in provenance:
        facts["against_provenance"] = check_provenance(dist, provenance)
    return facts


def check_provenance(dist: metadata.Distribution, provenance: dict[str, Any]) -> dict[str, Any]:
    """The RECORD the wheel was installed with, held to the provenance the build wrote into the wheel.

    An installer copies the wheel's RECORD rows (it does not hash the files again), so a row that differs
    from the provenance means the wheel arrived edited; a file that differs from its row was changed
    after the install (check_record). Overlay and patched files are held to their sha256; the rows
    carried over from upstream to the count and records.rows_sha256 the build recorded.
    """
    rows = {row[0]: tuple(row) for row in records.read(dist.read_text("RECORD") or "") if len(row) == 3 and row[1]}
    explained = {**provenance.get("overlay", {}), **provenance.get("patched", {})}
    differs = sorted(n for n, sha in explained.items() if n not in rows or rows[n][1] != (records.from_hex(sha) or ""))
    carried = [row for n, row in rows.items() if n not in explained and not _not_carried(n, rows)]
    expected = provenance.get("upstream", {}).get("record")
    facts: dict[str, Any] = {"explained": len(explained), "differs": differs,
                             "carried": {"rows": len(carried), "sha256": records.rows_sha256(carried)}}
    if isinstance(expected, dict):
        facts["carried"]["ok"] = (expected.get("rows"), expected.get("sha256")) == (len(carried), facts["carried"]["sha256"])
        if not facts["carried"]["ok"]:  # doctor names the rows against the upstream wheel, where it has that
            facts["carried"]["listed"] = sorted(carried)
    return facts


def _not_carried(name: str, rows: dict[str, Any]) -> bool:
    """A row no upstream wheel brought: the installer's (records.installer_row), or the provenance the build made."""
    return records.installer_row(name, rows) or name.endswith(f".dist-info/{PROVENANCE}")


def main(names: Sequence[str]) -> int:
    print(json.dumps({"python": python_facts()}))
    print(json.dumps({"distributions": {name: distribution_facts(name) for name in names}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
