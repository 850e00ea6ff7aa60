"""doctor's facts about an environment, gathered inside its own interpreter with the standard library only.

The examined environment may have none of this tool's dependencies (not even pip), so nothing here
imports packaging: requirements go back as text, with the interpreter's PEP 508 marker environment,
and doctor judges them where it runs.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import platform
import sys
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

PROVENANCE = "NVFP4_OVERLAY.json"  # metadata.PROVENANCE, the file every patched wheel's dist-info holds


def python_facts() -> dict[str, Any]:
    return {"executable": sys.executable, "version": platform.python_version(), "prefix": sys.prefix,
            "markers": marker_environment()}


def marker_environment() -> dict[str, str]:
    """PEP 508's environment markers, as the specification defines each one."""
    info = sys.implementation.version
    version = f"{info.major}.{info.minor}.{info.micro}"
    if info.releaselevel != "final":
        version += info.releaselevel[0] + str(info.serial)
    return {
        "implementation_name": sys.implementation.name, "implementation_version": version,
        "os_name": os.name, "platform_machine": platform.machine(), "platform_release": platform.release(),
        "platform_system": platform.system(), "platform_version": platform.version(),
        "python_full_version": platform.python_version(), "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform,
    }


def distribution_facts(name: str, *, files: bool = True) -> dict[str, Any]:
    """One distribution as installed: version, where, its provenance, its requirements; with `files`, its
    RECORD checked against the files and, for a patched build, against the provenance."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return {"installed": False}
    provenance = _provenance(dist)
    facts = {"installed": True, "version": dist.version, "location": str(dist.locate_file("")),
             "provenance": provenance, "requires": dist.requires or []}
    if files:
        facts["record"] = check_record(dist)
        if provenance is not None and "error" not in provenance:
            facts["against_provenance"] = check_provenance(dist, provenance)
    return facts


def _provenance(dist: metadata.Distribution) -> dict[str, Any] | None:
    text = dist.read_text(PROVENANCE)
    if text is None:
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return {"error": "unreadable"}
    return document if isinstance(document, dict) else {"error": "unreadable"}


def check_record(dist: metadata.Distribution) -> dict[str, Any]:
    """Every installed file with a hash in RECORD (PEP 376), hashed again: edits and deletions show."""
    modified: list[str] = []
    missing: list[str] = []
    matching = 0
    files = [f for f in dist.files or () if f.hash is not None]
    for item in files:
        assert item.hash is not None
        try:
            digest = _file_digest(Path(str(dist.locate_file(item))), item.hash.mode)
        except FileNotFoundError:
            missing.append(str(item))
            continue
        except (OSError, ValueError):  # an unknown hash algorithm or an unreadable file: say so
            modified.append(str(item))
            continue
        if digest == item.hash.value:
            matching += 1
        else:
            modified.append(str(item))
    return {"files": len(files), "matching": matching, "modified": sorted(modified), "missing": sorted(missing)}


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
    carried = [row for n, row in rows.items() if n not in explained and not _installer_row(n, rows)]
    expected = provenance.get("upstream", {}).get("record")
    facts: dict[str, Any] = {"explained": len(explained), "differs": differs,
                             "carried": {"rows": len(carried), "sha256": record_rows_sha256(carried)}}
    if isinstance(expected, dict):
        facts["carried"]["ok"] = (expected.get("rows"), expected.get("sha256")) == (len(carried), facts["carried"]["sha256"])
        if not facts["carried"]["ok"]:  # doctor names the rows against the upstream wheel, where it has that
            facts["carried"]["listed"] = sorted(carried)
    return facts


def _installer_row(name: str, rows: dict[str, Any]) -> bool:
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


def _file_digest(path: Path, mode: str) -> str:
    digest = hashlib.new(mode)
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def record_rows_sha256(rows: Iterable[Sequence[str]]) -> str:
    """The sha256 of RECORD rows (path, hash, size) as a RECORD writes them: csv, sorted by path, "\n" ends.

    The build records it in the provenance for the members it carries over from upstream unchanged;
    verify and doctor compute it again from the RECORD they read (one definition, standard library only).
    """
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(sorted(tuple(row) for row in rows))
    return hashlib.sha256(out.getvalue().encode()).hexdigest()


def main(names: Sequence[str]) -> int:
    """`python -m nvfp4_overlay.probes.doctor_env DIST...`: the interpreter and the distributions' versions
    and provenance as two JSON lines, no file hashed (what rollback reads of an environment)."""
    print(json.dumps({"python": python_facts()}))
    print(json.dumps({"distributions": {name: distribution_facts(name, files=False) for name in names}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
