"""The FlashInfer trace ladder on the real wheels: upstream breaks torch.compile, patched does not.

The oracle (nvfp4_overlay/oracle/oracle.py, the probe nvfp4_overlay/probes/flashinfer/flashinfer_trace.py) holds the
patched tree of each carried release to its upstream tree, with torch 2.13 (CPU),
torch.version.cuda "12.8" and the compute capability faked as (12, 0) and (10, 0), for every entry
point the overlay routes (behaviour.ROUTED_CANDIDATES; the patched tree's entries.ENTRIES says which
it routes). Only the JIT build is stubbed: a module whose kernels record the arguments they get.
Upstream's half comes from tests/oracle/ (a fact about the pinned wheel, recomputed on a rotating
sample: test_oracle.py), the patched half is probed, one release at a time (`-k 0.6.18`).
behaviour.trace_problems is the verdict refresh uses; the tests below add what the report says
upstream does, and controls that the verdict can fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import (
    FULL,
    PATCHES,
    ReleaseOracle,
    by_release,
    default_flashinfer,
    flashinfer_releases,
    pinned_releases,
    tree_copy,
)
from packaging.version import Version

from nvfp4_overlay.oracle import behaviour, explored, oracle
from nvfp4_overlay.probes.flashinfer.tables import cases

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

RELEASES = flashinfer_releases()
# Every case on the releases a stack pins (every release with NVFP4_OVERLAY_FULL=1); the first case
# of each entry point on the others.
EVERY_CASE = RELEASES if FULL else [v for v in RELEASES if v in pinned_releases("flashinfer-python")]
ROUTED = list(behaviour.ROUTED_CANDIDATES)
GPUS = ("12.0", "10.0")
# The JIT loader each entry point calls (the fp4 family: get_fp4_quantization_module).
LOADERS = {"mxfp8_quantize": "get_mxfp8_quantization_sm100_module", "rmsnorm_quant": "get_norm_module",
           "fused_add_rmsnorm_quant": "get_norm_module",
           "nvfp4_kv_quantize": "get_fp4_kv_quantization_module",
           # the trtllm-gen MoE spec fetches its kernel-list header through the cubin loader
           "trtllm_fp4_block_scale_moe": "gen_trtllm_gen_fused_moe_sm100_module",
           "trtllm_fp4_block_scale_routed_moe": "gen_trtllm_gen_fused_moe_sm100_module",
           "cutlass_fused_moe": "get_cutlass_fused_moe_module",
           # the CUTLASS runner's JIT module (0.6.x); from 0.7.0 the workspace, keyed by the current
           # CUDA stream, before it
           "mm_fp4": ("get_cutlass_fp4_gemm_module", "_get_stream_cache_buf",
                      # 0.6.11-0.6.11.post1: the AutoTuner's lock first; 0.6.11.post2-3: the SM121
                      # specialised kernels' check asks the toolkit's release first
                      "get_effective_map_to_tuning_buckets", "get_cuda_version"),
           # CuTe DSL only: its driver, before any compile (on the CPU probe at the driver's checks of
           # the input, which dynamo cannot decide; on a GPU at the kernel's compile and launch)
           "silu_and_mul_nvfp4_quantize": "silu_and_mul_nvfp4_quantize_cute_dsl",
           # SM90 alone: the DeepGEMM runner's spec asks the toolkit's release
           "fp8_blockscale_gemm_sm90": "gen_fp8_blockscale_gemm_sm90_module",
           # 0.7.4 asks for its generated wgmma/tcgen05 programs first
           "tinygemm_bf16": ("get_tinygemm2_module", "get_tinygemm2_sm100_module", "_tinygemm2_wgmma_program",
                             "_tinygemm2_tcgen05_program")}


@pytest.fixture
def ladder(release_oracle: ReleaseOracle, release: str) -> dict[str, Any]:
    """This release's ladder: every case where EVERY_CASE says, the first of each entry point elsewhere."""
    return release_oracle.ladder(release, ROUTED, quick=release not in EVERY_CASE)


@pytest.mark.parametrize("release", by_release(RELEASES))
def test_patched_passes_the_ladder(ladder: dict[str, Any], release: str) -> None:
    assert behaviour.routed(ladder) == sorted(ROUTED)  # the overlay routes every candidate
    assert behaviour.trace_problems(release, ladder, behaviour.routed(ladder)) == []


@pytest.mark.parametrize("release", by_release(RELEASES))
def test_every_entry_point_the_release_has_is_routed(ladder: dict[str, Any], release: str) -> None:
    patched, upstream = ladder["patched"], ladder["upstream"]
    assert sorted(patched["entries"]) == sorted(upstream["entries"])
    # nvfp4_kv_quantize and nvfp4_quantize_paged_kv_cache from 0.6.7; the norm-quant pair is exported from flashinfer itself from 0.6.7
    # (flashinfer.norm before, routed there too, outside the ladder's reach)
    older = {"nvfp4_kv_quantize", "nvfp4_quantize_paged_kv_cache", "rmsnorm_quant", "fused_add_rmsnorm_quant"}
    expected = set(ROUTED) - (older if Version(release) < Version("0.6.7") else set())
    if Version(release) < Version("0.6.16"):
        expected -= {"silu_and_mul_nvfp4_quantize"}  # CuTe DSL only, from 0.6.16
    if Version(release) < Version("0.6.5"):
        expected -= {"tinygemm_bf16"}  # flashinfer.gemm has it from 0.6.5
    assert set(patched["entries"]) == expected  # the KV-cache pair from 0.6.7, the others in all
    for name, info in patched["entries"].items():
        assert info["schema"] == info["signature"] == upstream["entries"][name]["signature"], name


@pytest.mark.parametrize("release", by_release(RELEASES))
def test_upstream_fullgraph_fails_in_the_jit_loader(ladder: dict[str, Any], release: str) -> None:
    for name in ladder["upstream"]["entries"]:
        for gpu, error in behaviour.upstream_fails(ladder, name).items():
            assert error is not None, f"sm{gpu}: upstream {name} compiled with fullgraph; the report says not"
            assert error["kind"] == "Unsupported", (name, gpu, error)
            # dynamo's user stack: the trace went into the JIT loader (the nvcc version lookups, the
            # file reads, the lock) and broke in upstream's code, not in the probe's stubbed build
            functions = [frame.rsplit(":", 1)[1] for frame in error["stack"]]
            where = LOADERS.get(name, "get_fp4_quantization_module")
            assert {where} & set(functions) if isinstance(where, str) else set(where) & set(functions), \
                (name, gpu, error["stack"])
            recording = [f for f in error["stack"] if f in ("<outside>/flashinfer_trace.py:launch",
                                                             "<outside>/flashinfer_trace.py:__getattr__")]
            assert not recording and "RecordingModule" not in error["explanation"], (name, gpu, error["stack"])
    for error in behaviour.upstream_fails(ladder, "fp4_quantize").values():
        assert error is not None
        assert error["reason"] == "Attempted to call function marked as skipped"
        # The lock subprocess.Popen allocates for `which nvcc`, reached from get_fp4_quantization_module.
        assert "_thread" in error["explanation"] and "allocate_lock" in error["explanation"]


# the paged KV cache: K's and V's fp4_quantize; the FP8 block-scale GEMM: the runner's workspace
# size, the workspace handed to it, the GEMM
LAUNCHES = {"nvfp4_quantize_paged_kv_cache": 2, "fp8_blockscale_gemm_sm90": 3}


@pytest.mark.parametrize("release", by_release(EVERY_CASE))
def test_every_case_ran_on_both_gpus_with_one_opaque_op(ladder: dict[str, Any], release: str) -> None:
    patched = ladder["patched"]
    for name in patched["entries"]:
        op = f"{behaviour.OP_PREFIX}{name}.default"
        for gpu in cases.ladder_gpus(name, GPUS):  # and the one GPU an SM90-only entry point runs on
            runs = patched[gpu][name]
            assert len(runs) >= (9 if name == "fp4_quantize" else 3), (name, sorted(runs))
            reached, kernel = 0, cases.has_kernel(name, gpu, release)
            for case, run in runs.items():
                if "error" in run["eager"]:  # upstream refuses the arguments: so does the compiled call
                    assert "error" in run["compiled"], (name, case)
                    continue
                assert run["compiled"]["targets"].count(op) == 1, (name, case)
                assert run["compiled"]["op_calls"] == run["compiled"]["calls"], (name, case)
                # the eager call reached the kernel (the paged KV cache: K's and V's fp4_quantize)
                assert len(run["eager"]["launches"]) == LAUNCHES.get(name, 1), (name, case)
                reached += 1
            # where upstream has no kernel for the GPU (probes/flashinfer/tables/cases.py NO_KERNEL) every call refuses
            assert reached >= 2 if kernel else reached == 0, (name, gpu, sorted(runs))
        # The positive control of the eager check: the op log sees the probe's own aten::ones (and
        # what FlashInfer's path allocates), not ours.
        gpu = next(g for g in cases.ladder_gpus(name, GPUS) if cases.has_kernel(name, g, release))
        ops = patched[gpu]["eager_ops"][name]["ops"]
        assert "aten::ones" in ops and not [o for o in ops if o.startswith("nvfp4_overlay::")], (name, ops)


@pytest.mark.parametrize("release", by_release(RELEASES))
def test_cuda_version_lookups_work_under_fullgraph(ladder: dict[str, Any], release: str) -> None:
    patched = ladder["patched"]["lookups"]
    assert "error" not in patched, patched.get("error")
    assert patched["value"] == [24.0, 24.0]  # (0 + 12) * 2: 12.8 >= 12.8, < 12.9, < 13.0
    assert patched["events"] == []
    upstream = ladder["upstream"]["lookups"]
    assert upstream.get("error", {}).get("kind") == "Unsupported", upstream


# SM121 (GB10, DGX Spark), a rung of its own (oracle.SM121_GPUS, torch's CUDA 13.0): upstream's code takes its
# SM12x paths there (get_fp4_quantization_module's "121"/"120f", supported_major_versions=[..., 12], is_sm12x_supported).
# The default stack's release and the newest per run; every carried release with NVFP4_OVERLAY_FULL=1
# (make test-releases). docs/proof.md says why not every release every run.
SM121_RELEASES = RELEASES if FULL else [v for v in RELEASES if v in (default_flashinfer(), RELEASES[-1])]


@pytest.mark.parametrize("release", by_release(SM121_RELEASES))
def test_sm121_upstream_fails_and_patched_compiles_as_on_sm120(release_oracle: ReleaseOracle, release: str) -> None:
    ladder = release_oracle.ladder(release, ROUTED, quick=release not in EVERY_CASE, gpus=oracle.SM121_GPUS,
                                   torch_cuda=oracle.SM121_TORCH_CUDA)
    assert oracle.gpu_keys(ladder["patched"]) == oracle.gpu_keys(ladder["upstream"]) == ["12.1"]
    assert behaviour.routed(ladder) == sorted(ROUTED)
    assert behaviour.trace_problems(release, ladder, behaviour.routed(ladder)) == []
    for name in ladder["upstream"]["entries"]:
        if name in cases.ONLY_GPU:  # upstream refuses it on SM12x before any loader (the FP8 GEMM: SM90 alone)
            continue
        error = behaviour.upstream_fails(ladder, name)["12.1"]
        assert error is not None and error["kind"] == "Unsupported", (name, error)
        where = LOADERS.get(name, "get_fp4_quantization_module")
        functions = {frame.rsplit(":", 1)[1] for frame in error["stack"]}
        assert {where} & functions if isinstance(where, str) else set(where) & functions, (name, error["stack"])
    op = f"{behaviour.OP_PREFIX}fp4_quantize.default"
    runs = ladder["patched"]["12.1"]["fp4_quantize"]
    reached = [run for run in runs.values() if "error" not in run["eager"]]
    assert len(reached) >= (9 if release in EVERY_CASE else 1)
    assert all(run["compiled"]["targets"].count(op) == 1 for run in reached)


# The releases whose torch.ops.flashinfer.fp4_quantize passes enable_pdl by position, into
# is_global_scale_inversed (patch 0003); fixed upstream in 0.7.1.
OPT_IN_BUG = [v for v in RELEASES if Version("0.6.12") <= Version(v) < Version("0.7.1")]


@pytest.mark.parametrize("release", by_release(RELEASES))
def test_every_fake_gives_upstreams_shapes_at_every_rank(release_oracle: ReleaseOracle, release: str) -> None:
    """Every row of every routed entry point, as written and with its input at the other ranks (1-D to
    4-D, leading dimensions split), fake against upstream's wrapper with a no-op kernel: the same
    outputs wherever upstream accepts the input; and the ranks were probed (cheap: no trace)."""
    shapes = release_oracle.shapes(release, ROUTED)
    assert behaviour.shape_problems(release, shapes) == []
    compared = [(case, run) for gpu in ("12.0", "10.0") for runs in shapes[gpu].values() for case, run in runs.items()
                if not isinstance(run["wrapper"], dict) and isinstance(run["fake"], list)]
    assert {case.rsplit("@", 1)[1] for case, _ in compared} >= {"1d", "2d", "3d", "4d"}, release
    assert set(shapes["entries"]) == set(shapes["12.0"]) and "fp4_quantize" in shapes["entries"]


# The explored space (oracle/explored.py): in make test the default stack's release and the newest, the
# first row of each entry point on SM120 (quick); with NVFP4_OVERLAY_FULL=1 every release so, and those
# two every row on both GPUs too (the weekly run: a full space takes a release minutes).
TWO = [v for v in RELEASES if v in (default_flashinfer(), RELEASES[-1])]
EXPLORED = [(v, True) for v in (RELEASES if FULL else TWO)] + [(v, False) for v in (TWO if FULL else [])]


@pytest.mark.parametrize(("release", "quick"), [pytest.param(v, q, id=f"{v}-{'quick' if q else 'full'}",
                                                             marks=pytest.mark.xdist_group(f"flashinfer-{v}")) for v, q in EXPLORED])
def test_every_fake_agrees_with_upstreams_wrapper_over_the_explored_space(release_oracle: ReleaseOracle,
                                                                         release: str, quick: bool) -> None:
    """Sizes at and around every constant of each wrapper's shape code, powers of two to 16k, odd sizes,
    every optional parameter in each state: each fake (derived from upstream's wrapper, or written by
    hand) gives what upstream's wrapper gives, to the result's class; and the space was explored."""
    found = release_oracle.explored(release, ROUTED, quick=quick)
    assert explored.problems(release, found) == []
    fp4 = found["upstream"]["12.0"]["fp4_quantize"]["calls"]
    rows = {int(c.rsplit("=", 1)[1]) for c in fp4 if "@m=" in c}
    assert {127, 128, 129, 1023, 1024, 1025, 16384, 3} <= rows, sorted(rows)  # the rounding, a power of two, odd
    assert any("@global_scale=None" in c for c in fp4) and any("@k=" in c for c in fp4)
    ours = found["patched"]["12.0"]
    assert ours["fp4_quantize"]["derived"] and not ours["nvfp4_quantize"]["derived"]
    compared = sum(1 for runs in ours.values() for a in runs["calls"].values() if a != "upstream")
    assert compared > 500 and sorted(ours) == sorted(found["patched"]["entries"]), compared


@pytest.mark.parametrize("release", by_release(RELEASES[-1:]))
def test_the_explored_verdict_names_the_call_and_both_answers(release_oracle: ReleaseOracle, release: str) -> None:
    """Controls: one explored answer of the fake changed (a shape, then the result's class), and a fake
    that left a fake tensor behind, are each refused by name."""
    import copy

    found = release_oracle.explored(release, ROUTED, quick=True)
    call = "swizzled128-sf16@m=1025"
    for bend in (lambda a: a[1][1].__setitem__(1, [1280, 16]), lambda a: a.__setitem__(0, "list")):
        broken = copy.deepcopy(found)
        answer = broken["patched"]["12.0"]["fp4_quantize"]["calls"][call]
        bend(answer)
        (problem,) = explored.problems(release, broken)
        assert problem.startswith(f"{release}: sm120: fp4_quantize [{call}]: the fake gives {answer}, upstream's "
                                  f"wrapper {found['upstream']['12.0']['fp4_quantize']['calls'][call]}"), problem
        assert "faking.py" in problem  # a derived fake: what to do says so
    left = copy.deepcopy(found)
    left["patched"]["12.0"]["mxfp8_quantize"]["left"] = ["flashinfer.utils._cache_buf holds a fake tensor"]
    (problem,) = explored.problems(release, left)
    assert "mxfp8_quantize: the fakes left flashinfer.utils._cache_buf holds a fake tensor" in problem


@pytest.mark.parametrize("release", by_release([v for v in RELEASES if Version(v) >= Version("0.6.12")]))
def test_the_opt_in_op_hands_enable_pdl_to_the_kernel(ladder: dict[str, Any], release: str) -> None:
    """torch.ops.flashinfer.fp4_quantize(x, s, enable_pdl=True) launches the kernel as the public
    fp4_quantize(x, s, enable_pdl=True) does: PDL on, the global scale not inverted. Upstream's op,
    the control, differs on exactly the releases patch 0003 covers."""
    for gpu in GPUS:
        patched = ladder["patched"][gpu]["opt_in_fp4_op"]
        upstream = ladder["upstream"][gpu]["opt_in_fp4_op"]
        assert len(patched["public"]) == 1 and patched["public"] == upstream["public"], gpu
        assert patched["launches"] == patched["public"], (gpu, patched["launches"])
        if release in OPT_IN_BUG:
            # the launch ends (..., is_global_scale_inversed, enable_pdl) in these releases
            assert patched["public"][0][-2:] == [["value", "False"], ["value", "True"]], patched["public"]
            assert upstream["launches"][0][-2] == ["value", "True"], upstream["launches"]  # inverted
            assert upstream["launches"] != upstream["public"]
        else:
            assert upstream["launches"] == upstream["public"]
    assert ("0003-opt-in-fp4-op-passes-enable-pdl.patch" in
            (PATCHES / "flashinfer-python" / release / "series").read_text()) == (release in OPT_IN_BUG)


@pytest.mark.parametrize("release", by_release(RELEASES[-1:]))
def test_the_verdict_sees_a_fake_that_differs_and_a_parameter_left_out(ladder: dict[str, Any], release: str) -> None:
    """Controls: the same ladder with the patched side's fake or schema broken must be refused."""
    import copy

    routed = behaviour.routed(ladder)
    for name in routed:
        broken = copy.deepcopy(ladder)
        gpu = next(g for g in cases.ladder_gpus(name, GPUS) if cases.has_kernel(name, g, release))
        run = next(iter(broken["patched"][gpu][name].values()))
        if run["compiled"]["fake_outputs"]:
            run["compiled"]["fake_outputs"][-1][1] = [1, 1]  # the last output's shape
            what = "the fake gives"
        else:  # an entry point that writes in place (rmsnorm_quant): its kernel's arguments instead
            run["compiled"]["launches"][0][1][1] = [1, 1]
            what = "the kernel gets"
        broken["patched"]["entries"][name]["schema"] = broken["patched"]["entries"][name]["schema"][:-1]
        problems = behaviour.trace_problems(release, broken, routed)
        assert any(f"{name} [" in p and what in p for p in problems), (name, problems)
        assert any(f"{name}: the op takes" in p and "would not reach the op" in p for p in problems), name
    inverted = copy.deepcopy(ladder)  # the opt-in op's bug, as 0.6.12-0.7.0.post1 ship it
    launch = inverted["patched"]["12.0"]["opt_in_fp4_op"]["launches"][0]
    launch[-2:] = [["value", "True"], ["value", "None"]]
    assert any("patch 0003" in p for p in behaviour.trace_problems(release, inverted, routed))
    one_gpu = copy.deepcopy(ladder)  # a patched side that ran on fewer GPUs than upstream's
    del one_gpu["patched"]["10.0"]
    (problem,) = behaviour.trace_problems(release, one_gpu, routed)
    ran, theirs = problem.removeprefix(f"{release}: the patched ladder ran on ").split(", upstream's on ")
    assert "10.0" not in ran and "10.0" in theirs, problem
    unprobed = copy.deepcopy(ladder)
    unprobed["patched"]["probed"] = unprobed["patched"]["probed"][:-1]
    problems = behaviour.trace_problems(release, unprobed, routed)
    assert any("which the ladder does not call" in p for p in problems), problems


# Appended to a patched tree's fakes.py and faking.py: every fake gets one output wrong, the way a fake
# goes wrong (upstream's own fake of silu_and_mul_scaled_nvfp4_experts_quantize forgets the permutation;
# a fake that forgets the reshape leaves the scale factors flat): each hand-written fake, and every
# fake derived from upstream's wrapper.
BEND = """

def bend(out, given):
    if out is None:
        return out
    if isinstance(out, (tuple, list)):
        items = [bend(t, given) for t in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    if any(out is g for g in given):  # a parameter handed back (out=) stays the one given: what the fake
        return out                    # allocates is wrong, the traced path's allocation of it included
    return out.contiguous() if not out.is_contiguous() else out.reshape(-1) if out.dim() > 1 else out.reshape(1, -1)
"""
BREAK_HAND_WRITTEN = BEND + """

def _broken(fake):
    import functools

    @functools.wraps(fake)  # the signature the overlay reads (what the fake takes) stays the fake's
    def broken(*args, **values):
        given = [v for v in values.values() if v is not None]
        return bend(fake(*args, **values), given)  # a tuple, a list ([output]), one tensor (mm_fp4's out), nested
    return broken


for _name in {names!r}:
    if _name in globals():  # a hand-written fake (entries.py names it)
        globals()[_name] = _broken(globals()[_name])
"""
BREAK_DERIVED = BEND + """

_unbroken = derived


def derived(fn):
    fake = _unbroken(fn)

    def broken(**values):
        given = [v for v in values.values() if v is not None]
        return bend(fake(**values), given)
    return broken
"""
# The fakes that allocate (an in-place entry point's fake allocates nothing to break).
ALLOCATING = [n for n in ROUTED if n not in ("rmsnorm_quant", "fused_add_rmsnorm_quant", "tinygemm_bf16")]
# Those that hand back a parameter the op writes into (out=, output=): for a call that leaves it None,
# the traced path allocates it with the fake, and upstream's own check of a given out may refuse a wrong
# allocation when the graph runs (a compiled run that fails) before the outputs are compared.
HANDED_BACK = ("trtllm_fp4_block_scale_moe", "trtllm_fp4_block_scale_routed_moe", "cutlass_fused_moe", "mm_fp4",
               "fp8_blockscale_gemm_sm90")


@pytest.mark.parametrize("release", by_release(RELEASES[-1:]))
def test_the_ladder_refuses_a_broken_fake_of_every_entry_point(release_oracle: ReleaseOracle, wheel_tree: Any,
                                                              tmp_path: Path, release: str) -> None:
    """Control, end to end: a patched tree whose fakes each get one output wrong (hand-written or derived
    from upstream's wrapper) fails the ladder on every entry point, on both GPUs (the first case of each)."""
    broken = tmp_path / "broken"
    tree_copy(wheel_tree("flashinfer-python", release), broken)
    overlay = broken / "flashinfer" / "_nvfp4_overlay"
    (overlay / "fakes.py").write_text((overlay / "fakes.py").read_text() + BREAK_HAND_WRITTEN.format(names=ALLOCATING))
    (overlay / "faking.py").write_text((overlay / "faking.py").read_text() + BREAK_DERIVED)
    upstream, patched = release_oracle.sides(release)
    side = oracle.Side(release, "patched", {**patched.inputs, "edited": "every fake broken"}, lambda: broken)
    found = {"upstream": release_oracle.oracle.upstream_ladder(upstream, ROUTED),
             "patched": oracle.ladder_for(side, ROUTED, quick=True, results=oracle.Results(None))}
    assert behaviour.routed(found) == sorted(ROUTED)
    problems = behaviour.trace_problems(release, found, ROUTED)
    for name in ALLOCATING:
        for gpu in cases.kernel_gpus(name, GPUS):  # where a call reaches the fake (SM90 alone for the FP8 GEMM)
            mine = [p for p in problems if f"sm{gpu.replace('.', '')}: {name} [" in p]
            assert any("the fake gives" in p or name in HANDED_BACK and "does not compile" in p and "shape" in p
                       for p in mine), (name, gpu, mine)


# Appended to a patched tree's faking.py: the module getters left cached while faking (the control of
# "a module loaded eagerly before the compile is never called on fake tensors").
GETTERS_LEFT_CACHED = """

_upstream_kind = _kind


def _kind(value):
    kind = _upstream_kind(value)
    return "" if kind == "cached" else kind
"""


@pytest.mark.parametrize("release", by_release(RELEASES[-1:]))
def test_a_derived_fake_that_reaches_an_eagerly_loaded_module_is_refused(release_oracle: ReleaseOracle,
                                                                        wheel_tree: Any, tmp_path: Path,
                                                                        release: str) -> None:
    """Control: with faking.py leaving the functools.cache'd getters as they are, a derived fake that runs
    after an eager call (the ladder's order: every case eagerly first) gets the module that call loaded
    and launches its kernel on fake tensors while dynamo traces: the ladder sees the launch."""
    broken = tmp_path / "cached"
    tree_copy(wheel_tree("flashinfer-python", release), broken)
    faking = broken / "flashinfer" / "_nvfp4_overlay" / "faking.py"
    faking.write_text(faking.read_text() + GETTERS_LEFT_CACHED)
    upstream, patched = release_oracle.sides(release)
    side = oracle.Side(release, "patched", {**patched.inputs, "edited": "getters left cached"}, lambda: broken)
    found = {"upstream": release_oracle.oracle.upstream_ladder(upstream, ROUTED),
             "patched": oracle.ladder_for(side, ROUTED, quick=True, results=oracle.Results(None))}
    problems = behaviour.trace_problems(release, found, ROUTED)
    assert any("fp4_quantize [" in p and "the kernel gets" in p for p in problems), problems


# Appended to a patched tree's entries.py: mm_fp4's fake derived from upstream's wrapper.
MM_FP4_DERIVED = """

import dataclasses as _dataclasses

ENTRIES["mm_fp4"] = _dataclasses.replace(ENTRIES["mm_fp4"], fake=None, inert=frozenset())
"""


@pytest.mark.parametrize("release", by_release(RELEASES[-1:]))
def test_why_mm_fp4s_fake_is_written_by_hand(release_oracle: ReleaseOracle, wheel_tree: Any, tmp_path: Path,
                                             release: str) -> None:
    """entries.py's reason, shown: derived from upstream's wrapper, mm_fp4's fake keeps the workspace it
    allocates in upstream's module-level cache (utils._get_stream_cache_buf), a fake tensor an eager call
    would then be handed; the explored space's fake side, which runs before any eager call, says so."""
    derived = tmp_path / "mm_fp4"
    tree_copy(wheel_tree("flashinfer-python", release), derived)
    entries = derived / "flashinfer" / "_nvfp4_overlay" / "entries.py"
    entries.write_text(entries.read_text() + MM_FP4_DERIVED)
    _, patched = release_oracle.sides(release)
    side = oracle.Side(release, "patched", {**patched.inputs, "edited": "mm_fp4 derived"}, lambda: derived)
    found = explored.explore_for(side, ["mm_fp4"], results=oracle.Results(None), quick=True)
    assert found["12.0"]["mm_fp4"]["derived"]
    assert any("_stream_cache_buf holds a fake tensor" in left for left in found["12.0"]["mm_fp4"]["left"]), found


@pytest.mark.parametrize("release", by_release(RELEASES[:1]))
def test_trees_hold_python_files_only(wheel_tree: Any, release: str) -> None:
    tree: Path = wheel_tree("flashinfer-python", release, patched=False)
    assert (tree / "flashinfer" / "jit" / "cpp_ext.py").is_file()
    assert not list((tree / "flashinfer").glob("data/**/*.cu"))  # the C++ sources stay in the wheel
