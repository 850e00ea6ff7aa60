"""The CUDA-version call sites of a FlashInfer release, and what the committed audit says of each.

FlashInfer's get_cuda_version() answers two questions (what nvcc compiles, what the runtime
offers); patch 0001 answers each call site by the audit in patches/flashinfer-python/
audit-cuda-versions.json, whose "toolkit" sites are the overlay's nvcc_facing.py. A new release can
add call sites: this module finds every call of get_cuda_version, is_cuda_version_at_least and
version_at_least(torch.version.cuda, ...) in a release's files (the calling function's qualified
name, as Python's co_qualname gives it), so that refresh and the tests can say which ones the audit
does not classify yet. Pure: it reads file texts it is given.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError

AUDIT = "audit-cuda-versions.json"
LOOKUPS = frozenset({"get_cuda_version", "is_cuda_version_at_least"})
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class CallSite:
    module: str  # flashinfer.jit.fused_moe
    qualname: str  # the calling function, as co_qualname names it ("<module>" at module level)
    callee: str  # get_cuda_version, is_cuda_version_at_least, version_at_least
    call: str  # the call's source text

    @property
    def key(self) -> tuple[str, str]:
        return self.module, self.qualname


@dataclass(frozen=True)
class Audit:
    """patches/flashinfer-python/audit-cuda-versions.json: one entry per (module, qualname, call)."""

    entries: tuple[dict[str, Any], ...]

    def answer(self, site: CallSite) -> str | None:
        """'toolkit' or 'torch' for a site the audit classifies, else None."""
        for entry in self.entries:
            if _module_matches(entry["module"], site.module) and entry["qualname"] == site.qualname:
                return str(entry["answer"])
        return None

    def toolkit_sites(self) -> dict[str, frozenset[str]]:
        """module -> qualnames that get the toolkit's release: what nvcc_facing.py must hold."""
        out: dict[str, set[str]] = {}
        for entry in self.entries:
            if entry["answer"] == "toolkit":
                out.setdefault(entry["module"], set()).add(entry["qualname"])
        return {m: frozenset(q) for m, q in out.items()}


def load_audit(patches_dir: Path) -> Audit:
    path = patches_dir / "flashinfer-python" / AUDIT
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        msg = f"{path}: cannot read the CUDA-version audit ({exc}); restore it from git"
        raise ConfigError(msg) from exc
    return Audit(tuple(entries))


def call_sites(files: Mapping[str, str]) -> list[CallSite]:
    """Every CUDA-version call in the given files (wheel-relative path -> text), flashinfer/data/ aside."""
    sites: list[CallSite] = []
    for path, text in sorted(files.items()):
        if not path.endswith(".py") or path.startswith("flashinfer/data/"):
            continue
        if "cuda_version" not in text and "version_at_least" not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        if _binds_foreign_lookup(tree):
            continue  # e.g. kda_kernels/tirx/cache.py: TVM's own get_cuda_version, not FlashInfer's
        sites += _Visitor(module_name(path), text).sites_of(tree)
    return sites


def module_name(path: str) -> str:
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unclassified(sites: Iterable[CallSite], audit: Audit) -> list[CallSite]:
    """The lookups (not upstream's own torch-based version_at_least) that the audit has no answer for."""
    return [s for s in sites if s.callee in LOOKUPS and audit.answer(s) is None]


class _Visitor:
    """Qualified names as CPython gives them: 'f.<locals>.g', 'C.m', '<module>'."""

    def __init__(self, module: str, text: str) -> None:
        self.module, self.text = module, text
        self.found: list[CallSite] = []

    def sites_of(self, tree: ast.Module) -> list[CallSite]:
        for node in tree.body:
            self.visit(node, [])
        return self.found

    def visit(self, node: ast.AST, scope: list[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in node.decorator_list:
                self.visit(d, scope)  # decorators run in the enclosing scope
            inner = [*scope, node.name] + ([] if isinstance(node, ast.ClassDef) else ["<locals>"])
            for child in node.body:
                self.visit(child, inner)
            return
        if isinstance(node, ast.Call):
            self.call(node, scope)
        for inside in ast.iter_child_nodes(node):
            self.visit(inside, scope)

    def call(self, node: ast.Call, scope: list[str]) -> None:
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if name != "version_at_least" and name not in LOOKUPS:
            return
        text = ast.get_source_segment(self.text, node) or ""
        if name == "version_at_least":
            first = ast.get_source_segment(self.text, node.args[0]) if node.args else ""
            if "torch.version.cuda" not in (first or ""):
                return
        names = scope[:-1] if scope and scope[-1] == "<locals>" else scope
        self.found.append(CallSite(self.module, ".".join(names) or "<module>", name, text))


def _binds_foreign_lookup(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and "cpp_ext" not in (node.module or ""):
            if any(a.name in LOOKUPS and (a.asname or a.name) in LOOKUPS for a in node.names):
                return True
    return False


def _module_matches(pattern: str, module: str) -> bool:
    if "*" not in pattern:
        return pattern == module
    head, _, tail = pattern.partition("*")
    return module.startswith(head) and module.endswith(tail) and len(module) > len(head) + len(tail)


def markdown_table(audit: Audit) -> str:
    """The audit as docs/patches.md shows it: one row per call site, grouped by module."""
    rows = ["| releases | call site | call | answered by | what it decides; why |", "| --- | --- | --- | --- | --- |"]
    for e in sorted(audit.entries, key=lambda e: (e["module"], e["qualname"], e["call"])):
        span = e["first"] if e["first"] == e["last"] else f"{e['first']}–{e['last']}"
        if e.get("releases"):
            span += " (not all)"
        answer = {"toolkit": "toolkit (nvcc)", "torch": "torch"}.get(e["answer"], e["answer"])
        if e["class"] == "torch-upstream":
            answer = "torch (upstream's own)"
        flag = " (judgement call)" if e.get("ambiguous") else ""
        text = f"{e['decides']}; {e['why']}".replace("|", "\\|").replace("\n", " ")
        call = e["call"].replace("\n", " ").replace("|", "\\|")
        rows.append(f"| {span} | `{e['module']}` `{e['qualname']}` | `{call}` | {answer}{flag} | {text} |")
    return "\n".join(rows) + "\n"


BEGIN, END = "<!-- audit:cuda-versions", "<!-- /audit:cuda-versions -->"


def render_into(document: str, audit: Audit) -> str:
    """docs/patches.md with the table between its audit markers made anew (make docs)."""
    head, sep, rest = document.partition(BEGIN)
    marker, _, tail = rest.partition("\n")
    _, end, after = tail.partition(END)
    if not sep or not end:
        msg = f"the document has no {BEGIN} ... {END} region to render the audit into"
        raise ConfigError(msg)
    return f"{head}{BEGIN}{marker}\n{markdown_table(audit)}{END}{after}"
