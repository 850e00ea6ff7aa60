"""Wheel member names (PEP 427: relative posix paths): the reader holds upstream's to them, the recipe the patched wheel's."""

from __future__ import annotations

# What to do about an upstream wheel that breaks a rule of the format (every refusal of one says it).
UNTRUSTED = "pin another file in upstream.toml and check where this one came from"


def name_problem(name: str) -> str | None:
    """Why a name may not be a wheel member, or None (PEP 427 members are relative posix paths)."""
    # PurePosixPath(name).parts for any name that reaches a use of it, at a sixth of the cost: pathlib
    # took a third of a 14,705-member build's CPU (bench/run.py). Leading '/' returns first.
    parts = tuple(p for p in name.split("/") if p and p != ".")
    if name.startswith("/") or (parts and ":" in parts[0]):
        return "absolute path or drive letter"
    if "\\" in name:
        return "backslash in the name"
    if ".." in parts or "." in name.split("/"):
        return "'..' or '.' in the path"
    if "\x00" in name or not parts or "" in name.rstrip("/").split("/"):
        return "empty component or NUL in the name"
    return None
