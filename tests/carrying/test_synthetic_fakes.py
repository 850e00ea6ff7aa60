"""Releases whose allocation changes where no case looked: a size threshold, a NamedTuple, an arity by value.

Each is the real 0.7.4 wheel repacked as 0.7.5 (tests/synthetic_release.py) with one edit to
fp4_quantize (flashinfer/quantization/fp4_quantization.py), none touching a line the series holds to,
each ported by ``refresh --quick`` with exit 0 while the fakes were hand-kept copies of upstream's
allocation (issue 41), and each behaving otherwise compiled than eagerly:

- ``sf-256-rows-from-1024``: the swizzled scale factors padded to 256 rows once the input has 1024 rows
  or more (in the kernel wrapper its module getter defines): at 1100 rows eager returns (1280, 16), the
  compiled graph was traced for (1152, 16);
- ``named-tuple``: fp4_quantize returns a NamedTuple; compiled, a plain tuple (``r.sf`` breaks);
- ``scale-returned-without-global-scale``: with global_scale=None (NVFP4), a third tensor, the scale
  upstream computed; compiled, "upstream returned 3 values, entries.py says (Tensor, Tensor)".

Now fp4_quantize's fake is upstream's own wrapper: on the patched 0.7.5 tree (the 0.7.4 series, this
checkout's overlay) its compiled call returns what its eager call returns at the sizes and arguments
that differ, with the GPU faked as the probes fake it. refresh ports the NamedTuple and the arity (every
entry point's fake agrees with upstream's wrapper over the explored space), and refuses the threshold
by nvfp4_quantize, whose fake is written by hand and calls the old rule: the refusal names the entry
point, the explored call and both answers.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import OVERLAY, PATCHES, cache_dir, private_cache, run_python
from synthetic_release import repack

from nvfp4_overlay import cli
from nvfp4_overlay.oracle import probe_runner
from nvfp4_overlay.patch.manifest import Target, load_upstream
from nvfp4_overlay.wheel import build, fetch

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

NEW = "0.7.5"
FP4 = "flashinfer/quantization/fp4_quantization.py"


def _replace(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert text.count(old) == 1, old
        return text.replace(old, new)
    return edit


_THRESHOLD = _replace("m, k // sf_vec_size, 8 if is_sf_8x4_layout else 128\n",
                      "m, k // sf_vec_size, 8 if is_sf_8x4_layout else (256 if m >= 1024 else 128)\n")
_TAIL = """    if is_column_major:
        x_q = x_q.transpose(-2, -1)
        sf = sf.transpose(-2, -1)

    return x_q, sf
"""


_NAMED = """

from typing import NamedTuple  # noqa: E402


class FP4Quantized(NamedTuple):
    x_q: torch.Tensor
    sf: torch.Tensor
"""


def _named_tuple(text: str) -> str:
    return _replace(_TAIL, _TAIL.replace("return x_q, sf", "return FP4Quantized(x_q, sf)"))(text) + _NAMED


_ARITY = _replace(_TAIL, _TAIL.replace(
    "    return x_q, sf\n",
    "    if global_scale is None and not sf_use_ue8m0:  # NVFP4 without a global scale: the one computed\n"
    "        return x_q, sf, torch.ones((1,), dtype=torch.float32, device=x_q.device)\n"
    "    return x_q, sf\n"))

CASES: dict[str, Callable[[str], str]] = {
    "sf-256-rows-from-1024": _THRESHOLD,
    "named-tuple": _named_tuple,
    "scale-returned-without-global-scale": _ARITY,
}


@pytest.fixture(scope="module")
def origin() -> Path:
    upstream = load_upstream(PATCHES, Target("flashinfer-python", "0.7.4"))
    return fetch.upstream_wheel(upstream, upstream.wheels[0], fetch.Source(cache_dir()))


def _house(origin: Path, tmp_path: Path, case: str) -> Path:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    (house / origin.name).symlink_to(origin)
    repack(origin, NEW, house, {FP4: CASES[case]})
    return house


def _refresh(house: Path, cache: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["refresh", "flashinfer-python", "0.7.4", NEW, "--dry-run", "--quick", "--patches-dir",
                         str(PATCHES), "--overlay-dir", str(OVERLAY), "--cache-dir", str(cache), "--wheelhouse",
                         str(house), "--offline"])
    return code, out.getvalue() + err.getvalue()


def _patched_tree(house: Path, cache: Path, tmp_path: Path) -> Path:
    """The synthetic release built with the 0.7.4 series as it stands (what refresh would write), unpacked."""
    series = tmp_path / "patches" / "flashinfer-python" / NEW
    shutil.copytree(PATCHES / "flashinfer-python" / "0.7.4", series)
    (wheel,) = house.glob(f"*-{NEW}-*.whl")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (series / "upstream.toml").write_text(f'revision = 3\n\n[[wheel]]\nfilename = "{wheel.name}"\nsha256 = "{digest}"\n')
    source = fetch.Source(cache, wheelhouse=house, offline=True)
    options = build.Options(tmp_path / "patches", OVERLAY, tmp_path / "dist", source)
    (built,) = build.build_targets([Target("flashinfer-python", NEW)], options)
    return probe_runner.unpack(built.wheel, tmp_path / "tree")


# Eager against compiled, in a child with the GPU faked as the trace ladder fakes it (SM100).
EAGER_AND_COMPILED = r'''
import json, os, sys, tempfile
from pathlib import Path
import torch
from nvfp4_overlay.probes.flashinfer import flashinfer_trace
from nvfp4_overlay.probes.flashinfer.stubs import serving_stubs
from nvfp4_overlay.probes.flashinfer.tables import space
from nvfp4_overlay.probes.toolkit import make_toolkit
torch.version.cuda = "12.8"
os.environ["CUDA_HOME"] = str(make_toolkit(Path(tempfile.mkdtemp()), "12.8"))
import flashinfer
from flashinfer.jit import core
box = flashinfer_trace.Box(os.path.dirname(flashinfer.__file__))
flashinfer_trace._stub_kernels(core, box)
serving_stubs.install(box)
torch.Tensor.cuda = lambda self, *a, **k: self
flashinfer_trace._fake_capability((10, 0))
out = {}
for rows, scale, field in CALLS:
    x = torch.randn(rows, 256, dtype=torch.bfloat16)
    s = torch.tensor([2.0]) if scale else None
    call = (lambda x, s: getattr(flashinfer.fp4_quantize(x, s), field)) if field else flashinfer.fp4_quantize
    torch._dynamo.reset()
    answers = []
    for run in (call, torch.compile(call, fullgraph=True, backend="aot_eager")):
        try:
            answers.append(space.exact(run(x, s)))
        except Exception as exc:
            answers.append({"error": [type(exc).__name__, str(exc)[:300]]})
    out[f"{rows}-{scale}-{field}"] = answers
json.dump(out, sys.stdout)
'''


def _eager_and_compiled(house: Path, cache: Path, tmp_path: Path,
                        calls: list[tuple[int, bool, str | None]]) -> dict[str, Any]:
    """Each call's eager and compiled answer on the patched synthetic release, kept under the digest of
    everything that makes it (the synthetic wheel, the 0.7.4 series, the overlay, the engine, the probes'
    sources, this script, torch): the same bytes each run, so a warm run builds nothing."""
    import torch

    from nvfp4_overlay.oracle import oracle

    (wheel,) = house.glob(f"*-{NEW}-*.whl")
    script = f"CALLS = {calls!r}\n" + EAGER_AND_COMPILED
    inputs = [hashlib.sha256(wheel.read_bytes()).hexdigest(), oracle.digest_tree(PATCHES / "flashinfer-python" / "0.7.4"),
              oracle.digest_tree(OVERLAY / "flashinfer-python"), oracle.engine_digest(), oracle.probe_digest("fake_space"),
              script, torch.__version__]
    kept = cache_dir() / "synthetic-fakes" / f"{hashlib.sha256(chr(0).join(inputs).encode()).hexdigest()[:32]}.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    done = run_python(script, [_patched_tree(house, cache, tmp_path)])
    assert done.returncode == 0, done.stderr[-3000:]
    found = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps(found))
    return found


@pytest.mark.parametrize("case", ["named-tuple", "scale-returned-without-global-scale"])
def test_a_result_type_or_arity_upstream_changes_is_ported_and_followed(origin: Path, tmp_path: Path,
                                                                        case: str) -> None:
    house, cache = _house(origin, tmp_path, case), private_cache(tmp_path / "cache")
    code, output = _refresh(house, cache)
    assert code == 0, output[-3000:]
    calls = ([(40, True, None), (40, True, "sf")] if case == "named-tuple" else [(40, False, None), (40, True, None)])
    found = _eager_and_compiled(house, cache, tmp_path, calls)
    for call, (eager, compiled) in found.items():
        assert "error" not in eager and compiled == eager, (call, eager, compiled)
    if case == "named-tuple":
        assert found["40-True-None"][0][0] == "FP4Quantized" and found["40-True-None"][0][2] == ["x_q", "sf"]
    else:
        assert len(found["40-False-None"][0][1]) == 3 and len(found["40-True-None"][0][1]) == 2


def test_a_size_threshold_is_followed_by_the_derived_fake_and_refused_by_a_hand_written_one(
        origin: Path, tmp_path: Path) -> None:
    house, cache = _house(origin, tmp_path, "sf-256-rows-from-1024"), private_cache(tmp_path / "cache")
    code, output = _refresh(house, cache)
    assert code == 1, output[-3000:]
    assert re.search(r"0\.7\.5: sm120: nvfp4_quantize \[swizzled128@m=10(2[4-9]|[3-9]\d)\]: the fake gives .*"
                     r"\[1152, 16\].*, upstream's wrapper .*\[1280, 16\]", output), output[-3000:]
    assert not re.search(r": fp4_quantize \[[^]]*\]: the fake gives", output), output[-3000:]  # derived: follows
    found = _eager_and_compiled(house, cache, tmp_path, [(1100, True, None), (1023, True, None)])
    assert found["1100-True-None"][0][1][1][1] == [1280, 16]  # the new padding, eagerly
    for call, (eager, compiled) in found.items():
        assert compiled == eager, (call, eager, compiled)
