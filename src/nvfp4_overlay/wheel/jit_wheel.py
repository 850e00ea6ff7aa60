"""The flashinfer_jit_cache wheel: its version, its members and their layout (pure), and writing it.

FlashInfer looks for a package named ``flashinfer_jit_cache`` (flashinfer/jit/env.py,
``_get_aot_dir``): its ``__version__`` must begin with FlashInfer's own (``0.6.8.post1``), and
``get_jit_cache_dir()`` names a directory where a module is ``<dir>/<name>/<name>.so``; a JitSpec
whose file is there loads it and builds nothing (``JitSpec.is_aot``). The version is the patched
FlashInfer's (``0.6.8.post1+nvfp4.7``, so the cache names the exact build whose sources it
compiled) with the CUDA major and GPU family appended as local segments (``.cu130.sm120``):
PEP 440 allows them, pip and uv install it beside the patched wheel, and upstream's prefix check
accepts it, as it accepts its own ``+cu129``.
"""

from __future__ import annotations

import io
import json
import platform
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from .. import records

PACKAGE = "flashinfer_jit_cache"
DIST = "flashinfer-jit-cache"
PROVENANCE = "NVFP4_OVERLAY_JIT_CACHE.json"
MODULES_DIR = "jit_cache"
# What the provenance says of the modules' bytes (probes/flashinfer/jit_build.py, docs/design.md).
REPRODUCIBLE = ("each module's bytes are a function of its inputs (sources' digests and flags) and the toolchain "
                "named here: built with FlashInfer's command lines plus flags that change embedded names only "
                "(-ffile-prefix-map, nvcc --keep), so verify builds it again and compares; a module marked "
                "not reproducible, or one that cannot be built again where it is checked, is taken on its builder's word")


def cache_version(flashinfer_local_version: str, cuda_major: str, gpu: str) -> str:
    version = Version(f"{flashinfer_local_version}.cu{cuda_major}0.{gpu}")
    return str(version)


@dataclass(frozen=True)
class Built:
    """One module: its name and its .so bytes."""

    name: str
    data: bytes


def members(version: str, modules: list[Built], provenance: Mapping[str, Any], requires: str) -> dict[str, bytes]:
    """The wheel's members, name -> bytes, RECORD last (PEP 427)."""
    dist_info = f"{PACKAGE}-{version}.dist-info"
    out: dict[str, bytes] = {f"{PACKAGE}/__init__.py": _init(version, provenance)}
    for module in sorted(modules, key=lambda m: m.name):
        out[f"{PACKAGE}/{MODULES_DIR}/{module.name}/{module.name}.so"] = module.data
    out[f"{dist_info}/METADATA"] = _metadata(version, provenance, requires)
    out[f"{dist_info}/WHEEL"] = _wheel_file()
    out[f"{dist_info}/{PROVENANCE}"] = (json.dumps(provenance, indent=2, sort_keys=True) + "\n").encode()
    rows = [records.Row(name, records.hash_of(data), str(len(data))) for name, data in out.items()]
    out[f"{dist_info}/RECORD"] = records.write(f"{dist_info}/RECORD", rows)
    return out


def filename(version: str) -> str:
    return f"{PACKAGE}-{version}-py3-none-{platform_tag()}.whl"


def platform_tag() -> str:
    """The modules are ELF objects of this machine's architecture, linked as FlashInfer's JIT links
    them (glibc, libstdc++ of the host compiler); the toolkit itself needs glibc 2.28 or newer."""
    return f"manylinux_2_28_{platform.machine()}"


def write(out: io.BufferedIOBase, files: Mapping[str, bytes], date_time: tuple[int, ...]) -> None:
    """A new archive (zipfile writes fresh members; nothing is copied raw here): fixed dates, order and modes."""
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=date_time[:6])  # type: ignore[arg-type]
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.create_system = 3  # unix, so the mode is read back
            zf.writestr(info, data, compresslevel=6)


def _init(version: str, provenance: Mapping[str, Any]) -> bytes:
    text = f'''"""FlashInfer's JIT modules, prebuilt by nvfp4-overlay for {provenance.get("stack")} on {provenance.get("gpu")}.

FlashInfer loads them through its own jit-cache lookup (flashinfer/jit/env.py); what each module is,
and what it was built from, is in the dist-info's {PROVENANCE}.
"""

import pathlib

__version__ = "{version}"


def get_jit_cache_dir() -> str:
    return str(pathlib.Path(__file__).resolve().parent / "{MODULES_DIR}")
'''
    return text.encode()


def _metadata(version: str, provenance: Mapping[str, Any], requires: str) -> bytes:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {DIST}",
        f"Version: {version}",
        f"Summary: FlashInfer JIT modules of {provenance.get('stack')} prebuilt for {provenance.get('gpu')} "
        f"(CUDA {provenance.get('cuda', {}).get('release')}), by nvfp4-overlay",
        f"Requires-Dist: {requires}",
        "",
    ]
    return "\n".join(lines).encode()


def _wheel_file() -> bytes:
    from .. import __version__

    return (f"Wheel-Version: 1.0\nGenerator: nvfp4-overlay {__version__}\nRoot-Is-Purelib: false\n"
            f"Tag: py3-none-{platform_tag()}\n").encode()
