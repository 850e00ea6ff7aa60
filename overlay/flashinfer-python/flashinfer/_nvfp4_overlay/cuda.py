"""nvfp4-overlay: FlashInfer's CUDA path and version lookups, answered without a process.

Added by nvfp4-overlay to every flashinfer-python release; patch 0001 puts these functions in
place of get_cuda_path, get_cuda_version and is_cuda_version_at_least in flashinfer/jit/cpp_ext.py
(one decorator line each, ``@replaces``).

FlashInfer asks its one get_cuda_version() two questions: what nvcc can compile (the architecture
list and its suffix, ``-D`` feature gates, nvcc-only flags, kernel generation, AOT lists) and what
the runtime offers (backend selection, whether a CuTe-DSL kernel may run). Upstream answers both
from ``nvcc --version`` (after ``which nvcc``), so a call reached while torch.compile traces starts
a process and fullgraph fails. Here the answer is upstream's unless the audit says otherwise:

- Every call gets the toolkit's release exactly as upstream finds it: nvcc under CUDA_HOME or
  CUDA_PATH, else the one on PATH (shutil.which, no ``which`` process), else /usr/local/cuda;
  torch's release when there is no nvcc. The release is read from the toolkit's own files
  (version.json, then CUDA_VERSION in include/cuda.h, which a pip-installed toolkit has without
  version.json), and ``nvcc --version`` runs only when neither exists. So the patched wheel writes
  upstream's nvcc command lines, refusals included, for any caller, also one the audit never saw.
- The run-time call sites (RUN_TIME in cuda_sites.py, from the audit in
  patches/flashinfer-python/audit-cuda-versions.json), and every call while dynamo traces (dynamo
  cannot inspect frames), get ``torch.version.cuda``: the runtime the kernels run on, known without
  a process (the toolkit's release when torch has no CUDA).

The call site is the call itself: the calling frame's module and innermost named scope (a lambda
or a comprehension asks for the function it sits in, a forwarder (FORWARDERS) for its caller), and
the call the frame is making, named by its source text and how many calls of that text come before
it in that scope (robust to lines upstream adds around it; cuda_calls.py finds it). A FlashInfer
call the audit does not list gets upstream's answer and warns once, also one inside a function
whose other calls it lists: a new lookup in an audited function is a new question nobody answered.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from inspect import CO_OPTIMIZED
from types import CodeType, FrameType
from typing import Callable, Dict, Mapping, Optional, Set, Tuple, TypeVar

import torch
from packaging.version import Version

from .cuda_calls import ANONYMOUS as _ANONYMOUS
from .cuda_calls import Call, calls_at
from .cuda_sites import FORWARDERS, RUN_TIME, TOOLKIT

F = TypeVar("F", bound=Callable[..., object])
Site = Tuple[str, str]  # (module, qualified name of the innermost named scope)


class UnauditedCudaVersionCall(UserWarning):
    """A FlashInfer function asked for the CUDA version and nvfp4-overlay's audit does not know it."""


_TORCH, _TOOLKIT, _FORWARDS = "torch", "toolkit", "forwards"

# The lookups are cached like upstream's functools.cache, in plain dicts: dynamo ignores
# functools.cache and traces the body of a cached function, the process included.
_cuda_path: Dict[str, str] = {}
_toolkit: Dict[str, Version] = {}
_torch: Dict[str, Version] = {}
_sites: Dict[CodeType, Site] = {}
_answers: Dict[CodeType, Dict[int, str]] = {}  # code object -> f_lasti -> the answer of that call
_warned: Set[object] = set()
_code_names: Dict[str, Dict[CodeType, str]] = {}  # Python 3.10: module -> its code objects' qualnames


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
    """Upstream's answer, torch's at a run-time call site and while dynamo traces (the module docstring)."""
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
    answer = _answer_at(frame)
    while answer == _FORWARDS and frame.f_back is not None:
        frame = frame.f_back  # a forwarder asks for its caller
        answer = _answer_at(frame)
    return torch_cuda_version() if answer == _TORCH else toolkit_cuda_version()


def _answer_at(frame: FrameType) -> str:
    """The answer of the call the frame is making, kept per code object and instruction: a call site
    is found once a process (its file parsed once), then answered from two dict lookups."""
    at = _answers.get(frame.f_code)
    if at is None:
        at = _answers[frame.f_code] = {}
    answer = at.get(frame.f_lasti)
    if answer is None:
        module, qualname = _site(frame)
        answer = at[frame.f_lasti] = _classify(module, qualname, calls_at(frame))
    return answer


def _site(frame: FrameType) -> Site:
    code = frame.f_code
    if code not in _sites:
        _sites[code] = (_module_of(frame), named_scope(_qualname(frame)))
    return _sites[code]


def _classify(module: str, qualname: str, calls: Tuple[Call, ...]) -> str:
    """The audit's answer for the call (RUN_TIME, FORWARDERS, TOOLKIT), upstream's for one it does not
    list. Python 3.10 knows the line alone: several calls on it count as one if the audit answers them alike."""
    answers = {answer for answer, table in ((_TORCH, RUN_TIME), (_FORWARDS, FORWARDERS), (_TOOLKIT, TOOLKIT))
               for call in calls if call in _listed(table, module, qualname)}
    if len(answers) == 1:
        return answers.pop()
    said = calls[0][0] if len(calls) == 1 else "a call whose source it cannot read" if not calls else (
        "one of: " + ", ".join(c[0] for c in calls))
    if module.partition(".")[0] == "flashinfer" and (module, qualname, calls) not in _warned:
        _warned.add((module, qualname, calls))
        warnings.warn(
            f"flashinfer: {module} {qualname} asks for the CUDA version ({said}) and the call is not in "
            "nvfp4-overlay's audit; it gets the toolkit's release, as upstream answers it. Report it to "
            "nvfp4-overlay (patches/flashinfer-python/audit-cuda-versions.json), saying whether it decides "
            "what nvcc compiles.",
            UnauditedCudaVersionCall,
            stacklevel=5,  # the caller, past _answer_at, _version_for and get_cuda_version
        )
    return _TOOLKIT


def named_scope(qualname: str) -> str:
    """The innermost named scope of a qualified name: 'f' for 'f.<locals>.<lambda>', '<module>' for '<genexpr>'."""
    parts = qualname.split(".")
    while parts and parts[-1] in _ANONYMOUS:
        parts.pop()
        if parts and parts[-1] == "<locals>":
            parts.pop()
    return ".".join(parts) or "<module>"


def _module_of(frame: FrameType) -> str:
    module = frame.f_globals.get("__name__", "")
    if module == "__main__":  # python -m flashinfer.aot: the module's own name is its spec's
        spec = frame.f_globals.get("__spec__")
        module = getattr(spec, "name", module)
    return str(module)


def _listed(table: Mapping[str, Mapping[str, "frozenset[Call]"]], module: str, qualname: str) -> "frozenset[Call]":
    """The calls the table lists in the function: (source text, calls of that text before it)."""
    functions = table.get(module)
    if functions is None:  # a pattern such as "flashinfer.*cake_build" (one copy per package)
        functions = next((v for k, v in table.items() if "*" in k and _matches(k, module)), None)
    return frozenset() if functions is None else functions.get(qualname, frozenset())


def _matches(pattern: str, module: str) -> bool:
    head, _, tail = pattern.partition("*")
    return module.startswith(head) and module.endswith(tail) and len(module) > len(head) + len(tail)


# --- the calling function's qualified name -----------------------------------------------------


def qualname_from_code(frame: FrameType) -> str:
    return str(frame.f_code.co_qualname)  # type: ignore[attr-defined]  # Python 3.11


def qualname_by_search(frame: FrameType) -> str:
    """Python 3.10 has no co_qualname: the code object is found among the module's functions and classes."""
    code = frame.f_code
    if code.co_name == "<module>":
        return "<module>"
    module = str(frame.f_globals.get("__name__", ""))
    names = _code_names.get(module)
    if names is None or code not in names:  # walked again for a function made since
        names = _code_names[module] = _names_in(frame.f_globals, module)
    if code in names:
        return names[code]
    if code.co_name in ("<listcomp>", "<dictcomp>", "<setcomp>") and frame.f_back is not None:
        return qualname_by_search(frame.f_back) + ".<locals>." + code.co_name  # run where it was made
    return "<module>" if code.co_name in _ANONYMOUS else code.co_name


def _names_in(namespace: Mapping[str, object], module: str) -> Dict[CodeType, str]:
    found: Dict[CodeType, str] = {}
    seen: Set[int] = set()

    def code_of(code: CodeType, qualname: str) -> None:
        found.setdefault(code, qualname)
        link = ".<locals>." if code.co_flags & CO_OPTIMIZED else "."  # a class body has no <locals>
        for inner in code.co_consts:
            if isinstance(inner, CodeType) and inner not in found:
                code_of(inner, qualname + link + inner.co_name)

    def value_of(value: object) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, type):
            if value.__module__ == module:
                for member in list(vars(value).values()):
                    value_of(member)
            return
        if isinstance(value, property):
            for accessor in (value.fget, value.fset, value.fdel):
                value_of(accessor)
            return
        value = getattr(value, "__func__", value)  # staticmethod, classmethod
        while hasattr(value, "__wrapped__"):  # functools.cache, functools.wraps: the function inside
            value = value.__wrapped__  # type: ignore[attr-defined]
        code = getattr(value, "__code__", None)
        if isinstance(code, CodeType) and getattr(value, "__module__", module) == module:
            code_of(code, str(getattr(value, "__qualname__", code.co_name)))

    for value in list(namespace.values()):
        value_of(value)
    return found


_qualname = qualname_from_code if hasattr(CodeType, "co_qualname") else qualname_by_search


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
