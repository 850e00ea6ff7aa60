"""What is installed, judged: a distribution's facts against patches/ (patched, current, intact), SGLang's pin.

The facts are what probes/doctor/doctor_env.py and doctor_files.py gathered in the examined interpreter, and
what operate/installed_files.py read of a patched build's files against the anchor (the build made again
from the pinned upstream wheel); nothing of that environment is imported or run here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..audit import PublicFunction, api_audit
from ..errors import ConfigError, OverlayError, Unverified
from ..patch import Stack, Target, load_stacks, load_upstream
from .doctor_report import Finding
from .installed_files import Held

SGLANG_FIXED = Version("0.5.12")  # ships its own opaque fp4_quantize (srt/layers/quantization/fp4_utils.py)


def judge_distribution(name: str, fact: dict[str, Any], patches_dir: Path, finding: Finding,
                       held: Held | Unverified | None = None) -> dict[str, Any]:
    """One distribution's report: version, provenance, series state, RECORD, and for a patched build its files
    against the anchor (`held`: what installed_files.hold found, or why it could not; its problems into finding)."""
    if not fact.get("installed"):
        return {"installed": False}
    version = fact["version"]
    report: dict[str, Any] = {"installed": True, "version": version, "location": fact["location"]}
    provenance = fact.get("provenance")
    report["patched"] = provenance is not None
    if provenance is not None:
        report["revision"] = provenance.get("revision")
        report["upstream"] = provenance.get("upstream", {})
        report["patches"] = [p.get("name") for p in provenance.get("patches", [])]
        report["overlay"] = sorted(provenance.get("overlay", {}))
        if provenance.get("version") != version:
            finding.integrity.append(f"{name} {version}: its provenance names version {provenance.get('version')!r}")
    report["series"] = _series_state(name, version, provenance, patches_dir, finding)
    report["record"] = fact["record"]
    _judge_record(name, version, report["record"], finding)
    if isinstance(held, Held):
        report["anchor"] = held.data()
        _judge_anchor(name, version, held, report["record"], finding)
    elif provenance is not None:  # no anchor: what the installed provenance says is a diagnosis, never a pass
        if isinstance(held, Unverified):
            finding.unverified.append(f"{name} {version}: {held.text()}")
        against = fact.get("against_provenance")
        _judge_arrival(name, version, provenance, against, report["record"], patches_dir, finding)
        if against is not None:  # the rows themselves were for naming them: not in the report
            report["against_provenance"] = {**against, "carried": {k: v for k, v in against["carried"].items()
                                                                   if k != "listed"}}
    return report


def _judge_anchor(name: str, version: str, held: Held, record: dict[str, Any], finding: Finding) -> None:
    """The installed files against the build made again from the pinned upstream wheel. A file changed since the
    install is _judge_record's (reinstall); the rest arrived so in the wheel (verify it, rebuild it)."""
    fix = (f"verify the wheel you installed ('nvfp4-overlay verify WHEEL'), rebuild it ('nvfp4-overlay build "
           f"{name}=={_public(version)}') and reinstall the rebuilt one")
    later = set(record["modified"]) | set(record["missing"])
    what = f"what this checkout's build makes from {held.upstream}"
    for paths, said in (
            (held.differs, f"installed file(s) are not {what}"),
            (held.missing, f"file(s) of {what} are not installed"),
            (held.unexplained, "installed file(s) came with the wheel, and no build of it makes them (a .pth or an "
                               "entry point runs code)"),
            (held.provenance, f"key(s) of the installed provenance are not {what}")):
        shown = [p for p in paths if p not in later]
        if shown:
            finding.integrity.append(f"{name} {version}: the wheel arrived edited: {len(shown)} {said} "
                                     f"({_shown(shown)}); {fix}")


def _series_state(name: str, version: str, provenance: dict[str, Any] | None, patches_dir: Path, finding: Finding) -> str:
    """How the installed version stands against the series in patches/ (and judge it)."""
    public = _public(version)
    try:
        upstream = load_upstream(patches_dir, Target(canonicalize_name(name), public))
    except ConfigError:
        upstream = None
    if provenance is not None:
        if upstream is not None and (provenance.get("revision"), provenance.get("version")) != (
                upstream.revision, upstream.local_version):  # the label carries the overlay's revision too
            finding.notes.append(
                f"{name} {version} was built at revision {provenance.get('revision')}; the series in "
                f"{upstream.directory} is at revision {upstream.revision} ({upstream.local_version}): rebuild and "
                f"reinstall to pick it up")
            return "outdated"
        return "current" if upstream is not None else "unknown"
    if upstream is not None:
        finding.problems.append(
            f"{name} {version} is the unpatched upstream release; a series exists for it: build it with "
            f"'nvfp4-overlay build {name}=={public}' (or 'make wheels STACK=...') and pip install the wheel")
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
            f"release ('nvfp4-overlay list' shows them) or port a series with 'nvfp4-overlay refresh'")
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


def _judge_record(name: str, version: str, record: dict[str, Any], finding: Finding) -> None:
    if record["files"] == 0:
        finding.notes.append(f"{name} {version}: no RECORD with hashes, so its files cannot be checked")
    for kind in ("modified", "missing"):
        paths = record[kind]
        if paths:
            finding.integrity.append(
                f"{name} {version}: {len(paths)} installed file(s) {kind} since they were installed ({_shown(paths)}): "
                f"they differ from the RECORD the installer wrote; reinstall with 'pip install --force-reinstall "
                f"--no-deps' the wheel you meant to run (pip and uv do not check a wheel's RECORD: if the files "
                f"stay {kind}, the wheel itself holds them so, and 'nvfp4-overlay verify WHEEL' refuses it: rebuild it)")


def _judge_arrival(name: str, version: str, provenance: dict[str, Any], facts: dict[str, Any] | None,
                   record: dict[str, Any], patches_dir: Path, finding: Finding) -> None:
    """The RECORD the wheel was installed with, against its provenance: a difference there means the wheel
    itself was edited after the build (its RECORD rewritten to match), so reinstalling it changes nothing."""
    fix = (f"verify the wheel you installed ('nvfp4-overlay verify WHEEL'), rebuild it ('nvfp4-overlay build "
           f"{name}=={_public(version)}') and reinstall the rebuilt one")
    if facts is None or "upstream" not in provenance or not isinstance(provenance.get("patched"), dict):
        finding.notes.append(f"{name} {version}: its provenance carries no digests of its files (an older build), "
                             f"so they are held to RECORD alone; rebuild and reinstall to hold them to the build")
        return
    edited = [p for p in facts["differs"] if p not in record["modified"] and p not in record["missing"]]
    if edited:
        finding.integrity.append(
            f"{name} {version}: the wheel arrived edited: {len(edited)} installed file(s) differ from what the build "
            f"wrote (its provenance) but match the RECORD they were installed with ({_shown(edited)}); {fix}")
    if facts["carried"].get("ok") is False:
        expected = provenance.get("upstream", {}).get("record", {})
        named = _name_carried(name, provenance, facts["carried"].get("listed", []), patches_dir)
        finding.integrity.append(
            f"{name} {version}: the wheel arrived edited: the RECORD rows of the {facts['carried']['rows']} files "
            f"carried over from upstream do not match what the build wrote ({expected.get('rows')} rows of sha256 "
            f"{expected.get('sha256')}, found {facts['carried']['sha256']}); {named}; {fix}")


def _name_carried(name: str, provenance: dict[str, Any], listed: Sequence[Sequence[str]], patches_dir: Path) -> str:
    """Which installed rows upstream's own RECORD does not have so, read from the pinned upstream wheel where
    the cache holds it (its sha256 checked); else how to have them named."""
    from ..wheel import fetch, find_dist_info, parse_record

    filename = str(provenance.get("upstream", {}).get("filename"))
    try:
        upstream = load_upstream(patches_dir, Target(canonicalize_name(name), str(parse_wheel_filename(filename)[1])))
        pin = next(w for w in upstream.wheels if w.filename == filename)
        with fetch.open_upstream(upstream, pin, fetch.Source(fetch.default_cache_dir(), offline=True)) as reader:
            old = find_dist_info(filename, reader.names, reader.read)
            rows = parse_record(reader.read(f"{old.dist_info}/RECORD"), filename)
    except (ConfigError, OverlayError, StopIteration, InvalidWheelFilename, InvalidVersion):
        return (f"put {filename} in the cache ('nvfp4-overlay build {name}=={_public(str(provenance.get('version')))}' "
                f"downloads it) and run doctor again to name them")
    new = old.relabelled(str(provenance.get("version")))
    wanted = {old.rename(r.path, new): r.hash for r in rows.values()}
    odd = [path for path, digest, _ in listed if wanted.get(path) != digest]
    return f"against {filename}'s own RECORD: {_shown(odd)}" if odd else f"{filename}'s RECORD lists rows no longer there"


def _shown(paths: Sequence[str]) -> str:
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


def scans_api(flashinfer: dict[str, Any]) -> bool:
    """Whether doctor scans the installed FlashInfer's public API: a release patches/ carries no series
    for (a carried one is held to the serving-API audit by the tests, file for file: RECORD says they
    are the wheel's)."""
    return bool(flashinfer.get("installed")) and flashinfer.get("series") in ("none", "unknown")


def judge_new_apis(flashinfer: dict[str, Any], found: Sequence[PublicFunction], patches_dir: Path,
                   finding: Finding) -> None:
    """The installed FlashInfer's public functions that reach a kernel loader and the audit does not
    classify: each a problem (unrouted, it breaks torch.compile(fullgraph=True))."""
    flashinfer["new_apis"] = [{"function": f.key, "loaders": list(f.loaders), "via": list(f.via)} for f in found]
    finding.problems += [api_audit.problem(flashinfer["version"], f, patches_dir) for f in found]


def sglang_pins(sglang: dict[str, Any], markers: dict[str, str]) -> dict[str, Requirement]:
    """SGLang's requirements that apply in the examined environment, by canonical name."""
    pins: dict[str, Requirement] = {}
    for text in sglang.get("requires", []):
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate({**markers, "extra": ""}):
            pins[canonicalize_name(requirement.name)] = requirement
    return pins


def check_pin(sglang: dict[str, Any], flashinfer_version: str, markers: dict[str, str], finding: Finding) -> None:
    """SGLang pins flashinfer-python exactly; `pip install --no-deps` does not check that, so doctor does."""
    requirement = sglang_pins(sglang, markers).get("flashinfer-python")
    if requirement is not None and not requirement.specifier.contains(flashinfer_version, prereleases=True):
        finding.problems.append(
            f"sglang {sglang['version']} requires {requirement}, but flashinfer-python {flashinfer_version} "
            f"is installed; install the pair of one stack ('nvfp4-overlay install --stack NAME' prints how)")
