"""Probe part: planned JIT modules built by FlashInfer's own build_jit_specs, so that the same inputs give the same bytes on any host.

What differs between two builds of one module (measured, nvcc 13.0 and g++ 13: fp4_kv_quant built
from two cache dirs by two processes; docs/design.md): the absolute paths of the sources and of the
headers, which ``__FILE__`` puts into .rodata (a check's message), shifting the code that addresses
them; nvcc's temporary file name, ``tmpxft_<pid>_<n>``, which reaches the symbol table as the name
of the host compiler's static initializer (``_GLOBAL__sub_I_tmpxft_...cudafe1.cpp``); and the GNU
build-id, a digest of the rest. The fatbinary was the same. So each module gets, through FlashInfer's
own ``FLASHINFER_EXTRA_CFLAGS`` and ``FLASHINFER_EXTRA_CUDAFLAGS`` (appended to its command lines;
nothing of upstream's is changed or removed, and build.json records the difference), flags that
change embedded names only:

- ``-ffile-prefix-map=<path>=/nvfp4-overlay/<place>`` for each place a path comes from (the tree, the
  toolkit, the workspace, the cubins, Python's headers, site-packages), to the host compiler
  (``-Xcompiler=`` through nvcc, which preprocesses with it for the device side too);
- ``--keep --keep-dir=<dir>``: nvcc names its intermediate files after the source (``x.cudafe1.cpp``),
  not after its process; the directory is removed after the build.

A module whose ``.cu`` files share a name would collide in that directory: it is built with
upstream's flags alone and marked not reproducible, with the reason. A build is kept under
``DIR/<name>/`` with ``build.json`` (its key: the inputs' digest, the toolchain and these flags'
revision), so an interrupted build resumes and a verify on the same host finds it.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import shlex
import shutil
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any

HEARTBEAT_S = 30.0
REPRODUCIBLE = 1  # the revision of the flags below: a build made with other flags is not reused
PREFIX = "/nvfp4-overlay"  # where every place's paths are said to be, in the bytes of a module
_ENV = ("FLASHINFER_EXTRA_CFLAGS", "FLASHINFER_EXTRA_CUDAFLAGS")


def build(specs: dict[str, Any], described: dict[str, Any], how: dict[str, Any], places: dict[str, str]) -> dict[str, Any]:
    """Each chosen module built alone, kept when its key has not changed; {"modules": name -> build.json,
    "failed": module -> nvcc's first error line, "skipped": module -> why}."""
    out = Path(how["out"])
    chosen = [n for n in sorted(specs) if how.get("modules") is None or n in how["modules"]]
    done: dict[str, Any] = {}
    failed: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for number, name in enumerate(chosen, start=1):
        say = f"[{number}/{len(chosen)}] {name}:"
        spec, module = specs[name], described[name]
        uses_cubins = any(d.startswith("<cubins>") for d in module["include_dirs"])
        why_not = _not_reproducible(spec)
        key = build_key(module, how.get("cubins") if uses_cubins else None, how.get("toolchain"), why_not is None)
        stamp = out / name / "build.json"
        if stamp.is_file() and json.loads(stamp.read_text()).get("key") == key and (out / name / f"{name}.so").is_file():
            print(f"{say} built before, kept", file=sys.stderr, flush=True)
            done[name] = json.loads(stamp.read_text())
            continue
        if uses_cubins and not how.get("cubins"):
            # The planning stubs answered the trtllm-gen headers with placeholders; nvcc needs the real ones,
            # flashinfer-cubin's (jit-cache reads them from its pinned wheel when the dist dir or cache holds it).
            skipped[name] = ("it compiles against the trtllm-gen headers, which flashinfer-cubin ships and the dist dir and "
                             "cache lack: not prebuilt; bring it ('nvfp4-overlay index --cubins') and build again")
            print(f"{say} skipped: {skipped[name]}", file=sys.stderr, flush=True)
            continue
        print(f"{say} nvcc, {len(spec.sources)} sources", file=sys.stderr, flush=True)
        try:
            record = _build_one(spec, out / name, places, why_not, bool(how.get("verbose")))
        except RuntimeError as exc:  # nvcc refused: say so, go on with the others (one run shows every failure)
            first = next((line for line in str(exc).splitlines() if "error" in line), str(exc)[-300:])
            failed[name] = _scrub(first, places)
            print(f"{say} FAILED: {failed[name]}", file=sys.stderr, flush=True)
            continue
        done[name] = {"key": key, "inputs": module["inputs"], **record}
        stamp.write_text(json.dumps(done[name], sort_keys=True))
        print(f"{say} built in {record['seconds']} s", file=sys.stderr, flush=True)
    return {"modules": done, "failed": failed, "skipped": skipped}


def build_key(module: dict[str, Any], cubins: str | None, toolchain: Any, reproducible: bool) -> str:
    """What a build is kept by: the module's inputs (sources' digests and flags), flashinfer-cubin's digest for
    a module compiled against its headers, the toolchain that compiles it and the revision of the flags above."""
    parts = {"inputs": module["inputs"], "cubins": cubins, "toolchain": toolchain,
             "reproducible": REPRODUCIBLE if reproducible else None}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _build_one(spec: Any, out: Path, places: dict[str, str], why_not: str | None, verbose: bool) -> dict[str, Any]:
    """One module built by upstream's build_jit_specs and copied to out/<name>.so; what build.json records of it."""
    from flashinfer.jit import core as jit_core

    keep = Path(os.environ["FLASHINFER_WORKSPACE_BASE"]) / "keep" / spec.name
    places = _build_places(places)
    flags = {} if why_not else reproducible_flags(places, keep)
    added, removed = _command_lines(spec, flags)  # the build.ninja upstream writes, and ours
    started = time.monotonic()
    shutil.rmtree(keep, ignore_errors=True)
    keep.mkdir(parents=True, exist_ok=True)
    try:
        with _heartbeat(spec.name, started), _environ(flags):
            jit_core.build_jit_specs([spec], verbose=verbose, skip_prebuilt=False)
    finally:
        shutil.rmtree(keep, ignore_errors=True)
    seconds = round(time.monotonic() - started, 1)
    out.mkdir(parents=True, exist_ok=True)
    staged = out / f".{spec.name}.so.partial"
    shutil.copyfile(spec.jit_library_path, staged)
    staged.replace(out / f"{spec.name}.so")
    return {"seconds": seconds, "reproducible": why_not is None, **({"not_reproducible": why_not} if why_not else {}),
            "command_lines": {"added": [_scrub(t, places) for t in added], "removed": [_scrub(t, places) for t in removed]}}


def reproducible_flags(places: dict[str, str], keep: Path) -> dict[str, str]:
    """FLASHINFER_EXTRA_CFLAGS and FLASHINFER_EXTRA_CUDAFLAGS (each after what the environment already says):
    every place's path mapped to a fixed name (the longest last: GCC takes the last map that matches),
    and nvcc's intermediate files named after the source, in `keep`."""
    maps = [f"-ffile-prefix-map={path}={PREFIX}/{name.strip('<>')}"
            for path, name in sorted(places.items(), key=lambda p: len(p[0]))]
    cuda = [f"-Xcompiler={m}" for m in maps] + ["--keep", f"--keep-dir={keep}"]
    mine = {"FLASHINFER_EXTRA_CFLAGS": maps, "FLASHINFER_EXTRA_CUDAFLAGS": cuda}
    return {k: " ".join(filter(None, [os.environ.get(k, ""), *map(shlex.quote, v)])) for k, v in mine.items()}


def _build_places(places: dict[str, str]) -> dict[str, str]:
    """The plan's places, and the others a module's bytes may name: the toolkit by its real path (nvcc's own
    include directory), Python's headers and the site-packages that hold tvm_ffi's."""
    out = dict(places)
    for path, name in places.items():
        if name == "<toolkit>":
            out[os.path.realpath(path)] = "<toolkit>"
    out[sysconfig.get_paths()["include"]] = "<python>"
    with contextlib.suppress(ImportError):
        import tvm_ffi

        out[os.path.dirname(os.path.dirname(os.path.abspath(tvm_ffi.__file__)))] = "<site-packages>"
    return {p: n for p, n in out.items() if p and p != os.sep}


def _not_reproducible(spec: Any) -> str | None:
    """Why the flags cannot apply to this module (None: they can)."""
    names = collections.Counter(Path(str(s)).stem for s in spec.sources if str(s).endswith(".cu"))
    shared = sorted(n for n, count in names.items() if count > 1)
    if shared:
        return (f"its .cu sources share the name{'s' if len(shared) > 1 else ''} {', '.join(shared)}: nvcc's "
                f"intermediate files would collide in one --keep-dir, so it is built with upstream's flags alone and "
                f"nvcc's temporary file name (tmpxft_<pid>) stays in its bytes")
    return None


def _command_lines(spec: Any, flags: dict[str, str]) -> tuple[list[str], list[str]]:
    """(the tokens our build.ninja adds to upstream's, those it drops): the file written without the flags, then
    with them (write_ninja, which build_jit_specs then finds written)."""
    spec.write_ninja()
    upstream = Path(spec.ninja_path).read_text()
    with _environ(flags):
        spec.write_ninja()
    ours = Path(spec.ninja_path).read_text()
    # ninja's line continuations ("$") are layout, not flags
    a = collections.Counter(t for t in upstream.split() if t != "$")
    b = collections.Counter(t for t in ours.split() if t != "$")
    return sorted((b - a).elements()), sorted((a - b).elements())


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Any:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _scrub(text: str, places: dict[str, str]) -> str:
    for path, name in sorted(places.items(), key=lambda p: -len(p[0])):
        text = text.replace(path, name)
    return text


@contextlib.contextmanager
def _heartbeat(name: str, started: float) -> Any:
    """A line every HEARTBEAT_S seconds while nvcc works, so a long module never looks hung."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            print(f"    {name}: still building, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
