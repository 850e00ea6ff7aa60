"""doctor: whether an environment's FlashInfer and SGLang are patched, intact and trace, examined from outside.

The facts come from a child of the examined interpreter (probes/doctor/doctor_trace.py, `--python PATH`, by
default this one): what is installed there, RECORD checked, whether flashinfer imports, and the live
trace. A crash or a hang there cannot take doctor down. Nothing of the examined environment is imported
or run in doctor's own process: a patched build's files are read here as bytes and held to the build
made again from the pinned upstream wheel (operate/installed_files.py), and the routes the installed
FlashInfer takes are this checkout's overlay's, which its files were just held to. Exit status
(docs/design.md's table, read for a deployment gate): 0 the stack is patched, its files are what the
build makes, flashinfer imports and the trace check passes; 1 something needs a person: flashinfer-python
missing, unpatched or not importable, an SGLang release with a series installed unpatched, a broken
pin, a failed or hung trace; 3 an installed file differs from its RECORD or from what the build makes,
is missing, or came from no build (a hand edit, an edited wheel); 4 a patched build that cannot be
verified here (the pinned upstream wheel cannot be had); 5 a JIT-cache module taken on its builder's word.
3 wins over 4 over 1 over 5, since an edited or unvouched file makes every other answer doubtful: the
judges fill one Finding and doctor_report.decide alone ranks it (examine returns the judged Report). A
`--python` that is no usable interpreter is 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from .. import progress
from ..errors import ConfigError, OverlayError, TimedOut, Unverified
from ..patch import overlay_root
from . import installed_files
from .doctor_report import Finding, Report, parse
from .installed import check_pin, judge_distribution, judge_new_apis, scans_api, sglang_pins
from .installed_files import Held
from .report_fields import unplaced

if TYPE_CHECKING:
    from ..wheel import Source
    from .doctor_launch import Asked

DISTRIBUTIONS = ("flashinfer-python", "sglang")
OPAQUE_OP = "nvfp4_overlay.flashinfer_"  # every routed entry point's op: nvfp4_overlay::flashinfer_<name>
PACKAGE = Path(__file__).resolve().parents[1]
PROBE = "nvfp4_overlay.probes.doctor.doctor_trace"
FILES_PROBE = "nvfp4_overlay.probes.doctor.doctor_files"  # versions, provenance, RECORD against it: nothing imported


# --- the facts, from a child of the examined interpreter ------------------------------------------


def run_probe(python: str, *, trace: bool, timeout: float) -> dict[str, Any]:
    """Every fact the probe printed before it finished, crashed or hung; ConfigError if `python` cannot run it."""
    progress.report(f"{python}: reading the installed distributions" + (" and tracing each routed entry point"
                                                                         if trace else ""))
    argv = ["-m", PROBE, "--distributions", ",".join(DISTRIBUTIONS), *([] if trace else ["--no-trace"])]
    facts, why, timed_out = _child_facts(python, argv, timeout)
    if "distributions" not in facts:  # it ran, and stopped before the first finding: nothing to judge
        msg = f"--python {python}: doctor's probe stopped ({why}) before it had read the installed distributions"
        raise OverlayError(msg, item="--python", path=python, expected="the installed distributions", found=why,
                           fix="run doctor again, and report the error if it stays")
    for name, held in installed_distributions(python, timeout=timeout).items():  # RECORD against the provenance
        if "against_provenance" in held and name in facts.get("distributions", {}):
            facts["distributions"][name]["against_provenance"] = held["against_provenance"]
    hung = {"timed_out": True} if timed_out else {}
    facts.setdefault("import", {"ok": False, "error": why, **hung})
    if trace:
        facts.setdefault("trace", {"ok": False, "error": why, **hung})
    return facts


def installed_distributions(python: str, names: Sequence[str] = DISTRIBUTIONS, *, timeout: float = 120) -> dict[str, Any]:
    """What `python`'s environment has installed of `names` (rollback reads the JIT cache and cubins too): version,
    provenance and, for a patched build, the RECORD it was installed with against that provenance
    (probes/doctor/doctor_files.py: no file hashed, nothing imported; apart from the trace probe, whose source
    keys the oracle's results)."""
    progress.report(f"{python}: reading the installed distributions")
    facts, _, _ = _child_facts(python, ["-m", FILES_PROBE, *names], timeout)
    return dict(facts["distributions"])


def _child_facts(python: str, argv: list[str], timeout: float) -> tuple[dict[str, Any], str, bool]:
    """The JSON lines a probe printed in a child of `python`, why it stopped if it did not finish, and
    whether it timed out (TimedOut if it gave nothing before the distributions: slow is not broken)."""
    with tempfile.TemporaryDirectory(prefix="nvfp4-doctor-") as tmp:
        # The child imports only this package from here, through a folder that holds nothing else: the
        # examined environment's own torch and flashinfer stay the ones it finds. From an empty
        # directory, without the current one on sys.path (PYTHONSAFEPATH, 3.11+), so a checkout
        # holding a flashinfer/ folder cannot stand in for the installed package.
        root, cwd = Path(tmp, "path"), Path(tmp, "cwd")
        root.mkdir()
        cwd.mkdir()
        (root / PACKAGE.name).symlink_to(PACKAGE, target_is_directory=True)
        path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONSAFEPATH="1", PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=path)
        try:
            done = subprocess.run([python, *argv], check=False, capture_output=True, text=True, timeout=timeout,
                                  env=env, cwd=cwd)
            stdout, stderr, code = done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired as exc:
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
            stderr, code = "", None
        except OSError as exc:  # not a program at all (exec format error), or gone since it was checked
            stdout, stderr, code = "", exc.strerror or str(exc), -1
    facts: dict[str, Any] = {}
    for line in stdout.splitlines():
        try:
            facts.update(json.loads(line))
        except ValueError:
            continue
    tail = (stderr.strip().splitlines() or [""])[-1]
    why = f"no answer within {timeout:g} s (--trace-timeout)" if code is None else f"the probe exited {code}"
    why += f": {tail}" if tail else ""
    if code is None and "distributions" not in facts:  # slow or hung: nothing says the interpreter is broken
        msg = (f"--python {python}: doctor's probe gave {why} before it had read the installed distributions "
               f"(a cold start on a busy machine can take that long)")
        raise TimedOut(msg, item="--trace-timeout", path=python, expected=f"an answer within {timeout:g} s",
                       found="no answer",
                       fix=f"run doctor again with a larger --trace-timeout, e.g. --trace-timeout {max(600, 4 * timeout):g}")
    if "python" not in facts:
        msg = f"--python {python}: it did not run doctor's probe ({why})"
        raise ConfigError(msg, item="--python", path=python, expected="a Python 3.8+ interpreter", found=why,
                          fix="name the serving environment's Python 3.8 or later, e.g. /srv/sglang/bin/python")
    return facts, why, code is None


def check_python(python: str) -> str:
    """--python PATH: an executable file, checked before anything runs (exit 2, naming it)."""
    path = Path(python)
    if not path.is_file() or not os.access(path, os.X_OK):
        found = "missing" if not path.exists() else "not an executable file"
        msg = f"--python {python}: {found}"
        raise ConfigError(msg, item="--python", path=python, expected="an executable Python", found=found,
                          fix="name the serving environment's interpreter, e.g. /srv/sglang/bin/python")
    return python


# --- the verdict ---------------------------------------------------------------------------------


def diagnose(patches_dir: Path, overlay_dir: Path, source: Source, *, python: str | None = None, trace: bool = True,
             timeout: float = 300) -> tuple[dict[str, Any], Finding]:
    """The whole report as a JSON-ready document, and the finding that decides the exit status."""
    python = check_python(python) if python else sys.executable
    facts = run_probe(python, trace=trace, timeout=timeout)
    finding = Finding(python=python)
    distributions = {}
    for name in DISTRIBUTIONS:
        fact = facts["distributions"].get(name, {})
        distributions[name] = judge_distribution(name, fact, patches_dir, finding,
                                                 _held(name, fact, patches_dir, overlay_dir, source))
    flashinfer, sglang = distributions["flashinfer-python"], facts["distributions"].get("sglang", {})
    markers = facts["python"].get("markers", {})
    if not sglang.get("installed"):
        finding.notes.append(f"sglang is not installed in {python}")
    elif flashinfer["installed"]:
        check_pin(sglang, flashinfer["version"], markers, finding)
    torch_pin = sglang_pins(sglang, markers).get("torch") if sglang.get("installed") else None
    fix_torch = (f"install torch into that environment (sglang {sglang['version']} requires {torch_pin})"
                 if torch_pin else "install into that environment the CUDA build of torch your stack runs")
    _judge_import(flashinfer, facts["import"], fix_torch, finding)
    gpu = facts.get("gpu")
    _judge_gpu(gpu, fix_torch, finding)
    if trace and flashinfer["installed"] and facts["import"].get("ok"):
        _judge_trace(facts["trace"], finding)
    routes = installed_routes(distributions["flashinfer-python"], overlay_dir)
    remaining = _remaining_raw(patches_dir, distributions, routes, finding)
    document: dict[str, Any] = {
        "python": {k: v for k, v in facts["python"].items() if k != "markers"},
        "distributions": distributions,
        "import": facts["import"],
        "gpu": gpu,
        "trace": facts["trace"] if trace else {"ok": None, "skipped": True},
        "sglang_regions_raw": remaining,
        "routes": routes,
    }
    return document, finding


def examine(patches_dir: Path, overlay_dir: Path, source: Source, *, python: str | None = None, trace: bool = True,
            timeout: float = 300, asked: Asked | None = None) -> Report:
    """doctor's whole report, judged once: the distributions and the trace (diagnose), a new API, the JIT cache
    and, asked a launch line (doctor_launch.ask), SGLang's answer for it."""
    from ..patch import load_stacks
    from . import doctor_launch, jit_doctor

    document, finding = diagnose(patches_dir, overlay_dir, source, python=python, trace=trace, timeout=timeout)
    _new_api(document, finding, patches_dir)
    examined = python or sys.executable
    jit_doctor.report(document, finding, examined, load_stacks(patches_dir).default)
    if asked is not None:
        doctor_launch.judge(document, finding, asked, examined, patches_dir, source.cache_dir, timeout)
    finding.notes += [f"doctor's report has no place for {key}, which it left out; report it" for key in
                      unplaced(Report, document)]
    return parse(Report, document).judged(finding)


def _new_api(document: dict[str, Any], finding: Finding, patches_dir: Path) -> None:
    """A FlashInfer release without a series: its public functions that reach a kernel loader and that the
    serving-API audit does not classify, read from the installed files."""
    from ..audit import api_audit

    flashinfer = document["distributions"]["flashinfer-python"]
    if not scans_api(flashinfer):
        return
    root = Path(flashinfer["location"])
    files = {str(p.relative_to(root)): p.read_text(errors="replace") for p in sorted((root / "flashinfer").rglob("*.py"))
             if api_audit.scanned(str(p.relative_to(root)))}
    judge_new_apis(flashinfer, api_audit.new_api(files, api_audit.load_audit(patches_dir)), patches_dir, finding)


def _held(name: str, fact: dict[str, Any], patches_dir: Path, overlay_dir: Path,
          source: Source) -> Held | Unverified | None:
    """A patched build's installed files against the anchor (None: not installed, or not a patched build)."""
    if not fact.get("installed") or fact.get("provenance") is None:
        return None
    progress.report(f"holding the installed {name} {fact['version']} to the build made again")
    try:
        return installed_files.hold(name, fact["version"], Path(fact["location"]), patches_dir, overlay_dir, source)
    except Unverified as exc:
        return exc


def installed_routes(flashinfer: dict[str, Any], overlay_dir: Path) -> dict[str, dict[str, list[Any]]] | None:
    """The routes the installed FlashInfer takes to its ops, read from this checkout's overlay, never from the
    installed entries.py (running it would run the examined environment here): a patched build's entries.py is
    held to the overlay's with its other files, and an unpatched FlashInfer routes nothing."""
    from ..audit import sglang_audit

    if not (flashinfer.get("installed") and flashinfer.get("patched")):
        return None
    return sglang_audit.read_routes(overlay_root(overlay_dir, "flashinfer-python"))


def _remaining_raw(patches_dir: Path, distributions: dict[str, Any], routes: dict[str, Any] | None,
                   finding: Finding) -> dict[str, Any] | None:
    """What in the installed SGLang's compiled regions still breaks fullgraph under the installed
    FlashInfer's routes (patches/sglang/audit-regions.json), in the regions a fullgraph region of the
    release reaches (patches/sglang/region-reach.toml); None where the table has no answer."""
    from ..audit import sglang_audit, sglang_raw, sglang_reach

    sglang, flashinfer = distributions["sglang"], distributions["flashinfer-python"]
    if not (sglang.get("installed") and flashinfer.get("installed")):
        return None
    try:
        version = Version(sglang["version"]).public
        table = sglang_audit.load_table(patches_dir)
        reach = sglang_reach.load_reach(patches_dir)
    except (InvalidVersion, ConfigError):
        return None
    if version not in table["releases"]:
        finding.notes.append(f"sglang {version}: the region audit (patches/sglang/audit-regions.json) has not seen it")
        return None
    left = sglang_audit.stack_remaining(table, version, bool(sglang.get("patched")), routes, reach)
    said = "; ".join(f"{region} ({next(iter(next(iter(by_gpu.values()), [])), '')})"
                     for region, by_gpu in left.items()) or "none"
    finding.notes.append(f"SGLang {version}'s compiled regions, raw FlashInfer or SGLang code left under this "
                         f"FlashInfer: {sglang_raw.qualified(said, sglang_raw.conditional_calls(routes))}")
    return left


def _judge_import(flashinfer: dict[str, Any], imported: dict[str, Any], fix_torch: str, finding: Finding) -> None:
    python = finding.python
    if not flashinfer["installed"]:
        finding.problems.append(
            f"flashinfer-python is not installed in {python}; install a stack's wheels there "
            f"('nvfp4-overlay install --stack NAME --python {python}' prints the commands)")
    elif imported.get("timed_out"):  # slow or hung, not shown broken: no reinstall advised
        finding.problems.append(f"flashinfer-python {flashinfer['version']} gave {imported['error']} while it "
                                f"imported in {python}; run doctor again with a larger --trace-timeout")
    elif not imported.get("ok"):
        error = imported.get("error") or "no answer"
        fix = (fix_torch if "torch" in error else
               f"reinstall the stack ('nvfp4-overlay install --stack NAME --python {python}'), or fix what the error names")
        finding.problems.append(f"flashinfer-python {flashinfer['version']} does not import in {python} ({error}); {fix}")


def _judge_gpu(gpu: dict[str, Any] | None, fix_torch: str, finding: Finding) -> None:
    """No torch is a problem (nothing can run); no GPU only a note: CI and build machines have none."""
    if gpu is None:
        return
    if gpu.get("torch") is None:
        finding.problems.append(f"torch does not import in {finding.python} ({gpu.get('error')}): FlashInfer "
                                f"needs it and the trace check cannot run; {fix_torch}")
    elif gpu.get("cuda") is None:
        finding.notes.append(
            f"torch {gpu['torch']} is a CPU build (torch.version.cuda is None), so no GPU can serve here; the trace "
            f"check faked a CUDA build and compute capability 12.0. On a server, install the CUDA build of torch")
    elif not gpu.get("devices"):
        finding.notes.append(
            f"torch {gpu['torch']} (CUDA {gpu['cuda']}) sees no GPU: check the driver ('nvidia-smi') and "
            f"CUDA_VISIBLE_DEVICES; the trace check faked compute capability 12.0")
    for device in gpu.get("devices") or []:
        if tuple(device["capability"]) >= (12, 1) and device["capability"][0] == 12 and \
                Version(gpu["cuda"]) < Version("12.9"):  # FlashInfer's is_sm12x_supported, compilation_context
            finding.notes.append(
                f"GPU {device['index']} is SM{device['capability'][0]}{device['capability'][1]} (GB10, DGX Spark): "
                f"FlashInfer supports it from CUDA 12.9 (torch here: {gpu['cuda']}); install a torch built for "
                f"CUDA 12.9 or 13.0")


def gpu_family(capability: list[int]) -> str:
    """How FlashInfer and SGLang group a compute capability: both ask the major alone for SM12x (FlashInfer's
    is_sm12x_supported and JIT modules' supported_major_versions, SGLang's is_sm120_supported), so 12.1
    (GB10, DGX Spark) takes every SM120 path."""
    major, minor = capability
    if major == 12:
        return "SM12x, the SM120 paths" + (" (from CUDA 12.9)" if minor >= 1 else "")
    return f"SM{major}x" if major >= 10 else f"SM{major}{minor}"


def _judge_trace(trace: dict[str, Any], finding: Finding) -> None:
    entries = trace.get("entries") or {}
    if trace.get("timed_out"):
        finding.problems.append(f"the trace check gave {trace.get('error')}; it compiles every routed entry point, "
                                f"which takes minutes on a cold cache: run doctor again with a larger --trace-timeout")
    elif not entries and trace.get("cause") is None:  # no-torch and no-import are judged above, with their fix
        finding.problems.append(f"the trace check did not run: {trace.get('error')}; run doctor again, and report "
                                f"the error if it stays")
    for name, entry in entries.items():
        if not entry.get("ok"):
            finding.problems.append(
                f"flashinfer.{name} does not compile with torch.compile(fullgraph=True): {entry.get('error')}")
        elif not any(op.startswith(OPAQUE_OP) for op in entry.get("ops", [])):
            finding.notes.append(f"flashinfer.{name}: the traced graph holds no {OPAQUE_OP}* op: {entry.get('ops')}")
