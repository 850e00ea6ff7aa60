"""Every CUDA-version call site of a FlashInfer release, named as the overlay's run time names it.

Patch 0001 answers get_cuda_version() and is_cuda_version_at_least() by call site: cuda.py reads the
calling frame's module and qualified name, steps out of the audit's forwarders, and looks the site up
in the audit's tables. This scanner names the same sites from the source, so the audit can hold
every one of them:

- the scope is the innermost named one (``f``, ``C.m``, ``f.<locals>.g``, ``<module>``, a class body
  ``C``), as CPython's co_qualname gives it; a lambda or a comprehension is no scope of its own
  (cuda.py strips ``.<locals>.<lambda>``, ``<listcomp>``, ``<genexpr>``, and Python 3.12 inlines
  list, set and dict comprehensions anyway);
- a lookup is called under its own name, an attribute (``cpp_ext.get_cuda_version()``), an alias
  (``import ... as``, ``x = get_cuda_version``), ``getattr(m, "get_cuda_version")`` or
  ``functools.partial(...)``; a name imported from outside FlashInfer (TVM's own
  ``get_cuda_version``) is not FlashInfer's lookup;
- a forwarder (a function the audit marks as forwarding its caller's question) counts as a lookup:
  its callers are call sites, as at run time.

Pure: it reads the file texts it is given.
"""

from __future__ import annotations

import ast
import hashlib
import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

LOOKUPS = frozenset({"get_cuda_version", "is_cuda_version_at_least"})
UPSTREAMS_OWN = "version_at_least"  # version_at_least(torch.version.cuda, ...): upstream's own torch-based check
_PARTIALS = frozenset({"partial", "functools.partial"})

Forwarders = Mapping[str, frozenset[str]]  # module (or a "flashinfer.*cake_build" pattern) -> qualnames


@dataclass(frozen=True)
class CallSite:
    module: str  # flashinfer.jit.fused_moe
    qualname: str  # the calling scope, as co_qualname names it ("<module>" at module level)
    callee: str  # get_cuda_version, is_cuda_version_at_least, a forwarder's name, version_at_least
    call: str  # the call's source text
    nth: int = 0  # how many calls of the same text come before it in its scope (source order)
    position: tuple[int, int] = field(default=(0, 0), compare=False)  # (line, column) it starts at: not its identity

    @property
    def key(self) -> tuple[str, str]:
        return self.module, self.qualname

    @property
    def identity(self) -> tuple[str, str, str, int]:
        """The call itself, as the overlay's cuda.py names it: robust to lines added around it."""
        return self.module, self.qualname, self.call, self.nth

    def describe(self) -> str:
        nth = f" (the call of that text number {self.nth + 1} in it)" if self.nth else ""
        return f"{self.module} {self.qualname} calls {self.call}{nth}"


def call_sites(files: Mapping[str, str], forwarders: Forwarders | None = None) -> list[CallSite]:
    """Every CUDA-version call in the given files (wheel-relative path -> text), flashinfer/data/ aside."""
    forwarders = forwarders or {}
    names = LOOKUPS | {q.rsplit(".", 1)[-1] for qs in forwarders.values() for q in qs}
    audit_key = tuple(sorted((k, tuple(sorted(v))) for k, v in forwarders.items()))
    sites: list[CallSite] = []
    for path, text in sorted(files.items()):
        if not path.endswith(".py") or path.startswith("flashinfer/data/"):
            continue
        if "cuda_version" not in text and "version_at_least" not in text and not any(n in text for n in names):
            continue
        # A file's sites depend on its path, its text and the forwarders alone: consecutive releases
        # (and a synthetic one, 0.7.4 with one file changed) share most files, scanned once a process.
        key = (audit_key, path, hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
        if key not in _SCANNED:
            _SCANNED[key] = tuple(_file_sites(path, text, forwarders, names))
        sites += _SCANNED[key]
    return sites


_SCANNED: dict[tuple[object, str, bytes], tuple[CallSite, ...]] = {}  # (forwarders, path, text digest) -> its sites


def _file_sites(path: str, text: str, forwarders: Forwarders, names: frozenset[str]) -> list[CallSite]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    where = _Where(module_name(path), path.endswith("/__init__.py"), forwarders, names)
    return numbered(_Visitor(where, text).sites_of(tree))


def numbered(sites: list[CallSite]) -> list[CallSite]:
    """Each site with its ordinal among the calls of the same text in its scope, in source order (the
    position the overlay's cuda.py finds at run time from the frame: the call's text and that count)."""
    order: dict[tuple[str, str, str], list[CallSite]] = {}
    for site in sorted(sites, key=lambda s: s.position):
        order.setdefault((site.module, site.qualname, site.call), []).append(site)
    nth = {id(s): i for same in order.values() for i, s in enumerate(same)}
    return [replace(s, nth=nth[id(s)]) for s in sites]


def module_name(path: str) -> str:
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_matches(pattern: str, module: str) -> bool:
    """A module name against an audit key; one '*' stands for any run of characters."""
    if "*" not in pattern:
        return pattern == module
    head, _, tail = pattern.partition("*")
    return module.startswith(head) and module.endswith(tail) and len(module) > len(head) + len(tail)


def _module_bindings(module: str, forwarders: Forwarders) -> dict[str, str]:
    """The names every scope of the module starts from: the lookups and the module's own forwarders."""
    bound = {name: name for name in LOOKUPS}
    for pattern, qualnames in forwarders.items():
        if module_matches(pattern, module):
            bound.update({q: q for q in qualnames if "." not in q})
    return bound


def _bindings(body: list[ast.stmt], outer: Mapping[str, str], where: _Where) -> dict[str, str]:
    """The names of one scope that hold a lookup: the outer scope's, and its own imports and assignments.

    Flow-insensitive within the scope (a binding anywhere in it counts), as a scan that errs towards
    naming a site too many: cuda.py answers a site the audit does not know as upstream does.
    """
    bound = dict(outer)
    nodes = list(_shallow(body))
    assignments = [a for node in nodes for a in _assignments(node)]
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            source = _imported_module(node, where.module, where.package)
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name in LOOKUPS and not source.startswith("flashinfer"):
                    bound.pop(local, None)  # kda_kernels/tirx/cache.py: TVM's get_cuda_version
                elif alias.name in LOOKUPS or _forwards(where.forwarders, source, alias.name):
                    bound[local] = alias.name
    for _ in range(3):  # aliases of aliases: x = get_cuda_version; y = x
        for target, value in assignments:
            lookup = _lookup_of(value, bound, where.names)
            if lookup is not None:
                bound[target] = lookup
    return bound


def _shallow(nodes: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of a scope's own code: not the bodies of the functions, classes and lambdas in it."""
    todo: list[ast.AST] = list(nodes)
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo += [*node.decorator_list, *_defaults_and_bases(node)]
        elif not isinstance(node, ast.Lambda):
            todo += ast.iter_child_nodes(node)


def _imported_module(node: ast.ImportFrom, module: str, package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if package else module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _forwards(forwarders: Forwarders, module: str, name: str) -> bool:
    return any(name in qs and module_matches(pattern, module) for pattern, qs in forwarders.items())


def _assignments(node: ast.AST) -> list[tuple[str, ast.expr]]:
    if isinstance(node, ast.Assign):
        return [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name) and node.value:
        return [(node.target.id, node.value)]
    return []


def _lookup_of(expr: ast.expr, bound: Mapping[str, str], names: frozenset[str]) -> str | None:
    """Which lookup an expression's value is, if it is one: a name, an attribute, getattr, partial."""
    if isinstance(expr, ast.Name):
        return bound.get(expr.id)
    if isinstance(expr, ast.Attribute):
        return expr.attr if expr.attr in names else None
    if isinstance(expr, ast.Call) and expr.args:
        called = ast.unparse(expr.func)
        first = expr.args[0]
        if called == "getattr" and len(expr.args) >= 2:
            name = expr.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value in names:
                return name.value
        if called in _PARTIALS:
            return _lookup_of(first, bound, names)
    return None


@dataclass(frozen=True)
class _Where:
    module: str
    package: bool  # an __init__.py: relative imports start from the module itself
    forwarders: Forwarders
    names: frozenset[str]  # the attribute and getattr names that are lookups: LOOKUPS and the forwarders'


class _Visitor:
    """Qualified names as CPython gives them: 'f.<locals>.g', 'C.m', '<module>'."""

    def __init__(self, where: _Where, text: str) -> None:
        self.where, self.source = where, _Source(text)
        self.found: list[CallSite] = []

    def sites_of(self, tree: ast.Module) -> list[CallSite]:
        bound = _bindings(tree.body, _module_bindings(self.where.module, self.where.forwarders), self.where)
        for node in tree.body:
            self.visit(node, [], bound, bound)
        return self.found

    def visit(self, node: ast.AST, scope: list[str], bound: Mapping[str, str], enclosing: Mapping[str, str]) -> None:
        """``bound``: the names of this scope; ``enclosing``: those a function defined here sees (a class
        body's names are not visible in its methods)."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for outer in [*node.decorator_list, *_defaults_and_bases(node)]:
                self.visit(outer, scope, bound, enclosing)  # they run in the enclosing scope
            if not self.may_call(node, enclosing):
                return  # no name that could reach a lookup appears in it: no call site inside
            inner = [*scope, node.name] + ([] if isinstance(node, ast.ClassDef) else ["<locals>"])
            own = _bindings(node.body, enclosing, self.where)
            for child in node.body:
                self.visit(child, inner, own, enclosing if isinstance(node, ast.ClassDef) else own)
            return
        # A lambda's or a comprehension's body is part of the enclosing scope: no branch for them.
        if isinstance(node, ast.Call):
            self.call(node, scope, bound)
        for inside in ast.iter_child_nodes(node):
            self.visit(inside, scope, bound, enclosing)

    def may_call(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, enclosing: Mapping[str, str]) -> bool:
        """Whether a def's or class's text names a lookup, a forwarder, upstream's own check or a name
        bound to one in the scopes around it: every way a call inside could reach a lookup names one
        of them (an alias, an attribute, getattr's string, partial's argument), so a body naming none
        holds no call site and is not walked (most of a release's functions)."""
        text = self.source.segment(node)
        return (UPSTREAMS_OWN in text or any(n in text for n in self.where.names)
                or any(n in text for n in enclosing))

    def call(self, node: ast.Call, scope: list[str], bound: Mapping[str, str]) -> None:
        callee = _lookup_of(node.func, bound, self.where.names)
        if callee is None and ast.unparse(node.func).rsplit(".", 1)[-1] == UPSTREAMS_OWN:
            first = self.source.segment(node.args[0]) if node.args else ""
            callee = UPSTREAMS_OWN if "torch.version.cuda" in (first or "") else None
        if callee is None:
            return
        names = scope[:-1] if scope and scope[-1] == "<locals>" else scope
        text = self.source.segment(node)
        self.found.append(CallSite(self.where.module, ".".join(names) or "<module>", callee, text,
                                   position=(node.lineno, node.col_offset)))


class _Source:
    """ast.get_source_segment, with the text split into lines once (ast splits the whole text again
    on every call: two thirds of a 0.7.4 scan went there)."""

    def __init__(self, text: str) -> None:
        # newline="": lines end at \n, \r\n or \r and keep their ends, as ast's own split (not at \f)
        self.lines = io.StringIO(text, newline="").readlines()

    def segment(self, node: ast.expr | ast.stmt) -> str:
        if node.end_lineno is None or node.end_col_offset is None:
            return ""
        first, last = node.lineno - 1, node.end_lineno - 1
        start, end = node.col_offset, node.end_col_offset  # utf-8 byte offsets
        if first == last:
            return self.lines[first].encode()[start:end].decode()
        head = self.lines[first].encode()[start:].decode()
        tail = self.lines[last].encode()[:end].decode()
        return "".join([head, *self.lines[first + 1:last], tail])


def _defaults_and_bases(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[ast.expr]:
    if isinstance(node, ast.ClassDef):
        return [*node.bases, *(k.value for k in node.keywords)]
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, [args.vararg, args.kwarg])]
    annotations = [a.annotation for a in every if a.annotation is not None]
    return [*args.defaults, *(d for d in args.kw_defaults if d is not None), *annotations,
            *([node.returns] if node.returns else [])]
