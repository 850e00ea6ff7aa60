"""The serving-API audit: which public FlashInfer functions that reach a kernel loader are routed, and why not.

A public function that reaches FlashInfer's JIT loader or its cubin loader (api_graph.reaching, a
static call graph over the release's own files) breaks ``torch.compile(fullgraph=True)`` unless the
overlay routes it. The committed audit (patches/flashinfer-python/audit-serving-api.json) classifies
every one of every carried release: routed, or out of scope and why. A new release can add one; this
module names those the audit does not classify, for refresh, drift, doctor and the tests.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import replace_file, sha256_file
from ..formats import read_json, render_between
from .api_graph import reaching
from .api_scan import Memo, PublicFunction, is_public_module, module_name

__all__ = ["AUDIT", "Audit", "Memo", "PublicFunction", "Rule", "as_json", "is_public_module", "load_audit",
           "module_name", "new_api", "problem", "reaching", "scan", "scan_wheel_files", "unclassified"]

AUDIT = "audit-serving-api.json"
# A name with one of these in it is an FP4/FP8/quantization API: only a rule naming it exactly
# classifies it, so a new one is never swept into a family's glob.
MARKERS = ("fp4", "fp8", "mxfp", "nvfp", "e2m1", "quant")


# --- the committed audit -------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    module: str  # a glob over the defining module
    name: str  # an exact name, or a glob that never matches an FP4/FP8 name (MARKERS)
    verdict: str  # "routed" or "out of scope"
    why: str

    def matches(self, fn: PublicFunction) -> bool:
        if not fnmatch.fnmatchcase(fn.module, self.module):
            return False
        if not _is_glob(self.name):
            return fn.name == self.name
        return not any(m in fn.name.lower() for m in MARKERS) and fnmatch.fnmatchcase(fn.name, self.name)


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


@dataclass(frozen=True)
class Audit:
    rules: tuple[Rule, ...]

    def verdict(self, fn: PublicFunction) -> Rule | None:
        """The first rule naming fn exactly, else the first whose glob takes it (Rule.matches)."""
        for rule in self._by_name.get(fn.name, ()):
            if rule.matches(fn):
                return rule
        for rule in self._globs:
            if rule.matches(fn):
                return rule
        return None

    @functools.cached_property
    def _by_name(self) -> dict[str, list[Rule]]:
        """The exact rules by name, in the audit's order (a release has some 1,800 functions that
        reach a loader and the audit 600 rules: one look-up each, not 600 matches)."""
        out: dict[str, list[Rule]] = {}
        for rule in self.rules:
            if not _is_glob(rule.name):
                out.setdefault(rule.name, []).append(rule)
        return out

    @functools.cached_property
    def _globs(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if _is_glob(r.name))

    def routed(self) -> frozenset[str]:
        return frozenset(r.name for r in self.rules if r.verdict == "routed")


def load_audit(patches_dir: Path) -> Audit:
    path = patches_dir / "flashinfer-python" / AUDIT
    raw = read_json(path, what="the serving-API audit")
    try:
        rules = tuple(Rule(r["module"], r["name"], r["verdict"], r["why"]) for r in raw["rules"])
    except (KeyError, TypeError) as exc:
        msg = f"{path}: cannot read the serving-API audit ({exc})"
        raise ConfigError(msg, path=path, expected="a JSON object with rules of module, name, verdict and why",
                          found=str(exc), fix=f"restore it from git ('git checkout -- {path}')") from exc
    bad = [r for r in rules if r.verdict not in ("routed", "pending", "out of scope") or not r.why.strip()]
    if bad:
        msg = f"{path}: rules need a verdict ('routed', 'pending' or 'out of scope') and a reason: {bad[:3]}"
        raise ConfigError(msg, path=path, item=", ".join(f"{r.module}.{r.name}" for r in bad[:3]),
                          expected="verdict 'routed', 'pending' or 'out of scope', and a reason",
                          found=", ".join(repr(r.verdict) for r in bad[:3]), fix="give each rule a verdict and a reason")
    return Audit(rules)


def unclassified(functions: Iterable[PublicFunction], audit: Audit) -> list[PublicFunction]:
    """The functions that reach a loader and that no rule of the audit classifies: a new API."""
    return [f for f in functions if audit.verdict(f) is None]


LOADERS = {"jit": "the JIT loader (JitSpec.build_and_load)", "cubin": "the cubin loader (flashinfer.jit.cubin_loader)"}


def new_api(files: Mapping[str, str], audit: Audit, memo: Memo | None = None,
            store: Path | None = None) -> list[PublicFunction]:
    """The release's public functions (files: wheel path -> text) that reach a kernel loader and that
    the audit does not classify: a new API, which breaks fullgraph=True until the overlay routes it."""
    return unclassified(scan(files, memo, store), audit)


def scan(files: Mapping[str, str], memo: Memo | None = None, store: Path | None = None) -> list[PublicFunction]:
    """Every public function of the release (files: wheel path -> text) that reaches a kernel loader.

    One set of texts is scanned once per process (refresh asks before it ports, and its behaviour
    checks ask again of the same wheel: 0.7.4 takes seconds each time), and once at all with a
    store (a directory: the cache's api-scan/): kept there under the digest of the texts, of the
    scan's own modules and of Python's version (ast's), so one byte changed in any scans again. A
    scan of other texts reuses, by text, what the one before learnt (_MEMO: a release that changes
    one file of 0.7.4 scans in 4.8 s instead of 12.9 s)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{len(files[name])}\0".encode() + files[name].encode("utf-8", "surrogatepass"))
    key = digest.hexdigest()
    if key not in _REACHING:
        _REACHING[key] = _stored(store, key, lambda: reaching(files, memo or _MEMO))
    return _REACHING[key]


# The modules whose code makes a scan's result: a change to any of them is a new key.
SCANNER = ("api_audit.py", "api_graph.py", "api_scan.py", "api_body.py", "api_text.py")


def _stored(store: Path | None, texts: str, compute: Callable[[], list[PublicFunction]]) -> list[PublicFunction]:
    if store is None:
        return compute()
    here = Path(__file__).resolve().parent
    key = hashlib.sha256("\0".join([texts, *(sha256_file(here / m) for m in SCANNER),
                                     f"{sys.version_info[0]}.{sys.version_info[1]}"]).encode()).hexdigest()
    path = store / f"{key[:32]}.json"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):  # absent or unreadable: scanned again
        return [PublicFunction(f["module"], f["name"], tuple(f["loaders"]), tuple(f["via"]))
                for f in json.loads(path.read_text())["functions"]]
    found = compute()
    store.mkdir(parents=True, exist_ok=True)
    rows = [{"module": f.module, "name": f.name, "loaders": list(f.loaders), "via": list(f.via)} for f in found]
    replace_file(path, json.dumps({"key": key, "functions": rows}).encode())
    return found


_REACHING: dict[str, list[PublicFunction]] = {}  # the digest of a release's texts -> what reaches a loader there
_MEMO = Memo()  # what the last scan learnt, by text (api_scan.Memo: the last two releases' modules and defs)


def problem(release: str, fn: PublicFunction, patches_dir: Path) -> str:
    """A new API as drift, refresh and doctor name it: what, where, through which calls, and what to do."""
    loaders = " and ".join(LOADERS[k] for k in fn.loaders)
    through = " > ".join(v.rsplit(".", 1)[-1] for v in fn.via[1:-1]) or "itself"
    return (f"flashinfer-python {release}: {fn.key} is a public function that reaches {loaders} (through "
            f"{through}), and {patches_dir / 'flashinfer-python' / AUDIT} does not classify it: unrouted, it breaks "
            f"torch.compile(fullgraph=True); route it (_nvfp4_overlay/entries.py, then 'nvfp4-overlay routes' and 'nvfp4-overlay audit-api') "
            f"or declare it out of scope in the audit, saying why")


def scanned(name: str) -> bool:
    """Whether the scan reads a wheel member: FlashInfer's Python files, not the sources under data/."""
    return name.endswith(".py") and name.startswith("flashinfer/") and not name.startswith("flashinfer/data/")


def scan_wheel_files(read: Mapping[str, bytes]) -> dict[str, str]:
    """The texts the scan reads from a wheel's members (name -> bytes): its Python files."""
    return {n: b.decode("utf-8", "replace") for n, b in read.items() if scanned(n)}


def as_json(functions: Iterable[PublicFunction], audit: Audit) -> list[dict[str, Any]]:
    rows = []
    for f in functions:
        rule = audit.verdict(f)
        rows.append({"function": f.key, "loaders": list(f.loaders), "via": list(f.via),
                     "verdict": rule.verdict if rule else None, "why": rule.why if rule else None})
    return rows


def markdown_table(audit: Audit) -> str:
    """The audit as docs show it: each routed or pending function, then each reason for leaving the
    others out of scope with how many exact names and which module families it covers."""
    rows = ["| function | verdict | why |", "| --- | --- | --- |"]
    for r in sorted((r for r in audit.rules if r.verdict != "out of scope"), key=lambda r: (r.verdict, r.name, r.module)):
        rows.append(f"| `{r.module}.{r.name}` | {r.verdict} | {r.why} |")
    reasons: dict[str, tuple[int, list[str]]] = {}
    for r in audit.rules:
        if r.verdict == "out of scope":
            count, families = reasons.get(r.why, (0, []))
            reasons[r.why] = (count + (not _is_glob(r.name)), families + ([r.module] if _is_glob(r.name) else []))
    for why, (count, families) in sorted(reasons.items()):
        where = f"{count} FP4/FP8/quantize names by exact name" if count else ""
        if families:
            where += ("; " if where else "") + "families " + ", ".join(f"`{f}`" for f in sorted(families))
        rows.append(f"| {where} | out of scope | {why} |")
    return "\n".join(rows) + "\n"


BEGIN, END = "<!-- audit:serving-api", "<!-- /audit:serving-api -->"


def render_into(document: str, audit: Audit) -> str:
    """The document with the table between its audit markers made anew."""
    return render_between(document, BEGIN, END, markdown_table(audit), "the serving-API audit")


def new_apis(read: Callable[[str], bytes | None], names: Sequence[str], audit: Audit,
             store: Path | None = None) -> tuple[PublicFunction, ...]:
    """The public FlashInfer functions of a release (its members: names, read) that reach a kernel
    loader and that the serving-API audit does not classify: a state of the release's own, which needs
    a person until the overlay routes them or the audit declares them out of scope. No I/O but the
    scan's store (scan), when one is given."""
    files = {n: data.decode("utf-8", "replace") for n in names if scanned(n) and (data := read(n)) is not None}
    return tuple(new_api(files, audit, store=store))
