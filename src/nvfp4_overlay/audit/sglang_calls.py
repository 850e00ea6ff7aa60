"""Which FlashInfer functions an SGLang release calls in its runtime, and where: a scan of its wheel's sglang/srt.

A call counts when its callee is a name the file imports from a flashinfer module (``from
flashinfer.fused_moe import trtllm_fp4_block_scale_moe as f``, at the top or inside a function, as
SGLang imports lazily), or an attribute of a flashinfer module the file imports (``flashinfer.fp4_quantize``,
``from flashinfer import fused_moe; fused_moe.cutlass_fused_moe``). Each site is named as the region
audit names its calls (``sglang/srt/layers/quantization/modelopt_quant.py:1479 apply``), so the region
table (patches/sglang/audit-regions.json) says, for a site it traced, in which compiled region and on
which GPU it runs. The scan reads code, not a run: a call behind a backend flag or a GPU check is
listed with its site, whichever branch a server takes (jit-cache prebuilds for every branch).
Pure, but for reading the wheel.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .sglang_audit import cells
from .sglang_reach import SOURCES, release_sources

FLASHINFER = "flashinfer"


def flashinfer_calls(wheel: Path) -> dict[str, list[str]]:
    """function -> its call sites in the SGLang wheel's runtime, sorted."""
    return calls_in(release_sources(wheel))


def calls_in(sources: Mapping[str, str]) -> dict[str, list[str]]:
    """function -> call sites, for sources (path in the wheel -> text) under sglang/srt/."""
    found: dict[str, set[str]] = {}
    for path, text in sorted(sources.items()):
        if not path.startswith(SOURCES) or FLASHINFER not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue  # not Python this interpreter reads: no call of it is counted
        scan = _Scan(path, *_imports(tree))
        scan.visit(tree)
        for function, site in scan.calls:
            found.setdefault(function, set()).add(site)
    return {function: sorted(sites, key=_site_key) for function, sites in sorted(found.items())}


def _imports(tree: ast.AST) -> tuple[dict[str, str], set[str]]:
    """(local name -> the flashinfer function it names, local names bound to a flashinfer module), file-wide."""
    names: dict[str, str] = {}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == FLASHINFER:
            for alias in node.names:
                names[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == FLASHINFER:
                    modules.add(alias.asname or alias.name.split(".")[0])
    return names, modules


class _Scan(ast.NodeVisitor):
    """The calls of flashinfer names in one file, each with its line and the function it sits in."""

    def __init__(self, path: str, names: dict[str, str], modules: set[str]) -> None:
        self.path, self.names, self.modules = path, names, modules
        self.within: list[str] = []
        self.calls: list[tuple[str, str]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:  # noqa: N802 - ast's name
        self.within.append(node.name)
        self.generic_visit(node)
        self.within.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast's name

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802 - ast's name
        function = self._callee(node.func)
        if function is not None:
            where = f" {self.within[-1]}" if self.within else ""
            self.calls.append((function, f"{self.path}:{node.lineno}{where}"))
        self.generic_visit(node)

    def _callee(self, func: ast.expr) -> str | None:
        if isinstance(func, ast.Name):
            return self.names.get(func.id)
        if isinstance(func, ast.Attribute):
            root = func.value
            while isinstance(root, ast.Attribute):
                root = root.value
            # flashinfer.x.f(...), or m.f(...) where `from flashinfer import m` bound a module
            if isinstance(root, ast.Name) and (root.id in self.modules or root.id in self.names):
                return func.attr
        return None


def _site_key(site: str) -> tuple[str, int]:
    path, _, rest = site.partition(":")
    return path, int(rest.split(" ")[0])


def region_sites(table: Mapping[str, Any], release: str, function: str) -> list[str]:
    """Where the region table saw the upstream SGLang of the release call function inside a compiled region:
    "region (gpu): site", e.g. "modelopt_fp4_linear (sm120): sglang/srt/.../modelopt_quant.py:1479 apply"."""
    if release not in table.get("releases", {}):
        return []
    out = set()
    for region, by_gpu in cells(table, release, "upstream").items():
        if "absent" in by_gpu:
            continue
        for gpu, cell in (by_gpu.items() if "calls" not in by_gpu else [("every GPU", by_gpu)]):
            out |= {f"{region} ({gpu}): {c['site']}" for c in cell.get("calls", []) if c["function"] == function}
    return sorted(out)
