"""A corpus of upstream releases that do not exist yet: each is ported right or refused naming what and where.

Every case is the real flashinfer-python 0.7.4 wheel repacked as 0.7.5 (tests/synthetic_release.py)
with a change a release can bring, fed to ``refresh flashinfer-python 0.7.4 0.7.5 --dry-run`` from a
wheelhouse, as a maintainer (or the weekly propose run) would meet it. Nothing ships silently wrong:
a case that the series cannot carry must be refused (exit 1, or 3 for a wheel that is not what it
says) with a message that names the function, the call site or the parameter; a case it can carry
must be ported (exit 0) after the behaviour checks. The cases refused by the text (the audits, the
merge) cost a build; the two that need the probes (a reordered decorator, ported; a parameter
fp4_quantize gains, ported: its fake is upstream's wrapper) run the grid, the ladder and the explored
space, `refresh --quick`: the patched ladder's first case
of each entry point, as for a release no stack pins (every case of every carried release is
tests/releases/test_trace_flashinfer.py's; what is tested here is how refresh judges, not the cases).

The other synthetic releases live beside the code they exercise: tests/carrying/test_synthetic_releases.py
(a new call site under an alias, upstream fixing its own CUDA lookup), tests/releases/test_api_audit.py (a new
public quantizer on the same loader), tests/unit/test_merge.py (a decorator merge3 would misplace).
"""

from __future__ import annotations

import contextlib
import io
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
FP4 = "flashinfer/quantization/fp4_quantization.py"


def _sub(pattern: str, replacement: str, count: int = 1) -> Callable[[str], str]:
    """An edit that must find its pattern `count` times (0: every time, at least once)."""
    def edit(text: str) -> str:
        new, n = re.subn(pattern, replacement, text, count=count, flags=re.MULTILINE)
        assert n and (count == 0 or n == count), f"{pattern!r}: {n} matches"
        return new
    return edit


def _move_fp4_quantize(text: str) -> str:
    """fp4_quantize leaves the module (for a module of its own); the name is imported back."""
    start = text.index("@flashinfer_api(trace=fp4_quantize_trace)\ndef fp4_quantize(")
    end = text.index("\n@", start + 1)
    return text[:start] + "from .fp4_api import fp4_quantize  # noqa: E402  moved\n" + text[end:]


def _kv_decorators_swapped(text: str) -> str:
    old = ("@backend_requirement({}, common_check=_nvfp4_kv_quant_check)\n"
           "@flashinfer_api(trace=nvfp4_kv_quantize_trace)\ndef nvfp4_kv_quantize(")
    assert text.count(old) == 1
    return text.replace(old, "@flashinfer_api(trace=nvfp4_kv_quantize_trace)\n"
                             "@backend_requirement({}, common_check=_nvfp4_kv_quant_check)\ndef nvfp4_kv_quantize(")


# (id, edits, expected exit, fragments the output must hold)
CASES = [
    ("renamed-normalize-cuda-arch",
     {"flashinfer/compilation_context.py": _sub(r"_normalize_cuda_arch", "_arch_with_suffix", count=0)},
     1, ["CompilationContext._arch_with_suffix calls", "does not classify"]),
    ("new-jit-function-imports-the-check",
     {"flashinfer/jit/fp8_rowwise.py": lambda _: (
         "from .cpp_ext import is_cuda_version_at_least\n\n\ndef gen_fp8_rowwise_module():\n"
         "    return [\"-DENABLE_FP8_ROWWISE\"] if is_cuda_version_at_least(\"12.9\") else []\n")},
     1, ["flashinfer.jit.fp8_rowwise gen_fp8_rowwise_module calls is_cuda_version_at_least(\"12.9\")"]),
    ("fp4-quantize-renamed-with-an-alias",
     {FP4: lambda t: _sub(r"^def fp4_quantize\(", "def quantize_fp4(")(t) + "\n\nfp4_quantize = quantize_fp4\n"},
     1, ["fp4_quantize", "no fp4_quantize"]),
    ("fp4-quantize-moved-to-another-module",
     {FP4: _move_fp4_quantize, "flashinfer/quantization/fp4_api.py": lambda _: "def fp4_quantize(input):\n    pass\n"},
     1, ["fp4_quantize", "no fp4_quantize"]),
    ("decorators-reordered", {FP4: _kv_decorators_swapped}, 0, ["behaviour against upstream"]),
    # fp4_quantize's fake is upstream's own wrapper: a parameter it gains reaches it and the op, and the
    # explored space holds it in each state (None, False, True): ported. A hand-written fake refuses one
    # (tests/releases/test_fakes_signatures.py).
    ("fp4-quantize-gains-pack",
     {FP4: _sub(r"^(    \*,\n    batch_invariant: bool = False,\n\) -> Tuple\[torch.Tensor, torch.Tensor\]:)",
                "    pack: bool = False,\n\\1")},
     0, ["behaviour against upstream"]),
]


@pytest.fixture(scope="module")
def origin() -> Path:
    upstream = load_upstream(PATCHES, Target("flashinfer-python", "0.7.4"))
    return fetch.upstream_wheel(upstream, upstream.wheels[0], fetch.Source(cache_dir()))


def _refresh(house: Path, cache: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["refresh", "flashinfer-python", "0.7.4", NEW, "--dry-run", "--patches-dir", str(PATCHES),
                         "--overlay-dir", str(OVERLAY), "--cache-dir", str(cache), "--wheelhouse", str(house),
                         "--offline", "--quick"])
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize(("edits", "expected", "fragments"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_each_release_is_ported_right_or_refused_naming_it(origin: Path, tmp_path: Path, edits: dict[str, Callable[[str], str]],
                                                          expected: int, fragments: list[str]) -> None:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    (house / origin.name).symlink_to(origin)
    repack(origin, NEW, house, edits)
    code, output = _refresh(house, private_cache(tmp_path / "cache"))  # the shared one records what it saw
    assert code == expected, output[-3000:]
    for fragment in fragments:
        assert fragment in output, (fragment, output[-3000:])
    assert not (PATCHES / "flashinfer-python" / NEW).exists()  # --dry-run, and a refusal, write nothing


def test_a_wheel_whose_metadata_names_another_release_is_an_integrity_refusal(origin: Path, tmp_path: Path) -> None:
    """The file name says 0.7.5, METADATA says 0.7.6: exit 3, worded as integrity, nothing read from it."""
    house = tmp_path / "wheelhouse"
    house.mkdir()
    (house / origin.name).symlink_to(origin)
    built = repack(origin, NEW, tmp_path, {})
    repack(built, NEW, house, {}, metadata_version="0.7.6")
    code, output = _refresh(house, private_cache(tmp_path / "cache"))
    assert code == 3, output[-3000:]
    assert "integrity" in output and "0.7.6" in output
