"""doctor's and rollback's second look at an environment, inside its interpreter, standard library only:
the RECORD each patched build was installed with, held to the provenance the build wrote.

`python -m nvfp4_overlay.probes.doctor.doctor_files DIST...` prints the interpreter and, for each distribution,
its version and provenance (what rollback reads) and, for a patched build, `against_provenance`
(what doctor judges: operate/installed.py). Kept apart from doctor_env.py, which the trace probes import too.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import sys
from collections.abc import Iterable, Sequence
from importlib import metadata
from typing import Any

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


# What an installer writes into RECORD beside the wheel's own rows (pip, uv; PEP 376, 610, 627).
INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD", "uv_cache.json")


def check_provenance(dist: metadata.Distribution, provenance: dict[str, Any]) -> dict[str, Any]:
    """The RECORD the wheel was installed with, held to the provenance the build wrote into the wheel.

    An installer copies the wheel's RECORD rows (it does not hash the files again), so a row that differs
    from the provenance means the wheel arrived edited; a file that differs from its row was changed
    after the install (check_record). Overlay and patched files are held to their sha256; the rows
    carried over from upstream to the count and record_rows_sha256 the build recorded.
    """
    rows = {str(f): (str(f), f"{f.hash.mode}={f.hash.value}", "" if f.size is None else str(f.size))
            for f in dist.files or () if f.hash is not None}
    explained = {**provenance.get("overlay", {}), **provenance.get("patched", {})}
    differs = sorted(n for n, sha in explained.items() if n not in rows or rows[n][1] != _record_hash(sha))
    carried = [row for n, row in rows.items() if n not in explained and not installer_row(n, rows)]
    expected = provenance.get("upstream", {}).get("record")
    facts: dict[str, Any] = {"explained": len(explained), "differs": differs,
                             "carried": {"rows": len(carried), "sha256": record_rows_sha256(carried)}}
    if isinstance(expected, dict):
        facts["carried"]["ok"] = (expected.get("rows"), expected.get("sha256")) == (len(carried), facts["carried"]["sha256"])
        if not facts["carried"]["ok"]:  # doctor names the rows against the upstream wheel, where it has that
            facts["carried"]["listed"] = sorted(carried)
    return facts


def installer_row(name: str, rows: dict[str, Any]) -> bool:
    """A row the installer wrote, not the wheel: its own dist-info files, scripts outside site-packages,
    bytecode it compiled from a .py file of the same distribution, the provenance (made by the build)."""
    head, _, tail = name.rpartition("/")
    if name.startswith(("../", "/")) or (head.endswith(".dist-info") and tail in (*INSTALLER_FILES, PROVENANCE)):
        return True
    if head.endswith("__pycache__") and tail.endswith(".pyc"):
        source = f"{head[: -len('__pycache__')]}{tail.split('.', 1)[0]}.py"
        return source in rows
    return False


def _record_hash(hexdigest: str) -> str:
    try:
        return "sha256=" + base64.urlsafe_b64encode(bytes.fromhex(hexdigest)).rstrip(b"=").decode()
    except (TypeError, ValueError):
        return ""


def record_rows_sha256(rows: Iterable[Sequence[str]]) -> str:
    """The sha256 of RECORD rows (path, hash, size) as a RECORD writes them: csv, sorted by path, "\n" ends.

    The build records it in the provenance for the members it carries over from upstream unchanged;
    verify and doctor compute it again from the RECORD they read (one definition, standard library only).
    """
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(sorted(tuple(row) for row in rows))
    return hashlib.sha256(out.getvalue().encode()).hexdigest()



def main(names: Sequence[str]) -> int:
    print(json.dumps({"python": python_facts()}))
    print(json.dumps({"distributions": {name: distribution_facts(name) for name in names}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
