"""Where each routed entry point of a FlashInfer tree lives: the module whose def carries patch 0002's route decorator.

The entry points are found in the release itself, not in a table: a patched tree's routed functions
are the top-level defs decorated with ``_nvfp4_overlay.opaque.route`` (the line the `routes`
generator writes above each, wherever the release defines it: ``flashinfer.gemm.gemm_base``,
``flashinfer.norm``, a module a later release adds), so ``flashinfer.gemm.fp8_blockscale_gemm_sm90``,
which the top-level package does not bind, is found as ``fp4_quantize`` is. An unpatched tree has no
decorator: a name is found at the module that defines it, and where two define it (0.7.4's
experimental ``mxfp8_quantize``), at the one a package of the tree binds publicly.

Read as text (the standard library's ast over the package's files), so the planner, the JIT-load
probe and doctor's trace find the same functions, imported only when they are called.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import sys
from collections.abc import Iterable
from typing import Any

ROUTE_MODULE = "flashinfer._nvfp4_overlay.opaque"
_OWN = "_nvfp4_overlay"  # the overlay itself defines no entry point
_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", re.M)


def routed_modules(package_dir: str) -> dict[str, str]:
    """Routed entry point -> the dotted module that defines it, for the package at package_dir (its flashinfer/)."""
    found: dict[str, str] = {}
    for module, text in _sources(package_dir):
        if ROUTE_MODULE not in text:
            continue
        for node in _top_level_defs(text):
            if any(_is_route(d) for d in node.decorator_list):
                found.setdefault(node.name, module)
    return dict(sorted(found.items()))


def defining_modules(package_dir: str, names: Iterable[str]) -> dict[str, list[str]]:
    """name -> every dotted module whose top level defines it (an unpatched tree's answer)."""
    wanted = set(names)
    found: dict[str, list[str]] = {}
    for module, text in _sources(package_dir):
        if not wanted & set(_DEF.findall(text)):
            continue
        for node in _top_level_defs(text):
            if node.name in wanted:
                found.setdefault(node.name, []).append(module)
    return found


def entry_points(flashinfer: Any, names: Iterable[str] | None = None) -> dict[str, Any]:
    """name -> the function to call, for every routed entry point of the imported flashinfer (or of `names`:
    an unpatched tree's candidates, found where they are defined); a name the tree does not define is left out."""
    package_dir = os.path.dirname(os.path.abspath(flashinfer.__file__))
    routed = routed_modules(package_dir)
    wanted: dict[str, str | None]
    if names is None:
        wanted = dict(routed)
    else:
        names = list(names)
        others = defining_modules(package_dir, [n for n in names if n not in routed])
        wanted = {n: routed.get(n) or _public_one(n, others.get(n, [])) for n in names}
    functions = {}
    for name, module in sorted(wanted.items()):
        if module is not None:
            functions[name] = getattr(importlib.import_module(module), name)
    return functions


def _public_one(name: str, modules: list[str]) -> str | None:
    """Of the modules that define name, the one whose function a package of the tree binds (its public home)."""
    if len(modules) < 2:
        return modules[0] if modules else None
    for module in modules:
        function = getattr(importlib.import_module(module), name, None)
        for package, loaded in list(sys.modules.items()):
            if (package.startswith("flashinfer") and package != module and hasattr(loaded, "__path__")
                    and getattr(loaded, name, None) is function):
                return module
    return sorted(modules)[0]


def _sources(package_dir: str) -> list[tuple[str, str]]:
    """(dotted module, text) for every .py file of the package but the overlay's, in a fixed order."""
    root = os.path.dirname(package_dir)
    out = []
    for folder, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != _OWN and d != "__pycache__")
        for file in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, file)
            dotted = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
            with open(path, encoding="utf-8", errors="replace") as handle:
                out.append((dotted[:-len(".__init__")] if dotted.endswith(".__init__") else dotted, handle.read()))
    return out


def _top_level_defs(text: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []  # not Python this interpreter reads: it defines nothing that can be called here
    return [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _is_route(decorator: ast.expr) -> bool:
    """``@__import__("flashinfer._nvfp4_overlay.opaque", fromlist=["route"]).route`` (patch 0002's line)."""
    if not (isinstance(decorator, ast.Attribute) and decorator.attr == "route"):
        return False
    call = decorator.value
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "__import__"
            and bool(call.args) and isinstance(call.args[0], ast.Constant) and call.args[0].value == ROUTE_MODULE)
