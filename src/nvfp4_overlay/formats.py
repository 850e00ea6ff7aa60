"""The committed files' formats: TOML and JSON, each read by one loader that raises the one ConfigError, and
the generated tables in the docs, written between two markers by one renderer.

A file that is missing or does not parse is named, with what was found and the fix: `missing`
says what to do when it is not there, `fix` what to do when it does not parse (the syntax, or
restoring it from git). What a file must hold is its reader's business (patch/manifest.py, the audits).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["read_json", "read_toml", "render_between"]


def read_toml(path: Path, *, missing: str | None = None, fix: str = "fix the syntax") -> dict[str, Any]:
    """The TOML document at path; ConfigError when it is missing or not TOML."""
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError as exc:
        raise _missing(path, missing) from exc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        msg = f"{path}: not valid TOML ({exc})"
        raise ConfigError(msg, path=path, expected="TOML", found=str(exc), fix=fix) from exc


def read_json(path: Path, *, what: str, missing: str | None = None, fix: str | None = None) -> Any:
    """The JSON document at path (`what` it is, for the message); ConfigError when it is missing or not JSON."""
    fix = fix or f"restore it from git: git checkout -- {path}"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise _missing(path, missing or fix) from exc
    except (OSError, ValueError) as exc:
        msg = f"{path}: cannot read {what} ({exc})"
        raise ConfigError(msg, path=path, expected=f"{what} as JSON", found=str(exc), fix=fix) from exc


def _missing(path: Path, missing: str | None) -> ConfigError:
    fix = missing or f"restore it from git: git checkout -- {path}"
    return ConfigError(f"{path}: not found", path=path, found="missing", fix=fix)


def render_between(document: str, begin: str, end: str, body: str, what: str) -> str:
    """The document with `body` between its `begin` marker's line and its `end` marker, made anew."""
    head, sep, rest = document.partition(begin)
    marker, _, tail = rest.partition("\n")
    _, found, after = tail.partition(end)
    if not sep or not found:
        msg = f"the document has no {begin} ... {end} region to render {what} into"
        raise ConfigError(msg, item=begin, expected=f"{begin} ... {end}", found="no such region",
                          fix=f"put the two markers back where {what} goes")
    return f"{head}{begin}{marker}\n{body}{end}{after}"
