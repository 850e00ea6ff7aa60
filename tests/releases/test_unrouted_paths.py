"""The calls the overlay leaves on upstream's path while dynamo traces, on the real patched wheels.

entries.py routes the serving MoE entry points only for what their fakes are held to: the finalized
trtllm-gen MoE (``do_finalize=False`` returns rows whose count depends on the routing and the
tactic's tile), without ``gemm1_lora_delta`` (two more outputs the kernel sizes), and
cutlass_fused_moe with the CUTLASS backend and an ``ActivationType`` member. Any other call must
reach upstream's function while dynamo traces, and so fail under fullgraph where upstream fails (in
the JIT or cubin loader), never go through an op whose fake would lie. Each check has its control:
the same case with the routed value compiles to the op. The probe's stubs (probes/flashinfer/stubs/serving_stubs.py)
stand in for the GPU, as in the trace ladder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import by_release, run_python

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

# (entry point, ladder case of probes/flashinfer/tables/cases.py, keyword arguments that leave the op, from release)
UNROUTED = [
    ("trtllm_fp4_block_scale_moe", "finalize", "{'do_finalize': False}", "0.6.1"),
    ("trtllm_fp4_block_scale_routed_moe", "finalize", "{'do_finalize': False}", "0.6.1"),
    ("trtllm_fp4_block_scale_routed_moe", "finalize",
     "{'gemm1_lora_delta': torch.zeros(40, 256, dtype=torch.bfloat16)}", "0.6.18"),
    ("cutlass_fused_moe", "nvfp4", "{'activation_type': 3}", "0.6.1"),
    ("cutlass_fused_moe", "nvfp4", "{'backend': 'cake'}", "0.7.1"),
]

PROBE = """
import json, os, sys, tempfile
import torch
from nvfp4_overlay.probes.flashinfer import flashinfer_trace as ft
from nvfp4_overlay.probes.flashinfer.stubs import serving_stubs
from nvfp4_overlay.probes.flashinfer.tables import cases
torch.version.cuda = "12.8"
os.environ["FLASHINFER_WORKSPACE_BASE"] = tempfile.mkdtemp()
import flashinfer
import flashinfer.fused_moe
from flashinfer.jit import core as jit_core
tree = os.path.dirname(os.path.dirname(flashinfer.__file__))
box = ft.Box(os.path.dirname(flashinfer.__file__))
ft._stub_kernels(jit_core, box)
serving_stubs.install(box)
torch.Tensor.cuda = lambda self, *a, **k: self
torch.cuda.current_device = lambda: 0
ft._fake_capability((10, 0))
out = []
for name, case, extra in json.loads(sys.argv[1]):
    fn = getattr(flashinfer.fused_moe, name)
    args, kwargs = dict(cases.cases(name, fn, release=flashinfer.__version__))[case](torch)
    for variant in ({}, eval(extra)):
        targets = []

        def backend(gm, example_inputs):
            targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
            return gm.forward

        torch._dynamo.reset()
        call = {**kwargs, **variant}
        try:
            torch.compile(lambda *a: fn(*a, **call), fullgraph=True, backend=backend)(*args)
            out.append({"targets": targets})
        except Exception as exc:
            out.append({"error": ft.error_summary(exc, tree)})
print(json.dumps(out))
"""


def _probe(tree: Any, checks: list[tuple[str, str, str]], tmp: Path) -> list[dict[str, Any]]:
    # The probe's workspace and the stubs' cubin cache (tempfile) land under the test's own tmp_path.
    done = run_python(PROBE.replace("sys.argv[1]", repr(json.dumps(checks))), [tree], env={"TMPDIR": str(tmp)},
                      timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("release", by_release(["0.6.1", "0.7.4"]))
def test_what_no_fake_holds_takes_upstreams_path(wheel_tree: Any, release: str, tmp_path: Path) -> None:
    from packaging.version import Version

    checks = [(n, c, e) for n, c, e, since in UNROUTED if Version(release) >= Version(since)]
    found = _probe(wheel_tree("flashinfer-python", release), checks, tmp_path)
    for (name, case, extra), routed, unrouted in zip(checks, found[::2], found[1::2]):
        op = f"nvfp4_overlay.flashinfer_{name}.default"
        assert routed.get("targets", []).count(op) == 1, (name, case, routed)  # the control: the op
        assert "error" in unrouted, (name, extra, unrouted)
        # upstream's own function was traced (the routed wrapper called it while dynamo traced), to
        # where upstream fails under fullgraph: its loader, or its own code on fake tensors
        frames = unrouted["error"]["stack"]
        assert f"flashinfer/fused_moe/core.py:{name}" in frames, (name, extra, frames)
