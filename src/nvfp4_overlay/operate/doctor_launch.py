"""doctor --sglang-args: what SGLang's own code makes of a launch line, asked in a child of the examined interpreter.

The child (probes/sglang/sglang_launch.py) runs the installed SGLang's parser, ServerArgs and the
model runner's gate, with the model's config.json (``--model-path DIR``, else the target model of
``--model-arch``: audit/sglang_models.py) and the GPU family (``--gpu``, else the GPU doctor saw, else
SM120), faked; where SGLang is not installed there, the default stack's pinned SGLang, unpacked from
the cache (never downloaded). Nothing of SGLang runs in this process. A flag the release does not
define, an architecture its model registry lacks, a line its validation refuses: exit 2, in
SGLang's words. Otherwise the answer (the graph backends, whether a fullgraph region is compiled,
the SGLang rule that decided it) joins the region table's FlashInfer calls for that release and
GPU, each with whether the installed FlashInfer routes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from ..audit import sglang_audit, sglang_launch, sglang_models, sglang_raw
from ..errors import ConfigError, TimedOut, UsageError
from . import doctor_stops
from .doctor_report import Finding, data

PROBE = "nvfp4_overlay.probes.sglang.sglang_launch"
PACKAGE = Path(__file__).resolve().parents[1]
TREE_GPU = {"sm121": "sm120"}  # the region table's rows of a GPU family (SGLang takes SM120's branches on SM121)


@dataclass(frozen=True)
class Request:
    """What doctor was asked: the launch line's words, the model, the GPU family."""

    args: str
    model_arch: str | None = None
    gpu: str | None = None


@dataclass(frozen=True)
class Asked:
    """A request checked before any probe runs: the words, the model as the probe takes it, its architecture."""

    request: Request
    argv: list[str]
    model: dict[str, Any]
    architecture: str


def ask(request: Request) -> Asked:
    """The request, checked: a malformed line or no model to ask about is exit 2 before doctor's probes run."""
    argv = sglang_launch.split_args(request.args)
    model, arch = _model(argv, request.model_arch)
    return Asked(request, argv, model, arch)


def judge(document: dict[str, Any], finding: Finding, asked: Asked, python: str, patches_dir: Path, cache_dir: Path,
          timeout: float) -> dict[str, Any]:
    """document["sglang_launch"]: SGLang's answer for the launch line, with the FlashInfer calls of its region (its
    notes into finding)."""
    request, argv, line, arch = asked.request, asked.argv, asked.model, asked.architecture
    gpu = request.gpu or _seen_gpu(document.get("gpu")) or "sm120"
    if not request.gpu and (document.get("gpu") or {}).get("devices") and not _seen_gpu(document.get("gpu")):
        finding.notes.append("--sglang-args: the GPU seen there is none of sm90, sm100, sm120, sm121; "
                                 "the launch line is asked for sm120 (name another with --gpu)")
    sglang = document["distributions"].get("sglang", {})
    with tempfile.TemporaryDirectory(prefix="nvfp4-launch-") as scratch:
        tree, release = (None, Version(sglang["version"]).public) if sglang.get("installed") else \
            _stack_tree(patches_dir, cache_dir, Path(scratch))
        plan = {"sglang": tree, "flashinfer": None, "gpu": list(sglang_launch.GPUS[gpu]),
                "lines": [{"key": "line", "argv": argv, **line}]}
        try:
            found = _child(python, plan, timeout)
        except ConfigError as exc:  # the interpreter cannot run SGLang's code (no torch): doctor's other problems say why
            unjudged: dict[str, Any] = {"release": release, "gpu": gpu, "error": exc.text()}
            document["sglang_launch"] = unjudged
            finding.notes.append(f"--sglang-args: not judged: {exc.text()}")
            return unjudged
    answer = found["lines"]["line"]
    _refuse(answer, release, request.args, arch)
    calls = region_calls(patches_dir, release, bool(sglang.get("patched")), gpu, _routes(document), answer, argv)
    entry = sglang_launch.compact(answer)
    out = {"release": release, "installed": bool(sglang.get("installed")), "gpu": gpu,
           "gpu_from": "--gpu" if request.gpu else "doctor" if _seen_gpu(document.get("gpu")) else "default",
           "architecture": answer["architecture"], **entry, "calls": calls, "stops": _stops(
               patches_dir, release, bool(sglang.get("patched")), gpu, answer), "stubbed": sorted(found["stubbed"])}
    document["sglang_launch"] = out
    finding.notes.append(_note(out))
    return out


def _model(argv: list[str], model_arch: str | None) -> tuple[dict[str, Any], str]:
    local = sglang_launch.local_config(argv)
    if local is not None:
        return {"model_dir": str(local.resolve())}, sglang_launch.read_architecture(local)
    if model_arch:
        return {"config": sglang_models.config_for(model_arch)}, sglang_models.config_for(model_arch)["architectures"][0]
    msg = ("--sglang-args: the launch line names no local model directory with a config.json, and no --model-arch "
           "is given; SGLang decides by the model's architecture, so name it")
    raise UsageError(msg, item="--model-arch", expected="--model-path DIR (with config.json) or --model-arch NAME",
                     found="neither", fix="add --model-arch GlmMoeDsaForCausalLM (config.json's architectures[0])")


def _refuse(answer: dict[str, Any], release: str, args: str, arch: str) -> None:
    refused = answer.get("refused")
    if "probe_error" in answer:
        msg = f"SGLang {release}: the launch-line probe failed: {answer['probe_error']}"
        raise ConfigError(msg, item="--sglang-args", found=answer["probe_error"], fix="report it with the line")
    if not refused:
        return
    if refused["kind"] == "architecture":
        msg = f"SGLang {release} has no model class {arch} in its model registry (sglang/srt/models)"
        raise UsageError(msg, item=arch, expected=f"an architecture SGLang {release} registers",
                         found=f"{arch} ({refused['registry']} registered)",
                         fix="check --model-arch: name the architecture its config.json gives, or serve it with a "
                             "release that has it")
    said = refused["message"]
    where = refused.get("where") or {}
    at = f" ({where.get('file')}:{where.get('line')})" if where else ""
    msg = f"SGLang {release} refuses the launch line {args!r}: {said}{at}"
    raise UsageError(msg, item="--sglang-args", expected=f"a launch line SGLang {release} takes", found=said,
                     fix="remove or correct what SGLang names")


def region_calls(patches_dir: Path, release: str, patched: bool, gpu: str, routes: Any,
                 answer: dict[str, Any], argv: list[str]) -> list[dict[str, Any]]:
    """The FlashInfer calls the region table saw in this release's compiled regions on this GPU family, each
    with whether this FlashInfer routes it; the conditional calls (sglang_raw) that hold for the line."""
    if not answer.get("fullgraph"):
        return []
    out: list[dict[str, Any]] = []
    try:
        table = sglang_audit.load_table(patches_dir)
        regions = sglang_audit.cells(table, release, "patched" if patched else "upstream")
    except ConfigError:
        regions = {}
    for region, by_gpu in regions.items():
        cell = by_gpu.get(TREE_GPU.get(gpu, gpu), {}) if "absent" not in by_gpu else {}
        for call in cell.get("calls", []):
            out.append({"region": region, "function": call["function"], "site": call["site"],
                        "routed": sglang_audit.routed(call, routes), "traces": call.get("upstream") == "traces"})
    deepgemm = "flashinfer_deepgemm" in [w.split("=")[-1] for w in argv]
    for call in sglang_raw.conditional_calls(routes):
        if call["function"] == "fp8_blockscale_gemm_sm90" and not (gpu == "sm90" and deepgemm):
            continue
        if call["function"] == "tinygemm_bf16" and answer.get("architecture") != "GptOssForCausalLM":
            continue
        out.append({"region": "conditional", "function": call["function"], "site": call["where"],
                    "routed": call["routed"], "traces": False, "condition": call["condition"]})
    return out


def _stops(patches_dir: Path, release: str, patched: bool, gpu: str, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """Where SGLang's own code stops the region's compile before FlashInfer (doctor_stops: the whole-layer table)."""
    if not answer.get("fullgraph"):
        return []
    return [data(stop) for stop in doctor_stops.stops(patches_dir, release, patched, gpu, answer["architecture"])]


def _routes(document: dict[str, Any]) -> Any:
    """doctor's routes of the installed FlashInfer: this checkout's overlay, never the installed entries.py run here."""
    return document.get("routes")


def _note(out: dict[str, Any]) -> str:
    said = {True: "compiles a fullgraph region", False: "compiles no fullgraph region", None: "cannot be judged"}
    raw = [c["function"] for c in out["calls"] if not c["routed"] and not c["traces"]]
    left = (f"; raw FlashInfer left in it: {', '.join(raw)}" if raw else
            "; every FlashInfer call the region table saw there is routed" if out["fullgraph"] else "")
    first = [s for s in out["stops"] if not s["behind"]]
    stopped = "".join(f"; SGLang's own code stops it before FlashInfer ({s['model']}, {s['gpu']}: {s['where']}), "
                      + (f"fixed by sglang {s['fixed_by']}" if s["fixed_by"] else "which no patched label fixes")
                      for s in first[:1])
    return (f"SGLang {out['release']} on {out['gpu']} ({out['architecture']}): this launch line "
            f"{said[out['fullgraph']]} (prefill {out['prefill']}, decode {out['decode']}; decided by {out['rule']})"
            f"{stopped}{left}")


def _seen_gpu(gpu: dict[str, Any] | None) -> str | None:
    devices = (gpu or {}).get("devices") or []
    if not devices:
        return None
    major, minor = devices[0]["capability"][:2]
    return next((name for name, cc in sglang_launch.GPUS.items() if cc == (major, minor)), None)


def _stack_tree(patches_dir: Path, cache_dir: Path, scratch: Path) -> tuple[str, str]:
    """The default stack's pinned SGLang, its Python files unpacked from the cache (never downloaded)."""
    import zipfile

    from ..patch import Target, load_stacks, load_upstream
    from ..wheel import fetch

    stacks = load_stacks(patches_dir)
    stack = stacks.get(stacks.default, patches_dir / "stacks.toml")
    (version,) = [t.version for t in (*stack.targets, *stack.upstream) if t.dist == "sglang"]
    source = fetch.Source(cache_dir, offline=True)
    upstream = load_upstream(patches_dir, Target("sglang", version))
    (pin,) = fetch.select_wheels(upstream, source)
    wheel = fetch.upstream_wheel(upstream, pin, source)
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(scratch, [n for n in zf.namelist() if n.startswith("sglang/") and n.endswith((".py", ".json"))])
    return str(scratch), version


def _child(python: str, plan: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The probe's JSON from a child of `python` that imports only this package from here (doctor's isolation)."""
    with tempfile.TemporaryDirectory(prefix="nvfp4-doctor-launch-") as tmp:
        root, cwd = Path(tmp, "path"), Path(tmp, "cwd")
        root.mkdir()
        cwd.mkdir()
        (root / PACKAGE.name).symlink_to(PACKAGE, target_is_directory=True)
        env = dict(os.environ, PYTHONSAFEPATH="1", PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(root))
        try:
            done = subprocess.run([python, "-m", PROBE], input=json.dumps(plan), capture_output=True, text=True,
                                  timeout=timeout, env=env, cwd=cwd, check=False)
        except subprocess.TimeoutExpired as exc:
            msg = f"--sglang-args: SGLang's launch-line probe gave no answer within {timeout:g} s"
            raise TimedOut(msg, item="--trace-timeout", found="no answer", fix=f"--trace-timeout {4 * timeout:g}") from exc
    try:
        found: dict[str, Any] = json.loads(done.stdout)
        return found
    except ValueError:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        msg = f"--python {python}: SGLang's launch-line probe did not answer (exit {done.returncode}: {tail})"
        raise ConfigError(msg, item="--python", path=python, expected="an interpreter with torch",
                          found=tail, fix="name the serving environment's interpreter (torch and SGLang's dependencies)") from None
