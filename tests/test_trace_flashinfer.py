"""The FlashInfer trace ladder on the real wheels: upstream breaks torch.compile, patched does not.

Each (version, upstream|patched) pair runs one fresh interpreter (``PROBE`` below) with torch 2.13
CPU, ``torch.version.cuda`` set as on a CUDA build, and the compute capability reported as (12, 0)
and then (10, 0). The probe prints one JSON document; the tests assert on it. Only the JIT build
is stubbed (there is no nvcc or GPU here): ``JitSpec.build_and_load`` returns a module whose
``fp4_quantize`` records the arguments the launch would get, so everything above the kernel, the
output allocation included, is the wheel's own code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_python

pytestmark = [pytest.mark.upstream, pytest.mark.torch]

VERSIONS = ["0.6.1", "0.6.3", "0.6.7.post2", "0.6.7.post3", "0.6.8.post1", "0.7.4"]
CAPABILITIES = [(12, 0), (10, 0)]
OPAQUE_OP = "nvfp4_overlay.flashinfer_fp4_quantize.default"

# Layouts as (name, fp4_quantize keyword arguments, column-major input).
LAYOUTS = [
    ("swizzled128-sf16", {"sf_vec_size": 16}, False),
    ("swizzled8x4-sf16", {"sf_vec_size": 16, "is_sf_8x4_layout": True}, False),
    ("linear-sf16", {"sf_vec_size": 16, "is_sf_swizzled_layout": False}, False),
    ("swizzled128-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True}, False),
    ("swizzled8x4-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True, "is_sf_8x4_layout": True}, False),
    ("linear-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True, "is_sf_swizzled_layout": False}, False),
    ("colmajor-swizzled128-sf16", {"sf_vec_size": 16}, True),
    ("colmajor-linear-sf16", {"sf_vec_size": 16, "is_sf_swizzled_layout": False}, True),
    ("colmajor-swizzled128-sf32", {"sf_vec_size": 32, "sf_use_ue8m0": True}, True),
]

PROBE = r'''
import inspect, json, os, sys
import torch

CAPABILITIES = @CAPABILITIES@
LAYOUTS = @LAYOUTS@
torch.version.cuda = "12.8"  # what a CUDA build of torch reports; flashinfer reads it at import
for var in ("CUDA_HOME", "CUDA_PATH"):
    os.environ.pop(var, None)

import flashinfer
from flashinfer.jit import core as jit_core
from flashinfer.jit import cpp_ext
try:
    import flashinfer.quantization.fp4_quantization as fq
except ImportError:
    import flashinfer.fp4_quantization as fq

PKG = os.path.dirname(os.path.abspath(flashinfer.__file__))
SPAWN = ("subprocess.Popen", "os.posix_spawn", "os.spawn", "os.system", "os.fork", "os.forkpty")
phase = ["setup"]
events = []


def audit(event, args):
    if event in SPAWN or event.startswith("os.exec"):
        events.append([phase[0], event, repr(args[0])[:120]])
    elif event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(args[0]))
        if path.startswith(PKG + os.sep):
            events.append([phase[0], "source-read" if by_linecache() else "open", path])


def by_linecache():
    # Dynamo reads the traced functions' source through linecache for its stack traces;
    # that is the tracer looking at code, not flashinfer doing I/O.
    frame = sys._getframe(2)
    while frame is not None:
        if os.path.basename(frame.f_code.co_filename) == "linecache.py":
            return True
        frame = frame.f_back
    return False


sys.addaudithook(audit)
result = {"graphs": {}, "trace_error": {}, "trace_events": {}, "cc": {}}

# --- the kernel stand-in: records what the launch would get -----------------------------------
launches = []


def describe(value):
    if isinstance(value, torch.Tensor):
        return ["tensor", list(value.shape), list(value.stride()), str(value.dtype)]
    return ["value", repr(value)]


class RecordingModule:
    def __getattr__(self, name):
        def launch(*args):
            launches.append([name] + [describe(a) for a in args])
        return launch


def fake_build_and_load(self, *args, **kwargs):
    return RecordingModule()


for obj in list(vars(jit_core).values()):
    if isinstance(obj, type) and issubclass(obj, jit_core.JitSpec):
        obj.build_and_load = fake_build_and_load
jit_core.check_cuda_arch = lambda: None


def fq_args(inp, gs, kwargs):
    """The opaque op's positional arguments for fp4_quantize(inp, gs, **kwargs), defaults filled."""
    params = inspect.signature(flashinfer.fp4_quantize).parameters
    bound = {name: p.default for name, p in params.items()}
    bound.update(kwargs, input=inp, global_scale=gs)
    op = torch.ops.nvfp4_overlay.flashinfer_fp4_quantize.default
    out = []
    for arg in op._schema.arguments:
        if arg.name == "nvfp4_4over6":
            out.append(-1)
        else:
            out.append(bound[arg.name])
    return out


def set_capability(cc):
    fq.get_compute_capability = lambda device: cc
    torch.cuda.get_device_capability = lambda device=None: cc


def quantize(x, gs):
    return flashinfer.fp4_quantize(x, gs)


x = torch.randn(40, 256, dtype=torch.bfloat16)
gs = torch.tensor([2.0])

for cc in CAPABILITIES:
    key = f"{cc[0]}.{cc[1]}"
    set_capability(cc)
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        phase[0] = "run"
        graphs.append([[n.op, str(n.target)] for n in gm.graph.nodes])
        return gm.forward

    del launches[:]
    phase[0] = "trace"
    try:
        compiled_out = torch.compile(quantize, fullgraph=True, backend=backend)(x, gs)
    except Exception as exc:
        result["trace_error"][key] = [type(exc).__name__, str(exc)[:8000]]
        compiled_out = None
    phase[0] = "after"
    result["trace_events"][key] = [e for e in events if e[0] == "trace" and e[1] != "source-read"]
    result.setdefault("source_reads", []).extend(e for e in events if e[1] == "source-read")
    del events[:]
    result["graphs"][key] = graphs
    entry = result["cc"][key] = {}
    if compiled_out is None:
        continue
    entry["compiled_launches"] = list(launches)

    # Eager: the upstream body and the kernel, never the opaque op (the profiler's op log shows it).
    def op_log(fn):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            out = fn()
        return out, sorted({evt.name for evt in prof.events()})

    del launches[:]
    eager_out, entry["eager_ops"] = op_log(lambda: flashinfer.fp4_quantize(x, gs))
    entry["eager_launches"] = list(launches)
    compiled_fn = torch.compile(quantize, fullgraph=True, backend=backend)
    _, entry["compiled_ops"] = op_log(lambda: compiled_fn(x, gs))
    entry["outputs"] = [[describe(t) for t in eager_out], [describe(t) for t in compiled_out]]

    # Every layout: real outputs (upstream allocation) vs the fake, and compiled vs eager launches.
    layouts = {}
    for name, kwargs, column_major in LAYOUTS:
        inp = x.t() if column_major else x  # x.t(): stride(-2) == 1, quantized along dim -2
        del launches[:]
        real = flashinfer.fp4_quantize(inp, gs, **kwargs)
        eager_launch = list(launches)
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake_inp = mode.from_tensor(inp)
            fake = torch.ops.nvfp4_overlay.flashinfer_fp4_quantize.default(
                *fq_args(fake_inp, gs, kwargs)
            ) if hasattr(torch.ops.nvfp4_overlay, "flashinfer_fp4_quantize") else None
        torch._dynamo.reset()
        del launches[:]
        compiled = torch.compile(
            lambda t, g: flashinfer.fp4_quantize(t, g, **kwargs), fullgraph=True, backend="eager"
        )(inp, gs)
        layouts[name] = {
            "real": [describe(t) for t in real],
            "fake": None if fake is None else [describe(t) for t in fake],
            "compiled": [describe(t) for t in compiled],
            "eager_launch": eager_launch,
            "compiled_launch": list(launches),
        }
    entry["layouts"] = layouts
'''

PROBE_TAIL = r'''
# get_cuda_version(): with a CUDA torch, no subprocess, and the same value as torch reports.
if hasattr(cpp_ext.get_cuda_version, "cache_clear"):
    cpp_ext.get_cuda_version.cache_clear()
    cpp_ext.get_cuda_path.cache_clear()
del events[:]
phase[0] = "version"
version = cpp_ext.get_cuda_version()
result["version"] = {"value": str(version), "events": [e for e in events if e[0] == "version"]}
del events[:]

# Both lookups under fullgraph, with no graph break.
def gated(t):
    v = cpp_ext.get_cuda_version()
    if cpp_ext.is_cuda_version_at_least("12.8") and not cpp_ext.is_cuda_version_at_least("12.9"):
        t = t + v.major
    if cpp_ext.is_cuda_version_at_least("12.8.0") and cpp_ext.is_cuda_version_at_least("12"):
        t = t * 2
    if cpp_ext.is_cuda_version_at_least("13.0"):
        t = t - 1000
    return t

torch._dynamo.reset()
phase[0] = "trace-version"
try:
    value = torch.compile(gated, fullgraph=True, backend="eager")(torch.zeros(2))
    result["gated"] = {"value": value.tolist()}
except Exception as exc:
    result["gated"] = {"error": [type(exc).__name__, str(exc)[:2000]]}
result["gated"]["events"] = [e for e in events if e[0] == "trace-version" and e[1] != "source-read"]
print("@@RESULT@@" + json.dumps(result))
'''


def _probe_code() -> str:
    layouts = [(name, kwargs, colmajor) for name, kwargs, colmajor in LAYOUTS]
    head = PROBE.replace("@CAPABILITIES@", repr(CAPABILITIES)).replace("@LAYOUTS@", repr(layouts))
    return head + PROBE_TAIL


@pytest.fixture(scope="module")
def probe(wheel_tree):
    """probe(version, patched) -> the probe's JSON result for that wheel tree (run once each)."""
    results: dict[tuple[str, bool], dict] = {}

    def get(version: str, patched: bool) -> dict:
        key = (version, patched)
        if key not in results:
            tree: Path = wheel_tree("flashinfer-python", version, patched=patched)
            proc = run_python(_probe_code(), path=[tree])
            marker = [line for line in proc.stdout.splitlines() if line.startswith("@@RESULT@@")]
            assert marker, f"probe failed for {version} patched={patched}:\n{proc.stderr[-6000:]}"
            results[key] = json.loads(marker[-1][len("@@RESULT@@"):])
        return results[key]

    return get


def _key(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


PARAMS = [pytest.param(v, cc, id=f"{v}-sm{cc[0]}{cc[1]}") for v in VERSIONS for cc in CAPABILITIES]


@pytest.mark.parametrize(("version", "cc"), PARAMS)
def test_upstream_fullgraph_fails_on_the_nvcc_subprocess(probe, version: str, cc: tuple[int, int]) -> None:
    result = probe(version, patched=False)
    error = result["trace_error"].get(_key(cc))
    assert error is not None, "upstream fp4_quantize compiled with fullgraph; the report says it cannot"
    kind, message = error
    assert kind == "Unsupported"
    assert "Attempted to call function marked as skipped" in message
    # The skipped function is the lock subprocess.Popen allocates for `nvcc --version`/`which nvcc`,
    # reached from get_cuda_version through get_fp4_quantization_module.
    assert "_thread" in message and "allocate_lock" in message
    assert "get_fp4_quantization_module" in message


@pytest.mark.parametrize(("version", "cc"), PARAMS)
def test_patched_fullgraph_compiles_to_one_opaque_op(probe, version: str, cc: tuple[int, int]) -> None:
    result = probe(version, patched=True)
    key = _key(cc)
    assert result["trace_error"].get(key) is None, result["trace_error"].get(key)
    (graph,) = result["graphs"][key]
    calls = [target for op, target in graph if op == "call_function"]
    assert calls.count(OPAQUE_OP) == 1, calls
    # Nothing of the JIT path or the kernel wrapper made it into the graph.
    assert not [t for t in calls if "fp4_quantize_sm100" in t or "flashinfer::" in t], calls


@pytest.mark.parametrize(("version", "cc"), PARAMS)
def test_patched_trace_starts_no_process_and_opens_no_package_file(probe, version: str, cc: tuple[int, int]) -> None:
    result = probe(version, patched=True)
    assert result["trace_error"].get(_key(cc)) is None
    assert result["trace_events"][_key(cc)] == []


@pytest.mark.parametrize(("version", "cc"), PARAMS)
def test_compiled_path_launches_the_kernel_as_eager_does(probe, version: str, cc: tuple[int, int]) -> None:
    entry = probe(version, patched=True)["cc"][_key(cc)]
    assert len(entry["compiled_launches"]) == 1
    assert entry["compiled_launches"] == entry["eager_launches"]
    assert entry["compiled_launches"][0][0] == "fp4_quantize"
    eager_out, compiled_out = entry["outputs"]
    assert eager_out == compiled_out


@pytest.mark.parametrize(("version", "cc"), PARAMS)
def test_eager_calls_bypass_the_custom_op(probe, version: str, cc: tuple[int, int]) -> None:
    entry = probe(version, patched=True)["cc"][_key(cc)]
    overlay_ops = [op for op in entry["eager_ops"] if op.startswith("nvfp4_overlay::")]
    assert overlay_ops == [], overlay_ops
    assert len(entry["eager_launches"]) == 1  # the eager call did reach the kernel
    # Positive control: the same op log does see the op on the compiled path.
    assert "nvfp4_overlay::flashinfer_fp4_quantize" in entry["compiled_ops"]


@pytest.mark.parametrize("layout", [name for name, _, _ in LAYOUTS])
@pytest.mark.parametrize("version", VERSIONS)
def test_fake_matches_real_outputs_for_every_layout(probe, version: str, layout: str) -> None:
    for cc in CAPABILITIES:
        case = probe(version, patched=True)["cc"][_key(cc)]["layouts"][layout]
        assert case["fake"] == case["real"], f"sm{cc}: fake {case['fake']} != real {case['real']}"
        assert case["compiled"] == case["real"]
        assert len(case["eager_launch"]) == 1
        assert case["compiled_launch"] == case["eager_launch"]


@pytest.mark.parametrize("version", VERSIONS)
def test_cuda_version_lookup_starts_no_subprocess(probe, version: str) -> None:
    patched = probe(version, patched=True)["version"]
    assert patched["value"] == "12.8"
    assert [e for e in patched["events"] if e[1] != "open"] == []
    # Control: upstream asks `which nvcc` / `nvcc --version` first, so the audit does see processes.
    upstream = probe(version, patched=False)["version"]
    assert [e for e in upstream["events"] if e[1] != "open"] != []


@pytest.mark.parametrize("version", VERSIONS)
def test_cuda_version_checks_work_under_fullgraph(probe, version: str) -> None:
    gated = probe(version, patched=True)["gated"]
    assert "error" not in gated, gated.get("error")
    assert gated["value"] == [24.0, 24.0]  # (0 + 12) * 2: 12.8 >= 12.8, < 12.9, < 13.0
    assert gated["events"] == []
    upstream = probe(version, patched=False)["gated"]
    assert upstream.get("error", [None])[0] == "Unsupported"
