"""Patches that apply and no longer act: a decorated function that is not what its name resolves to.

Every series decorates upstream defs with the overlay (``@_nvfp4_cuda.replaces``,
``@__import__("flashinfer._nvfp4_overlay.opaque", fromlist=["route"]).route``): the decorated object must be the one
callers reach. When upstream re-binds the name after the def (``get_cuda_version = _v2``, a second
``def``, an import), the old def is left in place, its text and the decorator's context still match,
and the series applies exact, while callers reach the new object and the patch does nothing. Read
from the patched text of each file: module-level statements after the decorated def (inside ``if``,
``try`` and ``with`` blocks too, not inside defs or classes) that bind the same name. Pure.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass

# Every decorator a series adds names the overlay: ``@__import__("flashinfer._nvfp4_overlay...")...``
# or the module it imported under an _nvfp4 name (``@_nvfp4_cuda.replaces``, patch 0001).
OVERLAY_MARK = "_nvfp4"


@dataclass(frozen=True)
class Inert:
    """One decorated def that its module re-binds: what callers reach instead."""

    path: str  # flashinfer/jit/cpp_ext.py
    name: str  # get_cuda_version
    decorated_line: int
    rebound_line: int
    rebound_by: str  # the statement's first line: "get_cuda_version = _get_cuda_version_from_files"

    def describe(self, release: str) -> str:
        module = self.path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        return (f"{release}: {module}.{self.name} resolves to `{self.rebound_by}` ({self.path}:{self.rebound_line}), "
                f"not to the def the patch decorates (line {self.decorated_line}): the patch applies and no longer "
                f"acts. Read upstream's new {self.name}; move the decorator line onto the object the name now "
                f"binds (or port the change into the overlay), then run drift again")


@functools.lru_cache(maxsize=256)  # drift meets one patched text in many (series, release) cells
def rebound(path: str, text: str) -> tuple[Inert, ...]:
    """The overlay-decorated module-level defs of a patched file that a later statement re-binds."""
    if OVERLAY_MARK not in text:
        return ()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return ()  # a file the patch leaves unparsable is the build's and the ladder's to refuse
    lines = text.splitlines()
    found = []
    decorated = {node.name: node for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _overlay_decorated(node, lines)}
    for name, node in decorated.items():
        later = [s for s in _module_statements(tree.body) if s.lineno > node.lineno and name in _binds(s)]
        if later:
            first = later[0]
            found.append(Inert(path, name, node.lineno, first.lineno, lines[first.lineno - 1].strip()))
    return tuple(found)


def _overlay_decorated(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> bool:
    return any(OVERLAY_MARK in "".join(lines[d.lineno - 1:(d.end_lineno or d.lineno)]) for d in node.decorator_list)


def _module_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at module level: the body, and the bodies of its if, try, with and loops."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _module_statements(getattr(stmt, field, []) or [])
        for handler in getattr(stmt, "handlers", []) or []:
            yield from _module_statements(handler.body)


def _binds(stmt: ast.stmt) -> set[str]:
    """The names a statement binds in its module's namespace, itself (not what it contains)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
        targets = [stmt.target]
    elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
        targets = [stmt.target] if isinstance(stmt, (ast.For, ast.AsyncFor)) else [
            i.optional_vars for i in stmt.items if i.optional_vars is not None]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
