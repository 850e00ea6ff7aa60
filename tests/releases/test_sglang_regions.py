"""SGLang's compiled regions that reach FlashInfer, traced from every release a stack installs (0.5.8-0.5.23).

For each SGLang release of patches/stacks.toml, one interpreter runs probes/sglang/sglang_regions.py over
every SGLang tree (upstream; patched where a series carries the release) x FlashInfer tree
(upstream and patched, of the release's pin) x GPU (SM120, SM100, faked; CPU tensors), a child per
cell: each region of probes/sglang/sglang_drivers.py is built from the release's own classes and traced
with torch.compile(fullgraph=True). patches/sglang/audit-regions.json says which FlashInfer
functions each region calls raw; the tests hold the probe to it, the upstream stack failing where
it says, and the patched stack doing what the patched FlashInfer's ENTRIES (read from that tree)
make of those calls: a routed call is one opaque op, an unrouted one still fails. What remains raw
per stack is computed (sglang_audit.stack_remaining), and patches/sglang/stack-claims.toml (the
regions each stack claims to keep whole) must hold.

What is not SGLang's or FlashInfer's own code (probes/sglang/sglang_imports.py, sglang_machine.py,
sglang_drivers.py, sglang_moe.py say how), every stand-in the probe uses:
- ``sglang/__init__.py``: a bare package (it imports the frontend and HTTP stack);
- third-party modules absent here (transformers, triton, pydantic, zmq, PIL, ...; the table lists
  them per release under ``stand_ins``): permissive stand-ins where SGLang imports them unguarded,
  ImportError where it guards them (as on a server without them), except SGLang's kernel packages
  (sgl_kernel, triton, triton_kernels, cuda-python, cutlass), stand-ins everywhere; a region that
  traces into a permissive stand-in fails its test;
- ``msgspec``: Struct, defstruct, field and structs over dataclasses (ServerArgs is a msgspec struct
  from 0.5.20), positional, frozen, keyword-only and compared by value as each struct's options ask;
- SGLang modules whose import raises with those stand-ins (configs of other models, tokenizer
  helpers): stand-ins themselves, listed with the reason; no region needs one;
- ``sgl_kernel.scaled_fp4_quant`` (SM100 linear quantize, 0.5.8-0.5.9): an opaque op of sgl-kernel's
  schema, whose fake SGLang registers; other ``sgl_kernel::`` ops SGLang registers fakes for are
  defined from those fakes;
- empty ``include/`` and ``csrc/`` in SGLang's JIT kernel package (C++ sources not unpacked);
- the GPU: torch reports one CUDA device of the faked capability to SGLang's and FlashInfer's code
  (``is_available``, ``device_count``, capability, name, properties, ``torch.version.cuda`` 12.9),
  the truth to torch's own; ``Tensor.cuda()`` is the identity; while SGLang sets up, CUDA tensors it
  asks for are made on the CPU and its ops with no CPU kernel return zeros shaped by their fakes;
- SGLang's process groups: one-rank stand-ins in parallel_state (world size 1);
- FlashInfer's JIT build while SGLang prepares weights: no-op kernels (its own loader is back
  before the trace);
- the server's configuration (MoE regions): SGLang's ServerArgs at its defaults with the
  quantization and MoE runner backend set, published by SGLang's own functions, not resolved;
- ``InklingMoE``: its constructor not run (Inkling's HF config), the attributes ``_forward_routed``
  reads set, its experts a FusedMoE made as the constructor makes it; the flashinfer_cutlass block
  gets the StandardTopKOutput TopK would make (TopK's triton kernel cannot run here);
- weights: ones, made by the layers' own create_weights and process_weights_after_loading.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import Any

import pytest
from helpers import FULL, OVERLAY, PATCHES, cache_dir, default_sglang, rotating_sample, sglang_flashinfer_pins

from nvfp4_overlay import files
from nvfp4_overlay.audit import sglang_audit, sglang_reach
from nvfp4_overlay.oracle import oracle, probe_runner, sglang_releases
from nvfp4_overlay.patch.manifest import Target, load_upstream
from nvfp4_overlay.wheel import fetch

RELEASES = sglang_releases.audit_releases(PATCHES)
BY_VERSION = {r.version: r for r in RELEASES}
STACK_PIN = sglang_flashinfer_pins()
VERSIONS = [r.version for r in RELEASES]
STACK_SGLANG = default_sglang()
# The releases whose upstream stack (upstream SGLang, upstream FlashInfer) is probed afresh and held to
# the committed table: two a day, every one with NVFP4_OVERLAY_FRESH=1 (make test-releases, weekly).
FRESH = (VERSIONS if os.environ.get("NVFP4_OVERLAY_FRESH") == "1"
         else rotating_sample(VERSIONS, 2, datetime.date.today().toordinal()))
TABLE = sglang_audit.load_table(PATCHES)


@pytest.fixture(scope="session")
def region_runs(wheel_tree: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """region_runs(version) -> the probe's results and the trees, each release probed once per session.

    The patched FlashInfer's runs always; the upstream FlashInfer's (a fact about two published
    wheels, which the committed table holds) only for the releases of FRESH, the rotating sample.
    Each (SGLang tree, FlashInfer tree) pair is kept in the result cache under its inputs.
    """
    done: dict[tuple[str, str], dict[str, Any]] = {}
    results = oracle.Results(cache_dir() / "oracle")

    def get(version: str, gpus: dict[str, tuple[int, int]] | None = None) -> dict[str, Any]:
        """gpus: another set than sglang_releases.TREE_GPUS (its runs: both FlashInfer trees, always)."""
        if (version, str(gpus)) not in done:
            release = BY_VERSION[version]
            wheel = sglang_releases.upstream_wheel(PATCHES, release, fetch.Source(cache_dir()))
            sglang = {"upstream": lambda: probe_runner.unpack(wheel, tmp_path_factory.mktemp(f"sglang-{version}"))}
            inputs = {"sglang/upstream": files.sha256_file(wheel)}
            if release.carried:
                sglang["patched"] = lambda: wheel_tree("sglang", version, patched=True)
                inputs["sglang/patched"] = oracle.digest_tree(PATCHES / "sglang" / version) + \
                    oracle.digest_tree(OVERLAY / "sglang") + oracle.engine_digest()
            pin = STACK_PIN[version]
            flashinfer = {kind: lambda kind=kind: wheel_tree("flashinfer-python", pin, patched=kind == "patched")
                          for kind in ("upstream", "patched")}
            upstream_pin = fetch.select_wheels(load_upstream(PATCHES, Target("flashinfer-python", pin)),
                                               fetch.Source(cache_dir()))[0].sha256
            inputs["flashinfer/upstream"] = upstream_pin
            inputs["flashinfer/patched"] = str(oracle.patched_inputs(upstream_pin, PATCHES, OVERLAY,
                                                                     "flashinfer-python", pin))
            kinds = ("upstream", "patched") if version in FRESH or gpus else ("patched",)
            plan = {"gpus": {g: list(cc) for g, cc in gpus.items()}} if gpus else {}  # the default plan as it was
            found: dict[str, Any] = {}
            for kind in kinds:
                side = oracle.Side(version, f"sglang-{kind}-flashinfer", inputs, lambda: tmp_path_factory.getbasetemp())
                key = oracle.key_of("sglang_regions", side, {"flashinfer": kind, "sglang": sorted(sglang), **plan})
                one = results.computed("sglang_regions", side, key, lambda kind=kind: sglang_releases.probe_release(
                    {s: make() for s, make in sglang.items()}, {kind: flashinfer[kind]()},
                    tmp_path_factory.mktemp("scratch"), jobs=1, gpus=gpus), keep=_no_crash)
                for tree, by_kind in one.items():
                    found.setdefault(tree, {}).update(by_kind)
            done[version, str(gpus)] = {"results": found, "wheel": wheel,
                                        "flashinfer": {k: make() for k, make in flashinfer.items()}}
        return done[version, str(gpus)]

    return get


def _no_crash(found: Any) -> bool:
    """A run with a crashed cell is not kept: the next session probes it again."""
    return not any("crash" in report for by_kind in found.values() for by_gpu in by_kind.values()
                   for report in by_gpu.values())


def by_version(versions: list[str]) -> list[Any]:
    """One param per release, all of a release's tests in one pytest-xdist worker (one probe run)."""
    return [pytest.param(v, id=v, marks=pytest.mark.xdist_group(f"sglang-{v}")) for v in versions]


# --- the pins and the table, without torch ----------------------------------------------------------------


@pytest.mark.upstream
@pytest.mark.parametrize("version", VERSIONS)
def test_wheel_metadata_pins_the_stacks_flashinfer(version: str) -> None:
    wheel = sglang_releases.upstream_wheel(PATCHES, BY_VERSION[version], fetch.Source(cache_dir()))
    assert sglang_releases.flashinfer_pin(wheel) == STACK_PIN[version]


@pytest.fixture(scope="session")
def release_sources() -> Any:
    """release_sources(version) -> the upstream wheel's .py files (path -> text), each read once."""
    done: dict[str, dict[str, str]] = {}

    def get(version: str) -> dict[str, str]:
        if version not in done:
            wheel = sglang_releases.upstream_wheel(PATCHES, BY_VERSION[version], fetch.Source(cache_dir()))
            done[version] = sglang_reach.release_sources(wheel)
        return done[version]

    return get


@pytest.mark.upstream
@pytest.mark.parametrize("version", VERSIONS)
def test_region_reach_evidence_holds_in_the_pinned_wheel(release_sources: Any, version: str) -> None:
    """Each region-reach.toml entry covering the release: its evidence read in the release's own files."""
    entries = [e for e in sglang_reach.load_reach(PATCHES) if e.releases.contains(version, prereleases=True)]
    problems = [f"sglang {version}, {list(e.regions)}: {p}" for e in entries
                for p in sglang_reach.evidence_problems(e, release_sources(version))]
    assert not problems, "read the release anew and fix patches/sglang/region-reach.toml:\n" + "\n".join(problems)


def _series(version: str) -> list[str]:
    path = PATCHES / "sglang" / version / "series"
    return path.read_text().split() if path.is_file() else []


@pytest.mark.upstream
@pytest.mark.parametrize("version", [v for v in VERSIONS if any(p.startswith("0002-moe-output-buffer")
                                                                   for p in _series(v))])
def test_no_writer_provides_a_moe_output_buffer_while_compiling(release_sources: Any, version: str) -> None:
    """0002's premise: ForwardFlags.moe_output_buffer is set only through moe_output_buffer_ctx, and each
    caller of it does so only when not torch.compiler.is_compiling(), so a compiled region reads None."""
    sources = {p: t for p, t in release_sources(version).items() if p.startswith(sglang_reach.SOURCES)}
    writers = sorted(p for p, t in sources.items() if "moe_output_buffer=" in t)
    assert writers == ["sglang/srt/layers/moe/moe_runner/base.py"], writers
    flag = sources["sglang/srt/runtime_context.py"]
    visible = flag[flag.index("_GRAPH_VISIBLE = frozenset("):]
    assert '"moe_output_buffer"' not in visible[:visible.index(")")], "the flag is a plain slot: 0002 is moot"
    calls = [(p, i) for p, t in sources.items() for i, line in enumerate(t.splitlines())
             if "moe_output_buffer_ctx(" in line and not line.lstrip().startswith(("def ", "#"))]
    assert calls, "no caller of moe_output_buffer_ctx: read the release anew"
    for path, i in calls:
        before = "\n".join(sources[path].splitlines()[max(0, i - 8):i])
        assert "and not torch.compiler.is_compiling()" in before, f"{path}:{i + 1} sets the buffer while compiling"


@pytest.mark.upstream
@pytest.mark.parametrize("version", [v for v in VERSIONS if any(p.startswith("0003-pdl-arch-check")
                                                                   for p in _series(v))])
def test_the_pdl_arch_check_is_a_per_process_constant(release_sources: Any, version: str) -> None:
    """0003's premise: is_arch_support_pdl is cache_once, so its first answer is the process's answer."""
    text = release_sources(version)["sglang/kernels/jit/utils/arch.py"]
    assert "@cache_once\ndef is_arch_support_pdl() -> bool:" in text


# --- the probe, per release ---------------------------------------------------------------------------------


def _problems(version: str, runs: dict[str, Any], which: str) -> list[str]:
    """which: "upstream" (the upstream FlashInfer, every SGLang tree) or "patched"."""
    results, entry = runs["results"], TABLE["releases"][version]
    routes = sglang_audit.read_routes(runs["flashinfer"]["patched"])
    problems = []
    for tree, regions in entry["sglang"].items():
        for region, by_gpu in regions.items():
            for gpu in sglang_audit.GPUS:
                cell = by_gpu if "absent" in by_gpu else by_gpu[gpu]
                run = results[tree][which][gpu]["regions"][region]
                if which == "upstream":
                    found = sglang_audit.upstream_problems(cell, run)
                else:
                    found = sglang_audit.patched_problems(cell, run, routes)
                problems += [f"{version} {tree} SGLang, {region}, {gpu}: {p}" for p in found]
    return problems


@pytest.mark.upstream
@pytest.mark.torch
@pytest.mark.parametrize("version", by_version(FRESH))
def test_upstream_stack_fails_where_the_table_says(region_runs: Any, version: str) -> None:
    runs = region_runs(version)
    for by_flashinfer in runs["results"].values():
        report = by_flashinfer["upstream"]["sm120"]
        assert report.get("flashinfer_version") == STACK_PIN[version], str(report.get("crash", report))[:3000]
        assert report["routes"] is None, "the upstream tree has the overlay's ENTRIES"
    assert _problems(version, runs, "upstream") == []


@pytest.mark.upstream
@pytest.mark.torch
@pytest.mark.parametrize("version", by_version(VERSIONS))
def test_patched_stack_does_what_its_entries_say(region_runs: Any, version: str) -> None:
    runs = region_runs(version)
    assert _problems(version, runs, "patched") == []


@pytest.mark.upstream
@pytest.mark.torch
@pytest.mark.parametrize("version", by_version(VERSIONS))
def test_entries_read_without_torch_are_the_imported_ones(region_runs: Any, version: str) -> None:
    runs = region_runs(version)
    imported = runs["results"]["upstream"]["patched"]["sm120"]["routes"]
    assert imported, "the patched FlashInfer tree has no ENTRIES"
    assert sglang_audit.read_routes(runs["flashinfer"]["patched"]) == json.loads(json.dumps(imported))
    assert sglang_audit.read_routes(runs["flashinfer"]["upstream"]) is None


@pytest.mark.upstream
@pytest.mark.torch
@pytest.mark.parametrize("version", by_version(VERSIONS))
def test_stack_claims_hold(region_runs: Any, version: str) -> None:
    """Each region a stack claims compiles under its patched stack on both GPUs, and nothing remains raw."""
    release, runs = BY_VERSION[version], region_runs(version)
    claimed = sglang_audit.load_claims(PATCHES).get(f"sglang-{version}", frozenset())
    routes = sglang_audit.read_routes(runs["flashinfer"]["patched"])
    left = sglang_audit.stack_remaining(TABLE, version, release.carried, routes)
    tree = "patched" if release.carried else "upstream"
    for region in sorted(claimed):
        assert region not in left, f"sglang-{version} claims {region}, yet raw under it: {left[region]}"
        for gpu in sglang_audit.GPUS:
            run = runs["results"][tree]["patched"][gpu]["regions"][region]
            assert run.get("ok"), f"sglang-{version} claims {region}; on {gpu} it fails: {str(run)[:800]}"


# SM121 (GB10, DGX Spark), probed apart (sglang_releases.SM121_GPUS) and held to the table's sm120 rows: the
# default stack's SGLang and 0.5.19 (Qwen3.5's silu_and_mul quantize, the FP8 norm-quant pair and Inkling's
# MoE, all raw under tc_piecewise) per run; every release with NVFP4_OVERLAY_FULL=1 (make test-releases).
SM121_VERSIONS = VERSIONS if FULL else [v for v in VERSIONS if v in (STACK_SGLANG, "0.5.19")]


@pytest.mark.upstream
@pytest.mark.torch
@pytest.mark.parametrize("version", by_version(SM121_VERSIONS))
def test_sm121_regions_fail_and_compile_as_on_sm120(region_runs: Any, version: str) -> None:
    """Upstream's stack fails on SM121 where the table says it fails on SM120, and the patched stack does
    there what its routes make of the same calls: SGLang and FlashInfer take their SM12x paths alike."""
    runs, entry = region_runs(version, sglang_releases.SM121_GPUS), TABLE["releases"][version]
    routes = sglang_audit.read_routes(runs["flashinfer"]["patched"])
    problems, seen = [], 0
    for tree, regions in entry["sglang"].items():
        for region, by_gpu in regions.items():
            cell = by_gpu if "absent" in by_gpu else by_gpu["sm120"]
            upstream, patched = (runs["results"][tree][kind]["sm121"]["regions"][region] for kind in ("upstream", "patched"))
            assert upstream.get("ok") is not None or "absent" in upstream, (tree, region, str(upstream)[:800])
            problems += [f"{tree} {region} sm121: {p}" for p in (*sglang_audit.upstream_problems(cell, upstream),
                                                                  *sglang_audit.patched_problems(cell, patched, routes))]
            seen += bool(cell.get("calls"))
    assert seen and problems == []


@pytest.mark.upstream
@pytest.mark.torch
@pytest.mark.parametrize("version", by_version(FRESH))
def test_the_verdict_refuses_a_table_or_routes_that_lie(region_runs: Any, version: str) -> None:
    """Controls on the real runs: a table that drops a call, says a failing region compiles, or ENTRIES
    that claim to route a call the patched FlashInfer leaves raw, each make the verdict fail."""
    runs, entry = region_runs(version), TABLE["releases"][version]
    routes = sglang_audit.read_routes(runs["flashinfer"]["patched"]) or {}
    checked = 0
    for tree, regions in entry["sglang"].items():
        for region, by_gpu in regions.items():
            if "absent" in by_gpu:
                continue
            for gpu, cell in by_gpu.items():
                upstream, patched = (runs["results"][tree][k][gpu]["regions"][region] for k in ("upstream", "patched"))
                if cell["calls"] or cell["sglang_break"]:
                    lie = {"calls": [], "sglang_break": None, "frontier": None}
                    assert sglang_audit.upstream_problems(lie, upstream), f"{tree} {region} {gpu}: a lie passed"
                    checked += 1
                raw = [c for c in cell["calls"] if not sglang_audit.routed(c, routes)]
                if raw:
                    everything = {**routes, **{c["function"]: {} for c in raw}}
                    assert sglang_audit.patched_problems(cell, patched, everything), f"{tree} {region} {gpu}"
                    checked += 1
                if not cell["calls"] and not cell["sglang_break"]:
                    assert sglang_audit.upstream_problems({**cell, "sglang_break": "made up"}, upstream)
                    checked += 1
    assert checked
