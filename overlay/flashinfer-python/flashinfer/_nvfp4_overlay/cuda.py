"""nvfp4-overlay: FlashInfer's CUDA path and version lookups, answered without a process.

Added by nvfp4-overlay to every flashinfer-python release; patch 0001 puts these functions in
place of get_cuda_path, get_cuda_version and is_cuda_version_at_least in flashinfer/jit/cpp_ext.py
(one decorator line each, ``@replaces``).

FlashInfer asks its one get_cuda_version() two questions. Upstream answers both from
``nvcc --version`` (after ``which nvcc``), so a call reached while torch.compile traces starts a
process and fullgraph fails. Here the answer depends on the question, that is on the call site:

- What nvcc can compile: the architecture list and its suffix, ``-D`` feature gates, nvcc-only
  flags, kernel generation, AOT lists (the call sites in nvcc_facing.py, from the audit in
  docs/patches.md). Those get the toolkit's release exactly as upstream finds it: nvcc under
  CUDA_HOME or CUDA_PATH, else the one on PATH (shutil.which, no ``which`` process), else
  /usr/local/cuda; torch's release when there is no nvcc. The release is read from the toolkit's
  own files (version.json, then CUDA_VERSION in include/cuda.h, which a pip-installed toolkit
  has without version.json), and ``nvcc --version`` runs only when neither exists. So the
  patched wheel writes upstream's nvcc command lines, refusals included.
- Everything else, and every call while dynamo traces: ``torch.version.cuda``, the runtime the
  kernels run on, known without a process (the toolkit's release when torch has no CUDA).
"""

import json
import os
import re
import shutil
import subprocess
import sys
from types import CodeType, FrameType
from typing import Callable, Dict, Optional, TypeVar

import torch
from packaging.version import Version

from .nvcc_facing import NVCC_FACING

F = TypeVar("F", bound=Callable[..., object])

# Frames Python makes for a comprehension or generator expression (3.10, 3.11): the call site is
# the function they sit in.
_ANONYMOUS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})

# The lookups are cached like upstream's functools.cache, in plain dicts: dynamo ignores
# functools.cache and traces the body of a cached function, the process included.
_cuda_path: Dict[str, str] = {}
_toolkit: Dict[str, Version] = {}
_torch: Dict[str, Version] = {}
_asks_nvcc: Dict[CodeType, bool] = {}


def replaces(upstream: F) -> F:
    """Patch 0001's decorator: the function of this module with the same name takes upstream's place."""
    return globals()[upstream.__name__]  # type: ignore[no-any-return]


# --- what FlashInfer calls ---------------------------------------------------------------------


def get_cuda_path() -> str:
    """Upstream's CUDA_HOME search, with shutil.which for ``which nvcc``."""
    if "home" not in _cuda_path:
        _cuda_path["home"] = _find_cuda_path()
    return _cuda_path["home"]


def get_cuda_version() -> Version:
    """The toolkit's release at an nvcc-facing call site, else torch's (see the module docstring)."""
    if torch.compiler.is_compiling():
        return torch_cuda_version()
    return _version_for(sys._getframe(1))


def is_cuda_version_at_least(version_str: str) -> bool:
    if torch.compiler.is_compiling():
        return torch_cuda_version() >= Version(version_str)
    return _version_for(sys._getframe(1)) >= Version(version_str)


# --- the two answers ---------------------------------------------------------------------------


def torch_cuda_version() -> Version:
    """torch.version.cuda; the toolkit's release only for a build of torch without CUDA."""
    text = torch.version.cuda
    if text is None:
        return toolkit_cuda_version()
    if text not in _torch:
        _torch[text] = Version(text)
    return _torch[text]


def toolkit_cuda_version() -> Version:
    """What upstream's get_cuda_version() answers: nvcc's release, else torch's."""
    if "release" not in _toolkit:
        if torch.compiler.is_compiling():
            msg = (
                "flashinfer: the CUDA toolkit's release cannot be looked up while torch.compile "
                "traces; set CUDA_HOME, or call flashinfer.jit.cpp_ext.get_cuda_version() once "
                "before compiling"
            )
            raise RuntimeError(msg)
        _toolkit["release"] = _find_toolkit_release()
    return _toolkit["release"]


def _version_for(frame: FrameType) -> Version:
    code = frame.f_code
    while code.co_name in _ANONYMOUS and frame.f_back is not None:
        frame = frame.f_back  # a comprehension's frame: the question is the function's it sits in
        code = frame.f_code
    if code not in _asks_nvcc:
        _asks_nvcc[code] = _listed(_module_of(frame), _qualname(frame))
    return toolkit_cuda_version() if _asks_nvcc[code] else torch_cuda_version()


def _module_of(frame: FrameType) -> str:
    module = frame.f_globals.get("__name__", "")
    if module == "__main__":  # python -m flashinfer.aot: the module's own name is its spec's
        spec = frame.f_globals.get("__spec__")
        module = getattr(spec, "name", module)
    return module


def _qualname(frame: FrameType) -> str:
    """The calling function's qualified name: fused_moe/runners.py has five _check_support methods."""
    code = frame.f_code
    qualname = getattr(code, "co_qualname", None)  # Python 3.11
    if qualname is not None:
        return qualname
    for value in list(frame.f_globals.values()):  # Python 3.10: the class whose method this code is
        if isinstance(value, type):
            method = value.__dict__.get(code.co_name)
            method = getattr(method, "__func__", method)
            if getattr(method, "__code__", None) is code:
                return f"{value.__name__}.{code.co_name}"
    return code.co_name


def _listed(module: str, qualname: str) -> bool:
    names = NVCC_FACING.get(module)
    if names is None:  # a pattern such as "flashinfer.*cake_build" (one copy per package)
        names = next((v for k, v in NVCC_FACING.items() if "*" in k and _matches(k, module)), None)
    if names is None:
        return False
    # Python 3.10 names a nested function by itself: "has_sm" for "detect_sm_capabilities.<locals>.has_sm".
    return qualname in names or ("." not in qualname and any(n.endswith(f"<locals>.{qualname}") for n in names))


def _matches(pattern: str, module: str) -> bool:
    head, _, tail = pattern.partition("*")
    return module.startswith(head) and module.endswith(tail) and len(module) > len(head) + len(tail)


# --- finding the toolkit, as upstream does, without a process ---------------------------------


def _find_cuda_path() -> str:
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home is not None:
        return cuda_home
    if torch.compiler.is_compiling():
        msg = "flashinfer: nvcc cannot be searched for on PATH while torch.compile traces; set CUDA_HOME"
        raise RuntimeError(msg)
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        return os.path.dirname(os.path.dirname(nvcc))
    # The default of torch.utils.cpp_extension, as upstream has it.
    cuda_home = "/usr/local/cuda"
    if not os.path.exists(cuda_home):
        raise RuntimeError(f"Could not find nvcc and default {cuda_home=} doesn't exist")
    return cuda_home


def _find_toolkit_release() -> Version:
    # Upstream runs `$cuda_home/bin/nvcc --version` and falls back to torch's release when
    # get_cuda_path() raises or nvcc is not there (RuntimeError, FileNotFoundError).
    try:
        cuda_home = get_cuda_path()
    except RuntimeError as exc:
        return _torch_instead(exc)
    nvcc = os.path.join(cuda_home, "bin/nvcc")
    if not os.path.exists(nvcc):
        return _torch_instead(FileNotFoundError(nvcc))
    return _release_from_files(cuda_home) or _release_from_nvcc(nvcc)


def _release_from_files(cuda_home: str) -> Optional[Version]:
    try:
        with open(os.path.join(cuda_home, "version.json")) as f:
            release = json.load(f)["cuda"]["version"]
        return Version(".".join(str(release).split(".")[:2]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        with open(os.path.join(cuda_home, "include", "cuda.h")) as f:
            match = re.search(r"^#define\s+CUDA_VERSION\s+(\d+)", f.read(), re.MULTILINE)
    except OSError:
        return None
    if match is None:
        return None
    number = int(match.group(1))  # 12080 is 12.8
    return Version(f"{number // 1000}.{number % 1000 // 10}")


def _release_from_nvcc(nvcc: str) -> Version:
    try:
        txt = subprocess.check_output([nvcc, "--version"], text=True)
        matches = re.findall(r"release (\d+\.\d+),", txt)
        if not matches:
            raise RuntimeError(f"Could not parse CUDA version from nvcc --version output: {txt}")
        return Version(matches[0])
    except (RuntimeError, FileNotFoundError, subprocess.CalledProcessError) as exc:
        return _torch_instead(exc)


def _torch_instead(exc: BaseException) -> Version:
    if torch.version.cuda is None:
        raise RuntimeError(
            "nvcc not found and PyTorch is not built with CUDA support. "
            "Could not determine CUDA version."
        ) from exc
    return Version(torch.version.cuda)
