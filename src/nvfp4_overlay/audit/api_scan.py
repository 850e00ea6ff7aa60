"""The names a FlashInfer release binds and what each def's body names: the scan's call graph.

A function (or a class, through all of its methods) names another when its body, lambdas,
comprehensions and nested functions included, names it: by its own name, through an import alias,
through a module alias (``core.gen_x``), through ``getattr(module, "name")`` with a constant name;
decorators aside (they run at import). Each module's top level is bound from its statements
(api_text cuts them; imports and ``x = y`` aliases are parsed, defs only found); a def is parsed
when the graph asks for it (api_graph), whole or a statement at a time. Pure: it reads the file
texts it is given.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .api_text import Chunk, Source

CUBIN_LOADER = "flashinfer.jit.cubin_loader"
JIT_LOADER = "build_and_load"
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# x = y (= z): the only assignment that binds an alias; confirmed by a parse.
_ALIAS = re.compile(r"[A-Za-z_]\w*\s*=\s*(?:[A-Za-z_]\w*\s*=\s*)*\(?\s*[A-Za-z_]\w*\s*\)?\s*(?:#[^\n]*)?(?:\s*#[^\n]*)*\s*")

T = TypeVar("T")
Key = tuple[str, str]  # (module, top-level name)
Ref = Key | str  # a function a body names, or a loader kind ("jit", "cubin")
Imports = dict[str, tuple[str, str | None]]  # alias -> (module, name), name None for `import m`


@dataclass(frozen=True)
class PublicFunction:
    """A public function or class of a release that reaches a loader."""

    module: str  # where it is defined: flashinfer.quantization.fp4_quantization
    name: str  # fp4_quantize, or a class name
    loaders: tuple[str, ...]  # "jit", "cubin"
    via: tuple[str, ...]  # a shortest chain of qualified names from it to the loader

    @property
    def key(self) -> str:
        return f"{self.module}.{self.name}"


def module_name(path: str) -> str:
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_public_module(module: str) -> bool:
    return not any(part.startswith("_") for part in module.split("."))


class Def:
    """A top-level def or class: its span (``keyword``: where its decorators end), and its node once
    parsed (at once, for one bound inside an ``if``/``try`` block)."""

    __slots__ = ("start", "keyword", "end", "node")

    def __init__(self, start: int, end: int, node: ast.AST | None = None, keyword: int | None = None) -> None:
        self.start, self.end, self.node = start, end, node
        self.keyword = start if keyword is None else keyword


@dataclass
class Module:
    """What a module binds at its top level: defs and classes, imports, ``x = y`` aliases."""

    name: str
    is_package: bool
    source: Source
    defs: dict[str, Def] = field(default_factory=dict)
    imports: Imports = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.source.text


def _bind(name: str, is_package: bool, text: str) -> Module | None:
    """The module's top-level bindings from its statements; a full parse where the cut is not Python.

    None: the module does not parse (as Python would refuse to import it)."""
    source = Source(text)
    info = Module(name, is_package, source)
    try:
        for chunk in source.chunks():
            if chunk.kind == "def":
                info.defs[chunk.name] = Def(chunk.start, chunk.end, keyword=chunk.body)
            elif chunk.kind != "other" or _ALIAS.fullmatch(text, chunk.start, chunk.end):
                for node in ast.parse(text[chunk.start:chunk.end]).body:
                    _collect(info, node, chunk)
    except (SyntaxError, ValueError):
        info = Module(name, is_package, source)
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return None
        for node in tree.body:
            _collect(info, node, Chunk("other", "", 0, len(text)))
    return info


def _collect(info: Module, node: ast.AST, chunk: Chunk) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        info.defs[node.name] = Def(chunk.start, chunk.end, node)
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
        for child in [*node.body, *node.orelse, *[s for h in getattr(node, "handlers", []) for s in h.body]]:
            _collect(info, child, chunk)  # imports under `if TYPE_CHECKING:` / `try:` bind too


def _absolute(info: Module, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    parts = info.name.split(".")
    base = parts if info.is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imports_of(info: Module, statements: Iterable[ast.AST]) -> Imports:
    """What the import statements among `statements` bind, as seen from `info`'s module."""
    local = Module(info.name, info.is_package, info.source)
    for node in statements:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            _collect(local, node, Chunk("other", "", 0, 0))
    return local.imports


class Memo:
    """What scanning a release learnt that the scan of the next can reuse, by text: the modules
    bound, the parts of defs read. Releases scanned one after another share most of their files;
    only what the last two releases held is kept."""

    def __init__(self) -> None:
        self._now: dict[Any, Any] = {}
        self._before: dict[Any, Any] = {}

    def next_release(self) -> None:
        self._before, self._now = self._now, {}

    def get(self, key: Any, make: Callable[[], T]) -> T:
        if key in self._now:
            return self._now[key]  # type: ignore[no-any-return]
        value = self._before.pop(key) if key in self._before else make()
        self._now[key] = value
        return value


class Release:
    """Every module of one release, bound at the top level on first use."""

    def __init__(self, files: Mapping[str, str], memo: Memo | None = None) -> None:
        self.texts = {module_name(p): t for p, t in files.items()
                      if p.endswith(".py") and p.startswith("flashinfer/") and not p.startswith("flashinfer/data/")}
        self.packages = {module_name(p) for p in files if p.endswith("/__init__.py")}
        self.memo = memo or Memo()
        self.memo.next_release()
        self._modules: dict[str, tuple[Module | None, frozenset[str]]] = {}

    def _bound(self, name: str) -> tuple[Module | None, frozenset[str]]:
        if name not in self._modules:
            text, package = self.texts[name], name in self.packages
            self._modules[name] = self.memo.get(
                ("module", name, package, text), lambda: (_bind(name, package, text), frozenset(_WORDS.findall(text))))
        return self._modules[name]

    def words(self, module: str) -> frozenset[str]:
        """Every identifier-like word of the module's text, comments and strings included."""
        return self._bound(module)[1]

    def module(self, name: str) -> Module | None:
        return self._bound(name)[0] if name in self.texts else None

    def node(self, module: str, name: str) -> ast.AST:
        """The def or class `name` of `module`, parsed anew with the module's own line numbers."""
        info = self.module(module)
        if info is None or name not in info.defs:
            msg = f"{module} binds no def or class {name!r}"
            raise KeyError(msg)
        found = info.defs[name]
        again = Module(module, info.is_package, info.source)
        lines = info.text.count("\n", 0, found.start)
        for stmt in ast.parse("\n" * lines + info.text[found.start:found.end]).body:
            _collect(again, stmt, Chunk("other", "", found.start, found.end))
        node = again.defs[name].node
        assert node is not None
        return node

    def resolve(self, module: str, name: str, depth: int = 0) -> Key | None:
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


def roots(node: ast.AST) -> list[ast.AST]:
    """What of a def counts as its body: a class's bases and body, a function's default values and
    body; not its decorators (they run at import, and what a decorator's wrapper does at call time,
    flashinfer_api's logging, is the decorator's own path)."""
    return [*getattr(node, "bases", []), *getattr(node, "body", []),
            *getattr(getattr(node, "args", None), "defaults", [])]


Symbol = tuple[str, ...]  # what a body names, before its names are resolved (symbols())


def symbols(parts: Iterable[ast.AST]) -> tuple[Symbol, ...]:
    """What `parts` of a def name, unresolved: ("name", id) for a name read; ("attr", attr, *path)
    for an attribute of a dotted name; ("getattr", constant, *path); ("jit",) for the loader's
    attribute; ("import", module, alias) and ("from", module, level, name, alias) for lazy imports."""
    out: list[Symbol] = []
    for root in parts:
        for sub in ast.walk(root):
            if isinstance(sub, ast.Attribute):
                if sub.attr == JIT_LOADER:
                    out.append(("jit",))
                path = _path(sub.value)
                if path:
                    out.append(("attr", sub.attr, *path))
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                out.append(("name", sub.id))
            elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "getattr"
                  and len(sub.args) >= 2 and isinstance(sub.args[1], ast.Constant)
                  and isinstance(sub.args[1].value, str)):
                path = _path(sub.args[0])
                if path:
                    out.append(("getattr", sub.args[1].value, *path))
            elif isinstance(sub, ast.Import):
                out += [("import", a.name, a.asname or "") for a in sub.names]
            elif isinstance(sub, ast.ImportFrom):
                out += [("from", sub.module or "", str(sub.level), a.name, a.asname or "") for a in sub.names]
    return tuple(dict.fromkeys(out))


def _path(value: ast.AST) -> tuple[str, ...]:
    """a.b.c as ("a", "b", "c"); () for anything but a dotted name."""
    if isinstance(value, ast.Name):
        return (value.id,)
    if isinstance(value, ast.Attribute):
        head = _path(value.value)
        return (*head, value.attr) if head else ()
    return ()


def bound_by(info: Module, found: Iterable[Symbol]) -> Imports:
    """What the lazy imports among `found` bind, as seen from `info`'s module (as _collect binds them)."""
    local: Imports = {}
    for symbol in found:
        if symbol[0] == "import":
            _, name, alias = symbol
            local[alias or name.split(".")[0]] = (name if alias else name.split(".")[0], None)
        elif symbol[0] == "from":
            _, module, level, name, alias = symbol
            local[alias or name] = (_absolute(info, module or None, int(level)), name)
    return local


def resolved(release: Release, info: Module, found: Iterable[Symbol], local: Imports | None = None) -> Iterator[Ref]:
    """The references `found` names: (module, name) of functions, or a loader kind. `local`: what the
    def's own imports bind (its lazy imports bind for all of its body); by default, those among `found`."""
    found = tuple(found)
    scope = _Scope(release, info, bound_by(info, found) if local is None else local)
    for symbol in found:
        kind = symbol[0]
        if kind == "jit":
            yield "jit"
        elif kind == "name":
            yield from scope.named(symbol[1])
        elif kind in ("attr", "getattr"):
            target = scope.module_of(symbol[2:])
            if target is not None:
                yield from scope.named_in(target, symbol[1])


def references(release: Release, info: Module, parts: Iterable[ast.AST], local: Imports | None = None) -> Iterator[Ref]:
    """What `parts` of a def's body name, resolved (symbols, then resolved)."""
    return resolved(release, info, symbols(parts), local)


@dataclass
class _Scope:
    """Names as a function body sees them: its own imports first, then its module's."""

    release: Release
    info: Module
    local: dict[str, tuple[str, str | None]]

    def named(self, name: str) -> Iterator[Ref]:
        if name in self.local:
            target, attr = self.local[name]
            yield from ([] if attr is None else self.named_in(target, attr))
        else:
            yield from self.named_in(self.info.name, name)

    def named_in(self, module: str, name: str) -> Iterator[Ref]:
        found = self.release.resolve(module, name)
        if found is not None:
            yield "cubin" if found[0] == CUBIN_LOADER else found

    def module_of(self, path: tuple[str, ...]) -> str | None:
        """The module a dotted name names (an imported module, or a dotted path of one), else None."""
        bound = self.local.get(path[0]) or self.info.imports.get(path[0])
        if bound is None:
            return None
        target, attr = bound
        full = target if attr is None else f"{target}.{attr}"
        if full not in self.release.texts:
            return None
        for part in path[1:]:
            full = f"{full}.{part}"
            if full not in self.release.texts:
                return None
        return full
