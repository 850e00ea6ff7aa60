"""SGLang's own piecewise compile of a whole decoder layer at tensor parallel 2 on a CPU: probes/sglang/layer/tp_probe.py.

Two real ranks (gloo), SGLang's own process groups and sharded layers, each rank compiling its shard
with install_torch_compiled(fullgraph=True) and SGLangBackend, the GPU faked. What TP 2 adds to the
one-rank runs (test_sglang_layer.py), read from the releases' code and held to the runs here:

- the row-parallel reduce after attention's o_proj and the MoE's output reduce go through
  GroupCoordinator.all_reduce; on a GPU server (a PyNcclCommunicator exists; custom all-reduce off as
  `--disable-custom-all-reduce` sets it) the traced call is SGLang's opaque `sglang.outplace_all_reduce`
  (0.5.11: method "pynccl" inside piecewise; 0.5.20: "auto" under dynamo), never the registered split
  op `sglang.inplace_all_reduce`: the graph splits at attention only;
- with `--enable-flashinfer-allreduce-fusion` on SM100 the communicator takes its fused branch:
  the post-attention all-reduce + residual + RMSNorm is SGLang's opaque
  `sglang.flashinfer_allreduce_residual_rmsnorm` (FlashInfer's allreduce_fusion inside it); 0.5.20
  also routes the MoE reduce to its opaque `sglang.flashinfer_allreduce` (can_use_flashinfer_allreduce
  decides in plain Python while traced and reads none of FlashInfer's workspace: the workspace stand-in
  records no read by SGLang's code during the trace);
- nothing of FlashInfer's own Python is traced on the patched stack, no collective and no process of
  SGLang's or FlashInfer's runs while dynamo traces, the upstream stack fails where it fails at one
  rank (0.5.11 on SM12x at fp4_quantize's JIT loader, 0.5.20 at is_musa), the patched compiles whole.

The control runs the same wrapper at TP 1 (a world of one real rank): no all-reduce op at all, every
weight whole. Each run is kept in the result cache under the digest of its inputs. `make test` runs
the default stack's cases and 0.5.20's fused all-reduce; the rest with NVFP4_OVERLAY_FULL=1.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import FULL, PATCHES, ROOT, cache_dir, default_sglang, probe_sources_digest, sglang_flashinfer_pins

from nvfp4_overlay.oracle import probe_runner, sglang_releases
from nvfp4_overlay.wheel import fetch

pytestmark = [pytest.mark.upstream, pytest.mark.torch, pytest.mark.xdist_group("sglang-layer-tp")]  # one worker: trees once

TP_PROBE = "probes.sglang.layer.tp_probe"  # run as a module; it and every module it imports: a run's inputs
DEFAULT, LATER = default_sglang(), "0.5.20"
SM120, SM100 = (12, 0), (10, 0)
FUSION = "--allreduce-fusion"
IS_MUSA = {LATER}  # SGLang's own is_musa imports torchada under dynamo (the SGLang series' 0004)
# the upstream layer meets flashinfer.fp4_quantize raw on SM12x up to 0.5.11 (DeepSeek-V3's MoE layer has
# no FP4 linear outside SGLang's MoE op: its attention is BF16 in NVIDIA's checkpoints)
RAW_FP4 = {(DEFAULT, "qwen3-moe")}


def case(release: str, side: str, gpu: tuple[int, int], backend: str, *options: str, model: str = "qwen3-moe",
         tp: int = 2) -> Any:
    name = f"{release}-{model}-{side}-sm{gpu[0]}{gpu[1]}-{backend}" + "".join(o.replace("--", "-") for o in options)
    return pytest.param(release, side, gpu, backend, (*options, "--model", model, "--tp", str(tp)),
                        id=name + ("" if tp == 2 else f"-tp{tp}"))


ALWAYS = [
    case(DEFAULT, "upstream", SM120, "flashinfer_cutlass"),
    case(DEFAULT, "patched", SM120, "flashinfer_cutlass"),
    case(DEFAULT, "patched", SM100, "flashinfer_cutlass", FUSION),
    case(DEFAULT, "patched", SM100, "flashinfer_cutlass", FUSION, tp=1),  # the control: no reduce at one rank
    case(LATER, "upstream", SM100, "flashinfer_cutlass", FUSION),
    case(LATER, "patched", SM100, "flashinfer_cutlass", FUSION),
]
MATRIX = [case(release, "patched", gpu, backend, *options, model=model)
          for release in (DEFAULT, LATER) for model in ("qwen3-moe", "deepseek-v3")
          for gpu, backend, options in ((SM100, "flashinfer_cutlass", ()), (SM100, "flashinfer_cutlass", (FUSION,)),
                                        (SM100, "flashinfer_trtllm", ()), (SM100, "flashinfer_trtllm", (FUSION,)),
                                        (SM120, "flashinfer_cutlass", ()))]
MATRIX += [case(release, "upstream", SM120, "flashinfer_cutlass", model="deepseek-v3") for release in (DEFAULT, LATER)]
MATRIX += [case(LATER, "patched", SM100, "flashinfer_cutlass", FUSION, tp=1)]  # 0.5.20's control
CASES = ALWAYS + ([c for c in MATRIX if c.id not in {a.id for a in ALWAYS}] if FULL else [])


def tp_run(sglang: Path, flashinfer: Path, gpu: tuple[int, int], backend: str, scratch: Path,
           options: tuple[str, ...]) -> dict[str, Any]:
    """The TP probe's result for these inputs, from the result cache where it was kept."""
    import torch

    key = probe_sources_digest(TP_PROBE, sglang, flashinfer)
    key = hashlib.sha256(f"{key}\0{gpu}\0{backend}\0{options}\0{torch.__version__}".encode()).hexdigest()[:32]
    kept = cache_dir() / "sglang-layer-tp" / f"{key}.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    done = subprocess.run([sys.executable, "-m", f"nvfp4_overlay.{TP_PROBE}", str(sglang), str(flashinfer),
                           *map(str, gpu), backend, *options], capture_output=True, text=True, cwd=scratch, timeout=1200, check=False,
                          env={**os.environ, "TVM_FFI_CACHE_DIR": str(scratch / "tvm-ffi")})
    lines = done.stdout.strip().splitlines()
    if not lines:
        return {"ranks": [{"setup_error": f"the launcher exited {done.returncode}: {done.stderr[-2000:]}"}]}
    result = dict(json.loads(lines[-1]))
    if all("setup_error" not in r and "no_cuda_runtime" not in r for r in result["ranks"]):
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(result))
    return result


@pytest.fixture(scope="module")
def trees(wheel_tree: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """trees(release) -> the SGLang and FlashInfer trees of its stack, upstream and patched."""
    made: dict[str, dict[str, Path]] = {}
    releases = {r.version: r for r in sglang_releases.audit_releases(PATCHES)}
    pins = sglang_flashinfer_pins()

    def get(release: str) -> dict[str, Path]:
        if release not in made:
            wheel = sglang_releases.upstream_wheel(PATCHES, releases[release], fetch.Source(cache_dir()))
            upstream = probe_runner.unpack(wheel, tmp_path_factory.mktemp(f"sglang-tp-{release}"))
            made[release] = {
                "upstream": upstream, "patched": wheel_tree("sglang", release) if releases[release].carried else upstream,
                "flashinfer-upstream": wheel_tree("flashinfer-python", pins[release], patched=False),
                "flashinfer-patched": wheel_tree("flashinfer-python", pins[release])}
        return made[release]

    return get


def expected_reduces(release: str, gpu: tuple[int, int], options: tuple[str, ...]) -> list[str]:
    """The all-reduce ops of a MoE layer's graph at TP 2, in order: after attention, after the MoE."""
    if FUSION not in options or gpu != SM100:  # the fused branch is SM90/SM100's only
        return ["sglang.outplace_all_reduce", "sglang.outplace_all_reduce"]
    moe = "sglang.flashinfer_allreduce" if release == LATER else "sglang.outplace_all_reduce"
    return ["sglang.flashinfer_allreduce_residual_rmsnorm", moe]


@pytest.mark.parametrize(("release", "side", "gpu", "backend", "options"), CASES)
def test_each_rank_compiles_its_shard_as_its_stack_says(trees: Any, tmp_path: Path, release: str, side: str,
                                                        gpu: tuple[int, int], backend: str,
                                                        options: tuple[str, ...]) -> None:
    tree = trees(release)
    result = tp_run(tree[side], tree[f"flashinfer-{side}"], gpu, backend, tmp_path, options)
    ranks, tp = result["ranks"], int(options[options.index("--tp") + 1])
    if any("no_cuda_runtime" in r for r in ranks):
        pytest.skip(ranks[0]["no_cuda_runtime"])
    assert [r.get("setup_error") for r in ranks] == [None] * tp, ranks
    model = options[options.index("--model") + 1]
    whole = side == "patched" or (release not in IS_MUSA and not (gpu[0] == 12 and (release, model) in RAW_FP4))
    for rank, run in enumerate(ranks):
        assert (run["rank"], run["tp_rank"], run["tp_size"]) == (rank, rank, tp), run
        assert run["world"]["pynccl"] == (None if tp == 1 else {"available": False}), run["world"]
        assert run["trace_collectives"] == [], run["trace_collectives"]  # no collective ran while traced
        assert run["whole"] is whole, run.get("error")
        if not whole:  # where it fails at one rank: FlashInfer's JIT loader under fp4_quantize, or is_musa
            assert ("is_musa" in run["error"]) == (release in IS_MUSA), run["error"]
            assert "subprocess" in run["error"] or release in IS_MUSA, run["error"]
            continue
        _one_whole_rank(run, release, gpu, options, tp, model)
    if whole:  # every rank traced the same graph
        assert len({json.dumps(r["pieces"]) for r in ranks}) == 1, [r["pieces"] for r in ranks]


def _one_whole_rank(run: dict[str, Any], release: str, gpu: tuple[int, int], options: tuple[str, ...],
                    tp: int, model: str) -> None:
    pieces, ops = run["pieces"], run["ops"]
    # SGLang splits at attention only: the all-reduce's split op (inplace_all_reduce) is not what it traces
    assert "sglang.inplace_all_reduce" in run["split_ops"], run["split_ops"]
    assert [p["ops"] for p in pieces if p["split"]] == [["sglang.unified_attention_with_output"]], pieces
    assert run["collective_nodes"] == [expected_reduces(release, gpu, options) if tp > 1 else []], run
    assert run["allreduce_fusion"] is (FUSION in options and gpu == SM100), run["allreduce_fusion"]
    assert not [op for op in ops if op.startswith("flashinfer.")], ops
    assert not [f for f in run["flashinfer_frames"] if "flashinfer/_nvfp4_overlay/" not in f], run["flashinfer_frames"]
    # what SGLang's or FlashInfer's code ran while traced: nothing of FlashInfer's, nothing of the
    # communicator's; 0.5.20's QK-norm JIT build (assume_constant_result) is the one SGLang call dynamo makes
    assert not [e for e in run["trace_io"] if e[-1].startswith("flashinfer/") or "/distributed/" in e[-1]
                or "comm_fusion" in e[-1]], run["trace_io"]
    assert all(e[-1].startswith(("sglang/kernels/jit/", "sglang/kernels/ops/")) for e in run["trace_io"]), run["trace_io"]
    traced_reads = {read.removeprefix("trace:") for read in run["workspace_reads"] if read.startswith("trace:")}
    assert traced_reads <= {"__class__"}, run["workspace_reads"]  # dynamo's own look at the object, no more
    if model == "qwen3-moe":  # the row-parallel o_proj (NVFP4, 2 per byte): its 4 heads of 64 split over the ranks
        assert run["shapes"]["self_attn.o_proj.weight"] == [256, 4 * 64 // 2 // tp], run["shapes"]


def test_tp_2_differs_from_tp_1_only_by_its_reduces(trees: Any, tmp_path: Path) -> None:
    """Each TP 1 control and its TP 2 twin trace the same ops, but for the all-reduces: with the fusion the
    fused op stands where one rank's fused_add_rmsnorm stood, and the reduces are added."""
    controls = [c for c in CASES if c.id.endswith("-tp1")]
    assert controls, [c.id for c in CASES]
    for control in controls:
        release, side, gpu, backend, options = control.values
        tree = trees(release)
        one = tp_run(tree[side], tree[f"flashinfer-{side}"], gpu, backend, tmp_path, options)["ranks"][0]
        two_options = (*options[:-1], "2")
        two = tp_run(tree[side], tree[f"flashinfer-{side}"], gpu, backend, tmp_path, two_options)["ranks"][0]
        fused = "sglang.flashinfer_allreduce_residual_rmsnorm"
        reduces = set(expected_reduces(release, gpu, options)) - {fused}
        without = [["sglfake.fused_add_rmsnorm" if op == fused else op for op in p["ops"]
                    if op not in reduces] for p in two["pieces"]]
        assert without == [p["ops"] for p in one["pieces"]], (two["pieces"], one["pieces"])
        assert one["collective_nodes"] == [[]] and one["allreduce_fusion"] is two["allreduce_fusion"], one
        # what SGLang's code ran while traced does not depend on the ranks (0.5.20's QK-norm JIT lookup)
        assert {e[-1].split(":")[0] for e in one["trace_io"]} == {e[-1].split(":")[0] for e in two["trace_io"]}, (one, two)


DOC = ROOT / "docs" / "sglang-regions.md"
ROW = re.compile(r"^\| `(?P<case>[^`]+)` \| (?P<whole>yes|no[^|]*) \| (?P<ops>[^|]*) \|", re.MULTILINE)


def test_the_document_says_what_the_tp_runs_found(trees: Any, tmp_path: Path) -> None:
    """docs/sglang-regions.md's tensor-parallel table: each row's verdict and all-reduce ops are the run's."""
    text = DOC.read_text(encoding="utf-8")
    rows = list(ROW.finditer(text[text.index("## Tensor parallel"):]))
    assert {m["case"] for m in rows} == {c.id for c in ALWAYS + MATRIX}, "docs/sglang-regions.md's TP table"
    wanted = {c.id: c.values for c in CASES}
    for row in (m for m in rows if m["case"] in wanted):
        release, side, gpu, backend, options = wanted[row["case"]]
        tree = trees(release)
        run = tp_run(tree[side], tree[f"flashinfer-{side}"], gpu, backend, tmp_path, options)["ranks"][0]
        assert (row["whole"] == "yes") is run["whole"], (row["case"], run.get("error"))
        ops = [op.strip(" `") for op in row["ops"].split(",") if op.strip()]
        assert ops == (run["collective_nodes"][0] if run["collective_nodes"] else []), (row["case"], run)
