"""The SGLang series on the CPU: the patched NVFP4 fp4_quantize compiles with fullgraph, upstream's does not.

Each release runs one fresh interpreter (torch 2.13 CPU) with the UPSTREAM flashinfer tree of its
pin on sys.path, and SGLang's files loaded by path: importing all of sglang needs far more
than this venv has, so the probe executes only the import block of `modelopt_quant.py` that picks
`fp4_quantize` (upstream and patched), with stub parent packages and a stub SGLang kernel for SM100.
The compute capability is faked in the subprocess: flashinfer's `get_compute_capability` (CPU tensors
are otherwise refused) and SGLang's `is_sm120_supported`.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from helpers import OVERLAY, PATCHES, cache_dir, run_python

from nvfp4_overlay.oracle import oracle
from nvfp4_overlay.patch.manifest import Target, load_upstream
from nvfp4_overlay.wheel import fetch

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

# SGLang release -> flashinfer-python it pins (METADATA Requires-Dist, read from each wheel).
FLASHINFER_PIN = {
    "0.5.8": "0.6.1",
    "0.5.8.post1": "0.6.1",
    "0.5.9": "0.6.3",
    "0.5.10": "0.6.7.post2",
    "0.5.10.post1": "0.6.7.post3",
    "0.5.11": "0.6.8.post1",
}
SM120, SM100 = (12, 0), (10, 0)
CASES = [
    pytest.param(version, cc, id=f"sglang-{version}-sm{cc[0]}{cc[1]}")
    for version in FLASHINFER_PIN
    for cc in (SM120, SM100)
]
OVERLAY_MODULE = "sglang.srt.layers.quantization.opaque_fp4_quantize"
MODELOPT = "sglang/srt/layers/quantization/modelopt_quant.py"

# Runs in the subprocess; its last stdout line is a JSON report. Config comes in as argv[1] (JSON).
PROBE = r'''
import ast, inspect, json, linecache, os, sys, traceback, types

cfg = json.loads(sys.argv[1])
CCS = [tuple(cc) for cc in cfg["ccs"]]
CC = CCS[0]  # the architecture reported now; the phases below go through CCS

import torch
import flashinfer

FI_DIR = os.path.realpath(os.path.dirname(flashinfer.__file__))
fp4_module = sys.modules.get("flashinfer.quantization.fp4_quantization") or sys.modules["flashinfer.fp4_quantization"]
fp4_module.get_compute_capability = lambda device: CC  # CPU tensors: flashinfer would refuse them
torch.version.cuda = "12.8"  # as a CUDA build of torch reports it (flashinfer 0.6.8 reads it for SM120)
report = {"flashinfer_version": flashinfer.__version__, "flashinfer_file": flashinfer.__file__}

# --- what subprocesses start and which flashinfer files open while dynamo traces -----------------
tracing = {"on": False}
seen = {"subprocess": [], "flashinfer_open": []}
SPAWN_EVENTS = {"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.fork", "os.spawn", "pty.spawn"}

def audit(event, args):
    if not tracing["on"]:
        return
    if event in SPAWN_EVENTS:
        seen["subprocess"].append(f"{event} {args[:2]!r}"[:200])
    elif event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if path.startswith(FI_DIR + os.sep):
            seen["flashinfer_open"].append(path)

sys.addaudithook(audit)

# --- SGLang's fp4_quantize, chosen by modelopt_quant.py's own import block ------------------------
def stub_package(name, path):
    module = types.ModuleType(name)
    module.__path__ = [path] if path else []
    sys.modules[name] = module
    return module

def sglang_kernel(*args, **kwargs):  # stands for SGLang's own scaled_fp4_quant (SM100)
    raise AssertionError("the SGLang kernel stub is not to be called")

def load_sglang_tree(tree):
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        del sys.modules[name]
    parts = ["sglang", "srt", "layers", "quantization"]
    for i in range(1, len(parts) + 1):
        stub_package(".".join(parts[:i]), os.path.join(tree, *parts[:i]))
    stub_package("sglang.jit_kernel", None)
    stub_package("sglang.jit_kernel.nvfp4", None).scaled_fp4_quant = sglang_kernel
    stub_package("sgl_kernel", None).scaled_fp4_quant = sglang_kernel

def modelopt_fp4_quantize(tree):
    """Execute the top-level try block of modelopt_quant.py that binds fp4_quantize."""
    path = os.path.join(tree, "sglang", "srt", "layers", "quantization", "modelopt_quant.py")
    module = ast.parse(open(path).read(), path)
    blocks = [node for node in module.body if isinstance(node, ast.Try)
              and "is_sm120_supported" in ast.unparse(node) and "fp4_quantize" in ast.unparse(node)]
    assert len(blocks) == 1, f"{path}: {len(blocks)} fp4_quantize import blocks"
    namespace = {"__name__": "sglang.srt.layers.quantization.modelopt_quant",
                 "is_sm120_supported": lambda: CC[0] == 12}
    exec(compile(ast.Module(body=blocks, type_ignores=[]), path, "exec"), namespace)
    return namespace["fp4_quantize"], ast.unparse(blocks[0])

def describe(fn):
    if fn is flashinfer.fp4_quantize:
        return "flashinfer.fp4_quantize"
    if fn is sglang_kernel:
        return "sglang-kernel"
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"

# --- torch.compile(fullgraph=True) with a backend that records the graph ---------------------------
def compile_and_call(fn, x, gs):
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        tracing["on"] = False  # tracing is over; what runs next is execution
        graphs.append(gm)
        return gm.forward

    def model(x, gs):
        x_fp4, x_sf = fn(x, gs)  # as ModelOptFp4LinearMethod.apply calls it
        return x_fp4, x_sf

    seen["subprocess"].clear(); seen["flashinfer_open"].clear()
    linecache.clearcache()  # dynamo reads traced source through linecache; each case reads afresh
    out = {"ok": False}
    tracing["on"] = True
    try:
        result = torch.compile(model, fullgraph=True, backend=backend)(x, gs)
        out["ok"] = True
        out["result_ptrs"] = [t.data_ptr() for t in result]
    except Exception as exc:
        out["error_type"] = f"{type(exc).__module__}.{type(exc).__qualname__}"
        out["error"] = str(exc)[:1500]
    finally:
        tracing["on"] = False
    out["targets"] = [str(n.target) for g in graphs for n in g.graph.nodes if n.op == "call_function"]
    out["subprocess"] = list(seen["subprocess"])
    out["flashinfer_open"] = sorted(set(seen["flashinfer_open"]))[:20]
    return out

x = torch.randn(8, 128, dtype=torch.bfloat16)
gs = torch.tensor([448.0 * 6.0], dtype=torch.float32)

by_cc = report["by_cc"] = {f"{cc[0]}{cc[1]}": {} for cc in CCS}

# Upstream first, before any spy: the real flashinfer.fp4_quantize, as upstream modelopt binds it.
load_sglang_tree(cfg["upstream_tree"])
for CC in CCS:
    case = by_cc[f"{CC[0]}{CC[1]}"]
    upstream_fn, case["upstream_block"] = modelopt_fp4_quantize(cfg["upstream_tree"])
    case["upstream_choice"] = describe(upstream_fn)
    case["upstream_compile"] = compile_and_call(flashinfer.fp4_quantize, x, gs)

# A spy on flashinfer's public fp4_quantize, installed before the overlay module imports it. While
# dynamo traces it calls the real function (so tracing into it fails as upstream does); at run time
# it records its arguments and call stack and returns canned tensors (no kernel on a CPU).
real_fp4_quantize = flashinfer.fp4_quantize
real_signature = inspect.signature(real_fp4_quantize)
calls = []
canned = (torch.full((8, 64), 7, dtype=torch.uint8), torch.full((128, 8), 9, dtype=torch.uint8))

def spy(*args, **kwargs):
    if torch.compiler.is_compiling():
        return real_fp4_quantize(*args, **kwargs)
    bound = real_signature.bind(*args, **kwargs)
    bound.apply_defaults()
    calls.append({
        "args": {k: ("x" if v is x else "gs" if v is gs else repr(v)) for k, v in bound.arguments.items()},
        "stack": [f"{os.path.basename(f.filename)}:{f.name}" for f in traceback.extract_stack()],
    })
    return canned

flashinfer.fp4_quantize = spy
load_sglang_tree(cfg["patched_tree"])
overlay = __import__(cfg["overlay_module"], fromlist=["fp4_quantize"])
report["overlay_file"] = overlay.__file__
report["canned_ptrs"] = [t.data_ptr() for t in canned]
sglang_fp4_quantize = overlay.fp4_quantize  # what modelopt_quant binds on SM120
for CC in CCS:
    case = by_cc[f"{CC[0]}{CC[1]}"]
    patched_fn, case["patched_block"] = modelopt_fp4_quantize(cfg["patched_tree"])
    case["patched_choice"] = describe(patched_fn)

    # Eager: straight to flashinfer's function, not through the custom op.
    eager = sglang_fp4_quantize(x, gs)
    case["eager_returns_canned"] = all(a is b for a, b in zip(eager, canned))
    case["eager_calls"] = calls[:]
    calls.clear()

    case["patched_compile"] = compile_and_call(sglang_fp4_quantize, x, gs)
    case["compiled_calls"] = calls[:]
    calls.clear()
CC = CCS[0]

# The fake against flashinfer's own Python wrapper for this pin: its JIT module is replaced by one
# whose kernel does nothing, so flashinfer allocates and reshapes its outputs exactly as on a GPU.
flashinfer.fp4_quantize = real_fp4_quantize
class NoKernel:
    def fp4_quantize(self, *args):
        pass
class NoBuild:
    def build_and_load(self):
        return NoKernel()
for name in dir(fp4_module):
    if name.startswith("gen_fp4_quantization_") and name.endswith("_module"):
        setattr(fp4_module, name, lambda *a, **k: NoBuild())

from torch._subclasses.fake_tensor import FakeTensorMode

def meta(t):
    return {"shape": list(t.shape), "stride": list(t.stride()), "dtype": str(t.dtype)}

def outcome(call):
    try:
        return {"outputs": [meta(t) for t in call()]}
    except Exception as exc:
        return {"raises": type(exc).__name__}

layouts = [
    {"sf_vec_size": 16},  # what modelopt_quant passes: NVFP4, swizzled 128x4
    {"sf_vec_size": 16, "is_sf_8x4_layout": True},
    {"sf_vec_size": 16, "is_sf_swizzled_layout": False},
    {"sf_vec_size": 32, "sf_use_ue8m0": True},
    {"sf_vec_size": 32, "sf_use_ue8m0": True, "is_sf_swizzled_layout": False},
]
fake_checks = []
for m in (1, 3, 128, 130):
    for k in (64, 96, 256):
        for column_major in (False, True):
            for layout in layouts:
                if k % layout["sf_vec_size"]:
                    continue
                t = torch.randn(k, m, dtype=torch.bfloat16).t() if column_major else torch.randn(m, k, dtype=torch.bfloat16)
                real = outcome(lambda: real_fp4_quantize(t, gs, **layout))
                with FakeTensorMode() as mode:
                    ft, fgs = mode.from_tensor(t), mode.from_tensor(gs)
                    fake = outcome(lambda: torch.ops.sglang.flashinfer_fp4_quantize(ft, fgs, **layout))
                fake_checks.append({"m": m, "k": k, "column_major": column_major, "layout": layout,
                                    "real": real, "fake": fake})
report["fake_checks"] = fake_checks
print(json.dumps(report))
'''


def _probe(wheel_tree: Any, version: str, cc: tuple[int, int]) -> dict[str, Any]:
    """The probe's report for one release, with the entries of one architecture on top."""
    report = _probe_release(wheel_tree, version)
    return {**report, **report["by_cc"][f"{cc[0]}{cc[1]}"]}


@cache  # one subprocess per release, both architectures; the tests below read its report
def _probe_release(wheel_tree: Any, version: str) -> dict[str, Any]:
    """The probe's report, kept in the result cache under everything that makes it (the three
    wheels, the SGLang series and overlay, the engine, the probe's text, torch, Python): a second
    session, or the other test worker, reads it instead of running it again."""
    def run() -> dict[str, Any]:
        flashinfer_tree = wheel_tree("flashinfer-python", FLASHINFER_PIN[version], patched=False)
        config = {
            "ccs": [SM120, SM100],
            "upstream_tree": str(wheel_tree("sglang", version, patched=False)),
            "patched_tree": str(wheel_tree("sglang", version, patched=True)),
            "overlay_module": OVERLAY_MODULE,
        }
        code = f"import sys; sys.argv[1:] = [{json.dumps(json.dumps(config))}]\n" + PROBE
        proc = run_python(code, path=[flashinfer_tree], timeout=300)
        assert proc.returncode == 0, f"probe failed for sglang {version}:\n{proc.stderr[-6000:]}"
        report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return report

    source = fetch.Source(cache_dir())
    pin = FLASHINFER_PIN[version]
    inputs = {"flashinfer/upstream": fetch.select_wheels(load_upstream(PATCHES, Target("flashinfer-python", pin)),
                                                         source)[0].sha256,
              "sglang/upstream": fetch.select_wheels(load_upstream(PATCHES, Target("sglang", version)), source)[0].sha256,
              "sglang/patched": oracle.digest_tree(PATCHES / "sglang" / version) + oracle.digest_tree(OVERLAY / "sglang")
              + oracle.engine_digest()}
    side = oracle.Side(version, "sglang-fp4-quantize", inputs, lambda: cache_dir())
    key = oracle.key_of("sglang_fp4_quantize", side, {"probe": hashlib.sha256(PROBE.encode()).hexdigest()})
    result: dict[str, Any] = oracle.Results(cache_dir() / "oracle").computed("sglang_fp4_quantize", side, key, run)
    return result


OPAQUE_OP = "sglang.flashinfer_fp4_quantize"


@pytest.mark.parametrize(("version", "cc"), CASES)
def test_upstream_fp4_quantize_fails_under_fullgraph(wheel_tree: Any, version: str, cc: tuple[int, int]) -> None:
    report = _probe(wheel_tree, version, cc)
    assert report["flashinfer_version"] == FLASHINFER_PIN[version]
    assert "/site-packages/" not in report["flashinfer_file"], "flashinfer must come from the upstream tree"
    # Upstream modelopt_quant.py binds flashinfer's function on SM120 and SGLang's kernel otherwise.
    assert report["upstream_choice"] == ("flashinfer.fp4_quantize" if cc == SM120 else "sglang-kernel")
    upstream = report["upstream_compile"]
    assert not upstream["ok"], "upstream flashinfer.fp4_quantize compiled with fullgraph: the fix may be moot"
    assert upstream["error_type"] == "torch._dynamo.exc.Unsupported", upstream
    assert "Attempted to call function marked as skipped" in upstream["error"], upstream["error"]
    # The audit hook saw flashinfer's files read while dynamo traced upstream's path, so its silence
    # on the patched path (test_patched_fp4_quantize_compiles_opaque) means something.
    assert upstream["flashinfer_open"], "the audit hook saw nothing under flashinfer while tracing upstream"


@pytest.mark.parametrize(("version", "cc"), CASES)
def test_patched_fp4_quantize_compiles_opaque(wheel_tree: Any, version: str, cc: tuple[int, int]) -> None:
    report = _probe(wheel_tree, version, cc)
    assert Path(report["overlay_file"]).parts[-5:] == ("sglang", "srt", "layers", "quantization", "opaque_fp4_quantize.py")
    # The patch re-binds SM120 only; SM100 keeps SGLang's own (already opaque) kernel.
    if cc == SM120:
        assert report["patched_choice"] == f"{OVERLAY_MODULE}.fp4_quantize"
    else:
        assert report["patched_choice"] == report["upstream_choice"] == "sglang-kernel"
    compiled = report["patched_compile"]
    assert compiled["ok"], compiled.get("error")
    assert any(OPAQUE_OP in target for target in compiled["targets"]), compiled["targets"]
    assert not any("flashinfer" in t and OPAQUE_OP not in t for t in compiled["targets"]), compiled["targets"]
    assert compiled["subprocess"] == [], "a subprocess started while dynamo traced"
    assert compiled["flashinfer_open"] == [], "a file under the flashinfer package opened while dynamo traced"


@pytest.mark.parametrize(("version", "cc"), CASES)
def test_eager_and_compiled_reach_flashinfer_with_the_same_arguments(wheel_tree: Any, version: str, cc: tuple[int, int]) -> None:
    report = _probe(wheel_tree, version, cc)
    expected = {
        "input": "x", "global_scale": "gs", "sf_vec_size": "16", "sf_use_ue8m0": "False",
        "is_sf_swizzled_layout": "True", "is_sf_8x4_layout": "False", "enable_pdl": "None",
    }
    if version == "0.5.11":
        expected["backend"] = "'cuda'"  # flashinfer 0.6.8's default, as upstream 0.5.11 leaves it
    (eager,) = report["eager_calls"]
    assert eager["args"] == expected
    assert report["eager_returns_canned"]
    assert not any("custom_ops.py" in frame for frame in eager["stack"]), "the eager path went through the custom op"
    # The compiled graph, run, calls the op, whose implementation calls flashinfer's function.
    (compiled,) = report["compiled_calls"]
    assert compiled["args"] == expected
    assert any("custom_ops.py" in frame for frame in compiled["stack"]), compiled["stack"]
    assert report["patched_compile"]["result_ptrs"] == report["canned_ptrs"]


@pytest.mark.parametrize("version", list(FLASHINFER_PIN))
def test_fake_matches_flashinfer_outputs(wheel_tree: Any, version: str) -> None:
    report = _probe(wheel_tree, version, SM120)
    checks = report["fake_checks"]
    assert len(checks) > 100
    assert any("outputs" in c["real"] for c in checks)
    # Where flashinfer refuses a shape the fake must refuse it too (its error type may differ).
    mismatched = [c for c in checks if _outcome(c["real"]) != _outcome(c["fake"])]
    assert mismatched == [], "\n".join(json.dumps(c) for c in mismatched[:5])


def _outcome(result: dict[str, Any]) -> Any:
    return "raises" if "raises" in result else result["outputs"]


def test_sglang_0511_platform_wheels_share_the_patched_file() -> None:
    """0.5.11 ships one wheel per platform; one series fits all only if modelopt_quant.py is the same."""
    from nvfp4_overlay.patch.manifest import Target, load_upstream
    from nvfp4_overlay.wheel import fetch

    upstream = load_upstream(PATCHES, Target("sglang", "0.5.11"))
    source = fetch.Source(cache_dir(), all_platforms=True)
    wheels = [fetch.upstream_wheel(upstream, pin, source) for pin in fetch.select_wheels(upstream, source)]
    assert len(wheels) == 8  # cp310-cp313, x86_64 and aarch64: every pinned file, fetched here if need be
    digests = {}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            names = set(zf.namelist())
            assert f"{OVERLAY_MODULE.replace('.', '/')}.py" not in names, f"{wheel.name} has the overlay's module"
            digests[wheel.name] = hashlib.sha256(zf.read(MODELOPT)).hexdigest()
    assert len(set(digests.values())) == 1, digests
