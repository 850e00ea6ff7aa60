"""The doctor command, and its report as a person reads it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..audit import api_audit
from ..operate import Finding, doctor, installed
from .context import Context


def cmd_doctor(ctx: Context) -> int:
    asked = None
    if ctx.args.sglang_args is not None:  # a malformed line, or no model named, is exit 2 before any probe runs
        from ..operate import doctor_launch

        asked = doctor_launch.ask(doctor_launch.Request(ctx.args.sglang_args, ctx.args.model_arch, ctx.args.gpu))
    document, finding = doctor.diagnose(ctx.patches_dir, ctx.overlay_dir, ctx.source, python=ctx.args.python,
                                        trace=not ctx.args.no_trace, timeout=ctx.args.trace_timeout)
    _new_api(document, finding, ctx.patches_dir)
    _jit(ctx, document, finding)
    if asked is not None:
        from ..operate import doctor_launch

        doctor_launch.judge(document, asked, ctx.args.python or sys.executable, ctx.patches_dir,
                            ctx.source.cache_dir, ctx.args.trace_timeout)
    ctx.emit(document, render(document))
    return finding.exit_code


def _jit(ctx: Context, document: dict[str, Any], finding: Finding) -> None:
    """The prebuilt JIT cache, the cubins and the toolkit against this node's FlashInfer and GPU (jit_doctor)."""
    from ..operate import jit_doctor
    from ..patch import load_stacks

    jit_doctor.report(document, finding, ctx.args.python or sys.executable, load_stacks(ctx.patches_dir).default)


def _new_api(document: dict[str, Any], finding: Finding, patches_dir: Path) -> None:
    """A FlashInfer release without a series: its public functions that reach a kernel loader and that the
    serving-API audit does not classify, read from the installed files."""
    flashinfer = document["distributions"]["flashinfer-python"]
    if not installed.scans_api(flashinfer):
        return
    root = Path(flashinfer["location"])
    files = {str(p.relative_to(root)): p.read_text(errors="replace") for p in sorted((root / "flashinfer").rglob("*.py"))
             if api_audit.scanned(str(p.relative_to(root)))}
    installed.judge_new_apis(flashinfer, api_audit.new_api(files, api_audit.load_audit(patches_dir)), patches_dir, finding)
    document.update(ok=finding.exit_code == 0, exit_code=finding.exit_code, problems=finding.all_problems,
                    notes=finding.notes)


def render(document: dict[str, Any]) -> str:
    python = document["python"]
    lines = [f"{'python':<18}{python['executable']} ({python['version']})"]
    for name, dist in document["distributions"].items():
        lines += _render_distribution(name, dist)
    imported = document["import"]
    lines.append(f"{'import flashinfer':<18}" + ("ok" if imported.get("ok") else f"FAILED: {imported.get('error')}"))
    lines += _render_gpu(document.get("gpu"))
    lines += _render_jit(document.get("jit"))
    lines.append(f"{'trace':<18}{_render_trace(document['trace'])}")
    lines += _render_launch(document.get("sglang_launch"))
    lines += [f"problem: {p}" for p in document["problems"]] + [f"note: {n}" for n in document["notes"]]
    lines += [f"taken on trust: {t}" for t in document.get("taken_on_trust", [])]
    verdict = {0: "OK", 1: "NOT OK", 3: "NOT OK (integrity)", 4: "NOT OK (cannot be verified here)",
               5: "TAKEN ON TRUST"}.get(document["exit_code"], "NOT OK")
    if document["exit_code"] == 0 and document["trace"].get("skipped"):
        verdict += ", not traced (--no-trace)"
    lines.append(f"{'verdict':<18}{verdict} (exit {document['exit_code']})")
    return "\n".join(lines)


def _render_distribution(name: str, dist: dict[str, Any]) -> list[str]:
    if not dist["installed"]:
        return [f"{name:<18}not installed"]
    if dist["patched"]:
        state = f"patched, revision {dist.get('revision')}, from {dist.get('upstream', {}).get('filename')}"
    else:
        state = "upstream (unpatched)"
    lines = [f"{name:<18}{dist['version']}  {state}  [{dist['location']}]"]
    if dist["patched"]:
        lines.append(f"{'':<18}patches: {', '.join(dist['patches']) or 'none'}")
    if dist.get("new_apis"):
        lines.append(f"{'':<18}new API the audit does not classify: {', '.join(a['function'] for a in dist['new_apis'])}")
    record = dist["record"]
    changed = len(record["modified"]) + len(record["missing"])
    lines.append(f"{'':<18}files: {record['matching']:,} of {record['files']:,} match RECORD"
                 + (f"; {changed} modified or missing" if changed else ""))
    anchor = dist.get("anchor")
    if anchor:
        verdict = "as built" if anchor["ok"] else "NOT as built"
        lines.append(f"{'':<18}files against the build made again from {anchor['upstream']}: {anchor['files']:,} "
                     f"held: {verdict}")
    held = dist.get("against_provenance")
    if held:
        carried = held["carried"]
        verdict = "as built" if not held["differs"] and carried.get("ok") else "NOT as built (arrived edited)"
        lines.append(f"{'':<18}RECORD against its own provenance (no anchor: a diagnosis, never a pass): "
                     f"{held['explained']} overlay and patched files by sha256, {carried['rows']:,} upstream rows by "
                     f"digest: {verdict}")
    return lines


def _render_gpu(gpu: dict[str, Any] | None) -> list[str]:
    if gpu is None:
        return [f"{'gpu':<18}not checked"]
    if gpu.get("torch") is None:
        return [f"{'gpu':<18}unknown: torch does not import ({gpu.get('error')})"]
    head = f"torch {gpu['torch']}, CUDA {gpu['cuda'] or 'none'}"
    if not gpu["devices"]:
        return [f"{'gpu':<18}none ({head}); the trace check fakes compute capability 12.0"]
    return [f"{'gpu':<18}{d['index']}: {d['name']}, compute capability {d['capability'][0]}.{d['capability'][1]} "
            f"({doctor.gpu_family(d['capability'])}; {head})" for d in gpu["devices"]]


def _render_trace(trace: dict[str, Any]) -> str:
    if trace.get("skipped"):
        return "skipped"
    entries = trace.get("entries") or {}
    if not entries:
        return f"FAILED: {trace.get('error')}"
    passed = [n for n, e in entries.items() if e.get("ok")]
    failed = [n for n, e in entries.items() if not e.get("ok")]
    text = f"{len(passed)} of {len(entries)} entry points trace with fullgraph=True in {trace.get('seconds')} s"
    text += f"; FAILED: {', '.join(failed)}" if failed else " through their opaque ops"
    eager_only = trace.get("eager_only") or {}
    if eager_only:  # FlashInfer's own compile list: docs/compile-list.md
        text += f"; eager-only here: {', '.join(sorted(eager_only))} ({'; '.join(sorted(set(eager_only.values())))})"
    return text


def _render_launch(launch: dict[str, Any] | None) -> list[str]:
    """doctor --sglang-args: SGLang's own answer for the launch line, on the GPU it was asked for."""
    if not launch:
        return []
    if "error" in launch:
        return [f"{'launch line':<18}not judged: {launch['error']}"]
    whose = "installed" if launch["installed"] else "the default stack's (not installed there)"
    verdict = {True: "yes", False: "no", None: "cannot tell"}[launch["fullgraph"]]
    lines = [f"{'launch line':<18}SGLang {launch['release']} ({whose}), {launch['gpu']} (from {launch['gpu_from']}), "
             f"{launch['architecture']}",
             f"{'  graphs':<18}prefill {launch['prefill']}, decode {launch['decode']}"
             + ("; --enable-torch-compile (not fullgraph)" if launch["torch_compile"] else ""),
             f"{'  fullgraph':<18}{verdict}: decided by {launch['rule']}",
             f"{'  runner':<18}{launch['runner']}"]
    for call in launch["calls"]:
        state = ("routed (the overlay's opaque op)" if call["routed"] else "traces as upstream has it"
                 if call["traces"] else "RAW (fails fullgraph=True)")
        lines.append(f"{'  flashinfer':<18}{call['function']} at {call['site']}: {state}")
    return lines


def _render_jit(jit: dict[str, Any] | None) -> list[str]:
    if not jit or "error" in jit:
        return []
    lines = [f"{'jit cache':<18}{jit.get('cache') or 'none'} (GPU {jit.get('gpu') or 'none seen'}, nvcc "
             f"{jit.get('nvcc') or 'absent'}, toolkit {jit.get('toolkit') or 'none'})"]
    if jit.get("prebuilt"):
        lines.append(f"{'  prebuilt':<18}{', '.join(jit['prebuilt'])}")
    if jit.get("anchored"):
        lines.append(f"{'  built here too':<18}{', '.join(jit['anchored'])} (equal, byte for byte)")
    if jit.get("will_jit"):
        lines.append(f"{'  JIT at 1st call':<18}{', '.join(jit['will_jit'])}")
    lines.append(f"{'flashinfer-cubin':<18}{jit.get('cubin') or 'not installed'}")
    return lines
