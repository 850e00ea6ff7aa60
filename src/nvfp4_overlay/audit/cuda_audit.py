"""The committed CUDA-version audit: what it says of each call site, and the overlay table it renders.

FlashInfer's get_cuda_version() answers two questions (what nvcc compiles, what the runtime
offers). Patch 0001 gives every call site upstream's answer (the toolkit's release) unless the audit
in patches/flashinfer-python/audit-cuda-versions.json lists it as a run-time site (torch's release);
the overlay's cuda_sites.py is rendered from it (``overlay_table``). audit/cuda_scan.py finds the sites of
a release; ``unclassified`` says which the audit does not classify yet, so that refresh and the
tests refuse a release with a lookup nobody looked at. Pure: it reads file texts it is given.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from ..errors import ConfigError
from ..formats import read_json, render_between
from .cuda_scan import LOOKUPS, UPSTREAMS_OWN, CallSite, call_sites, module_matches, module_name

__all__ = ["AUDIT", "LOOKUPS", "Audit", "CallSite", "call_sites", "load_audit", "markdown_table",
           "lookup_changes", "module_name", "overlay_table", "render_into", "unclassified", "unclassified_in"]

AUDIT = "audit-cuda-versions.json"
TOOLKIT, TORCH, FORWARDS = "toolkit", "torch", "per caller"


@dataclass(frozen=True)
class Audit:
    """patches/flashinfer-python/audit-cuda-versions.json: one entry per (module, qualname, call)."""

    entries: tuple[dict[str, Any], ...]

    def answer(self, site: CallSite) -> str | None:
        """'toolkit', 'torch' or 'per caller' (a forwarder) for a call the audit lists, else None: the
        call itself (its text and ordinal in its function), not the function it sits in."""
        entry = self.entry_of(site, by_call=True)
        return None if entry is None else str(entry["answer"])

    def entry_of(self, site: CallSite, *, by_call: bool) -> dict[str, Any] | None:
        """The entry of a site: the same call (by_call), or any call of the same text in the function."""
        upstreams_own = site.callee == UPSTREAMS_OWN
        for entry in self.entries:
            if (_is_upstreams_own(entry) == upstreams_own and entry["qualname"] == site.qualname
                    and entry["call"] == site.call and (not by_call or entry.get("nth", 0) == site.nth)
                    and module_matches(entry["module"], site.module)):
                return entry
        return None

    def calls(self, answer: str) -> dict[str, dict[str, frozenset[tuple[str, int]]]]:
        """module -> qualname -> the calls (text, ordinal) the audit answers so: a table of cuda_sites.py."""
        out: dict[str, dict[str, set[tuple[str, int]]]] = {}
        for entry in self.entries:
            if entry["answer"] == answer and not _is_upstreams_own(entry):
                out.setdefault(entry["module"], {}).setdefault(entry["qualname"], set()).add(
                    (entry["call"], int(entry.get("nth", 0))))
        return {m: {q: frozenset(c) for q, c in sorted(qs.items())} for m, qs in sorted(out.items())}

    def sites(self, answer: str) -> dict[str, frozenset[str]]:
        """module -> qualnames of the functions whose lookups the audit answers so."""
        return {m: frozenset(qs) for m, qs in self.calls(answer).items()}

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
    """The lookups (not upstream's own torch-based version_at_least) that the audit has no answer for:
    a call it does not list is new, whatever function it sits in."""
    return [s for s in sites if s.callee != UPSTREAMS_OWN and audit.answer(s) is None]


def new_call_problem(site: CallSite, audit: Audit, patches_dir: Path) -> str:
    """What a maintainer reads of a call the audit does not list: the call, and what to do next."""
    listed = sorted({str(e["answer"]) for e in audit.entries if e["qualname"] == site.qualname
                     and module_matches(e["module"], site.module)})
    beside = (f" (a new call in a function whose other calls the audit answers {' and '.join(listed)}: "
              f"each call is a question of its own, and the patched wheel answers this one as upstream does)"
              if listed else "")
    return (f"{site.describe()}, which {patches_dir}/flashinfer-python/{AUDIT} does not classify{beside}: "
            f"read the call and say whether it decides what nvcc compiles (toolkit) or what the runtime "
            f"offers (torch), add its entry (make cuda-audit fills in its releases), then make docs")


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


OVERLAY_TABLE_HEAD = '''"""nvfp4-overlay: which FlashInfer calls get torch's CUDA release instead of upstream's answer.

Data for cuda.py, rendered from patches/flashinfer-python/audit-cuda-versions.json (make docs;
tests/unit/test_cuda_scan.py holds the two equal). A get_cuda_version() or is_cuda_version_at_least()
call gets what upstream answers (the toolkit's release) unless the call is in RUN_TIME. TOOLKIT names
the calls the audit read and found nvcc-facing (they get upstream's answer and no warning); a
FlashInfer call in neither table, also one inside a function that lists others, gets upstream's
answer and warns once. A call in FORWARDERS is answered for its function's caller. Keys are module
names (one '*' stands for any run of characters: 0.7.4 copies one loader, cake_build.py, into 53
generated packages), then the calling functions' qualified names; values are the calls, each as its
source text and how many calls of that text come before it in the function.
"""
'''


def overlay_table(audit: Audit) -> str:
    """overlay/flashinfer-python/flashinfer/_nvfp4_overlay/cuda_sites.py, as the audit has it."""
    parts = [OVERLAY_TABLE_HEAD]
    for name, answer in (("RUN_TIME", TORCH), ("TOOLKIT", TOOLKIT), ("FORWARDERS", FORWARDS)):
        parts.append(f"\n{name} = {{\n")
        for module, functions in audit.calls(answer).items():
            parts.append(f"    {module!r}: {{\n")
            for qualname, calls in functions.items():
                listed = "".join(f"            ({c!r}, {n}),\n" for c, n in sorted(calls))
                parts.append(f"        {qualname!r}: frozenset({{\n{listed}        }}),\n")
            parts.append("    },\n")
        parts.append("}\n")
    return "".join(parts)


def markdown_table(audit: Audit) -> str:
    """The audit as docs/patches.md shows it: one row per call site, grouped by module."""
    rows = ["| releases | call site | call | answered by | what it decides; why |", "| --- | --- | --- | --- | --- |"]
    for e in sorted(audit.entries, key=lambda e: (e["module"], e["qualname"], e["call"], e.get("nth", 0))):
        span = e["first"] if e["first"] == e["last"] else f"{e['first']}–{e['last']}"
        if e.get("releases"):
            span += " (not all)"
        answer = {"toolkit": "toolkit (nvcc)", "torch": "torch"}.get(e["answer"], e["answer"])
        if e["class"] == "torch-upstream":
            answer = "torch (upstream's own)"
        flag = " (judgement call)" if e.get("ambiguous") else ""
        text = f"{e['decides']}; {e['why']}".replace("|", "\\|").replace("\n", " ")
        call = e["call"].replace("\n", " ").replace("|", "\\|")
        nth = f" (call {e['nth'] + 1} of that text)" if e.get("nth") else ""
        rows.append(f"| {span} | `{e['module']}` `{e['qualname']}` | `{call}`{nth} | {answer}{flag} | {text} |")
    return "\n".join(rows) + "\n"


BEGIN, END = "<!-- audit:cuda-versions", "<!-- /audit:cuda-versions -->"


def render_into(document: str, audit: Audit) -> str:
    """docs/patches.md with the table between its audit markers made anew (make docs)."""
    return render_between(document, BEGIN, END, markdown_table(audit), "the audit")


# --- the audit, made anew over the carried releases (make cuda-audit) -------------------------------


def regenerated(audit: Audit, scans: Mapping[str, Sequence[CallSite]]) -> list[dict[str, Any]]:
    """The audit's entries, one per call, with the releases each is in, read from every release's scan
    (release -> its sites); every verdict (answer, class, decides, why, ...) kept from the entry of the
    same call text in the same function. A call of the same text a second time in a function gets an
    entry of its own with the first one's verdict (the auditor read the function; the call is the
    same question). A site no entry of its text matches is an error: classify it first."""
    releases = sorted(scans, key=Version)
    seen: dict[tuple[int, int], set[str]] = {}  # (entry index, nth) -> releases
    index = {id(e): i for i, e in enumerate(audit.entries)}
    problems = []
    for release in releases:
        for site in scans[release]:
            entry = audit.entry_of(site, by_call=True) or audit.entry_of(site, by_call=False)
            if entry is None:
                problems.append(f"{release}: {site.describe()}")
                continue
            seen.setdefault((index[id(entry)], site.nth), set()).add(release)
    if problems:
        msg = f"call sites no entry of {AUDIT} classifies: {'; '.join(problems[:8])}"
        raise ConfigError(msg, item=problems[0], expected="every call classified", found=f"{len(problems)} new",
                          fix=f"classify them in patches/flashinfer-python/{AUDIT} first")
    out = []
    for i, entry in enumerate(audit.entries):
        nths = sorted({int(entry.get("nth", 0)), *(n for (j, n) in seen if j == i)})
        for nth in nths:
            found = seen.get((i, nth))
            out.append(_with_releases(entry, nth, found, releases) if found else {**entry, "nth": nth})
    return out


def _with_releases(entry: Mapping[str, Any], nth: int, found: set[str], releases: list[str]) -> dict[str, Any]:
    """entry for call nth, first and last as found, ``releases`` where it skips some between them."""
    ordered = sorted(found, key=Version)
    span = releases[releases.index(ordered[0]):releases.index(ordered[-1]) + 1]
    fresh: dict[str, Any] = {"first": ordered[0], "last": ordered[-1]}
    if ordered != span:
        fresh["releases"] = ordered
    for key, value in entry.items():  # the committed order of the keys, nth after call
        if key not in ("first", "last", "releases", "nth"):
            fresh[key] = value
        if key == "call":
            fresh["nth"] = nth
    return fresh


def as_json(entries: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(list(entries), indent=1, ensure_ascii=False) + "\n"
