"""Write patch 0002 of every carried flashinfer-python release from the upstream wheels themselves.

python bench/route_patches.py [--check] [VERSION...]

For each release: find the def of every entry point the overlay routes (overlay's entries.py, read
as text) where the release's public package binds it (flashinfer.<name>, else flashinfer.fused_moe
or flashinfer.norm), put the two route lines above its first decorator, and write the hunks as
refresh writes them (difflib, three lines of context) under the DEP-3 header below. --check writes
nothing and exits 1 naming each release whose committed patch differs. Build each release after
(`python build_wheels.py build flashinfer-python==X --offline`) to see it apply exactly.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from nvfp4_overlay import api_scan  # noqa: E402
from nvfp4_overlay.manifest import Target, all_targets, load_upstream  # noqa: E402

PATCH = "0002-fp4-mxfp8-entry-points-opaque-to-dynamo.patch"
LINES = ['# nvfp4-overlay: one opaque op while dynamo traces (flashinfer/_nvfp4_overlay/opaque.py)\n',
         '@__import__("flashinfer._nvfp4_overlay.opaque", fromlist=["route"]).route\n']
PACKAGES = ("flashinfer", "flashinfer.fused_moe", "flashinfer.norm", "flashinfer.gemm")
HEADER = """\
Description: Route FlashInfer's FP4/MXFP8 quantize, GEMM, MoE and norm-quant entry points to opaque custom ops while dynamo traces
 Every entry point that overlay's entries.py routes and this release defines
 ({names})
 gets one decorator, _nvfp4_overlay.opaque.route, above its own: while
 torch.compiler.is_compiling(), a call becomes
 torch.ops.nvfp4_overlay.flashinfer_<name>, a torch.library.custom_op whose
 schema is this release's signature (and backend_requirement's skip_check where
 upstream takes it), that declares the parameters upstream writes into
 (out, output, the residual) mutated, and whose fake allocates what upstream
 allocates. Dynamo no longer traces into the JIT loader, the cubin loader, the
 AutoTuner or the launch: they run when the compiled graph executes, through
 the unchanged upstream function. Eager callers take the upstream path, behind
 one is_compiling() check. Not routed (upstream's path, traced as upstream has
 it): see docs/patches.md.
Origin: nvfp4-overlay
Bug: https://github.com/flashinfer-ai/flashinfer/issues/2999
Forwarded: no
Last-Update: 2026-12-01

"""


def routed_names() -> list[str]:
    """The keys of overlay/.../entries.py's ENTRIES, in order (read as text: it imports torch)."""
    text = (ROOT / "overlay/flashinfer-python/flashinfer/_nvfp4_overlay/entries.py").read_text()
    start = text.index("ENTRIES: Dict[str, Entry] = {")
    table = text[start:text.index("\n}\n", start)]
    return re.findall(r'^    "(\w+)": Entry\(', table, re.M)


def wheel_files(version: str, cache: Path) -> dict[str, str]:
    pinned = load_upstream(ROOT / "patches", Target("flashinfer-python", version))
    (pin,) = pinned.wheels
    with zipfile.ZipFile(cache / "wheels" / pin.filename) as zf:
        return {n: zf.read(n).decode("utf-8", "replace") for n in zf.namelist()
                if n.endswith(".py") and n.startswith("flashinfer/") and not n.startswith("flashinfer/data/")}


def patch_for(version: str, files: dict[str, str], names: list[str]) -> str:
    release = api_scan.Release(files)
    inserts: dict[str, list[int]] = {}  # path -> 0-based line numbers to insert above
    found = []
    for name in names:
        where = next((release.resolve(p, name) for p in PACKAGES if release.resolve(p, name)), None)
        if where is None:
            continue
        module, _ = where
        node = release.node(module, name)
        assert isinstance(node, ast.FunctionDef), (version, name)
        first = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
        path = next(p for p in files if api_scan.module_name(p) == module and p.endswith(".py"))
        inserts.setdefault(path, []).append(first)
        found.append(name)
    hunks = []
    for path in sorted(inserts):
        old = files[path].splitlines(keepends=True)
        new = list(old)
        for line in sorted(inserts[path], reverse=True):
            new[line:line] = LINES
        diff = difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", n=3)
        hunks.append("".join(re.sub(r"^(---|\+\+\+) (\S+)\n", r"\1 \2\n", d) for d in diff))
    return HEADER.format(names=", ".join(found)) + "".join(hunks)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "nvfp4-overlay")
    parser.add_argument("versions", nargs="*")
    args = parser.parse_args()
    versions = args.versions or [t.version for t in all_targets(ROOT / "patches") if t.dist == "flashinfer-python"]
    names, differ = routed_names(), []
    for version in versions:
        text = patch_for(version, wheel_files(version, args.cache_dir), names)
        target = ROOT / "patches" / "flashinfer-python" / version / PATCH
        if target.read_text() != text:
            differ.append(version)
            if not args.check:
                target.write_text(text)
        print(f"{version}: {'differs' if version in differ else 'same'}", file=sys.stderr)
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
