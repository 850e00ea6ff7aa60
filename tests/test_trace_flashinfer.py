"""The FlashInfer trace ladder on the real wheels: upstream breaks torch.compile, patched does not.

behaviour.trace_ladder runs the probe (nvfp4_overlay/probes/flashinfer_trace.py) over the upstream
and the patched tree of every carried release, with torch 2.13 (CPU), torch.version.cuda "12.8" and
the compute capability faked as (12, 0) and (10, 0). Only the JIT build is stubbed: a module whose
kernels record the arguments they get. behaviour.trace_problems is the verdict refresh uses; the
tests below add what the report says upstream does, and controls that the verdict can fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import FULL, PATCHES, pinned_releases

from nvfp4_overlay import behaviour
from nvfp4_overlay.manifest import all_targets

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

RELEASES = [t.version for t in all_targets(PATCHES) if t.dist == "flashinfer-python"]
# Every case on the releases a stack pins (every release with NVFP4_OVERLAY_FULL=1); the first case
# of each entry point on the others.
EVERY_CASE = RELEASES if FULL else [v for v in RELEASES if v in pinned_releases("flashinfer-python")]
ROUTED = ["fp4_quantize"]


@pytest.fixture(scope="module")
def ladder(wheel_tree: Any) -> dict[str, Any]:
    def pairs(versions: list[str]) -> list[behaviour.Pair]:
        return [behaviour.Pair(v, wheel_tree("flashinfer-python", v, patched=False),
                               wheel_tree("flashinfer-python", v)) for v in versions]

    found = behaviour.trace_ladder(pairs(EVERY_CASE), ROUTED)
    rest = [v for v in RELEASES if v not in EVERY_CASE]
    if rest:
        found.update(behaviour.trace_ladder(pairs(rest), ROUTED, quick=True))
    return found


@pytest.mark.parametrize("release", RELEASES)
def test_patched_passes_the_ladder(ladder: dict[str, Any], release: str) -> None:
    assert behaviour.trace_problems(release, ladder[release], ROUTED) == []


@pytest.mark.parametrize("release", RELEASES)
def test_upstream_fullgraph_fails_on_the_nvcc_subprocess(ladder: dict[str, Any], release: str) -> None:
    for gpu, error in behaviour.upstream_fails(ladder[release], "fp4_quantize").items():
        assert error is not None, f"sm{gpu}: upstream fp4_quantize compiled with fullgraph; the report says it cannot"
        kind, message = error
        assert kind == "Unsupported"
        assert "Attempted to call function marked as skipped" in message
        # The lock subprocess.Popen allocates for `which nvcc`, reached from get_fp4_quantization_module.
        assert "_thread" in message and "allocate_lock" in message
        assert "get_fp4_quantization_module" in message


@pytest.mark.parametrize("release", EVERY_CASE)
def test_every_case_ran_on_both_gpus_with_one_opaque_op(ladder: dict[str, Any], release: str) -> None:
    patched = ladder[release]["patched"]
    for gpu in ("12.0", "10.0"):
        runs = patched[gpu]["fp4_quantize"]
        assert len(runs) >= 9, sorted(runs)
        for case, run in runs.items():
            assert run["compiled"]["targets"].count("nvfp4_overlay.flashinfer_fp4_quantize.default") == 1, case
            assert len(run["eager"]["launches"]) == 1, case  # the eager call reached the (recording) kernel
    # The positive control of the eager check: the op log does see FlashInfer's path, not ours.
    ops = patched["12.0"]["eager_ops"]["fp4_quantize"]["ops"]
    assert ops and not [op for op in ops if op.startswith("nvfp4_overlay::")], ops


@pytest.mark.parametrize("release", RELEASES)
def test_cuda_version_lookups_work_under_fullgraph(ladder: dict[str, Any], release: str) -> None:
    patched = ladder[release]["patched"]["lookups"]
    assert "error" not in patched, patched.get("error")
    assert patched["value"] == [24.0, 24.0]  # (0 + 12) * 2: 12.8 >= 12.8, < 12.9, < 13.0
    assert patched["events"] == []
    upstream = ladder[release]["upstream"]["lookups"]
    assert upstream.get("error", [None])[0] == "Unsupported"


def test_the_verdict_sees_a_fake_that_differs_and_a_parameter_left_out(ladder: dict[str, Any]) -> None:
    """Controls: the same ladder with the patched side's fake or schema broken must be refused."""
    import copy

    release = RELEASES[-1]
    broken = copy.deepcopy(ladder[release])
    run = broken["patched"]["12.0"]["fp4_quantize"]["swizzled128-sf16"]
    run["compiled"]["fake_outputs"][1][1] = [1, 1]  # the scale factors' shape
    broken["patched"]["entries"]["fp4_quantize"]["schema"] = broken["patched"]["entries"]["fp4_quantize"]["schema"][:-1]
    problems = behaviour.trace_problems(release, broken, ROUTED)
    assert any("the fake gives" in p for p in problems), problems
    assert any("would not reach the op" in p for p in problems), problems


def test_trees_hold_python_files_only(wheel_tree: Any) -> None:
    tree: Path = wheel_tree("flashinfer-python", RELEASES[0], patched=False)
    assert (tree / "flashinfer" / "jit" / "cpp_ext.py").is_file()
    assert not list((tree / "flashinfer").glob("data/**/*.cu"))  # the C++ sources stay in the wheel
