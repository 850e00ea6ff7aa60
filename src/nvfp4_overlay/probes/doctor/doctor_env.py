"""doctor's facts about an environment, gathered inside its own interpreter with the standard library only.

The examined environment may have none of this tool's dependencies (not even pip), so nothing here
imports packaging: requirements go back as text, with the interpreter's PEP 508 marker environment,
and doctor judges them where it runs.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from nvfp4_overlay import records

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


def distribution_facts(name: str) -> dict[str, Any]:
    """One distribution as installed: version, where, its provenance, its RECORD checked, its requirements."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return {"installed": False}
    return {"installed": True, "version": dist.version, "location": str(dist.locate_file("")),
            "provenance": _provenance(dist), "record": check_record(dist), "requires": dist.requires or []}


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
    rows = [records.Row(*row) for row in records.read(dist.read_text("RECORD") or "") if len(row) == 3]
    return records.check_files(rows, Path(str(dist.locate_file("")))).data()
