"""The CUDA toolkit a JIT cache is built with: where it is, its release, the toolchain around it, and the link stub it may lack.

FlashInfer's JIT links every module with ``-L$cuda_home/lib64/stubs -lcuda`` (jit/cpp_ext.py). A
toolkit installed without the driver stubs (the nvcc and cudart packages alone, as in slim CI
images) has no ``lib64/stubs/libcuda.so``, and the link fails. Then a stub is made the way NVIDIA's
is: a library named ``libcuda.so.1`` that defines every driver function ``include/cuda.h`` declares
(names only; the real driver answers at load time), found through ``LIBRARY_PATH``, so the link
line stays upstream's. No library does this; it is a dozen lines.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..errors import ConfigError
from ..files import replace_file

_DRIVER_FUNCTION = re.compile(r"\bCUresult\s+(cu\w+)\s*\(")
_CUDA_VERSION = re.compile(rb"#define\s+CUDA_VERSION\s+(\d+)")


@dataclass(frozen=True)
class Toolkit:
    root: Path
    release: str  # "13.0", from include/cuda.h (what nvcc compiles against)
    nvcc_version: str  # nvcc --version's last line, for the provenance

    @property
    def major(self) -> str:
        return self.release.split(".")[0]


def find_toolkit(environ: dict[str, str] | None = None) -> Toolkit:
    """CUDA_HOME, else the toolkit of the nvcc on PATH (following links); exit 2 naming the fix."""
    env = os.environ if environ is None else environ
    candidates = [Path(env["CUDA_HOME"])] if env.get("CUDA_HOME") else []
    nvcc = shutil.which("nvcc", path=env.get("PATH"))
    if nvcc:
        candidates += [Path(os.path.realpath(nvcc)).parent.parent, Path("/usr/local/cuda")]
    for root in candidates:
        header = root / "include" / "cuda.h"
        if header.is_file() and (root / "bin" / "nvcc").is_file():
            return Toolkit(root, _release(header), _nvcc_version(root / "bin" / "nvcc"))
    where = ", ".join(map(str, candidates)) or "no CUDA_HOME and no nvcc on PATH"
    msg = f"no CUDA toolkit found ({where}): a JIT cache is built with the real nvcc"
    raise ConfigError(msg, item="CUDA_HOME", expected="a toolkit with bin/nvcc and include/cuda.h", found=where,
                      fix="install the CUDA toolkit and set CUDA_HOME to it (e.g. CUDA_HOME=/usr/local/cuda-13.0)")


def toolchain(toolkit: Toolkit, environ: dict[str, str] | None = None) -> dict[str, str]:
    """What turns a module's inputs into its bytes besides them: nvcc, the host compilers (nvcc's, $CC or gcc;
    FlashInfer's link and .cpp compiles, $CXX or c++, jit/cpp_ext.py) and the tvm-ffi headers every module
    includes. Two hosts that agree on these build the same bytes from the same inputs."""
    env = os.environ if environ is None else environ
    found = {"nvcc": toolkit.nvcc_version, "cc": _first_line([env.get("CC") or "gcc", "--version"]),
             "cxx": _first_line([env.get("CXX") or "c++", "--version"])}
    try:
        found["tvm_ffi"] = metadata.version("apache-tvm-ffi")
    except metadata.PackageNotFoundError:
        found["tvm_ffi"] = "not installed"
    return found


def _first_line(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        return f"{argv[0]}: {exc.strerror}"
    return (done.stdout.strip().splitlines() or [f"{argv[0]} exited {done.returncode}"])[0]


def _release(header: Path) -> str:
    found = _CUDA_VERSION.search(header.read_bytes())
    if found is None:
        msg = f"{header}: no CUDA_VERSION define; is this a CUDA toolkit?"
        raise ConfigError(msg, path=header, item="CUDA_VERSION", found="missing", fix="set CUDA_HOME to one")
    number = int(found.group(1))
    return f"{number // 1000}.{number % 1000 // 10}"


def _nvcc_version(nvcc: Path) -> str:
    done = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    return "; ".join(lines[-2:]) if lines else f"nvcc --version exited {done.returncode}"


def link_stub(toolkit: Toolkit, into: Path) -> Path | None:
    """A directory holding a libcuda.so stub when the toolkit has none (None: it has one)."""
    if (toolkit.root / "lib64" / "stubs" / "libcuda.so").is_file():
        return None
    preprocessed = subprocess.run(["cc", "-E", "-P", f"-I{toolkit.root / 'include'}", str(toolkit.root / "include" / "cuda.h")],
                                  capture_output=True, text=True, check=True).stdout
    names = sorted(set(_DRIVER_FUNCTION.findall(preprocessed)))
    into.mkdir(parents=True, exist_ok=True)
    source = into / "libcuda_stub.c"
    replace_file(source, "".join(f"void {name}(void) {{}}\n" for name in names).encode())
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(into / "libcuda.so"), str(source)],
                   check=True)
    return into
