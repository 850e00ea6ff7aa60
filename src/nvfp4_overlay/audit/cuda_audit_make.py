"""The CUDA-version audit made anew from every carried release's wheel (``make cuda-audit``).

Each call site of every carried flashinfer-python release is scanned (audit/cuda_scan.py, with its
ordinal among the calls of the same text in its function) and matched to the audit's entry of the
same call; the entries are written back with the releases each call is in, every verdict kept
(cuda_audit.regenerated). ``--check`` writes nothing and exits 1 when the committed file differs.
"""

from __future__ import annotations

import argparse
import os
import sys
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nvfp4_overlay.audit.cuda_audit_make", allow_abbrev=False)
    parser.add_argument("--patches-dir", type=Path, default=Path("patches"))
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(os.environ.get("NVFP4_OVERLAY_CACHE", "~/.cache/nvfp4-overlay")).expanduser())
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the committed audit differs")
    args = parser.parse_args(argv)
    path = args.patches_dir / "flashinfer-python" / cuda_audit.AUDIT
    text = rescanned(args.patches_dir, fetch.Source(args.cache_dir))
    if args.check:
        if path.read_text() != text:
            print(f"{path}: not what the carried releases' scan gives; run 'make cuda-audit'", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
