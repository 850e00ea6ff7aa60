"""The launch-line table against SGLang's own code: every release's matrix resolved by its parser, ServerArgs
and model runner (probes/sglang/sglang_launch.py, over the pinned wheels unpacked) equals
patches/sglang/audit-launch.json, which doctor's tables are rendered from; and the classes of launch lines
the static table of before answered wrong, held to that resolution.

Each release's resolution is kept in the result cache under the digest of its inputs (the probe's and
its modules' sources, the matrix and its models, both pinned wheels, torch's version), as the layer
tests keep theirs. `make test` resolves the default stack's release and 0.5.20 (about a minute each,
cold); NVFP4_OVERLAY_FULL=1 every release 0.5.8-0.5.23.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from helpers import FULL, PATCHES, ROOT, cache_dir, default_sglang, sources_digest

from nvfp4_overlay.audit import sglang_launch, sglang_launch_table
from nvfp4_overlay.oracle import sglang_launch_runs, sglang_releases
from nvfp4_overlay.wheel import fetch

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

RELEASES = {r.version: r for r in sglang_releases.audit_releases(PATCHES)}
ALWAYS = (default_sglang(), "0.5.20")
TABLE = sglang_launch_table.load(PATCHES)
SOURCES = ROOT / "src" / "nvfp4_overlay"
INPUTS = (SOURCES / "probes" / "sglang", SOURCES / "probes" / "forking.py", SOURCES / "audit" / "sglang_launch.py",
          SOURCES / "audit" / "sglang_models.py", SOURCES / "oracle" / "sglang_launch_runs.py")


def resolved(release: str) -> dict[str, Any]:
    """The release's matrix as its own code resolves it, kept under the digest of everything that makes it."""
    import torch

    source = fetch.Source(cache_dir())
    wheel = sglang_releases.upstream_wheel(PATCHES, RELEASES[release], source)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    key = hashlib.sha256(f"{sources_digest(*INPUTS)}\0{digest}\0{json.dumps(sglang_launch.matrix())}\0"
                         f"{torch.__version__}".encode()).hexdigest()[:32]
    kept = cache_dir() / "sglang-launch" / f"{key}.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    entry = sglang_launch_runs.resolve_release(PATCHES, RELEASES[release], source)
    if not any("probe_error" in line for line in entry["lines"].values()):  # news, not a fact to keep
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(entry))
    return entry


@pytest.mark.parametrize("release", [pytest.param(v, marks=pytest.mark.xdist_group(f"sglang-launch-{v}"))
                                     for v in RELEASES if FULL or v in ALWAYS])
def test_the_committed_table_is_what_each_release_resolves(release: str) -> None:
    """Every line of the matrix, as the release's own code answers it, is the committed answer doctor's
    tables show; no line fails in the probe (a stand-in the release would need is news)."""
    fresh = resolved(release)
    failed = {k: v["probe_error"] for k, v in fresh["lines"].items() if "probe_error" in v}
    assert not failed, failed
    assert TABLE["releases"].get(release) == fresh, "run `make sglang-launch-table` (launch-table --resolve)"


def _entry(release: str, key: str) -> dict[str, Any]:
    entry = sglang_launch_table.answer(TABLE, release, key)
    assert entry is not None, (release, key)
    return entry


# The classes of launch lines the static table (audit/sglang_launch.py before) answered wrong, each as SGLang's
# own code answers it (the committed table, held above to the resolution): (release, line, fullgraph, where).
CLASSES = [
    # from 0.5.14 an explicitly chosen prefill backend skips every auto-disable rule (DP attention here)
    ("0.5.16", "qwen3-moe/sm120/prefill-tc_piecewise+dp-attention", True, "_parse_cuda_graph_config"),
    ("0.5.20", "qwen3-moe/sm120/prefill-tc_piecewise+dp-attention", True, "cuda_graph_hook.py"),
    ("0.5.20", "qwen3-moe/sm120/prefill-tc_piecewise+speculative-ngram", True, "cuda_graph_hook.py"),
    # --cuda-graph-config JSON is SGLang's highest precedence
    ("0.5.16", "qwen3-moe/sm120/config-json-tc_piecewise", True, ""),
    ("0.5.21", "qwen3-moe/sm120/config-json-tc_piecewise", True, "cuda_graph_hook.py"),
    # GLM-5 compiles by default on 0.5.13-0.5.14: no NSA/DSA exclusion in their code; 0.5.9 with the opt-in
    ("0.5.13", "glm-5/sm120/plain", True, "the default"),
    ("0.5.14", "glm-5/sm120/plain", True, ""),
    ("0.5.9", "glm-5/sm120/enable-piecewise", True, "the flag --enable-piecewise-cuda-graph"),
    # 0.5.10 turns the region off for speculative decoding; 0.5.11's breakable graph replaces the compiled runner
    ("0.5.10", "qwen3-moe/sm120/speculative-ngram", False, "server_args.py"),
    ("0.5.11", "qwen3-moe/sm120/breakable-graph", False, "the flag --enable-breakable-cuda-graph"),
    # 0.5.8-0.5.9 have no DP-attention or flashinfer_trtllm rule: the opt-in compiles with them
    ("0.5.9", "deepseek-v3/sm120/enable-piecewise", True, "the flag"),
]


@pytest.mark.parametrize(("release", "key", "fullgraph", "where"), CLASSES,
                         ids=[f"{c[0]}-{c[1].replace('/', '-')}" for c in CLASSES])
def test_sglang_decides_what_the_static_table_got_wrong(release: str, key: str, fullgraph: bool, where: str) -> None:
    entry = _entry(release, key)
    assert entry.get("fullgraph") is fullgraph, entry
    assert where in entry["rule"], entry["rule"]


def test_a_removed_flag_is_refused_in_sglang_words() -> None:
    """0.5.22 refuses tc_piecewise in its parser (no fullgraph region there); 0.5.8 has no prefill backend flag."""
    assert _entry("0.5.22", "qwen3-moe/sm120/prefill-tc_piecewise")["refused"] == "flag"
    assert "tc_piecewise" in _entry("0.5.22", "qwen3-moe/sm120/prefill-tc_piecewise")["message"]
    assert "unrecognized arguments" in _entry("0.5.8", "qwen3-moe/sm120/prefill-tc_piecewise")["message"]
    assert _entry("0.5.11", "minimax-m3/sm120/plain")["refused"] == "architecture"
