"""The doctor command, and its report (operate/doctor_report.py) as a person reads it."""

from __future__ import annotations

from ..operate import doctor, doctor_report
from .context import Context


def cmd_doctor(ctx: Context) -> int:
    asked = None
    if ctx.args.sglang_args is not None:  # a malformed line, or no model named, is exit 2 before any probe runs
        from ..operate import doctor_launch

        asked = doctor_launch.ask(doctor_launch.Request(ctx.args.sglang_args, ctx.args.model_arch, ctx.args.gpu))
    report = doctor.examine(ctx.patches_dir, ctx.overlay_dir, ctx.source, python=ctx.args.python,
                            trace=not ctx.args.no_trace, timeout=ctx.args.trace_timeout, asked=asked)
    ctx.emit(doctor_report.data(report), render(report))
    return report.exit_code


def render(report: doctor_report.Report) -> str:
    """The report's text: the same blocks --json writes, one line a fact."""
    python = report.python
    lines = [f"{'python':<18}{python.executable} ({python.version})"]
    for name, dist in report.distributions.items():
        lines += _render_distribution(name, dist)
    imported = report.imported
    lines.append(f"{'import flashinfer':<18}" + ("ok" if imported.ok else f"FAILED: {imported.error}"))
    lines += _render_gpu(report.gpu)
    lines += _render_jit(report.jit)
    lines.append(f"{'trace':<18}{_render_trace(report.trace)}")
    lines += _render_launch(report.sglang_launch)
    lines += [f"problem: {p}" for p in report.problems] + [f"note: {n}" for n in report.notes]
    lines += [f"taken on trust: {t}" for t in report.taken_on_trust]
    lines.append(f"{'verdict':<18}{report.verdict} (exit {report.exit_code})")
    return "\n".join(lines)


def _render_distribution(name: str, dist: doctor_report.Distribution) -> list[str]:
    if not dist.installed:
        return [f"{name:<18}not installed"]
    if dist.patched:
        state = f"patched, revision {dist.revision}, from {(dist.upstream or {}).get('filename')}"
    else:
        state = "upstream (unpatched)"
    lines = [f"{name:<18}{dist.version}  {state}  [{dist.location}]"]
    if dist.patched:
        lines.append(f"{'':<18}patches: {', '.join(dist.patches or []) or 'none'}")
    if dist.new_apis:
        lines.append(f"{'':<18}new API the audit does not classify: {', '.join(a.function for a in dist.new_apis)}")
    record = dist.record
    if record is not None:
        changed = len(record.modified) + len(record.missing)
        lines.append(f"{'':<18}files: {record.matching:,} of {record.files:,} match RECORD"
                     + (f"; {changed} modified or missing" if changed else ""))
    anchor = dist.anchor
    if anchor:
        lines.append(f"{'':<18}files against the build made again from {anchor.upstream}: {anchor.files:,} "
                     f"held: {'as built' if anchor.ok else 'NOT as built'}")
    held = dist.against_provenance
    if held:
        verdict = "as built" if not held.differs and held.carried.ok else "NOT as built (arrived edited)"
        lines.append(f"{'':<18}RECORD against its own provenance (no anchor: a diagnosis, never a pass): "
                     f"{held.explained} overlay and patched files by sha256, {held.carried.rows:,} upstream rows by "
                     f"digest: {verdict}")
    return lines


def _render_gpu(gpu: doctor_report.Gpu | None) -> list[str]:
    if gpu is None:
        return [f"{'gpu':<18}not checked"]
    if gpu.torch is None:
        return [f"{'gpu':<18}unknown: torch does not import ({gpu.error})"]
    head = f"torch {gpu.torch}, CUDA {gpu.cuda or 'none'}"
    if not gpu.devices:
        return [f"{'gpu':<18}none ({head}); the trace check fakes compute capability 12.0"]
    return [f"{'gpu':<18}{d.index}: {d.name}, compute capability {d.capability[0]}.{d.capability[1]} "
            f"({doctor.gpu_family(d.capability)}; {head})" for d in gpu.devices]


def _render_trace(trace: doctor_report.Trace) -> str:
    if trace.skipped:
        return "skipped"
    entries = trace.entries or {}
    if not entries:
        return f"FAILED: {trace.error}"
    failed = [n for n, e in entries.items() if not e.ok]
    text = f"{len(trace.compile_safe)} of {len(entries)} entry points trace with fullgraph=True in {trace.seconds} s"
    text += f"; FAILED: {', '.join(failed)}" if failed else " through their opaque ops"
    eager_only = trace.eager_only or {}
    if eager_only:  # FlashInfer's own compile list: docs/compile-list.md
        text += f"; eager-only here: {', '.join(sorted(eager_only))} ({'; '.join(sorted(set(eager_only.values())))})"
    return text


def _render_launch(launch: doctor_report.Launch | None) -> list[str]:
    """doctor --sglang-args: SGLang's own answer for the launch line, on the GPU it was asked for."""
    if launch is None:
        return []
    if launch.error is not None:
        return [f"{'launch line':<18}not judged: {launch.error}"]
    whose = "installed" if launch.installed else "the default stack's (not installed there)"
    verdict = {True: "yes", False: "no", None: "cannot tell"}[launch.fullgraph]
    lines = [f"{'launch line':<18}SGLang {launch.release} ({whose}), {launch.gpu} (from {launch.gpu_from}), "
             f"{launch.architecture}",
             f"{'  graphs':<18}prefill {launch.prefill}, decode {launch.decode}"
             + ("; --enable-torch-compile (not fullgraph)" if launch.torch_compile else ""),
             f"{'  fullgraph':<18}{verdict}: decided by {launch.rule}",
             f"{'  runner':<18}{launch.runner}"]
    for call in launch.calls or []:
        state = ("routed (the overlay's opaque op)" if call.routed else "traces as upstream has it"
                 if call.traces else "RAW (fails fullgraph=True)")
        lines.append(f"{'  flashinfer':<18}{call.function} at {call.site}: {state}")
    for stop in launch.stops or []:
        fix = f"fixed by sglang {stop.fixed_by}" if stop.fixed_by else "no patched label fixes it"
        lines.append(f"{'  sglang stops':<18}{stop.model} on {stop.gpu}{' (behind an earlier stop)' if stop.behind else ''}"
                     f": {stop.where}; {fix}" + (f" ({', '.join(stop.patches)})" if stop.patches else ""))
    return lines


def _render_jit(jit: doctor_report.JitCache) -> list[str]:
    if jit.error is not None:
        return []
    lines = [f"{'jit cache':<18}{jit.cache or 'none'} (GPU {jit.gpu or 'none seen'}, nvcc "
             f"{jit.nvcc or 'absent'}, toolkit {jit.toolkit or 'none'})"]
    if jit.prebuilt:
        lines.append(f"{'  prebuilt':<18}{', '.join(jit.prebuilt)}")
    if jit.anchored:
        lines.append(f"{'  built here too':<18}{', '.join(jit.anchored)} (equal, byte for byte)")
    if jit.will_jit is None:
        lines.append(f"{'  JIT at 1st call':<18}every module (no flashinfer_jit_cache)")
    elif jit.will_jit:
        lines.append(f"{'  JIT at 1st call':<18}{', '.join(jit.will_jit)}")
    lines.append(f"{'flashinfer-cubin':<18}{jit.cubin or 'not installed'}")
    return lines
