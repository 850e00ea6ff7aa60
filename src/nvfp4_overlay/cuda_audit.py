"""The committed CUDA-version audit: what it says of each call site, and the overlay table it renders.

FlashInfer's get_cuda_version() answers two questions (what nvcc compiles, what the runtime
offers). Patch 0001 gives every call site upstream's answer (the toolkit's release) unless the audit
in patches/flashinfer-python/audit-cuda-versions.json lists it as a run-time site (torch's release);
the overlay's cuda_sites.py is rendered from it (``overlay_table``). cuda_scan.py finds the sites of
a release; ``unclassified`` says which the audit does not classify yet, so that refresh and the
tests refuse a release with a lookup nobody looked at. Pure: it reads file texts it is given.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cuda_scan import LOOKUPS, UPSTREAMS_OWN, CallSite, call_sites, module_matches, module_name
from .formats import read_json, render_between

__all__ = ["AUDIT", "LOOKUPS", "Audit", "CallSite", "call_sites", "load_audit", "markdown_table",
           "lookup_changes", "module_name", "overlay_table", "render_into", "unclassified", "unclassified_in"]

AUDIT = "audit-cuda-versions.json"
TOOLKIT, TORCH, FORWARDS = "toolkit", "torch", "per caller"


@dataclass(frozen=True)
class Audit:
    """patches/flashinfer-python/audit-cuda-versions.json: one entry per (module, qualname, call)."""

    entries: tuple[dict[str, Any], ...]

    def answer(self, site: CallSite) -> str | None:
        """'toolkit', 'torch' or 'per caller' (a forwarder) for a site the audit classifies, else None."""
        upstreams_own = site.callee == UPSTREAMS_OWN
        for entry in self.entries:
            if (_is_upstreams_own(entry) == upstreams_own and entry["qualname"] == site.qualname
                    and module_matches(entry["module"], site.module)):
                return str(entry["answer"])
        return None

    def sites(self, answer: str) -> dict[str, frozenset[str]]:
        """module -> qualnames of the lookups the audit answers so: a table of cuda_sites.py."""
        out: dict[str, set[str]] = {}
        for entry in self.entries:
            if entry["answer"] == answer and not _is_upstreams_own(entry):
                out.setdefault(entry["module"], set()).add(entry["qualname"])
        return {m: frozenset(q) for m, q in sorted(out.items())}

    def toolkit_sites(self) -> dict[str, frozenset[str]]:
        return self.sites(TOOLKIT)

    def run_time_sites(self) -> dict[str, frozenset[str]]:
        return self.sites(TORCH)

    def forwarders(self) -> dict[str, frozenset[str]]:
        return self.sites(FORWARDS)


def load_audit(patches_dir: Path) -> Audit:
    path = patches_dir / "flashinfer-python" / AUDIT
    return Audit(tuple(read_json(path, what="the CUDA-version audit (a list of call-site entries)")))


def unclassified(sites: Iterable[CallSite], audit: Audit) -> list[CallSite]:
    """The lookups (not upstream's own torch-based version_at_least) that the audit has no answer for."""
    return [s for s in sites if s.callee != UPSTREAMS_OWN and audit.answer(s) is None]


def unclassified_in(files: Mapping[str, str], audit: Audit) -> list[CallSite]:
    """The call sites of a release's files (path -> text) that the audit does not classify."""
    return unclassified(call_sites(files, audit.forwarders()), audit)


# The upstream functions patch 0001 replaces, as cuda.py mirrors them: sha256 of ast.unparse (so
# comments and layout do not count), the same in every release from 0.6.1 to 0.7.4. A release whose
# text differs has a lookup of its own (another toolkit search, say pip's nvcc first), which the
# decorator line would silently replace with the old one: such a port needs a person.
REPLACED_IN = "flashinfer/jit/cpp_ext.py"
REPLACED = {
    "get_cuda_path": "285c3e7f27735abe44ccff8d2e5e562343f9e3942f92971eff30da4b185ef3d4",
    "get_cuda_version": "ca91af8cac2dd2815240b49d7ee9e346a9b52874b8475e856f6a45ad65eca291",
    "is_cuda_version_at_least": "341e06d5cac81eb4333ddda24d16b60732739d34613da32c291a50201fa61f16",
}


def lookup_changes(files: Mapping[str, str]) -> list[str]:
    """The replaced functions whose upstream text is not the one cuda.py mirrors, as sentences."""
    text = files.get(REPLACED_IN)
    if text is None:
        return [f"{REPLACED_IN}: not in the release; patch 0001 has nothing to replace"]
    found = {node.name: hashlib.sha256(ast.unparse(node).encode()).hexdigest()
             for node in ast.parse(text).body if isinstance(node, ast.FunctionDef) and node.name in REPLACED}
    problems = []
    for name, expected in REPLACED.items():
        if found.get(name) != expected:
            what = ("is gone" if name not in found
                    else f"changed (its text hashes to {found[name][:12]}, 0.6.1-0.7.4's to {expected[:12]})")
            problems.append(
                f"{REPLACED_IN}: upstream's {name} {what}; patch 0001 replaces it with cuda.py's mirror of "
                f"the old lookup, so the patched wheel would not ask what upstream now asks. Read "
                f"upstream's change; port it into overlay/flashinfer-python/flashinfer/_nvfp4_overlay/cuda.py "
                f"and record the new text in cuda_audit.REPLACED, or drop 0001 if upstream's lookup starts "
                f"no process and traces")
    return problems


def _is_upstreams_own(entry: Mapping[str, Any]) -> bool:
    return bool(entry["class"] == "torch-upstream")


OVERLAY_TABLE_HEAD = '''"""nvfp4-overlay: which FlashInfer call sites get torch's CUDA release instead of upstream's answer.

Data for cuda.py, rendered from patches/flashinfer-python/audit-cuda-versions.json (make docs;
tests/test_cuda_audit.py holds the two equal). A get_cuda_version() or is_cuda_version_at_least()
call gets what upstream answers (the toolkit's release) unless its calling function is in RUN_TIME.
TOOLKIT names the sites the audit read and found nvcc-facing (they get upstream's answer and no
warning); a FlashInfer caller in neither table gets upstream's answer and warns once. A call from a
function in FORWARDERS is answered for that function's caller. Keys are module names (one '*' stands
for any run of characters: 0.7.4 copies one loader, cake_build.py, into 53 generated packages),
values the calling functions' qualified names.
"""
'''


def overlay_table(audit: Audit) -> str:
    """overlay/flashinfer-python/flashinfer/_nvfp4_overlay/cuda_sites.py, as the audit has it."""
    parts = [OVERLAY_TABLE_HEAD]
    for name, table in (("RUN_TIME", audit.run_time_sites()), ("TOOLKIT", audit.toolkit_sites()),
                        ("FORWARDERS", audit.forwarders())):
        parts.append(f"\n{name} = {{\n")
        for module, qualnames in table.items():
            listed = "".join(f"        {q!r},\n" for q in sorted(qualnames))
            parts.append(f"    {module!r}: frozenset({{\n{listed}    }}),\n")
        parts.append("}\n")
    return "".join(parts)


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
    return render_between(document, BEGIN, END, markdown_table(audit), "the audit")
