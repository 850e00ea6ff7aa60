"""The fakes, the cases and each release's signatures agree both ways, in every carried release.

Every parameter a fake reads is in the release's signature (or entries.py says the release predates
it); every parameter of the signature is read by the fake, routed on or declared as not shaping the
outputs (entries.py ``inert``); every keyword a case passes that applies to the release is in its
signature, and each entry point keeps its minimum of cases. The signatures are read from the wheels
(the routed def, where the patch decorates it); the overlay is imported from this checkout.
"""

from __future__ import annotations

import ast
import re
import sys
import types
import zipfile
from typing import Any

import pytest
from helpers import OVERLAY, PATCHES, ROOT, assemble, cache_dir, fetch_upstream, overlay_package
from packaging.version import Version

from nvfp4_overlay.audit import api_audit, api_scan
from nvfp4_overlay.patch.manifest import all_targets
from nvfp4_overlay.probes.flashinfer.tables import cases

pytestmark = [pytest.mark.torch]
RELEASES = [t.version for t in all_targets(PATCHES) if t.dist == "flashinfer-python"]
PACKAGES = ("flashinfer", "flashinfer.fused_moe", "flashinfer.norm", "flashinfer.gemm")


@pytest.fixture(scope="module")
def overlay(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The overlay's modules, imported from this checkout under a package of their own."""
    with overlay_package(tmp_path_factory.mktemp("overlay"), "fi_overlay_under_test") as opaque:
        yield opaque


def signatures(release: str, names: list[str]) -> dict[str, list[str]]:
    """name -> the parameter names of the def the patch decorates, read from the upstream wheel."""
    wheel = fetch_upstream("flashinfer-python", release, patches_dir=PATCHES, cache_dir=cache_dir())
    with zipfile.ZipFile(wheel) as zf:
        files = api_audit.scan_wheel_files({n: zf.read(n) for n in zf.namelist() if n.count("/") <= 2})
    scan = api_scan.Release(files)
    out = {}
    for name in names:
        where = next((scan.resolve(p, name) for p in PACKAGES if scan.resolve(p, name)), None)
        if where is not None:
            node = scan.node(*where)
            assert isinstance(node, ast.FunctionDef)
            a = node.args
            out[name] = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
            if any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "backend_requirement"
                   for d in node.decorator_list):
                out[name].append("skip_check")  # the keyword backend_requirement's wrapper takes
    return out


@pytest.mark.upstream
@pytest.mark.parametrize("release", RELEASES)
def test_fakes_and_cases_agree_with_the_signature(overlay: Any, release: str) -> None:
    entries = overlay.ENTRIES
    found = signatures(release, list(entries))
    assert "fp4_quantize" in found
    for name, params in found.items():
        assert overlay.disagreements(entries[name], params, Version(release)) == [], (release, name)
        if name in cases._TABLES:  # FlashInfer's own compile list has its cases in compile_cases.py, run by its probe
            layout = types.SimpleNamespace(layout_128x4=0, layout_8x4=1, layout_linear=2)
            rows = cases._TABLES[name](layout)
            assert cases.applying(name, rows, set(params), release), (release, name)
        for param, since in entries[name].since.items():  # `since` is exact: not a guess
            assert (param in params) == (Version(release) >= Version(since)), (release, name, param, since)


def test_a_parameter_a_new_release_adds_is_a_refusal_for_a_hand_written_fake(overlay: Any) -> None:
    """0.7.4's nvfp4_quantize with a 0.7.5 `pack=False` (unpacked uint8, twice as wide): its hand-written
    fake does not know it, so the entry point must not be routed; the refusal names the parameter."""
    params = signatures("0.7.4", ["nvfp4_quantize"])["nvfp4_quantize"] + ["pack"]
    problems = overlay.disagreements(overlay.ENTRIES["nvfp4_quantize"], params, Version("0.7.5"))
    assert problems and "'pack'" in problems[0] and "neither read by the fake" in problems[0]


def test_a_derived_fake_reads_every_parameter_a_release_adds(overlay: Any) -> None:
    """fp4_quantize's fake is upstream's own wrapper: a `pack` 0.7.5 adds reaches it (and the op) with
    no declaration; a declaration that only a hand-written fake takes is stale there, and said so."""
    import dataclasses

    params = signatures("0.7.4", ["fp4_quantize"])["fp4_quantize"] + ["pack"]
    entry = overlay.ENTRIES["fp4_quantize"]
    assert entry.fake is None and overlay.disagreements(entry, params, Version("0.7.5")) == []
    stale = overlay.disagreements(dataclasses.replace(entry, inert=frozenset({"pack"})), params, Version("0.7.5"))
    assert stale and "declares inert" in stale[0] and "upstream's own wrapper" in stale[0]


def test_a_renamed_parameter_fails_the_cases_and_a_hand_written_fake(overlay: Any) -> None:
    """Upstream renames a parameter: the layout rows must not vanish (fp4_quantize's case table), and a
    hand-written fake (nvfp4_quantize's) must not silently take its default."""
    params = [p if p != "is_sf_swizzled_layout" else "is_sf_swizzled" for p in
              signatures("0.7.4", ["fp4_quantize"])["fp4_quantize"]]
    with pytest.raises(cases.CaseTableError, match="is_sf_swizzled_layout"):
        cases.applying("fp4_quantize", cases._TABLES["fp4_quantize"](None), set(params), "0.7.5")
    renamed = [p if p != "sf_vec_size" else "block_size" for p in
               signatures("0.7.4", ["nvfp4_quantize"])["nvfp4_quantize"]]
    problems = overlay.disagreements(overlay.ENTRIES["nvfp4_quantize"], renamed, Version("0.7.5"))
    assert any("'sf_vec_size'" in p for p in problems) and any("'block_size'" in p for p in problems)


def test_a_table_under_its_minimum_is_refused() -> None:
    rows = cases._TABLES["nvfp4_kv_quantize"](None)[:2]
    with pytest.raises(cases.CaseTableError, match="fewer than 3"):
        cases.applying("nvfp4_kv_quantize", rows, {"input", "global_scale", "skip_check"}, "0.7.4")


def test_no_fake_swallows_keywords() -> None:
    text = (OVERLAY / "flashinfer-python" / "flashinfer" / "_nvfp4_overlay" / "fakes.py").read_text()
    tree = ast.parse(text)
    assert not [f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.args.kwarg], text[:0]
    assert (ROOT / "src").is_dir()


def test_a_host_float_scale_travels_as_a_tensor_and_comes_back_a_float(overlay: Any) -> None:
    """nvfp4_quantize's a_global_sf: a float reaches upstream as the float (SGLang 0.5.13-0.5.15 pass
    one per token); a caller's own 0-dim float64 CPU tensor, which would come back a float, is refused."""
    import torch

    entries = sys.modules["fi_overlay_under_test._nvfp4_overlay.entries"]
    codec = entries.ENTRIES["nvfp4_quantize"].codecs["a_global_sf"]
    code = codec.encode({}, 1.0 / 2688.0)
    assert isinstance(code, torch.Tensor) and codec.accepts({}, 1.0 / 2688.0)
    back = codec.decode({}, code)
    assert type(back) is float and back == 1.0 / 2688.0
    scale = torch.tensor([2.0])
    assert codec.accepts({}, scale) and codec.decode({}, codec.encode({}, scale)) is scale
    assert not codec.accepts({}, torch.tensor(2.0, dtype=torch.float64))
    assert not codec.accepts({}, 2)  # an int takes upstream's path


def _slots(result: Any) -> tuple[Any, ...]:
    """The top level of what upstream returns (a Result's tree)."""
    tree = result.tree
    return tree[1] if isinstance(tree, tuple) else (tree,)


def test_per_token_returns_three_tensors(overlay: Any) -> None:
    entry = overlay.ENTRIES["nvfp4_quantize"]
    assert _slots(entry.result_for({"per_token_activation": True})) == ("Tensor", "Tensor", "Tensor")
    assert _slots(entry.result_for({"per_token_activation": False})) == ("Tensor", "Tensor")
    assert _slots(entry.result_for({})) == ("Tensor", "Tensor")  # before 0.6.11: no such parameter


def test_a_nested_result_with_host_floats_round_trips(overlay: Any) -> None:
    """nvfp4_quantize_paged_kv_cache's ((k, v), (k_sf, v_sf), float, float): the op's fresh outputs
    are the four tensors in order and the floats as 0-dim float64 CPU tensors; assembled back, the
    caller gets upstream's nesting and the same floats (not tensors)."""
    import torch

    result = overlay.ENTRIES["nvfp4_quantize_paged_kv_cache"].result
    k, v, k_sf, v_sf = (torch.zeros(i + 1) for i in range(4))
    fresh = result.fresh({}, ((k, v), (k_sf, v_sf), 0.125, 1.0 / 3.0))
    assert [t for t in fresh[:4]] == [k, v, k_sf, v_sf] and all(a is b for a, b in zip(fresh, (k, v, k_sf, v_sf)))
    assert [(t.shape, t.dtype, t.device.type) for t in fresh[4:]] == [((), torch.float64, "cpu")] * 2
    back = assemble(result, {}, fresh)
    assert back[0][0] is k and back[0][1] is v and back[1][0] is k_sf and back[1][1] is v_sf
    assert back[2:] == (0.125, 1.0 / 3.0) and all(type(x) is float for x in back[2:])
    with pytest.raises(RuntimeError, match="returned 3 values"):
        result.fresh({}, ((k, v), (k_sf, v_sf), 0.5))
    # the forms the other entry points use are unchanged
    assert assemble(overlay.ENTRIES["rmsnorm_quant"].result, {}, []) is None
    out = torch.zeros(2)
    mm = overlay.ENTRIES["mm_fp4"].result
    assert mm.fresh({"out": out}, out) == [] and assemble(mm, {"out": out}, []) is out


def test_a_custom_ops_float_output_is_the_fakes_constant_to_dynamo() -> None:
    """Why a host float travels as a tensor (entries.py, Result "float"): dynamo hands the caller of a
    custom op declared to return a float the fake's value, baked into the graph, whatever the data.
    If a torch stops doing so, this fails, and the carrier could go."""
    import torch

    @torch.library.custom_op("nvfp4_overlay_test::amax_float", mutates_args=(), schema="(Tensor x) -> (Tensor, float)")
    def amax_float(x: torch.Tensor) -> tuple[torch.Tensor, float]:
        return x.clone(), float(x.abs().amax().item())

    @amax_float.register_fake
    def _(x: torch.Tensor) -> tuple[torch.Tensor, float]:
        return torch.empty_like(x), 1.0

    def call(x: torch.Tensor) -> float:
        return amax_float(x)[1]

    torch._dynamo.reset()
    assert call(torch.full((3,), 5.0)) == 5.0  # eager: the data's
    assert torch.compile(call, fullgraph=True, backend="eager")(torch.full((3,), 5.0)) == 1.0  # the fake's


def test_the_overlay_ships_only_what_runs() -> None:
    """Every function the overlay defines is called by the overlay or by a patch (op_of: its public
    look-up of a routed entry point's op, for callers); what only a test calls lives in tests/."""
    texts = {p: p.read_text() for p in (OVERLAY / "flashinfer-python" / "flashinfer" / "_nvfp4_overlay").glob("*.py")}
    patches = "".join(p.read_text(errors="replace") for p in (PATCHES / "flashinfer-python").glob("*/*.patch"))
    unused = []
    for path, text in sorted(texts.items()):
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("__") and node.name != "op_of":
                uses = sum(len(re.findall(rf"\b{node.name}\b", t)) for t in texts.values())
                if uses <= 1 and node.name not in patches:
                    unused.append(f"{path.name}: {node.name}")
    assert unused == []
