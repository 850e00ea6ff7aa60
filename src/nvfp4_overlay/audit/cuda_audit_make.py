"""The CUDA-version audit made anew from every carried release's wheel (``nvfp4-overlay generate cuda-audit``).

Each call site of every carried flashinfer-python release is scanned (audit/cuda_scan.py, with its
ordinal among the calls of the same text in its function) and matched to the audit's entry of the
same call; the entries are written back with the releases each call is in, every verdict kept
(cuda_audit.regenerated); ``generate cuda-audit --check`` writes nothing and exits 1 when the committed file differs.
"""

from __future__ import annotations

from pathlib import Path

from ..patch import all_targets, load_upstream
from ..wheel import WheelReader, fetch
from . import cuda_audit


def release_files(wheel: Path) -> dict[str, str]:
    """The Python files of a release the scan reads (flashinfer/data/ aside)."""
    with WheelReader(wheel) as reader:
        return {n: reader.read(n).decode("utf-8", "replace") for n in reader.infos
                if n.endswith(".py") and not n.startswith("flashinfer/data/")}


def rescanned(patches_dir: Path, source: fetch.Source) -> str:
    """The audit's JSON text as every carried release's scan gives it."""
    audit = cuda_audit.load_audit(patches_dir)
    scans = {}
    for target in all_targets(patches_dir):
        if target.dist != "flashinfer-python":
            continue
        upstream = load_upstream(patches_dir, target)
        (pin,) = fetch.select_wheels(upstream, source)
        files = release_files(fetch.upstream_wheel(upstream, pin, source))
        scans[target.version] = cuda_audit.call_sites(files, audit.forwarders())
    return cuda_audit.as_json(cuda_audit.regenerated(audit, scans))
