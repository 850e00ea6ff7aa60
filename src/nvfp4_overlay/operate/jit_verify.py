"""verify for a flashinfer_jit_cache wheel: RECORD, the provenance, SHA256SUMS beside it, and each module built again.

A cache wheel carries no series to compare with; what it claims is in its provenance: every module
it holds with its sha256, the inputs it was built from (sources' digests and flags, digested again
here) and the patched FlashInfer wheel whose sources those were. A member edited and its RECORD row
rewritten differs from the provenance. What the wheel says about itself is never enough: the anchor
is the module built here (wheel/jit_cache.py `rederive`) from the patched wheel beside it, itself held
to the pinned upstream by verify, with the same toolchain: module builds are reproducible
(probes/flashinfer/jit_build.py), so an edit whose provenance, RECORD and SHA256SUMS were all rewritten
differs from it. A module that cannot be built again here (no nvcc or torch, another toolchain, the
patched wheel not beside it, a module marked not reproducible) is taken on its builder's word, each
with the reason: verify's TAKEN ON TRUST (exit 5), never ok.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from .. import progress
from ..errors import OverlayError
from ..files import sha256_bytes, sha256_file
from ..wheel import Source, WheelReader, default_cache_dir, jit_wheel, rederive
from .patched_verify import verify_patched
from .verdict import Sums, Verdict, check_record, check_sums


def is_cache_wheel(path: Path) -> bool:
    return path.name.startswith(f"{jit_wheel.PACKAGE}-")


def verify_cache_wheel(path: Path, patches_dir: Path, overlay_dir: Path, source: Source | None = None, *,
                       sums: Sums) -> Verdict:
    """The verdict on a cache wheel (verify.verify_wheel hands it over); `sums`: what the SHA256SUMS of its folder
    must say of it and of the patched wheel beside it (verdict.Sums)."""
    verdict = Verdict(path)
    try:
        with WheelReader(path) as reader:
            dist_info = next((n.split("/")[0] for n in reader.names if n.endswith(".dist-info/RECORD")), "")
            check_record(reader, dist_info, verdict)
            doc = json.loads(reader.read(f"{dist_info}/{jit_wheel.PROVENANCE}"))
            modules = {n: reader.read(n) for n in reader.names if n.endswith(".so")}
    except (OverlayError, ValueError, KeyError) as exc:
        verdict.problems.append(f"{path.name}: {exc}")
        return verdict
    verdict.provenance = doc
    verdict.problems += module_problems(doc, modules)
    check_sums(path, verdict, sums)
    _check_flashinfer(path.parent, doc, verdict)
    if not verdict.problems:  # its own claims hold: now against what this tool builds from the pins
        _check_rederived(path, doc, modules, (patches_dir, overlay_dir, source, sums), verdict)
    return verdict


def _check_rederived(path: Path, doc: dict[str, Any], modules: dict[str, bytes],
                     where: tuple[Path, Path, Source | None, Sums], verdict: Verdict) -> None:
    """Each module against the one built here from the same inputs: equal, or a problem; or taken on trust."""
    patches_dir, overlay_dir, source, sums = where
    prefix = f"{jit_wheel.PACKAGE}/{jit_wheel.MODULES_DIR}/"
    claimed = {n: m for n, m in doc.get("modules", {}).items() if m.get("included")}
    patched = path.parent / str(doc.get("flashinfer", {}).get("filename"))
    if not patched.is_file():
        why = (f"the patched wheel it was built from ({patched.name}) is not beside it, so its modules cannot be built "
               f"again here; put it there (nvfp4-overlay build --stack {doc.get('stack')}) and verify again")
        verdict.trusted += [f"{prefix}{n}/{n}.so: taken on its builder's word: {why}" for n in sorted(claimed)]
        return
    source = source if source is not None else Source(default_cache_dir())
    base = verify_patched(patched, patches_dir, overlay_dir, source, sums=sums)  # held to the pinned upstream
    if base.problems:
        verdict.problems.append(f"built from {patched.name}, which verify refuses: {base.problems[0]}")
        return
    if base.unverified:  # what the modules are built from has no anchor here: neither have they (exit 4)
        verdict.unverified = f"built from {patched.name}, which {base.unverified}"
        return
    cache = source.cache_dir
    progress.report(f"{path.name}: building its {len(claimed)} module(s) again from {patched.name} (kept in {cache})")
    again = rederive(doc, patched, patches_dir, cache, progress.report)
    for name, module in sorted(claimed.items()):
        member = f"{prefix}{name}/{name}.so"
        held = modules.get(member, b"")
        if name in again.trusted:
            verdict.trusted.append(f"{member}: taken on its builder's word: {again.trusted[name]}")
        elif again.inputs.get(name) != module.get("inputs"):
            verdict.problems.append(f"{member}: the provenance says it was built from inputs {module.get('inputs')}, "
                                    f"{patched.name} plans it from {again.inputs.get(name)}: rebuild the cache "
                                    f"(nvfp4-overlay jit-cache --stack {doc.get('stack')} --gpu {doc.get('gpu')})")
        elif sha256_bytes(held) != sha256_bytes(again.modules[name]):
            verdict.problems.append(f"{member}: sha256 {sha256_bytes(held)}, built here from the same inputs "
                                    f"{sha256_bytes(again.modules[name])}: not what those inputs build; rebuild the "
                                    f"cache and find out who changed this one")


def module_problems(doc: dict[str, Any], modules: dict[str, bytes]) -> list[str]:
    """Each .so against the provenance: present, named, its digest, and its inputs' digest recomputed."""
    problems = []
    claimed = {n: m for n, m in doc.get("modules", {}).items() if m.get("included")}
    prefix = f"{jit_wheel.PACKAGE}/{jit_wheel.MODULES_DIR}/"
    held = {member[len(prefix):].split("/")[0]: data for member, data in modules.items() if member.startswith(prefix)}
    for name in sorted(set(held) - set(claimed)):
        problems.append(f"{prefix}{name}: a module the provenance does not list")
    for name, module in sorted(claimed.items()):
        if name not in held:
            problems.append(f"{prefix}{name}/{name}.so: listed in the provenance, missing from the wheel")
        elif sha256_bytes(held[name]) != module.get("sha256"):
            problems.append(f"{prefix}{name}/{name}.so: sha256 {sha256_bytes(held[name])}, the provenance says "
                            f"{module.get('sha256')}: altered after it was built")
        if _inputs(module) != module.get("inputs"):
            problems.append(f"{name}: its sources and flags in the provenance do not digest to its inputs {module.get('inputs')}")
    return problems


def _inputs(module: dict[str, Any]) -> str:
    """As probes/flashinfer/jit_plan.py's describe_spec digests a spec."""
    keys = ("sources", "cflags", "cuda_cflags", "ldflags", "include_dirs", "needs_device_linking")
    described = {k: module.get(k) for k in keys if k in module}
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def _check_flashinfer(directory: Path, doc: dict[str, Any], verdict: Verdict) -> None:
    named = doc.get("flashinfer", {})
    wheel = directory / str(named.get("filename"))
    if not wheel.is_file():
        verdict.notes.append(f"the patched wheel it was built from ({named.get('filename')}) is not beside it")
    elif sha256_file(wheel) != named.get("sha256"):
        verdict.problems.append(f"built from {wheel.name} {named.get('sha256')}, the wheel beside it is "
                                f"{sha256_file(wheel)}: rebuild the cache (nvfp4-overlay jit-cache)")
