"""probes/ imports point one way: no module imports, at any depth and at any level (a function's
import included), a module that imports it; each shared piece (the faked GPU, describe(), a case row
and its input makers, the stubs' Placeholder, a probe's standard streams) is defined once, in any folder
of probes/."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

PROBES = ROOT / "src" / "nvfp4_overlay" / "probes"


def _name(path: Path) -> str:
    """A module of probes/ by its dotted name under probes/ (a folder's face by the folder's)."""
    parts = path.relative_to(PROBES).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The probes/ modules a module imports, anywhere in it (TYPE_CHECKING blocks left out), by their
    dotted names under probes/ (a name taken from a folder's face: the module of that name, if any)."""
    tree = ast.parse(path.read_text())
    checking = [n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test).endswith("TYPE_CHECKING")]
    skipped = {id(n) for block in checking for n in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nvfp4_overlay.probes"):
            base = (node.module or "").removeprefix("nvfp4_overlay.probes").lstrip(".")
            for alias in node.names:
                sub = f"{base}.{alias.name}".lstrip(".")
                found.add(sub if (PROBES / f"{sub.replace('.', '/')}.py").is_file() else base)
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("nvfp4_overlay.probes.") for a in node.names
                      if a.name.startswith("nvfp4_overlay.probes.")}
    return found - {_name(path), ""}


def test_no_import_circle_in_probes() -> None:
    graph = {_name(p): _imports(p) for p in PROBES.rglob("*.py")}
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



# The recorders whose audit() hears something other than io_audit.Watched's: who asked for each process and
# open (the TP probe's Watch attributes each to SGLang's or FlashInfer's frame, and counts the tracer's).
OTHER_HEARING = {"sglang.layer.tp_probe.Watch"}


def test_a_trace_is_heard_by_one_audit_method() -> None:
    """A recorder of a trace's processes and opens takes io_audit.Watched's audit() by inheriting, never by
    writing a twin of it; one that hears something else is named in OTHER_HEARING, with what it hears."""
    methods = {f"{_name(path)}.{node.name}" for path in PROBES.rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)
               for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "audit"}
    assert sorted(methods - OTHER_HEARING) == ["io_audit.Watched"], sorted(methods)
