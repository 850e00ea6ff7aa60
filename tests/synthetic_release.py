"""A real upstream wheel repacked as a release that does not exist yet, with files edited: a new upstream.

What a maintainer meets when upstream publishes: the same wheel layout, a new version everywhere it is
written (the file name, METADATA's Version, the .dist-info directory, RECORD's paths), and some files
changed. Unchanged members are copied raw (0.7.4 is 717 MB unpacked); every edited or added file and
METADATA get RECORD rows of their own hash, so pip, verify and the engine read it as they read a real one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from nvfp4_overlay import records
from nvfp4_overlay.wheel.archive import WheelReader
from nvfp4_overlay.wheel.metadata import parse_record, set_version
from nvfp4_overlay.wheel.recipe import CopiedMember, Entry, NewMember
from nvfp4_overlay.wheel.writer import write_wheel

Edit = Callable[[str], str]  # the old text ("" for a new file) -> the new text


def repack(wheel: Path, version: str, out_dir: Path, edits: Mapping[str, Edit], *,
           metadata_version: str | None = None) -> Path:
    """wheel as `version` in out_dir, each path of edits rewritten (or added); the new wheel's path.

    metadata_version: METADATA says this release instead (a wheel that is not what its name says).
    """
    stem, old_version, rest = wheel.name.split("-", 2)
    old_info, new_info = f"{stem}-{old_version}.dist-info", f"{stem}-{version}.dist-info"
    out = out_dir / f"{stem}-{version}-{rest}"
    with WheelReader(wheel) as reader:
        record = parse_record(reader.read(f"{old_info}/RECORD"), str(wheel))
        rows: dict[str, records.Row] = {}
        entries: list[Entry] = []
        changed: dict[str, bytes] = {
            path: edit(reader.read(path).decode() if path in reader.infos else "").encode()
            for path, edit in edits.items()}
        changed[f"{old_info}/METADATA"] = set_version(reader.read(f"{old_info}/METADATA"), metadata_version or version)
        for name in [*reader.names, *sorted(set(changed) - set(reader.names))]:
            if name == f"{old_info}/RECORD":
                continue
            new = name.replace(old_info, new_info, 1) if name.startswith(f"{old_info}/") else name
            if name in changed:
                entries.append(NewMember(new, changed[name]))
                rows[new] = records.Row(new, records.hash_of(changed[name]), str(len(changed[name])))
            else:
                entries.append(CopiedMember(new, reader.infos[name]))
                old = record[name]
                rows[new] = records.Row(new, old.hash, old.size)
        entries.append(NewMember(f"{new_info}/RECORD", records.write(f"{new_info}/RECORD", rows.values())))
        with out.open("wb") as f:
            write_wheel(f, reader, entries, (2026, 12, 1, 0, 0, 0))
    return out


# --- upstream fixes the lookup itself: no process, and pip's toolkit before CUDA_HOME and PATH -------

_PATH_HEAD = '''def get_cuda_path() -> str:
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
'''
_VERSION_TRY = '''    try:
        cuda_home = get_cuda_path()
        nvcc = os.path.join(cuda_home, "bin/nvcc")
'''
_AFTER_AT_LEAST = '''def is_cuda_version_at_least(version_str: str) -> bool:
    return get_cuda_version() >= Version(version_str)
'''
PIP_NVCC = "nvidia/cuda_nvcc"  # where the nvidia-cuda-nvcc wheel puts the toolkit, under site-packages


def pip_toolkit_first(cpp_ext: str) -> str:
    """jit/cpp_ext.py with a lookup as upstream could fix it; the lines patch 0001's hunks hold to stay.

    get_cuda_path takes pip's nvcc (``<site-packages>/nvidia/cuda_nvcc/bin/nvcc``, any sys.path
    entry) before CUDA_HOME, CUDA_PATH and PATH; get_cuda_version reads the release from the
    toolkit's include/cuda.h and runs nvcc only when that is missing.
    """
    for anchor in (_PATH_HEAD, _VERSION_TRY, _AFTER_AT_LEAST):
        if cpp_ext.count(anchor) != 1:
            msg = f"jit/cpp_ext.py: {anchor.splitlines()[0]!r} is not there once; the edit is for 0.6.1-0.7.4"
            raise ValueError(msg)
    text = cpp_ext.replace(_PATH_HEAD, _PATH_HEAD + '''    pip_home = _pip_cuda_home()  # pip's toolkit first: it is the one this environment installed
    if pip_home is not None:
        return pip_home
''')
    text = text.replace(_VERSION_TRY, _VERSION_TRY + '''        release = _release_in_headers(cuda_home)  # no process where the headers say it
        if release is not None:
            return release
''')
    return text.replace(_AFTER_AT_LEAST, _AFTER_AT_LEAST + f'''

def _pip_cuda_home():
    import sys

    for base in sys.path:
        home = os.path.join(base or ".", "{PIP_NVCC}")
        if os.path.exists(os.path.join(home, "bin", "nvcc")):
            return home
    return None


def _release_in_headers(cuda_home):
    try:
        with open(os.path.join(cuda_home, "include", "cuda.h")) as f:
            match = re.search(r"^#define\\s+CUDA_VERSION\\s+(\\d+)", f.read(), re.MULTILINE)
    except OSError:
        return None
    if match is None:
        return None
    number = int(match.group(1))
    return Version(f"{{number // 1000}}.{{number % 1000 // 10}}")
''')
