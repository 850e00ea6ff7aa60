"""doctor's report: one typed structure of what it found, its verdict decided in one place, and its JSON.

Each block is a frozen dataclass whose fields are the keys of `doctor --json`; a field's fact() says what
it means and, for a key the document holds only sometimes, when. data() writes the document from the
fields alone, cli/doctor.py writes the text from the same objects, and docs/install.md's schema is rendered
from the same fields (doctor_schema.py): the shape has this one definition. The judges (installed.py,
jit_doctor.py, doctor_launch.py, doctor.py) fill one Finding; decide() alone turns it into the verdict,
ranked as every verdict of the operator's side is (verdict.SEVERITY: 3 > 4 > 1 > 5 > 0).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from typing import Any

from ..errors import Exit
from .report_fields import data, fact, parse
from .verdict import ranked

__all__ = ["Finding", "Report", "data", "decide", "parse"]

# --- the distributions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class InstalledRecord:
    """The installed files against the RECORD the installer wrote (probes/doctor/doctor_env.py)."""

    files: int = fact("rows of RECORD with a hash")
    matching: int = fact("files whose bytes match their row")
    modified: list[str] = fact("files whose bytes differ from their row (changed since the install)")
    missing: list[str] = fact("files RECORD lists that are not there")


@dataclass(frozen=True)
class Anchor:
    """A patched build's installed files against the build made again from the pinned upstream wheel."""

    upstream: str = fact("the pinned upstream wheel the build was made again from")
    files: int = fact("installed files held to it")
    ok: bool = fact("every file as the build makes it, none missing, none unexplained, the provenance as written")
    differs: list[str] = fact("installed files with other bytes")
    missing: list[str] = fact("files the build makes that are not installed")
    unexplained: list[str] = fact("installed files no build of the wheel makes (a .pth, an entry point)")
    provenance: list[str] = fact("keys of the installed provenance that are not what the build writes")


@dataclass(frozen=True)
class Carried:
    rows: int = fact("RECORD rows carried over from upstream")
    sha256: str = fact("their digest (records.rows_sha256)")
    ok: bool | None = fact("whether they are what the build recorded", present="the provenance records them")


@dataclass(frozen=True)
class AgainstProvenance:
    """Where no anchor can be had: the RECORD the build was installed with against the provenance it carries."""

    explained: int = fact("overlay and patched files the provenance gives a sha256 for")
    differs: list[str] = fact("those whose RECORD row is not that sha256")
    carried: Carried = fact("the rows carried over from upstream")


@dataclass(frozen=True)
class NewApi:
    function: str = fact("the public function (module.name)")
    loaders: list[str] = fact("the kernel loaders it reaches")
    via: list[str] = fact("the calls it reaches them through")


def _patched(d: Distribution) -> bool:
    return bool(d.patched)


@dataclass(frozen=True)
class Distribution:
    """One of flashinfer-python and sglang as installed there, judged against patches/."""

    installed: bool = fact("whether it is installed")
    version: str | None = fact("its installed version", present="installed", default=None)
    location: str | None = fact("the site-packages it is installed in", present="installed", default=None)
    patched: bool | None = fact("whether it is a patched build (its dist-info holds the provenance)",
                                present="installed", default=None)
    revision: int | None = fact("the series revision it was built at", present="patched", when=_patched, default=None)
    upstream: dict[str, Any] | None = fact("the provenance's upstream block: filename, sha256, record {rows, sha256}",
                                           present="patched", when=_patched, default=None)
    patches: list[str] | None = fact("the series' patches it was built with", present="patched", when=_patched,
                                     default=None)
    overlay: list[str] | None = fact("the overlay files it carries", present="patched", when=_patched, default=None)
    series: str | None = fact("the installed version against patches/: current, outdated, unknown (patched); "
                              "available, fixed-upstream, none (upstream)", present="installed", default=None)
    record: InstalledRecord | None = fact("its files against RECORD", present="installed", default=None)
    anchor: Anchor | None = fact("its files against the build made again", present="a patched build held to the anchor",
                                 default=None)
    against_provenance: AgainstProvenance | None = fact(
        "RECORD against its own provenance: a diagnosis, never a pass", default=None,
        present="a patched build the anchor could not be had for (exit 4), whose provenance the probe read")
    new_apis: list[NewApi] | None = fact("public functions reaching a kernel loader that the serving-API audit does "
                                         "not classify", present="a flashinfer-python release with no series",
                                         default=None)


# --- the examined interpreter: what its probe answered ---------------------------------------------


@dataclass(frozen=True)
class Interpreter:
    executable: str = fact("the examined interpreter")
    version: str = fact("its Python version")
    prefix: str = fact("its sys.prefix")


@dataclass(frozen=True)
class Imported:
    """`import flashinfer` in the examined interpreter."""

    ok: bool = fact("whether it imported")
    version: str | None = fact("flashinfer.__version__", present="it imported", when=lambda i: i.ok, default=None)
    seconds: float | None = fact("how long the import took", present="it imported", default=None)
    error: str | None = fact("why it did not import (or why the probe stopped)", present="it did not import",
                             default=None)
    timed_out: bool | None = fact("true: the probe gave no answer within --trace-timeout", present="it timed out",
                                  default=None)


@dataclass(frozen=True)
class Device:
    index: int = fact("the CUDA device index")
    name: str = fact("its name")
    capability: list[int] = fact("its compute capability [major, minor]")


def _torch(g: Gpu) -> bool:
    return g.torch is not None


@dataclass(frozen=True)
class Gpu:
    """What torch sees in the examined interpreter."""

    torch: str | None = fact("torch.__version__; null: torch does not import")
    error: str | None = fact("why torch does not import", present="torch does not import", default=None)
    cuda: str | None = fact("torch.version.cuda; null: a CPU build", present="torch imports", when=_torch, default=None)
    available: bool | None = fact("torch.cuda.is_available()", present="torch imports", default=None)
    devices: list[Device] | None = fact("the GPUs torch sees", present="torch imports", default=None)


@dataclass(frozen=True)
class TraceEntry:
    """One routed entry point compiled with torch.compile(fullgraph=True) in the examined interpreter."""

    ok: bool = fact("whether it traced whole, starting no process")
    error: str | None = fact("the first line of why not", present="it failed", default=None)
    detail: list[str] | None = fact("the first lines of the error", present="dynamo raised", default=None)
    ops: list[str] | None = fact("the traced graph's call_function targets", present="it was traced", default=None)
    subprocesses: list[str] | None = fact("processes started while dynamo traced", present="it was traced",
                                          default=None)


def _traced(t: Trace) -> bool:
    return t.entries is not None


@dataclass(frozen=True)
class Trace:
    """The live check: each routed entry point compiled in a child of the examined interpreter."""

    ok: bool | None = fact("every entry point traced (compile-safe); null: not traced")
    skipped: bool | None = fact("true", present="--no-trace", default=None)
    cause: str | None = fact("no-torch or no-import: why the check did not run", present="it could not start",
                             default=None)
    error: str | None = fact("why it failed (its first failure)", present="it failed or could not run", default=None)
    timed_out: bool | None = fact("true: no answer within --trace-timeout", present="it timed out", default=None)
    entries: dict[str, TraceEntry] | None = fact("each routed entry point traced, by name", present="it ran",
                                                 default=None)
    failed: list[str] | None = fact("those that did not trace", present="it ran", when=_traced, default=None)
    eager_only: dict[str, str] | None = fact("FlashInfer's compile-list functions left eager on this release, with why "
                                             "(docs/compile-list.md)", present="it ran", when=_traced, default=None)
    faked: list[str] | None = fact("what the check stood in for where there is no GPU", present="it ran",
                                   when=_traced, default=None)
    flashinfer: str | None = fact("flashinfer.__version__ as traced", present="it ran", when=_traced, default=None)
    capability: list[int] | None = fact("the compute capability it traced for", present="it ran", when=_traced,
                                        default=None)
    seconds: float | None = fact("how long the check took", present="it ran", when=_traced, default=None)

    @property
    def compile_safe(self) -> list[str]:
        """The entry points that traced whole through their ops."""
        return [name for name, entry in (self.entries or {}).items() if entry.ok]


# --- the JIT cache, the launch line ------------------------------------------------------------------


def _read(j: Any) -> bool:
    return j.error is None


@dataclass(frozen=True)
class JitCache:
    """The prebuilt JIT cache, the cubins and the toolkit against this node's FlashInfer and GPU (jit_doctor.py)."""

    error: str | None = fact("why the environment could not be read", present="it could not be read", default=None)
    gpu: str | None = fact("the GPU family torch sees there (sm120, ...); null: none", present="read", when=_read,
                           default=None)
    nvcc: str | None = fact("nvcc on PATH there; null: none", present="read", when=_read, default=None)
    toolkit: str | None = fact("the CUDA toolkit release its headers give", present="read", when=_read, default=None)
    cache: str | None = fact("the installed flashinfer-jit-cache version; null: none", present="read", when=_read,
                             default=None)
    cubin: str | None = fact("the installed flashinfer-cubin version; null: none", present="read", when=_read,
                             default=None)
    prebuilt: list[str] | None = fact("modules the cache holds", present="read", when=_read, default=None)
    will_jit: list[str] | None = fact("modules that build with nvcc at their first call; null: every module (no cache "
                                      "is installed beside flashinfer-python)", present="read", when=_read, default=None)
    anchored: list[str] | None = fact("modules equal, byte for byte, to this host's build from the same inputs",
                                      present="a cache is installed", default=None)


@dataclass(frozen=True)
class LaunchCall:
    region: str = fact("the compiled region it is in (the region table's), or conditional")
    function: str = fact("the FlashInfer function")
    site: str = fact("SGLang's call site (file:line function)")
    routed: bool = fact("whether the installed FlashInfer routes it to its opaque op")
    traces: bool = fact("whether upstream's own code traces as it is")
    condition: str | None = fact("when SGLang calls it", present="a conditional call", default=None)


@dataclass(frozen=True)
class SglangStop:
    """Where SGLang's own code stops the fullgraph compile before FlashInfer (the whole-layer table)."""

    model: str = fact("the layer table's model")
    gpu: str = fact("the GPU family of its runs")
    where: str = fact("the dynamo failure and the frame it stopped in")
    behind: bool = fact("true: met only once an earlier stop is fixed (the series less one patch stops there)")
    fixed_by: str | None = fact("the patched SGLang label that compiles it whole; null: none does")
    patches: list[str] = fact("the series' patches that change the file, or name the module, it stopped in")


@dataclass(frozen=True)
class Launch:
    """doctor --sglang-args: SGLang's own answer for the launch line, and what its region holds."""

    release: str = fact("the SGLang release asked")
    gpu: str = fact("the GPU family asked for")
    error: str | None = fact("why the line could not be judged", present="not judged", default=None)
    installed: bool | None = fact("whether that SGLang is the installed one (else the default stack's)",
                                  present="judged", when=_read, default=None)
    gpu_from: str | None = fact("--gpu, doctor (the GPU seen) or default", present="judged", default=None)
    architecture: str | None = fact("the model's architecture", present="judged", default=None)
    prefill: str | None = fact("the prefill graph backend SGLang chose", present="judged", when=_read, default=None)
    decode: str | None = fact("the decode graph backend SGLang chose", present="judged", when=_read, default=None)
    fullgraph: bool | None = fact("whether a fullgraph region is compiled; null: cannot be judged", present="judged",
                                  when=_read, default=None)
    torch_compile: bool | None = fact("--enable-torch-compile (not fullgraph)", present="judged", when=_read,
                                      default=None)
    rule: str | None = fact("the SGLang rule that decided it (file:line, the flag, or the default)", present="judged",
                            default=None)
    runner: str | None = fact("the model runner's gate", present="judged", default=None)
    calls: list[LaunchCall] | None = fact("the FlashInfer calls in that region", present="judged", default=None)
    stops: list[SglangStop] | None = fact("where SGLang's own code stops that region's compile, and what fixes it",
                                          present="judged", default=None)
    stubbed: list[str] | None = fact("what the probe stood in for", present="judged", default=None)


# --- the findings and the verdict --------------------------------------------------------------------


@dataclass
class Finding:
    """The verdict's parts, as the judges find them: problems set the exit status, notes only inform."""

    python: str = sys.executable  # the examined interpreter, named in the fixes
    problems: list[str] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)  # "cannot be verified here": no anchor to hold files to
    notes: list[str] = field(default_factory=list)
    trusted: list[str] = field(default_factory=list)  # files taken on their builder's word (exit 5), each with why

    @property
    def exit_code(self) -> Exit:
        """3 an integrity failure; 4 a patched build that cannot be verified here; 1 a problem; 5 a file taken on its
        builder's word (a JIT module this host never built); 0 (verdict.SEVERITY)."""
        return ranked({Exit.INTEGRITY: bool(self.integrity), Exit.UNVERIFIED: bool(self.unverified),
                       Exit.NEEDS_PERSON: bool(self.problems), Exit.TAKEN_ON_TRUST: bool(self.trusted)})

    @property
    def all_problems(self) -> list[str]:
        return self.integrity + self.unverified + self.problems


VERDICTS = {Exit.OK: "OK", Exit.NEEDS_PERSON: "NOT OK", Exit.INTEGRITY: "NOT OK (integrity)",
            Exit.UNVERIFIED: "NOT OK (cannot be verified here)", Exit.TAKEN_ON_TRUST: "TAKEN ON TRUST"}


def decide(finding: Finding, trace: Trace) -> tuple[Exit, str]:
    """The exit status and the verdict in words, from the findings alone: the one place doctor's verdict is made."""
    code = finding.exit_code
    words = VERDICTS[code]
    if code == Exit.OK and trace.skipped:
        words += ", not traced (--no-trace)"
    return code, words


@dataclass(frozen=True)
class Report:
    """Everything doctor found in one environment, judged."""

    python: Interpreter = fact("the examined interpreter")
    distributions: dict[str, Distribution] = fact("flashinfer-python and sglang, by name")
    imported: Imported = fact("import flashinfer there", key="import")
    gpu: Gpu | None = fact("what torch sees there; null: not asked (--no-trace, and flashinfer did not bring torch)")
    trace: Trace = fact("the live check")
    sglang_regions_raw: dict[str, Any] | None = fact(
        "the installed SGLang's compiled regions (region -> GPU -> what is raw) with FlashInfer or SGLang code left raw "
        "under the installed FlashInfer (patches/sglang/audit-regions.json); null: the table has no answer")
    routes: dict[str, Any] | None = fact("the routes the installed FlashInfer takes to its ops (this checkout's "
                                         "overlay's); null: not a patched build")
    jit: JitCache = fact("the JIT cache, the cubins and the toolkit")
    sglang_launch: Launch | None = fact("the launch line's answer", present="--sglang-args", default=None)
    ok: bool = fact("exit_code is 0", default=False)
    exit_code: int = fact("0 OK, 1 needs a person, 3 integrity, 4 cannot be verified here, 5 taken on trust",
                          default=0)
    verdict: str = fact("the verdict in words, as the text's last line says it", default="")
    problems: list[str] = fact("what sets the exit status: integrity first, then what cannot be verified, then the "
                               "rest", default=[])
    notes: list[str] = fact("what only informs", default=[])
    taken_on_trust: list[str] = fact("files taken on their builder's word (exit 5), each with why", default=[])

    def judged(self, finding: Finding) -> Report:
        """This report with its verdict and its findings, decided from `finding` alone."""
        code, words = decide(finding, self.trace)
        return dataclasses.replace(self, ok=code == Exit.OK, exit_code=int(code), verdict=words,
                                   problems=finding.all_problems, notes=list(finding.notes),
                                   taken_on_trust=list(finding.trusted))
