"""The faked server the SGLang region probe runs a release's SGLang on: a Blackwell GPU on a CPU.

- the GPU: torch reports one CUDA device of the faked compute capability to SGLang's and
  FlashInfer's code (``torch.cuda.is_available``, ``device_count``, ``get_device_capability``,
  ``get_device_name``, ``get_device_properties``, ``current_device``, ``torch.version.cuda`` 12.9)
  and the truth to torch's own; ``Tensor.cuda()`` is the identity (tensors stay on the CPU), and
  FlashInfer's ``get_compute_capability`` bindings answer the faked GPU (``capability.fake_capability``);
  before dynamo traces, the stand-ins of absent modules leave ``sys.modules`` (torch looks for
  triton there for itself; SGLang's modules keep theirs);
- tensors SGLang asks for on a CUDA device while it imports and builds its layers are made on the
  CPU (``CpuForCuda``: module-level CUDA constants, ``device="cuda"``, ``.to("cuda")``), and an
  SGLang op with no CPU kernel called then (weight preparation) returns zeros shaped by its own
  fake (``fake_as_real``);
- ``sgl_kernel`` (SGLang's own CUDA kernels): a permissive stand-in, except ``scaled_fp4_quant``
  (the SM100 linear quantize up to 0.5.9), an opaque op ``sgl_kernel::scaled_fp4_quant`` of
  sgl-kernel's schema with sgl-kernel's allocation, whose fake SGLang registers itself; any other
  ``sgl_kernel::`` op SGLang registers a fake for is defined from that fake's signature (no kernel);
- SGLang's process groups: ``SingleRankGroup`` stand-ins (world size 1) in parallel_state;
- FlashInfer's JIT build, while SGLang prepares its weights eagerly: a JitSpec's ``build_and_load``
  returns a module of no-op kernels; upstream's own is back before dynamo traces (``FlashInferBuilds``).
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Sequence
from typing import Any

from nvfp4_overlay.probes.capability import fake_capability
from nvfp4_overlay.probes.sglang.sglang_imports import STUBBED, StubModule


class FakeGpu:
    """One CUDA device of compute capability cc, as torch reports it to SGLang and FlashInfer."""

    def __init__(self, torch: Any, cc: tuple[int, int], packages: Sequence[str]) -> None:
        self.torch, self.cc, self.packages = torch, cc, tuple(p + os.sep for p in packages)

    def setup(self) -> None:
        torch, cc = self.torch, self.cc
        name = {12: "NVIDIA RTX PRO 6000 Blackwell Server Edition", 10: "NVIDIA B200"}.get(cc[0], "NVIDIA GPU")
        props = types.SimpleNamespace(name=name, major=cc[0], minor=cc[1], total_memory=96 << 30,
                                      multi_processor_count=188 if cc[0] == 12 else 148, warp_size=32,
                                      gcnArchName="", L2_cache_size=128 << 20)
        real_available, real_count = torch.cuda.is_available, torch.cuda.device_count
        asks = self.asked_by_the_server

        # Traced (SGLang's code under dynamo): the faked server. Called: by SGLang or FlashInfer,
        # the faked server; by torch itself (dynamo, inductor), the truth.
        def is_available() -> bool:
            return True if torch.compiler.is_dynamo_compiling() else asks() or real_available()

        def device_count() -> int:
            return 1 if torch.compiler.is_dynamo_compiling() else 1 if asks() else int(real_count())

        torch.version.cuda = "12.9"
        torch.cuda.is_available = is_available
        torch.cuda.device_count = device_count
        torch.cuda.current_device = lambda: 0
        torch.cuda.get_device_name = lambda device=None: name
        torch.cuda.get_device_properties = lambda device=None: props
        torch.Tensor.cuda = lambda self, *a, **k: self

        fake_capability(torch, cc)
        self.cpu_for_cuda = CpuForCuda(torch)
        self.cpu_for_cuda.__enter__()

    def refresh(self) -> None:
        """The faked capability in every FlashInfer module imported since (later imports bind flashinfer.utils')."""
        fake_capability(self.torch, self.cc)

    def asked_by_the_server(self) -> bool:
        frame: Any = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.endswith(os.sep + "functools.py"):
            frame = frame.f_back  # an lru_cache'd helper of SGLang's
        return frame is not None and frame.f_code.co_filename.startswith(self.packages)

    def for_tracing(self) -> None:
        """FlashInfer's bindings made while SGLang imported it answer the faked GPU too; the
        stand-ins of absent modules leave sys.modules (torch asks it for triton for itself), SGLang's
        modules keep the ones they imported."""
        self.cpu_for_cuda.__exit__(None, None, None)
        fake_capability(self.torch, self.cc)
        for name in [n for n in sys.modules if n.partition(".")[0] in STUBBED]:
            if isinstance(sys.modules[name], StubModule) and name.partition(".")[0] not in ("sglang", "sgl_kernel"):
                del sys.modules[name]


class SingleRankGroup:
    """SGLang's GroupCoordinator of one rank: what its layers ask of a process group at world size 1."""

    world_size = 1
    rank = rank_in_group = local_rank = first_rank = last_rank = next_rank = prev_rank = 0
    ranks = (0,)
    is_first_rank = is_last_rank = True
    device_group = cpu_group = pynccl_comm = ca_comm = mscclpp_comm = symm_mem_comm = None
    use_pynccl = use_custom_allreduce = False

    def __init__(self, name: str) -> None:
        self.unique_name = name

    def __getattr__(self, name: str) -> Any:
        msg = f"the single-rank process group stand-in has no {name!r} (sglang_machine.SingleRankGroup)"
        raise AttributeError(msg)


def single_rank_groups(parallel_state: Any) -> list[str]:
    """Every process group parallel_state's getters return, as a SingleRankGroup; the names set."""
    getters = [f for n, f in vars(parallel_state).items() if n.startswith("get_") and callable(f)]
    wanted = {name for f in getters for name in getattr(getattr(f, "__code__", None), "co_names", ())}
    names = sorted(n for n in wanted if n.startswith("_") and n[1:].replace("_", "").isupper()
                   and n in vars(parallel_state) and vars(parallel_state)[n] is None)
    for name in names:
        setattr(parallel_state, name, SingleRankGroup(name.strip("_").lower()))
    return names


def fake_as_real(torch: Any, op: Any, args: Any, kwargs: Any) -> Any:
    """An SGLang op with no CPU kernel, called eagerly while SGLang prepares weights: its own fake
    gives the outputs' shapes, dtypes and strides; they are made as CPU tensors of zeros."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        out = op(*args, **kwargs)
    real = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype).zero_() if isinstance(t, torch.Tensor) else t
            for t in (out if isinstance(out, (tuple, list)) else [out])]
    return type(out)(real) if isinstance(out, (tuple, list)) else real[0]


class CpuForCuda:
    """While SGLang imports and builds its layers: a tensor it asks for on a CUDA device is made on the
    CPU (a TorchFunctionMode rewriting device= and .to(); module-level CUDA constants, .cuda()), and
    an SGLang op with no CPU kernel returns what its fake says (fake_as_real)."""

    def __init__(self, torch: Any) -> None:
        from torch.overrides import TorchFunctionMode

        def cpu(device: Any) -> Any:
            return "cpu" if str(device).startswith("cuda") else device

        class Mode(TorchFunctionMode):  # type: ignore[misc]
            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = dict(kwargs or {})
                if "device" in kwargs:
                    kwargs["device"] = cpu(kwargs["device"])
                if getattr(func, "__name__", "") == "to":
                    args = tuple(cpu(a) if isinstance(a, (str, torch.device)) else a for a in args)
                try:
                    return func(*args, **kwargs)
                except NotImplementedError:
                    if not str(func).startswith(("sglang.", "sgl_kernel.")):
                        raise
                    return fake_as_real(torch, func, args, kwargs)

        self.mode = Mode()

    def __enter__(self) -> None:
        self.mode.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.mode.__exit__(*exc)


def sgl_kernel_ops(torch: Any) -> types.ModuleType:
    """sgl_kernel (SGLang's CUDA kernels, not installable here): a stand-in whose FP4 quantize is an
    opaque op with sgl-kernel's schema (SGLang registers its own fake for it), the rest permissive."""
    library = torch.library.Library("sgl_kernel", "FRAGMENT")  # noqa: F841 - kept alive by torch
    library.define("scaled_fp4_quant(Tensor! output, Tensor input, Tensor! output_scale, "
                   "Tensor input_global_scale) -> ()")

    def scaled_fp4_quant(input: Any, input_global_scale: Any) -> tuple[Any, Any]:
        # sgl-kernel's Python wrapper: NVFP4 bytes, and 128x4-swizzled e4m3 scales in int32 words.
        input = input.reshape(-1, input.shape[-1])
        m, n = input.shape
        output = torch.empty((m, n // 2), device=input.device, dtype=torch.uint8)
        rows, cols = (m + 127) // 128 * 128, (n // 16 + 3) // 4 * 4
        scale = torch.empty((rows, cols // 4), device=input.device, dtype=torch.int32)
        torch.ops.sgl_kernel.scaled_fp4_quant.default(output, input, scale, input_global_scale)
        return output, scale.view(torch.float8_e4m3fn)

    real_register_fake = torch.library.register_fake

    def register_fake(op: Any, *args: Any, **kwargs: Any) -> Any:
        """SGLang registers fakes for sgl_kernel's ops at import: an op sgl-kernel would have defined is
        defined here from the fake's own signature (no kernel), so SGLang's fake is registered."""
        name = op if isinstance(op, str) else ""
        namespace, _, bare = name.partition("::")
        if namespace != "sgl_kernel" or hasattr(torch.ops.sgl_kernel, bare):
            return real_register_fake(op, *args, **kwargs)

        def define_then_register(fake: Any) -> Any:
            try:
                library.define(bare + torch.library.infer_schema(fake, mutates_args=()))
            except Exception:  # noqa: BLE001 - an unannotated fake: left unregistered, as without the op
                return fake
            return real_register_fake(op, fake, **kwargs)

        return define_then_register(args[0]) if args else define_then_register

    torch.library.register_fake = register_fake
    module = StubModule("sgl_kernel")
    module.__path__ = []
    module.scaled_fp4_quant = scaled_fp4_quant  # type: ignore[attr-defined]
    module._nvfp4_library = library  # type: ignore[attr-defined]
    sys.modules["sgl_kernel"] = module
    STUBBED["sgl_kernel"] = "absent here (SGLang's CUDA kernels); scaled_fp4_quant is an opaque op of sgl-kernel's schema"
    return module


class FlashInferBuilds:
    """FlashInfer's JIT build, stubbed for the weight preparation SGLang runs eagerly (no nvcc, no GPU):
    a JitSpec's build_and_load returns a module of no-op kernels. Upstream's own build_and_load is
    back before dynamo traces: what a region reaches while tracing is FlashInfer's real loader."""

    def __init__(self) -> None:
        from flashinfer.jit import core as jit_core

        self.jit_core = jit_core
        self.specs = [obj for obj in vars(jit_core).values() if isinstance(obj, type) and issubclass(obj, jit_core.JitSpec)]
        self.real = {spec: vars(spec).get("build_and_load") for spec in self.specs}
        self.real_check = getattr(jit_core, "check_cuda_arch", None)

    def stub(self) -> None:
        class NoKernels:
            def __getattr__(self, name: str) -> Any:
                return lambda *args, **kwargs: None

        for spec in self.specs:
            spec.build_and_load = lambda self, *a, **k: NoKernels()  # type: ignore[attr-defined]
        self.jit_core.check_cuda_arch = lambda: None

    def restore(self) -> None:
        for spec, real in self.real.items():
            if real is None:
                delattr(spec, "build_and_load")
            else:
                spec.build_and_load = real  # type: ignore[attr-defined]
        if self.real_check is not None:
            self.jit_core.check_cuda_arch = self.real_check
