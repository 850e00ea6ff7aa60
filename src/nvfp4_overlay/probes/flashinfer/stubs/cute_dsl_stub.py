"""Probe stub: the CuTe DSL (the ``cutlass`` package of nvidia-cutlass-dsl) as a compiler whose kernels record.

flashinfer-python requires nvidia-cutlass-dsl; a CPU machine cannot install it usefully (it compiles
for Blackwell GPUs). FlashInfer's CuTe-DSL paths (``nvfp4_quantize(backend="cute-dsl")``, per token
or not, ``silu_and_mul_nvfp4_quantize``, mm_fp4's requirement checks under ``backend="auto"``) import
it, describe their kernels with it, compile them and call the compiled kernel with the tensors they
allocated. Installed by serving_stubs for the trace ladder, this stands in for it the way the
recording JIT modules stand in for a built library:

- every ``cutlass`` module imports, and answers any name with a placeholder: callable (a decorator
  hands back what it decorates), subscriptable, a base class, an operand; so FlashInfer's kernel
  classes and the fake tensors it describes a compile with are built by FlashInfer's own code;
- ``cute.compile(kernel, ...)`` returns a kernel that records its arguments (serving_stubs' launch,
  named ``cute.compile:<kernel class>``) and writes nothing; FlashInfer's persistent cache of CuTe
  kernels (``JitSpecCuteDsl.build_and_load``, 0.6.16 on) takes its lock as upstream does and runs
  the compile;
- ``from_dlpack(tensor)`` (the releases before TVM-FFI hand the kernel DLPack views) is the tensor.

So what a CuTe-DSL path allocates, and what it hands its kernel, is FlashInfer's own code; what the
kernel computes is nobody's here.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

from nvfp4_overlay.probes.flashinfer.stubs.recording import Placeholder, kernel_of

PACKAGE = "cutlass"
# What the DSL brings along that FlashInfer's CuTe kernels import too: CUDA Python's bindings, cuTile
# (flashinfer-python requires cuda-tile); stood in for only where this machine has none.
ALONG = ("cuda",)


class DslPlaceholder(Placeholder):
    """A name of the DSL, or the value of a call of one."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], DslPlaceholder):
            return args[0]  # a decorator: @cute.jit, @cute.kernel, @dsl_user_op
        return DslPlaceholder(f"{self._name}()")

    def __getitem__(self, key: Any) -> Any:
        return DslPlaceholder(f"{self._name}[]")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)  # class Kernel(cutlass.SomeBase): a plain class here

    def __iter__(self) -> Any:
        return iter(())

    def __int__(self) -> int:
        return 0

    __index__ = __int__

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<cute-dsl {self._name}>"

    def _operand(self, *args: Any) -> Any:
        return DslPlaceholder(f"({self._name} op)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _operand
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _operand
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __lshift__ = __rshift__ = _operand
    __neg__ = __pos__ = __invert__ = _operand


class StandIn(types.ModuleType):
    """A module of the DSL: its submodules when imported, a placeholder for any other name."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return DslPlaceholder(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, box: Any, packages: tuple[str, ...]) -> None:
        self.box, self.packages = box, packages

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", 1)[0] not in self.packages:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = StandIn(spec.name)
        module.__path__ = []  # a package: every submodule imports
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ == f"{PACKAGE}.cute":
            module.compile = _compile(self.box)  # type: ignore[attr-defined]
        if module.__name__.endswith(".runtime"):
            module.from_dlpack = _from_dlpack  # type: ignore[attr-defined]


def _from_dlpack(tensor: Any, *args: Any, **kwargs: Any) -> Any:
    """from_dlpack(tensor): the tensor itself, its layout marks (a compile's hints) answered by it."""
    for name in ("mark_layout_dynamic", "mark_compact_shape_dynamic"):
        setattr(tensor, name, lambda *a, _tensor=tensor, **k: _tensor)
    return tensor


def _compile(box: Any) -> Any:
    def compile(kernel: Any, *args: Any, **kwargs: Any) -> Any:
        return kernel_of(box, f"cute.compile:{type(kernel).__name__}")

    return compile


def install(box: Any) -> None:
    """The stand-in on sys.meta_path (before any finder that could find a real one), and FlashInfer's
    CuTe-kernel cache made to compile under its lock."""
    import importlib.util

    along = tuple(p for p in ALONG if importlib.util.find_spec(p) is None)
    sys.meta_path.insert(0, _Finder(box, (PACKAGE, *along)))
    for name, loaded in list(sys.modules.items()):  # flags FlashInfer computed at its own import
        if name.startswith("flashinfer") and loaded is not None and hasattr(loaded, "CUTE_DSL_AVAILABLE"):
            loaded.CUTE_DSL_AVAILABLE = True  # type: ignore[attr-defined]
    try:
        from flashinfer.jit import cute_dsl_core
    except ImportError:
        return  # before 0.6.16: FlashInfer calls cute.compile itself
    from flashinfer.jit import core as jit_core

    def build_and_load(self: Any, *args: Any, **kwargs: Any) -> Any:
        with jit_core.FileLock(self.lock_path, thread_local=False):
            return self.compile_fn()

    cute_dsl_core.JitSpecCuteDsl.build_and_load = build_and_load
