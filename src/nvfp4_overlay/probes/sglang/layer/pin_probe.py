"""What SGLang 0.5.21's MXFP8 linear with its tactic pinned hands FlashInfer's GEMM, eagerly and when a compiled graph runs.

    python -m nvfp4_overlay.probes.sglang.layer.pin_probe SGLANG_TREE FLASHINFER_TREE

``flashinfer_mxfp8_blockscaled_linear(pin_tactic=True)`` (fp8_utils; the forward of block-FP8 weights
served as MXFP8 on Blackwell) must run FlashInfer's ``mm_mxfp8`` under
``autotune(False, skip_ops={"mxfp8_gemm"})``. One fresh interpreter, SM100 faked (the layer probe's
machinery, ``--fp8-gemm-backend flashinfer_cutlass``), imports the release's fp8_utils with SGLang's own
ops given a CPU kernel too (their own Python bodies, registered for CPU as for CUDA), and FlashInfer's
two raw calls under them replaced: the quantize by SGLang's own fake of it, the GEMM by a recorder of
what FlashInfer's autotuner holds when the GEMM is called (the ops skipped, whether tuning) and of its
arguments. It calls the linear eagerly and inside ``autotune(True)`` (a warm-up tuning pass), then the
same compiled with ``torch.compile(fullgraph=True)`` and run. Prints one JSON line: each call's records,
or where the compile stopped.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import Any

import torch

from nvfp4_overlay.probes.sglang import sglang_drivers, sglang_imports, sglang_machine
from nvfp4_overlay.probes.sglang.layer import probe, server

FP8_UTILS = "sglang.srt.layers.quantization.fp8_utils"
M, N, K = 8, 256, 256  # tokens, the linear's output and input widths


def setup(sglang_tree: str, flashinfer_tree: str) -> Any:
    """The faked SM100 server of the layer probe, with --fp8-gemm-backend flashinfer_cutlass; SGLang's ops
    registered for CPU too; fp8_utils imported."""
    gpu = sglang_machine.FakeGpu(torch, (10, 0), [os.path.join(sglang_tree, "sglang"), os.path.join(flashinfer_tree, "flashinfer")])
    gpu.setup()
    sys.path[:0] = [flashinfer_tree, sglang_tree]
    import flashinfer  # noqa: F401 - imported with the GPU faked, as SGLang's import needs it

    gpu.refresh()
    sglang_machine.sgl_kernel_ops(torch)
    sglang_imports.STUBBED.setdefault("cuda", "cuda-python, an SGLang requirement: a stand-in wherever imported")
    sglang_imports.install_imports(sglang_tree, [FP8_UTILS, "sglang.srt.utils.common"])
    common: Any = importlib.import_module("sglang.srt.utils.common")
    register = common.direct_register_custom_op

    def on_cpu_too(op_name: str, op_func: Any, *args: Any, **kwargs: Any) -> None:
        register(op_name, op_func, *args, **kwargs)
        library = kwargs.get("target_lib") or common.sglang_lib
        if op_name not in cpu_registered:  # the op's own Python body, for CPU tensors as for CUDA ones
            library.impl(op_name, op_func, "CPU")
            cpu_registered.add(op_name)

    cpu_registered: set[str] = set()
    common.direct_register_custom_op = on_cpu_too
    ctx = sglang_drivers.Context(sglang_tree, (10, 0), torch, os.getcwd())
    sglang_drivers.serve(ctx, "auto", server.CHECKPOINTS["fp8-mxfp8"][1])
    server.fp8_gemm_config(ctx)
    fp8_utils = importlib.import_module(FP8_UTILS)
    gpu.for_tracing()
    return fp8_utils


def recorded(fp8_utils: Any) -> list[dict[str, Any]]:
    """FlashInfer's raw quantize and GEMM under SGLang's ops, replaced: the quantize by SGLang's own fake
    (the shapes it allocates), the GEMM by a recorder of the autotuner's state and the arguments."""
    from flashinfer.autotuner import AutoTuner

    calls: list[dict[str, Any]] = []

    def mm_mxfp8(a: Any, b: Any, a_scale: Any, b_scale: Any, out_dtype: Any = None, **kwargs: Any) -> Any:
        tuner = AutoTuner.get()
        calls.append({"skip_ops": sorted(tuner._effective_skip_ops), "tuning": tuner.is_tuning_mode,
                      "shapes": [list(t.shape) for t in (a, b, a_scale, b_scale)], "out_dtype": str(out_dtype),
                      **{k: v for k, v in kwargs.items() if isinstance(v, (bool, str, int))}})
        return torch.zeros((a.shape[0], b.shape[1]), dtype=out_dtype)

    fp8_utils._raw_flashinfer_mm_mxfp8 = mm_mxfp8
    fp8_utils._raw_flashinfer_mxfp8_quantize = lambda x, **kw: fp8_utils._fake_flashinfer_mxfp8_quantize(
        x, kw.get("is_sf_swizzled_layout", True), kw.get("alignment", 32))
    return calls


def run(fp8_utils: Any, calls: list[dict[str, Any]]) -> dict[str, Any]:
    from flashinfer.autotuner import autotune

    weight = torch.ones((N, K), dtype=torch.float8_e4m3fn)
    scale = torch.full((N, K // 32), 127, dtype=torch.uint8)  # ue8m0 bytes, as the layer prepares them

    def linear(x: torch.Tensor) -> torch.Tensor:
        return fp8_utils.flashinfer_mxfp8_blockscaled_linear(x, weight, scale, backend="cutlass", pin_tactic=True)

    x, out = torch.randn(M, K, dtype=torch.bfloat16), dict[str, Any]()
    for name, fn in (("eager", linear), ("compiled", torch.compile(linear, fullgraph=True, backend="eager"))):
        for tuning in (False, True):
            key = f"{name}{'-under-autotune' if tuning else ''}"
            del calls[:]
            try:
                if tuning:
                    with autotune(True):
                        fn(x)
                else:
                    fn(x)
                out[key] = list(calls)
            except Exception as exc:  # noqa: BLE001 - where the compile stopped: the probe's finding
                text = str(exc)
                out[key] = {"error": f"{type(exc).__name__}: {text[:200]}", "where": text[text.find("from user code:"):][-1500:]}
    return out


def main() -> None:
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", os.path.join(os.getcwd(), "flashinfer-workspace"))
    if not probe.cuda_runtime():
        print(json.dumps({"no_cuda_runtime": "no libcudart.so* under $CUDA_HOME/lib64 (default /usr/local/cuda)"}))
        return
    try:
        fp8_utils = setup(sys.argv[1], sys.argv[2])
        result = run(fp8_utils, recorded(fp8_utils))
    except Exception:  # noqa: BLE001 - SGLang's own set-up failed: the probe's finding
        result = {"setup_error": traceback.format_exc()[-2500:]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
