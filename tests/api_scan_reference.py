"""The slow reference of the serving-API scan: every module of the release parsed whole, then a fixed point.

The scan (nvfp4_overlay.audit.api_graph) reads a release lazily, a statement at a time, to be fast; this
is the plain version it is held to (tests/unit/test_api_scan.py, tests/releases/test_api_scan_releases.py:
keys() and chains_hold() below compare the two): the same call graph by a full parse of
every module. Kept as it was written for the audit, apart from what the fast one may choose freely:
which of the shortest chains to a loader it names. What it found first:

A public function that reaches FlashInfer's JIT loader (``JitSpec.build_and_load``) or its cubin
loader (``flashinfer.jit.cubin_loader``) breaks ``torch.compile(fullgraph=True)`` unless the overlay
routes it (dynamo traces into the loader's file locks and path checks). A new release can add such
a function; this module finds every one, by a static call graph over the release's own files, so
that refresh, drift, doctor and the tests can name the ones that the committed audit
(patches/flashinfer-python/audit-serving-api.json) does not classify yet. Pure: it reads the file
texts it is given.

The graph: a function (or a class, through all of its methods) reaches a loader when its body,
lambdas, comprehensions and nested functions included, names a function that does: by its own
name, through an import alias, through a module alias (``core.gen_x``), through
``getattr(module, "name")`` with a constant name. It over-approximates (a branch never taken still
counts): the audit classifies what a release could reach, not what one call does.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from nvfp4_overlay.audit.api_scan import PublicFunction, is_public_module, module_name

CUBIN_LOADER = "flashinfer.jit.cubin_loader"
JIT_LOADER = "build_and_load"
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class _Module:
    name: str
    is_package: bool
    defs: dict[str, ast.AST] = field(default_factory=dict)  # top-level def/class name -> node
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # alias -> (module, name|None)
    aliases: dict[str, str] = field(default_factory=dict)  # x = y at module level


class _Release:
    """Every module of one release, parsed on first use (0.7.4 holds 113 MB of Python)."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.texts = {module_name(p): t for p, t in files.items()
                      if p.endswith(".py") and p.startswith("flashinfer/") and not p.startswith("flashinfer/data/")}
        self.packages = {module_name(p) for p in files if p.endswith("/__init__.py")}
        self._parsed: dict[str, _Module | None] = {}
        self._words: dict[str, frozenset[str]] = {}

    def words(self, module: str) -> frozenset[str]:
        if module not in self._words:
            self._words[module] = frozenset(_WORDS.findall(self.texts[module]))
        return self._words[module]

    def module(self, name: str) -> _Module | None:
        if name not in self._parsed:
            self._parsed[name] = self._parse(name) if name in self.texts else None
        return self._parsed[name]

    def _parse(self, name: str) -> _Module | None:
        try:
            tree = ast.parse(self.texts[name])
        except SyntaxError:
            return None
        info = _Module(name, name in self.packages)
        for node in tree.body:
            _collect(info, node)
        return info

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        """(defining module, top-level name) of `name` as `module` binds it, through re-exports."""
        info = self.module(module)
        if info is None or depth > 12:
            return None
        if name in info.defs:
            return module, name
        if name in info.aliases:
            return self.resolve(module, info.aliases[name], depth + 1)
        if name in info.imports:
            target, attr = info.imports[name]
            return None if attr is None else self.resolve(target, attr, depth + 1)
        return None


def _collect(info: _Module, node: ast.AST) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        info.defs[node.name] = node
    elif isinstance(node, ast.ImportFrom):
        base = _absolute(info, node.module, node.level)
        for a in node.names:
            info.imports[a.asname or a.name] = (base, a.name)
    elif isinstance(node, ast.Import):
        for a in node.names:
            info.imports[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
    elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
        for target in node.targets:
            if isinstance(target, ast.Name):
                info.aliases[target.id] = node.value.id
    elif isinstance(node, (ast.If, ast.Try)):
        for child in [*node.body, *getattr(node, "orelse", []), *[s for h in getattr(node, "handlers", []) for s in h.body]]:
            _collect(info, child)  # imports under `if TYPE_CHECKING:` / `try:` bind too


def _absolute(info: _Module, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    parts = info.name.split(".")
    base = parts if info.is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _references(release: _Release, info: _Module, node: ast.AST) -> Iterator[tuple[str, str] | str]:
    """What a def's body names: (module, name) of functions it may call, or a loader kind."""
    # Its body (a class: and its bases; a function: and its default values), not its decorators: those run at import, and what
    # a decorator's wrapper does at call time (flashinfer_api's logging) is the decorator's own path.
    roots = [*getattr(node, "bases", []), *getattr(node, "body", []),
             *getattr(getattr(node, "args", None), "defaults", [])]
    nodes = [sub for root in roots for sub in ast.walk(root)]
    local = _Module(info.name, info.is_package)
    for sub in nodes:
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
            _collect(local, sub)  # a lazy import inside the function binds for its body
    scope = _Scope(release, info, local.imports)
    for sub in nodes:
        if isinstance(sub, ast.Attribute):
            if sub.attr == JIT_LOADER:
                yield "jit"
            target = scope.module_of(sub.value)
            if target is not None:
                yield from scope.named_in(target, sub.attr)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            yield from scope.named(sub.id)
        elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "getattr"
              and len(sub.args) >= 2 and isinstance(sub.args[1], ast.Constant) and isinstance(sub.args[1].value, str)):
            target = scope.module_of(sub.args[0])
            if target is not None:
                yield from scope.named_in(target, sub.args[1].value)


@dataclass
class _Scope:
    """Names as a function body sees them: its own imports first, then its module's."""

    release: _Release
    info: _Module
    local: dict[str, tuple[str, str | None]]

    def named(self, name: str) -> Iterator[tuple[str, str] | str]:
        if name in self.local:
            target, attr = self.local[name]
            yield from ([] if attr is None else self.named_in(target, attr))
        else:
            yield from self.named_in(self.info.name, name)

    def named_in(self, module: str, name: str) -> Iterator[tuple[str, str] | str]:
        found = self.release.resolve(module, name)
        if found is not None:
            yield "cubin" if found[0] == CUBIN_LOADER else found

    def module_of(self, value: ast.AST) -> str | None:
        """The module an expression names (an imported module, or a dotted path of one), else None."""
        if isinstance(value, ast.Name):
            bound = self.local.get(value.id) or self.info.imports.get(value.id)
            if bound is None:
                return None
            target, attr = bound
            full = target if attr is None else f"{target}.{attr}"
            return full if full in self.release.texts else None
        if isinstance(value, ast.Attribute):
            head = self.module_of(value.value)
            if head is not None and f"{head}.{value.attr}" in self.release.texts:
                return f"{head}.{value.attr}"
        return None


def reaching(files: Mapping[str, str]) -> list[PublicFunction]:
    """Every public function or class of the release (files: wheel path -> text) that reaches a loader."""
    release = _Release(files)
    reach = _reach(release)
    public = _public(release)
    out = []
    for key in sorted(public, key=lambda k: f"{k[0]}.{k[1]}"):
        if key in reach:
            kinds, chain = reach[key]
            out.append(PublicFunction(key[0], key[1], tuple(sorted(kinds)), chain))
    return out


def _reach(release: _Release) -> dict[tuple[str, str], tuple[set[str], tuple[str, ...]]]:
    """(module, name) -> (loader kinds, one chain to a loader), by a fixed point from the loaders back.

    Only modules whose text holds a name already known to reach a loader are parsed (a module can
    only name a function whose name it spells); each def's references are resolved once.
    """
    refs: dict[tuple[str, str], list[tuple[str, str] | str]] = {}
    callers: dict[tuple[str, str], set[tuple[str, str]]] = {}
    reach: dict[tuple[str, str], tuple[set[str], tuple[str, ...]]] = {}
    read: set[str] = set()
    frontier = {JIT_LOADER, *_cubin_names(release)}
    while frontier:
        work = []
        for module in release.texts:
            if module in read or not frontier & release.words(module):
                continue
            read.add(module)
            info = release.module(module)
            for name, node in (info.defs.items() if info else ()):
                key = (module, name)
                refs[key] = list(dict.fromkeys(_references(release, info, node)))  # type: ignore[arg-type]
                for ref in refs[key]:
                    if not isinstance(ref, str) and ref != key:
                        callers.setdefault(ref, set()).add(key)
                work.append(key)
        grown = _propagate(work, refs, callers, reach)
        frontier = {name for _, name in grown}
    return reach


def _propagate(work: list[tuple[str, str]], refs: Mapping[tuple[str, str], list[tuple[str, str] | str]],
               callers: Mapping[tuple[str, str], set[tuple[str, str]]],
               reach: dict[tuple[str, str], tuple[set[str], tuple[str, ...]]]) -> set[tuple[str, str]]:
    """Grow `reach` over the known graph until nothing changes; the defs whose kinds grew."""
    grown: set[tuple[str, str]] = set()
    while work:
        key = work.pop()
        known = reach.get(key, (set(), ()))
        kinds, chain = set(known[0]), known[1]
        for ref in refs.get(key, ()):
            if isinstance(ref, str):
                kinds.add(ref)
                chain = chain or (f"{key[0]}.{key[1]}", ref)
            elif ref in reach and ref != key:
                kinds |= reach[ref][0]
                chain = chain or (f"{key[0]}.{key[1]}", *reach[ref][1])
        if kinds and kinds != known[0]:
            reach[key] = (kinds, chain)
            grown.add(key)
            work.extend(callers.get(key, ()))
    return grown


def _cubin_names(release: _Release) -> set[str]:
    info = release.module(CUBIN_LOADER)
    return set(info.defs) if info else set()


def _public(release: _Release) -> set[tuple[str, str]]:
    """Top-level functions and classes with public names in public modules, and what public packages
    re-export from private ones."""
    out: set[tuple[str, str]] = set()
    for module in release.texts:
        if not is_public_module(module):
            continue
        info = release.module(module)
        if info is None:
            continue
        out |= {(module, n) for n in info.defs if not n.startswith("_")}
        if info.is_package:
            for alias in info.imports:
                found = release.resolve(module, alias) if not alias.startswith("_") else None
                if found is not None:
                    out.add(found)
    return out


# --- the scan held to it ----------------------------------------------------------------------------


def keys(found: list[PublicFunction]) -> dict[str, tuple[str, ...]]:
    """A scan's public functions and the loaders each reaches, to compare two scans by."""
    return {f.key: tuple(f.loaders) for f in found}


def chains_hold(found: list[PublicFunction], files: dict[str, str]) -> None:
    """Each step of each chain the scan names is a reference the full parse finds."""
    release = _Release(files)
    for fn in found:
        for caller, callee in zip(fn.via, fn.via[1:]):
            module, _, name = caller.rpartition(".")
            info = release.module(module)
            assert info is not None and name in info.defs, (fn.key, caller)
            refs = {r if isinstance(r, str) else f"{r[0]}.{r[1]}" for r in _references(release, info, info.defs[name])}
            assert callee in refs, (fn.key, caller, callee)
