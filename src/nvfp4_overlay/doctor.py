"""doctor: what this Python environment has installed, whether it is patched and intact, and whether FP4 traces.

Exit status (DESIGN.md's table, read for a deployment gate): 0 the stack is patched, its files match
their RECORD and the trace check passes; 1 something needs a person: flashinfer-python missing or
unpatched, an SGLang release with a series installed unpatched, or the trace check failed or hung;
3 an integrity failure: an installed file differs from its RECORD or is gone (a hand edit). 3 wins
over 1, since an edited file makes every other answer doubtful.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from . import progress
from .errors import ConfigError
from .manifest import Stack, Target, load_stacks, load_upstream
from .metadata import PROVENANCE

DISTRIBUTIONS = ("flashinfer-python", "sglang")
SGLANG_FIXED = Version("0.5.12")  # ships its own opaque fp4_quantize (srt/layers/quantization/fp4_utils.py)
OPAQUE_OP = "nvfp4_overlay.flashinfer_"  # every routed entry point's op: nvfp4_overlay::flashinfer_<name>
EXIT_OK, EXIT_NEEDS_A_PERSON, EXIT_INTEGRITY = 0, 1, 3


@dataclass
class Finding:
    """The verdict's parts: problems set the exit status, notes only inform."""

    problems: list[str] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.integrity:
            return EXIT_INTEGRITY
        return EXIT_NEEDS_A_PERSON if self.problems else EXIT_OK


# --- installed distributions ---------------------------------------------------------------------


def inspect_distribution(name: str, patches_dir: Path, finding: Finding) -> dict[str, Any]:
    """One distribution as installed: version, provenance, series state, RECORD check."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return {"installed": False}
    version = dist.version
    report: dict[str, Any] = {"installed": True, "version": version, "location": str(dist.locate_file(""))}
    provenance = _provenance(dist)
    report["patched"] = provenance is not None
    if provenance is not None:
        report["revision"] = provenance.get("revision")
        report["upstream"] = provenance.get("upstream", {})
        report["patches"] = [p.get("name") for p in provenance.get("patches", [])]
        report["overlay"] = sorted(provenance.get("overlay", {}))
        if provenance.get("version") != version:
            finding.integrity.append(f"{name} {version}: {PROVENANCE} names version {provenance.get('version')!r}")
    report["series"] = _series_state(name, version, provenance, patches_dir, finding)
    report["record"] = check_record(dist)
    _judge_record(name, version, report["record"], finding)
    return report


def _provenance(dist: metadata.Distribution) -> dict[str, Any] | None:
    text = dist.read_text(PROVENANCE)
    if text is None:
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return {"error": "unreadable"}
    return document if isinstance(document, dict) else {"error": "unreadable"}


def _series_state(name: str, version: str, provenance: dict[str, Any] | None, patches_dir: Path, finding: Finding) -> str:
    """How the installed version stands against the series in patches/ (and judge it)."""
    public = _public(version)
    try:
        upstream = load_upstream(patches_dir, Target(canonicalize_name(name), public))
    except ConfigError:
        upstream = None
    if provenance is not None:
        if upstream is not None and provenance.get("revision") != upstream.revision:
            finding.notes.append(
                f"{name} {version} was built at revision {provenance.get('revision')}; the series in "
                f"{upstream.directory} is at revision {upstream.revision}: rebuild and reinstall to pick it up"
            )
            return "outdated"
        return "current" if upstream is not None else "unknown"
    if upstream is not None:
        finding.problems.append(
            f"{name} {version} is the unpatched upstream release; a series exists for it: build it with "
            f"'nvfp4-overlay build {name}=={public}' (or 'make wheels STACK=...') and pip install the wheel"
        )
        return "available"
    if name == "sglang" and _at_least(public, SGLANG_FIXED):
        stack = _shipping_stack(patches_dir, public)
        how = f"stack {stack.name} ships it unpatched with flashinfer-python " + ", ".join(
            t.version for t in stack.targets if t.dist == "flashinfer-python") if stack else "no stack names it"
        finding.notes.append(f"sglang {version} makes its own FlashInfer calls opaque (from {SGLANG_FIXED}); {how}")
        return "fixed-upstream"
    if name == "flashinfer-python":
        finding.problems.append(
            f"flashinfer-python {version} is unpatched and patches/ has no series for it; install a patched "
            f"release ('nvfp4-overlay list' shows them) or port a series with 'nvfp4-overlay refresh'"
        )
    else:
        finding.notes.append(f"{name} {version}: no series in {patches_dir}; nothing to compare with")
    return "none"


def _shipping_stack(patches_dir: Path, version: str) -> Stack | None:
    try:
        stacks = load_stacks(patches_dir)
    except ConfigError:
        return None
    return next((s for s in stacks.stacks if Target("sglang", version) in s.upstream), None)


def _public(version: str) -> str:
    try:
        return Version(version).public
    except InvalidVersion:
        return version


def _at_least(version: str, floor: Version) -> bool:
    try:
        return Version(version) >= floor
    except InvalidVersion:
        return False


def check_record(dist: metadata.Distribution) -> dict[str, Any]:
    """Every installed file with a hash in RECORD (PEP 376), hashed again: edits and deletions show."""
    modified: list[str] = []
    missing: list[str] = []
    matching = 0
    files = [f for f in dist.files or () if f.hash is not None]
    for number, item in enumerate(files, start=1):
        if number % 500 == 0:
            progress.report(f"{dist.metadata['Name']}: RECORD {number}/{len(files)} files")
        assert item.hash is not None
        path = Path(str(dist.locate_file(item)))
        try:
            digest = _file_digest(path, item.hash.mode)
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


def _file_digest(path: Path, mode: str) -> str:
    digest = hashlib.new(mode)
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def _judge_record(name: str, version: str, record: dict[str, Any], finding: Finding) -> None:
    if record["files"] == 0:
        finding.notes.append(f"{name} {version}: no RECORD with hashes, so its files cannot be checked")
    for kind in ("modified", "missing"):
        paths = record[kind]
        if paths:
            shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
            finding.integrity.append(
                f"{name} {version}: {len(paths)} installed file(s) {kind} since pip installed them ({shown}); "
                f"reinstall with 'pip install --force-reinstall --no-deps' the wheel you meant to run"
            )


def _check_pin(flashinfer_version: str, finding: Finding) -> None:
    """SGLang pins flashinfer-python exactly; `pip install --no-deps` does not check that, so doctor does."""
    for text in metadata.requires("sglang") or []:
        requirement = Requirement(text)
        if canonicalize_name(requirement.name) != "flashinfer-python":
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if not requirement.specifier.contains(flashinfer_version, prereleases=True):
            finding.problems.append(
                f"sglang {metadata.version('sglang')} requires {text}, but flashinfer-python {flashinfer_version} "
                f"is installed; install the pair of one stack ('nvfp4-overlay list' shows them)"
            )


# --- the live check, in a subprocess of this interpreter (trace_probe.py) -----------------------


def run_probe(timeout: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """GPU facts and the trace check from a child interpreter: a crash or hang there cannot take doctor down."""
    progress.report("trace check: torch.compile(fullgraph=True) over each routed FlashInfer entry point")
    command = [sys.executable, "-m", "nvfp4_overlay.trace_probe"]
    # From an empty directory, without the current one on sys.path (PYTHONSAFEPATH, 3.11+): a checkout
    # holding a flashinfer/ folder must not stand in for the installed package. The child finds this
    # package where this process found it.
    package_root = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONSAFEPATH="1", PYTHONPATH=path)
    try:
        with tempfile.TemporaryDirectory(prefix="nvfp4-doctor-") as cwd:
            done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
        stdout, stderr, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        stderr, code = "", None
    found: dict[str, Any] = {}
    for line in stdout.splitlines():
        try:
            found.update(json.loads(line))
        except ValueError:
            continue
    gpu = found.get("gpu", {"torch": None, "error": "the probe printed nothing"})
    trace = found.get("trace")
    if trace is None:
        tail = (stderr.strip().splitlines() or [""])[-1]
        why = f"hung: no answer within {timeout:g} s" if code is None else f"the probe exited {code}"
        why += f": {tail}" if tail else ""
        trace = {"ok": False, "error": why}
    return gpu, trace


def _judge_trace(trace: dict[str, Any], finding: Finding) -> None:
    entries = trace.get("entries") or {}
    if not entries:
        finding.problems.append(f"the trace check did not run: {trace.get('error')}")
    for name, entry in entries.items():
        if not entry.get("ok"):
            finding.problems.append(
                f"flashinfer.{name} does not compile with torch.compile(fullgraph=True): {entry.get('error')}")
        elif not any(op.startswith(OPAQUE_OP) for op in entry.get("ops", [])):
            finding.notes.append(f"flashinfer.{name}: the traced graph holds no {OPAQUE_OP}* op: {entry.get('ops')}")


# --- the command ---------------------------------------------------------------------------------


def diagnose(patches_dir: Path, *, trace: bool = True, timeout: float = 300) -> tuple[dict[str, Any], Finding]:
    """The whole report as a JSON-ready document, and the finding that decides the exit status."""
    finding = Finding()
    distributions = {}
    for name in DISTRIBUTIONS:
        progress.report(f"{name}: reading its metadata and RECORD")
        distributions[name] = inspect_distribution(name, patches_dir, finding)
    flashinfer = distributions["flashinfer-python"]
    if not flashinfer["installed"]:
        finding.problems.append("flashinfer-python is not installed in this environment")
    if not distributions["sglang"]["installed"]:
        finding.notes.append("sglang is not installed in this environment")
    elif flashinfer["installed"]:
        _check_pin(flashinfer["version"], finding)
    document: dict[str, Any] = {
        "python": {"executable": sys.executable, "version": sys.version.split()[0], "prefix": sys.prefix},
        "distributions": distributions,
    }
    if trace:  # the GPU facts are worth having even without flashinfer
        document["gpu"], document["trace"] = run_probe(timeout)
        if flashinfer["installed"]:
            _judge_trace(document["trace"], finding)
    else:
        document["gpu"], document["trace"] = None, {"ok": None, "skipped": True}
    document.update(ok=finding.exit_code == EXIT_OK, exit_code=finding.exit_code,
                    problems=finding.integrity + finding.problems, notes=finding.notes)
    return document, finding


def render(document: dict[str, Any]) -> str:
    python = document["python"]
    lines = [f"{'python':<18}{python['executable']} ({python['version']})"]
    for name, dist in document["distributions"].items():
        lines += _render_distribution(name, dist)
    lines += _render_gpu(document.get("gpu"))
    lines.append(f"{'trace':<18}{_render_trace(document['trace'])}")
    for problem in document["problems"]:
        lines.append(f"problem: {problem}")
    for note in document["notes"]:
        lines.append(f"note: {note}")
    verdict = {EXIT_OK: "OK", EXIT_NEEDS_A_PERSON: "NOT OK", EXIT_INTEGRITY: "NOT OK (integrity)"}[document["exit_code"]]
    lines.append(f"{'verdict':<18}{verdict} (exit {document['exit_code']})")
    return "\n".join(lines)


def _render_distribution(name: str, dist: dict[str, Any]) -> list[str]:
    if not dist["installed"]:
        return [f"{name:<18}not installed"]
    if dist["patched"]:
        state = f"patched, revision {dist.get('revision')}, from {dist.get('upstream', {}).get('filename')}"
    else:
        state = "upstream (unpatched)"
    lines = [f"{name:<18}{dist['version']}  {state}  [{dist['location']}]"]
    if dist["patched"]:
        lines.append(f"{'':<18}patches: {', '.join(dist['patches']) or 'none'}")
    record = dist["record"]
    changed = len(record["modified"]) + len(record["missing"])
    lines.append(f"{'':<18}files: {record['matching']:,} of {record['files']:,} match RECORD"
                 + (f"; {changed} modified or missing" if changed else ""))
    return lines


def _render_gpu(gpu: dict[str, Any] | None) -> list[str]:
    if gpu is None:
        return [f"{'gpu':<18}not checked"]
    if gpu.get("torch") is None:
        return [f"{'gpu':<18}unknown: torch does not import ({gpu.get('error')})"]
    head = f"torch {gpu['torch']}, CUDA {gpu['cuda'] or 'none'}"
    if not gpu["devices"]:
        return [f"{'gpu':<18}none ({head}); the trace check fakes compute capability 12.0"]
    return [f"{'gpu':<18}{d['index']}: {d['name']}, compute capability {d['capability'][0]}.{d['capability'][1]} ({head})"
            for d in gpu["devices"]]


def _render_trace(trace: dict[str, Any]) -> str:
    if trace.get("skipped"):
        return "skipped"
    entries = trace.get("entries") or {}
    if not entries:
        return f"FAILED: {trace.get('error')}"
    passed = [n for n, e in entries.items() if e.get("ok")]
    failed = [n for n, e in entries.items() if not e.get("ok")]
    text = f"{len(passed)} of {len(entries)} entry points trace with fullgraph=True in {trace.get('seconds')} s"
    return text + (f"; FAILED: {', '.join(failed)}" if failed else " through their opaque ops")
