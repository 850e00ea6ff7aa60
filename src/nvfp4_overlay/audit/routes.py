"""The route patch (0002) of a flashinfer-python release, written from the release's own text: pure.

Every entry point the overlay routes (overlay entries.py's ENTRIES and compile_list.py's COMPILE_LIST,
read as text: they import torch)
that the release defines where its public package binds it (flashinfer.<name>, else
flashinfer.fused_moe, flashinfer.norm or flashinfer.gemm) gets the two route lines above its first
decorator; the hunks are written as refresh writes them (difflib, three lines of context) under the
DEP-3 header below. `nvfp4-overlay routes` writes the committed patches with it, `routes --check`
holds them to it, and refresh writes a ported release's route patch with it.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import ConfigError
from . import api_scan

__all__ = ["ENTRIES", "PATCH", "route_patch", "routed_names"]

PATCH = "0002-fp4-mxfp8-entry-points-opaque-to-dynamo.patch"
# The overlay's tables of routed entry points (under overlay/flashinfer-python/), each with the line
# that opens it: the FP4/FP8 serving path's, and FlashInfer's own compile list's.
TABLES = (("flashinfer/_nvfp4_overlay/entries.py", "ENTRIES: Dict[str, Entry] = {"),
          ("flashinfer/_nvfp4_overlay/compile_list.py", "COMPILE_LIST: Dict[str, Entry] = {"))
ENTRIES = TABLES[0][0]
LINES = ['# nvfp4-overlay: one opaque op while dynamo traces (flashinfer/_nvfp4_overlay/opaque.py)\n',
         '@__import__("flashinfer._nvfp4_overlay.opaque", fromlist=["route"]).route\n']
PACKAGES = ("flashinfer", "flashinfer.fused_moe", "flashinfer.norm", "flashinfer.gemm")
HEADER = """\
Description: Route FlashInfer's FP4/MXFP8 quantize, GEMM, MoE and norm-quant entry points, and its own compile list, to opaque custom ops while dynamo traces
 Every entry point that overlay's entries.py and compile_list.py route and this release defines
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
_ENTRY = re.compile(r'^    "(\w+)": Entry\(', re.M)


def routed_names(overlay_dir: Path) -> list[str]:
    """The keys of the overlay's tables of routed entry points, in order (read as text: the modules import torch)."""
    names: list[str] = []
    for file, start_line in TABLES:
        path = overlay_dir / "flashinfer-python" / file
        try:
            text = path.read_text(encoding="utf-8")
            start = text.index(start_line)
            table = text[start:text.index("\n}\n", start)]
        except (OSError, ValueError) as exc:
            msg = f"{path}: cannot read the overlay's table of routed entry points ({exc}); restore it from git"
            raise ConfigError(msg, path=path, expected=f"a {start_line} ... }} table", found=str(exc),
                              fix=f"git checkout -- {path}") from exc
        names += _ENTRY.findall(table)
    return names


def route_patch(files: Mapping[str, str], names: Sequence[str]) -> str:
    """Patch 0002 for the release whose Python files are `files` (wheel path -> text)."""
    release = api_scan.Release(files)
    inserts: dict[str, list[int]] = {}  # path -> 0-based line numbers to insert above
    found = []
    for name in names:
        where = next((release.resolve(p, name) for p in PACKAGES if release.resolve(p, name)), None)
        if where is None:
            continue  # the release does not define it
        module, _ = where
        node = release.node(module, name)
        if not isinstance(node, ast.FunctionDef):
            msg = f"{module}.{name}: the overlay routes it, and this release binds it to no def"
            raise ConfigError(msg, item=f"{module}.{name}", expected="a def", found=type(node).__name__,
                              fix="route it by hand in the release's series, or drop it from entries.py")
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
