"""probes/ imports point one way: no module imports, at any depth and at any level (a function's
import included), a module that imports it; each shared piece (the faked GPU, describe(), a case row
and its input makers, the stubs' Placeholder, a probe's standard streams) is defined once, in any folder
of probes/."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

PROBES = ROOT / "src" / "nvfp4_overlay" / "probes"


def _imports(path: Path) -> set[str]:
    """The probes/ modules a module imports, anywhere in it (TYPE_CHECKING blocks left out)."""
    tree = ast.parse(path.read_text())
    checking = [n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test).endswith("TYPE_CHECKING")]
    skipped = {id(n) for block in checking for n in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "nvfp4_overlay.probes" or (
                    node.module.startswith("nvfp4_overlay.probes.")
                    and (PROBES / node.module.rsplit(".", 1)[1]).is_dir()):  # a folder's modules, by name
                found |= {a.name for a in node.names}
            elif node.module.startswith("nvfp4_overlay.probes."):
                found.add(node.module.rsplit(".", 1)[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.rsplit(".", 1)[1] for a in node.names if a.name.startswith("nvfp4_overlay.probes.")}
    return found - {path.stem}


def test_no_import_circle_in_probes() -> None:
    graph = {p.stem: _imports(p) for p in PROBES.rglob("*.py")}
    circles = []

    def visit(module: str, path: list[str]) -> None:
        for dep in sorted(graph.get(module, ())):
            if dep in path:
                circles.append(" -> ".join([*path[path.index(dep):], dep]))
            elif dep in graph:
                visit(dep, [*path, dep])

    for module in sorted(graph):
        visit(module, [module])
    assert circles == []


def test_each_shared_piece_is_defined_once() -> None:
    defined: dict[str, list[str]] = {}
    for path in PROBES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                defined.setdefault(node.name, []).append(path.name)
    for name in ("fake_capability", "describe", "Row", "bf16", "u8", "with_scale", "kernel_of", "_x", "_u8",
                 "_with_scale", "Placeholder", "prints_to_stderr", "answer", "Traced", "caused_by_traced",
                 "_caused_by_traced", "_caused_by", "Watched"):
        assert len(defined.get(name, [])) <= 1, (name, defined[name])
