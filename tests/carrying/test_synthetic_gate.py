"""Releases that apply exact and would ship wrong: a new lookup call, a patch made inert, a shape rule.

Each is the real flashinfer-python 0.7.4 wheel repacked as 0.7.5 (tests/synthetic_release.py) with one
change upstream could make without touching a line the series holds to, so that every hunk applies
exact; each was ported by ``refresh`` (exit 0) and called exact by ``drift`` before the gate looked
at calls, bindings and shapes:

- a second CUDA-version call inside a function the audit answers from torch (``_heuristic_func_mm_fp4``,
  mm_fp4's backend order): classified by its function, it got torch's release unreviewed;
- ``get_cuda_version`` and ``is_cuda_version_at_least`` re-bound below the defs patch 0001 decorates,
  to lookups that read the toolkit's files: callers reach upstream's new lookups (nvcc gets upstream's
  flags), which do not trace under fullgraph;
- fp4_quantize's scale factors keep a 3-D input's leading dimensions: the ladder's cases are 2-D, so
  the fake's old rule went unseen and a compiled graph would be built on a shape the run does not return.
  fp4_quantize's fake is now upstream's wrapper, which follows the rule; nvfp4_quantize's, written by
  hand, calls the old one, and is refused.

Now drift lists the new call and calls 0001 inert, and refresh refuses each naming the call or the
name; the shape rule is refused by the fakes probed against upstream's wrapper at every rank
(probes/flashinfer/fake_shapes.py), after the grid and the quick ladder pass (the one case here that probes).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import OVERLAY, PATCHES, cache_dir, private_cache
from synthetic_release import repack

from nvfp4_overlay import cli
from nvfp4_overlay.patch.manifest import Target, load_upstream
from nvfp4_overlay.wheel import fetch

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

NEW = "0.7.5"
GEMM = "flashinfer/gemm/gemm_base.py"
CPP_EXT = "flashinfer/jit/cpp_ext.py"


def _new_call_in_a_run_time_function(text: str) -> str:
    """mm_fp4's backend heuristic (a run-time site, torch's release) gains a lookup that names an nvcc target."""
    start = text.index("def _heuristic_func_mm_fp4(")
    at = text.index("    if batch_invariant:\n", start)
    new = '    sm120_target = "120f" if get_cuda_version().minor >= 9 else "120a"  # the toolkit compiles it\n'
    return text[:at] + new + text[at:]


REBOUND = "get_cuda_version = _toolkit_cuda_version"


def _lookup_rebound(text: str) -> str:
    """Upstream's new lookups read the toolkit's version.json; the old defs stay, the names are re-bound
    (both: so that nvcc gets upstream's flags in every toolkit layout, and only the trace tells)."""
    return text + f'''

@functools.cache
def _toolkit_cuda_version() -> Version:
    import json

    try:
        with open(os.path.join(get_cuda_path(), "version.json")) as f:
            return Version(".".join(json.load(f)["cuda"]["version"].split(".")[:2]))
    except (OSError, RuntimeError, KeyError, ValueError):
        return Version(torch.version.cuda or "0")


def _is_cuda_version_at_least_from_toolkit(version_str: str) -> bool:
    return _toolkit_cuda_version() >= Version(version_str)


{REBOUND}
is_cuda_version_at_least = _is_cuda_version_at_least_from_toolkit
'''


FP4 = "flashinfer/quantization/fp4_quantization.py"
_SF_TAIL = """    if is_column_major:
        x_q = x_q.transpose(-2, -1)
        sf = sf.transpose(-2, -1)
"""


def _sf_keeps_leading_dims(text: str) -> str:
    """fp4_quantize's scale factors keep a 3-D (or 4-D) input's leading dimensions; no new parameter."""
    start = text.index("def fp4_quantize(")
    at = text.index(_SF_TAIL, start) + len(_SF_TAIL)
    return text[:at] + """    if input.dim() > 2:  # one block of scale factors per leading index
        sf = sf.reshape(*input.shape[:-2], -1, sf.shape[-1])
""" + text[at:]


CASES: dict[str, dict[str, Callable[[str], str]]] = {
    "sf-keeps-the-leading-dimensions": {FP4: _sf_keeps_leading_dims},
    "new-call-in-a-run-time-function": {GEMM: _new_call_in_a_run_time_function},
    "lookup-rebound-below-the-patched-def": {CPP_EXT: _lookup_rebound},
}


@pytest.fixture(scope="module")
def origin() -> Path:
    upstream = load_upstream(PATCHES, Target("flashinfer-python", "0.7.4"))
    return fetch.upstream_wheel(upstream, upstream.wheels[0], fetch.Source(cache_dir()))


def _house(origin: Path, tmp_path: Path, case: str) -> Path:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    (house / origin.name).symlink_to(origin)
    repack(origin, NEW, house, CASES[case])
    return house


def _cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue() + "\n" + err.getvalue()


def _inputs(house: Path, cache: Path) -> list[str]:
    return ["--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--cache-dir", str(cache),
            "--wheelhouse", str(house), "--offline"]


def _drift(house: Path, cache: Path) -> tuple[int, dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(["drift", "--dist", "flashinfer-python", "--against", NEW, "--json", *_inputs(house, cache)])
    return code, json.loads(out.getvalue())


def _refresh(house: Path, cache: Path) -> tuple[int, str]:
    return _cli("refresh", "flashinfer-python", "0.7.4", NEW, "--dry-run", "--quick", *_inputs(house, cache))


def _cell(report: dict) -> dict:
    return next(c for c in report["cells"] if c["series"] == "0.7.4" and c["release"] == NEW)


def test_drift_names_a_new_call_inside_an_audited_function(origin: Path, tmp_path: Path) -> None:
    code, report = _drift(_house(origin, tmp_path, "new-call-in-a-run-time-function"), private_cache(tmp_path / "c"))
    assert {p["state"] for p in _cell(report)["patches"]} <= {"exact", "offset"}  # the text ports
    (calls,) = report["new_cuda_calls"].values()
    assert len(calls) == 1 and "flashinfer.gemm.gemm_base _heuristic_func_mm_fp4 calls get_cuda_version()" in calls[0]
    assert "other calls the audit answers torch" in calls[0] and "add its entry" in calls[0]
    assert code == 1


def test_refresh_refuses_a_new_call_inside_an_audited_function(origin: Path, tmp_path: Path) -> None:
    house = _house(origin, tmp_path, "new-call-in-a-run-time-function")
    code, output = _refresh(house, private_cache(tmp_path / "c"))
    assert code == 1, output[-3000:]
    assert re.search(r"0\.7\.5: flashinfer\.gemm\.gemm_base _heuristic_func_mm_fp4 calls get_cuda_version\(\)"
                     r"( \(the call of that text number 2 in it\))?, which .* does not classify", output), output[-3000:]
    assert not (PATCHES / "flashinfer-python" / NEW).exists()


def test_drift_calls_a_rebound_lookup_inert(origin: Path, tmp_path: Path) -> None:
    code, report = _drift(_house(origin, tmp_path, "lookup-rebound-below-the-patched-def"), private_cache(tmp_path / "c"))
    patch = next(p for p in _cell(report)["patches"] if p["patch"].startswith("0001"))
    assert patch["state"] == "inert", patch
    assert f"flashinfer.jit.cpp_ext.get_cuda_version resolves to `{REBOUND}`" in json.dumps(patch)
    assert code == 1


def test_refresh_refuses_a_rebound_lookup_as_inert(origin: Path, tmp_path: Path) -> None:
    code, output = _refresh(_house(origin, tmp_path, "lookup-rebound-below-the-patched-def"), private_cache(tmp_path / "c"))
    assert code == 1, output[-3000:]
    assert "0001-cuda-version-without-subprocess.patch: inert: 0.7.5: flashinfer.jit.cpp_ext.get_cuda_version " \
           f"resolves to `{REBOUND}`" in output, output[-3000:]
    assert "move the decorator line onto the object the name now binds" in output


def test_refresh_refuses_a_shape_rule_a_hand_written_fake_does_not_know(origin: Path, tmp_path: Path) -> None:
    """fp4_quantize's own fake is upstream's wrapper, which follows the new rule; nvfp4_quantize's is
    written by hand (entries.py says why) and calls fp4_quantize's rule as it was: refused, by name."""
    code, output = _refresh(_house(origin, tmp_path, "sf-keeps-the-leading-dimensions"), private_cache(tmp_path / "c"))
    assert code == 1, output[-3000:]
    assert re.search(r"0\.7\.5: sm1[02]0: nvfp4_quantize \[backend-cuda@3d\]: the fake gives .*\[128, 16\].*, "
                     r"upstream's wrapper .*\[2, 64, 16\]", output), output[-3000:]
    assert not re.search(r": fp4_quantize \[[^]]*\]: the fake gives", output), output[-3000:]
    assert "port it into the overlay's fakes.py" in output
