"""index: the dist dir as a self-contained static simple repository a fleet installs from (PEP 503, 691, 658, 700).

What it may publish (`publishable`): a wheel SHA256SUMS lists with its digest and verify passes (every
member what this checkout's build makes from the pinned upstream wheel), or the pinned flashinfer-cubin
file (`index --cubins`, held to its pin); anything else is refused by name.

Every page is a plain file and every link stays inside the index, so it works from `file://`, from
any static HTTP server rooted at it or at any folder above it, and copied whole to a bucket:

    <output>/index.html                         the projects (PEP 503)
    <output>/<project>/index.html               each wheel, linked by its bare filename with #sha256=
    <output>/<project>/<wheel>                  the wheel (a hard link to the dist dir's file; a copy
                                                across file systems)
    <output>/<project>/<wheel>.metadata         its METADATA (PEP 658), so pip resolves without the wheel
    <output>/index.json, <project>/index.json   the PEP 691 JSON form of each page

A static server answers `/<project>/` with index.html, which is the HTML serialization PEP 691 keeps
for clients and servers that do not negotiate; pip and uv read it. The JSON form is served only by
a server that looks at the Accept header (PEP 691 offers no URL for it): docs/design.md gives an
nginx configuration that does. The whole output directory is replaced at once: a half-written
index is never seen.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import urllib.parse
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from .. import progress
from ..errors import ConfigError, Exit, IntegrityError, Unverified
from ..files import SHA256SUMS, read_sums, replace_dir, sha256_bytes, sha256_file, staging_dir
from ..wheel import Source, WheelReader, find_dist_info
from .verdict import Sums
from .verify import verify_wheel

API_VERSION = "1.1"  # PEP 700: sizes and versions in the JSON pages


@dataclass(frozen=True)
class IndexedWheel:
    """One wheel as the index lists it."""

    filename: str
    project: str  # normalized (PEP 503)
    version: str
    size: int
    sha256: str
    requires_python: str | None
    metadata: bytes  # the wheel's METADATA, served as <filename>.metadata (PEP 658)

    @property
    def metadata_sha256(self) -> str:
        return sha256_bytes(self.metadata)


@dataclass(frozen=True)
class Withheld:
    """A wheel of the dist dir the index does not publish, and why (exit 3: refused; 4: cannot be verified here)."""

    filename: str
    why: tuple[str, ...]
    exit_code: Exit

    def __str__(self) -> str:
        return f"{self.filename}: " + "; ".join(self.why)


def publishable(dist_dir: Path, patches_dir: Path, overlay_dir: Path, source: Source) -> tuple[list[str], list[Withheld]]:
    """The wheels of the dist dir the index may publish, and those it must not: a wheel is published when verify
    passes it with SHA256SUMS (the build's list of what it wrote) required to list it with its digest (a build of
    this tool), or when it is the flashinfer-cubin file pinned in patches/ (verify holds it to the pin; `index
    --cubins` brings it)."""
    published, withheld = [], []
    paths = sorted(p for p in dist_dir.glob("*.whl") if not p.name.startswith(".")) if dist_dir.is_dir() else []
    for number, path in enumerate(paths, start=1):
        progress.report(f"[{number}/{len(paths)}] verifying {path.name}")
        verdict = verify_wheel(path, patches_dir, overlay_dir, source, sums=Sums.REQUIRED)
        if verdict.ok:
            published.append(path.name)
        else:
            why = (*verdict.problems, *([verdict.unverified] if verdict.unverified else []), *verdict.trusted)
            withheld.append(Withheld(path.name, tuple(w.removeprefix(f"{path.name}: ") for w in why), verdict.exit_code))
    return published, withheld


def refusal(dist_dir: Path, withheld: list[Withheld]) -> IntegrityError | Unverified:
    """The error naming every withheld wheel: an integrity failure (3) if one was refused, else not verified (4)."""
    fix = (f"remove them from {dist_dir} or rebuild them ('nvfp4-overlay build'); a wheel that cannot be verified "
           f"here needs its pinned upstream wheel (run without --offline, or with --wheelhouse DIR)")
    refused = any(w.exit_code == Exit.INTEGRITY for w in withheld)
    said = "refused" if refused else "not verified"
    msg = (f"index: {said}, nothing was published; it publishes only wheels {SHA256SUMS} lists and verify passes:\n  "
           + "\n  ".join(map(str, withheld)) + f"\n{fix[0].upper()}{fix[1:]}")
    kind = IntegrityError if refused else Unverified
    return kind(msg, path=dist_dir, item=", ".join(w.filename for w in withheld),
                expected=f"wheels {SHA256SUMS} lists that verify passes", found="; ".join(map(str, withheld)), fix=fix)


def collect(dist_dir: Path, only: list[str] | None = None) -> list[IndexedWheel]:
    """Every wheel in the dist dir (or those named by `only`), hashed and with its METADATA read, sorted by
    project and version."""
    if not dist_dir.is_dir():
        msg = f"{dist_dir}: no such directory; build wheels first ('make wheels'), or pass --dist-dir"
        raise ConfigError(msg, path=dist_dir, item="--dist-dir", expected="a directory of wheels", found="missing",
                          fix="nvfp4-overlay build")
    wheels = []
    paths = sorted(p for p in dist_dir.glob("*.whl") if not p.name.startswith(".") and (only is None or p.name in only))
    for number, path in enumerate(paths, start=1):
        progress.report(f"[{number}/{len(paths)}] hashing {path.name}")
        wheels.append(_indexed(path))
    if not wheels:
        msg = f"{dist_dir}: holds no wheels to index; build them first ('make wheels')"
        raise ConfigError(msg, path=dist_dir, expected="wheels", found="none", fix="nvfp4-overlay build")
    _check_sums(dist_dir, wheels)
    return sorted(wheels, key=lambda w: (w.project, Version(w.version), w.filename))  # 0.6.2 before 0.6.10


def _check_sums(dist_dir: Path, wheels: list[IndexedWheel]) -> None:
    """A wheel the build listed in SHA256SUMS must still have that digest: never publish a changed file."""
    sums = read_sums(dist_dir / SHA256SUMS)
    changed = [f"{w.filename}: {w.sha256}, SHA256SUMS says {sums[w.filename]}"
               for w in wheels if w.filename in sums and sums[w.filename] != w.sha256]
    if changed:
        msg = (f"{dist_dir}: wheels changed since they were built, refused:\n  " + "\n  ".join(changed)
               + "\nRebuild them ('make wheels') or find out who changed them")
        raise IntegrityError(msg, path=dist_dir, item=", ".join(w.split(":")[0] for w in changed),
                             expected="the digests in SHA256SUMS", found="other digests",
                             fix="rebuild them ('make wheels') or find out who changed them")


def _indexed(path: Path) -> IndexedWheel:
    try:
        name, version, _, _ = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        msg = f"{path}: not a wheel filename ({exc}); move it out of the dist dir"
        raise ConfigError(msg, path=path, expected="a PEP 427 wheel filename", found=str(exc),
                          fix="move it out of the dist dir") from exc
    with WheelReader(path) as reader:
        info = find_dist_info(path.name, reader.names, reader.read)
        metadata = reader.read(f"{info.dist_info}/METADATA")
    headers = HeaderParser().parsestr(metadata.decode("utf-8", "replace"), headersonly=True)
    return IndexedWheel(path.name, canonicalize_name(name), str(version), path.stat().st_size,
                        sha256_file(path), headers.get("Requires-Python"), metadata)


# --- pages (pure: values in, text out) -----------------------------------------------------------


def root_html(projects: list[str]) -> str:
    links = "".join(f'    <a href="{p}/">{p}</a><br/>\n' for p in projects)
    return _page("Simple index", links)


def project_html(project: str, wheels: list[IndexedWheel], prefix: str) -> str:
    links = []
    for w in wheels:
        attrs = [f'href="{html.escape(prefix + urllib.parse.quote(w.filename))}#sha256={w.sha256}"']
        if w.requires_python:
            attrs.append(f'data-requires-python="{html.escape(w.requires_python)}"')
        # PEP 714 renamed PEP 658's attribute; pip 22.3-23.x reads the old name, newer pips the new.
        attrs += [f'data-core-metadata="sha256={w.metadata_sha256}"', f'data-dist-info-metadata="sha256={w.metadata_sha256}"']
        links.append(f"    <a {' '.join(attrs)}>{html.escape(w.filename)}</a><br/>\n")
    return _page(f"Links for {project}", "".join(links))


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html>\n  <head>\n    <meta name=\"pypi:repository-version\" content=\"1.1\">\n"
        f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n"
        f"{body}  </body>\n</html>\n"
    )


def root_json(projects: list[str]) -> dict[str, Any]:
    return {"meta": {"api-version": API_VERSION}, "projects": [{"name": p} for p in projects]}


def project_json(project: str, wheels: list[IndexedWheel], prefix: str) -> dict[str, Any]:
    files = [
        {
            "filename": w.filename,
            "url": prefix + urllib.parse.quote(w.filename),
            "hashes": {"sha256": w.sha256},
            "requires-python": w.requires_python,
            "core-metadata": {"sha256": w.metadata_sha256},
            "dist-info-metadata": {"sha256": w.metadata_sha256},
            "size": w.size,
        }
        for w in wheels
    ]
    versions = sorted({w.version for w in wheels}, key=Version)
    return {"meta": {"api-version": API_VERSION}, "name": project, "files": files, "versions": versions}


# --- writing -------------------------------------------------------------------------------------


def write_index(dist_dir: Path, output: Path, only: list[str] | None = None) -> dict[str, list[IndexedWheel]]:
    """Write the index for every wheel in dist_dir (or those `only` names: `publishable`'s) into output
    (replaced whole) and the .metadata files."""
    by_project: dict[str, list[IndexedWheel]] = {}
    for wheel in collect(dist_dir, only):
        by_project.setdefault(wheel.project, []).append(wheel)
    projects = sorted(by_project)
    staging = staging_dir(output)
    try:
        _write(staging / "index.html", root_html(projects))
        _write(staging / "index.json", json.dumps(root_json(projects), indent=2) + "\n")
        for project, wheels in by_project.items():
            # Each wheel beside the page that links it: a link by bare filename works whatever the server's root.
            (staging / project).mkdir()
            for wheel in wheels:
                _place(dist_dir / wheel.filename, staging / project / wheel.filename)
                (staging / project / f"{wheel.filename}.metadata").write_bytes(wheel.metadata)
            _write(staging / project / "index.html", project_html(project, wheels, ""))
            _write(staging / project / "index.json", json.dumps(project_json(project, wheels, ""), indent=2) + "\n")
        replace_dir(staging, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return by_project


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def _place(source: Path, target: Path) -> None:
    """The wheel into the index: a hard link (no copy, and a later rebuild replaces dist's name, not this one)."""
    try:
        os.link(source, target)
    except OSError:  # another file system, or one without hard links
        shutil.copyfile(source, target)
