"""verify for a flashinfer_jit_cache wheel: RECORD, the provenance's module digests, and SHA256SUMS beside it.

A cache wheel carries no series to compare with; what it claims is in its provenance: every module
it holds with its sha256, the inputs it was built from (sources' digests and flags, digested again
here) and the patched FlashInfer wheel whose sources those were. A member edited and its RECORD row
rewritten differs from the provenance; a provenance rewritten too differs from the wheel's own
digest in the SHA256SUMS that jit-cache wrote beside it, and from the patched wheel it names.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..errors import OverlayError
from ..files import SHA256SUMS, read_sums, sha256_bytes, sha256_file
from ..wheel import WheelReader, jit_wheel
from .verify import Verdict, _check_record


def is_cache_wheel(path: Path) -> bool:
    return path.name.startswith(f"{jit_wheel.PACKAGE}-")


def verify_cache_wheel(path: Path) -> Verdict:
    verdict = Verdict(path)
    try:
        with WheelReader(path) as reader:
            dist_info = next((n.split("/")[0] for n in reader.names if n.endswith(".dist-info/RECORD")), "")
            _check_record(reader, dist_info, verdict)
            doc = json.loads(reader.read(f"{dist_info}/{jit_wheel.PROVENANCE}"))
            modules = {n: reader.read(n) for n in reader.names if n.endswith(".so")}
    except (OverlayError, ValueError, KeyError) as exc:
        verdict.problems.append(f"{path.name}: {exc}")
        return verdict
    verdict.provenance = doc
    verdict.problems += module_problems(doc, modules)
    _check_sums(path, verdict)
    _check_flashinfer(path.parent, doc, verdict)
    return verdict


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
    """As probes/jit_plan.describe_spec digests a spec."""
    keys = ("sources", "cflags", "cuda_cflags", "ldflags", "include_dirs", "needs_device_linking")
    described = {k: module.get(k) for k in keys if k in module}
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def _check_sums(path: Path, verdict: Verdict) -> None:
    sums = read_sums(path.parent / SHA256SUMS)
    if path.name not in sums:
        verdict.notes.append(f"{path.parent / SHA256SUMS} does not list {path.name}: only its own claims were checked")
    elif sums[path.name] != sha256_file(path):
        verdict.problems.append(f"{path.name}: sha256 {sha256_file(path)}, {path.parent / SHA256SUMS} says "
                                f"{sums[path.name]}: altered after jit-cache wrote it")


def _check_flashinfer(directory: Path, doc: dict[str, Any], verdict: Verdict) -> None:
    named = doc.get("flashinfer", {})
    wheel = directory / str(named.get("filename"))
    if not wheel.is_file():
        verdict.notes.append(f"the patched wheel it was built from ({named.get('filename')}) is not beside it")
    elif sha256_file(wheel) != named.get("sha256"):
        verdict.problems.append(f"built from {wheel.name} {named.get('sha256')}, the wheel beside it is "
                                f"{sha256_file(wheel)}: rebuild the cache (nvfp4-overlay jit-cache)")
