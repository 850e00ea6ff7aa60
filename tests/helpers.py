"""What the tests share besides fixtures: the checkout's paths, real upstream wheels, small wheels, a child Python,
the command line run in this process.

conftest.py holds the fixtures; test modules import these from here (``from helpers import PATCHES``).
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import functools
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from nvfp4_overlay.oracle import oracle, probe_runner
from nvfp4_overlay.patch.manifest import Target, load_upstream
from nvfp4_overlay.wheel import fetch

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "patches"
OVERLAY = ROOT / "overlay"

# `make test` runs every carried release on the cheap checks and the releases that a stack pins on
# all of them; `make test-releases` (NVFP4_OVERLAY_FULL=1) runs every release on all of them.
FULL = os.environ.get("NVFP4_OVERLAY_FULL") == "1"

# Upstream's half of the oracle, committed: a fact about each pinned wheel (tests/oracle/README.md).
COMMITTED_ORACLE = ROOT / "tests" / "oracle" / "flashinfer-python"


def flashinfer_releases() -> list[str]:
    """The carried flashinfer-python releases; NVFP4_OVERLAY_RELEASES="0.7.1 0.7.2" narrows them
    (make test-torch runs a stack's releases under its torch)."""
    from nvfp4_overlay.patch.manifest import all_targets

    every = [t.version for t in all_targets(PATCHES) if t.dist == "flashinfer-python"]
    only = os.environ.get("NVFP4_OVERLAY_RELEASES", "").split()
    return [v for v in every if v in only] if only else every


def rotating_sample(releases: Sequence[str], per_run: int, day: int) -> list[str]:
    """The releases whose committed upstream half a run computes again: per_run of them, the next
    ones each day, so that every committed half is held to a fresh run within len/per_run days."""
    if not releases:
        return []
    turns = -(-len(releases) // per_run)
    start = (day % turns) * per_run
    return list(releases[start : start + per_run])


# NVFP4_OVERLAY_FRESH=1 (make test-releases, the weekly run): every upstream half computed, none taken
# from tests/oracle/; otherwise two releases a day.
FRESH_UPSTREAM = (flashinfer_releases() if os.environ.get("NVFP4_OVERLAY_FRESH") == "1"
                  else rotating_sample(flashinfer_releases(), 2, datetime.date.today().toordinal()))


def by_release(releases: Sequence[str]) -> list[Any]:
    """pytest params, one per release, grouped so that pytest-xdist (--dist loadgroup) runs every
    test of a release in one worker: its trees are built and its probes run once."""
    import pytest

    return [pytest.param(v, id=v, marks=pytest.mark.xdist_group(f"flashinfer-{v}")) for v in releases]


def sglang_flashinfer_pins() -> dict[str, str]:
    """SGLang release -> the flashinfer-python release its stack installs, for every stack with SGLang."""
    from nvfp4_overlay.patch.manifest import load_stacks

    return {t.version: next(u.version for u in s.targets if u.dist == "flashinfer-python")
            for s in load_stacks(PATCHES).stacks for t in (*s.targets, *s.upstream) if t.dist == "sglang"}


def sglang_stack_releases() -> list[str]:
    """The SGLang releases patches/stacks.toml has a stack for, oldest first (PEP 440 order). A test that
    means "the newest" reads it here, not as a literal, so that adding a stack fails no correct test."""
    from packaging.version import Version

    return sorted(sglang_flashinfer_pins(), key=Version)


def sglang_after_newest(step: int = 1) -> str:
    """An SGLang release no stack has yet: the newest's last number plus step (0.5.23 -> 0.5.24), the
    release a test of a new stack invents."""
    from packaging.version import Version

    major, minor, micro = Version(sglang_stack_releases()[-1]).release[:3]
    return f"{major}.{minor}.{micro + step}"


def default_flashinfer() -> str:
    """The flashinfer-python release of the default stack (patches/stacks.toml)."""
    return _default_release("flashinfer-python")


def default_sglang() -> str:
    """The SGLang release of the default stack (patches/stacks.toml)."""
    return _default_release("sglang")


def _default_release(dist: str) -> str:
    from nvfp4_overlay.patch.manifest import load_stacks

    stacks = load_stacks(PATCHES)
    stack = stacks.get(stacks.default, PATCHES / "stacks.toml")
    return next(t.version for t in (*stack.targets, *stack.upstream) if t.dist == dist)


def pinned_releases(dist: str) -> set[str]:
    """The releases of dist that some stack installs: what operators run."""
    from nvfp4_overlay.patch.manifest import load_stacks

    return {t.version for s in load_stacks(PATCHES).stacks for t in s.targets if t.dist == dist}


@contextlib.contextmanager
def overlay_package(root: Path, name: str, release: str = "0.7.4") -> Iterator[Any]:
    """The FlashInfer overlay's opaque.py from this checkout, imported as a package of its own (name)
    under root, as a release's wheel holds it (its _build_meta says `release`)."""
    import importlib
    import shutil

    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_build_meta.py").write_text(f'__version__ = "{release}"\n')
    shutil.copytree(OVERLAY / "flashinfer-python" / "flashinfer" / "_nvfp4_overlay", package / "_nvfp4_overlay")
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(f"{name}._nvfp4_overlay.opaque")
    finally:
        sys.path.remove(str(root))


def cache_dir() -> Path:
    return Path(os.environ.get("NVFP4_OVERLAY_CACHE", Path.home() / ".cache" / "nvfp4-overlay"))


def private_cache(path: Path) -> Path:
    """A cache of a test's own for what a synthetic release brings (its wheels, the sha256 the index
    served for each release it saw), with the shared probe results and serving-API scans: those are
    keyed by every input, the synthetic wheel's sha256 or texts among them (repacked with fixed dates,
    so the same bytes each run), so a synthetic release probed once is not probed again, and one byte
    changed is probed afresh."""
    path.mkdir(parents=True, exist_ok=True)
    for kept in ("oracle", "api-scan"):  # oracle.Results, fetch.Source.scans_dir
        shared = cache_dir() / kept
        shared.mkdir(parents=True, exist_ok=True)
        if not (path / kept).is_symlink():
            (path / kept).symlink_to(shared, target_is_directory=True)
    return path


def fetch_upstream(dist: str, version: str, *, patches_dir: Path, cache_dir: Path, offline: bool = False) -> Path:
    """The verified upstream wheel of dist==version that fits this interpreter."""
    from nvfp4_overlay.patch.manifest import Target, load_upstream
    from nvfp4_overlay.wheel import fetch

    upstream = load_upstream(patches_dir, Target(dist, version))
    source = fetch.Source(cache_dir, offline=offline)
    (pin,) = fetch.select_wheels(upstream, source)
    return fetch.upstream_wheel(upstream, pin, source)


def build_one(dist: str, version: str, *, patches_dir: Path, overlay_dir: Path, dist_dir: Path, cache_dir: Path) -> Path:
    """Build dist==version for this interpreter into dist_dir and return the wheel's path."""
    from nvfp4_overlay.patch.manifest import Target
    from nvfp4_overlay.wheel import build, fetch

    options = build.Options(patches_dir, overlay_dir, dist_dir, fetch.Source(cache_dir))
    (built,) = build.build_targets([Target(dist, version)], options)
    return built.wheel


def run_python(code: str, path: Sequence[Path] = (), env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run code in a fresh interpreter with `path` first on sys.path (one wheel version per process)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([*map(str, path), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=timeout)


def fresh_venv(path: Path, *, pip: bool = True, newest_pip: bool = False) -> str:
    """A venv at path, its python returned; with newest_pip, its pip upgraded from the index (venv --upgrade-deps).
    One with the bundled pip is a copy of a venv made once per test process (ensurepip costs 3-11 s a venv on
    two loaded cores, the copy 0.3 s): its python is a symlink, and Python finds the copy's own pyvenv.cfg
    and site-packages beside it."""
    if pip and not newest_pip:
        shutil.copytree(_venv_template(), path, symlinks=True)
        return str(path / "bin" / "python")
    flags = ["--without-pip"] if not pip else ["--upgrade-deps"]
    subprocess.run([sys.executable, "-m", "venv", *flags, str(path)], check=True)
    return str(path / "bin" / "python")


@functools.cache
def _venv_template() -> Path:
    """The venv fresh_venv copies, made once per process, removed as it exits."""
    where = Path(tempfile.mkdtemp(prefix="nvfp4-overlay-venv-"))
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(where / "venv")], check=True)
    return where / "venv"


def run_cli(*argv: str) -> tuple[int, str, str]:
    """The command line run in this process on argv: (its exit status, its stdout, its stderr)."""
    from nvfp4_overlay import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def write_wheel(path: Path, name: str, version: str, files: dict[str, bytes | str], *, tag: str = "py3-none-any",
                record: bool = True, extra_metadata: str = "") -> Path:
    """A real (small) wheel: the files, a dist-info with METADATA, WHEEL and a correct RECORD."""
    from nvfp4_overlay.records import hash_of as record_hash

    stem = name.replace("-", "_")
    dist_info = f"{stem}-{version}.dist-info"
    members = {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}
    members[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{extra_metadata}\nA description.\n".encode()
    members[f"{dist_info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    if record:
        rows = [f"{n},{record_hash(d)},{len(d)}" for n, d in members.items()]
        members[f"{dist_info}/RECORD"] = ("\n".join([*rows, f"{dist_info}/RECORD,,"]) + "\n").encode()
    wheel = path / f"{stem}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return wheel


def cli_args(layout: dict[str, Path], *extra: str) -> list[str]:
    """Common options pointing the CLI at a `project` layout, offline."""
    return ["--patches-dir", str(layout["patches"]), "--overlay-dir", str(layout["overlay"]),
            "--dist-dir", str(layout["dist"]), "--cache-dir", str(layout["cache"]),
            "--wheelhouse", str(layout["wheelhouse"]), "--offline", *extra]


def data_args(layout: dict[str, Path]) -> list[str]:
    """The options of a command that holds built wheels to the project's data (verify): --patches-dir,
    --overlay-dir, and the pinned upstream wheel from the layout's wheelhouse, offline."""
    return ["--patches-dir", str(layout["patches"]), "--overlay-dir", str(layout["overlay"]),
            "--cache-dir", str(layout["cache"]), "--wheelhouse", str(layout["wheelhouse"]), "--offline"]


WheelTree = Callable[..., Path]  # wheel_tree(dist, version, patched=True) -> an unpacked tree


def wheel_trees(root: Path) -> WheelTree:
    """wheel_tree(dist, version, patched=True) -> a directory holding the wheel's Python files, under root.

    The directory can be put on sys.path of a subprocess (see run_python). Upstream trees are the
    pinned wheel unpacked as it is; patched trees are unpacked from the wheel the engine builds.
    Only the members a test can read are unpacked: the .py files and the dist-info, not the C++
    sources, vendored CUTLASS and cubins under flashinfer/data/ (0.7.4: 717 MB unpacked, 30 MB so).
    """
    made: dict[tuple[str, str, bool], Path] = {}

    def get(dist: str, version: str, patched: bool = True) -> Path:
        key = (dist, version, patched)
        if key not in made:
            kind = "patched" if patched else "upstream"
            if patched:
                wheel = build_one(dist, version, patches_dir=PATCHES, overlay_dir=OVERLAY,
                                  dist_dir=root / f"{dist}-{version}-dist", cache_dir=cache_dir())
            else:
                wheel = fetch_upstream(dist, version, patches_dir=PATCHES, cache_dir=cache_dir())
            made[key] = probe_runner.unpack(wheel, root / f"{dist}-{version}-{kind}")
        return made[key]

    return get


class ReleaseOracle:
    """The oracle of each carried flashinfer-python release, computed once: upstream's half from
    tests/oracle/ where its key holds (computed on the rotating sample, FRESH_UPSTREAM), the patched
    half probed (or taken from the result cache under the same inputs)."""

    def __init__(self, wheel_tree: WheelTree, toolkits: Path) -> None:
        self.wheel_tree = wheel_tree
        self.oracle = oracle.Oracle(oracle.Results(cache_dir() / "oracle"), toolkits, committed=COMMITTED_ORACLE,
                                    fresh=FRESH_UPSTREAM)
        self._ladders: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._grids: dict[str, dict[str, Any]] = {}

    def sides(self, release: str) -> tuple[oracle.Side, oracle.Side]:
        dist = "flashinfer-python"
        upstream = load_upstream(PATCHES, Target(dist, release))
        (pin,) = fetch.select_wheels(upstream, fetch.Source(cache_dir()))
        return oracle.release_sides(release, pin.sha256, PATCHES, OVERLAY, dist,
                                    lambda: self.wheel_tree(dist, release, patched=False),
                                    lambda: self.wheel_tree(dist, release))

    def ladder(self, release: str, entries: Sequence[str], *, quick: bool, gpus: oracle.Gpus = oracle.TRACE_GPUS,
               torch_cuda: str | None = None) -> dict[str, Any]:
        key = (release, quick, tuple(gpus), torch_cuda)
        if key not in self._ladders:
            self._ladders[key] = self.oracle.ladder(*self.sides(release), entries, quick=quick, gpus=gpus,
                                                    torch_cuda=torch_cuda)
        return self._ladders[key]

    def shapes(self, release: str, entries: Sequence[str]) -> dict[str, Any]:
        """The patched tree's fakes against upstream's wrapper at every rank (probes/flashinfer/fake_shapes.py)."""
        return self.oracle.shapes(self.sides(release)[1], entries)

    def explored(self, release: str, entries: Sequence[str], *, quick: bool) -> dict[str, Any]:
        """Upstream's wrapper and the patched tree's fakes over the explored space (oracle/explored.py)."""
        from nvfp4_overlay.oracle import explored

        return explored.explore(*self.sides(release), entries, results=self.oracle.results, quick=quick)

    def grid(self, release: str) -> dict[str, Any]:
        if release not in self._grids:
            self._grids[release] = self.oracle.grid(*self.sides(release), control=True)
        return self._grids[release]


def edited_wheel(wheel: Path, member: str, dest: Path, *, sums: bool = False) -> Path:
    """A copy of `wheel` in dest with one byte-level edit to `member` (a line appended, or an added member
    when it is absent) and its RECORD row rewritten to match, as anyone who can write the file can do;
    with `sums`, dest's SHA256SUMS lists the edited copy (as if the build had written it)."""
    import hashlib

    from nvfp4_overlay.records import hash_of as record_hash

    dest.mkdir(parents=True, exist_ok=True)
    out = dest / wheel.name
    with zipfile.ZipFile(wheel) as zin:
        members = {i.filename: zin.read(i) for i in zin.infolist() if not i.is_dir()}
    edited = members.get(member, b"") + b"\nEDITED = True\n"
    members[member] = edited
    (record,) = [n for n in members if n.endswith(".dist-info/RECORD")]
    rows = [line for line in members[record].decode().splitlines() if not line.startswith(f"{member},")]
    rows.insert(0, f"{member},{record_hash(edited)},{len(edited)}")
    members[record] = ("\n".join(rows) + "\n").encode()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    if sums:
        with (dest / "SHA256SUMS").open("a") as f:
            f.write(f"{hashlib.sha256(out.read_bytes()).hexdigest()}  {out.name}\n")
    return out


# --- the overlay's results, put back together (the reference of opaque._traced_path's written code) --


def assemble(result: Any, values: Mapping[str, Any], fresh: list[Any]) -> Any:
    """Upstream's result rebuilt around an op's fresh tensors from the overlay's Result (its tree): what
    opaque._traced_path writes out as code for dynamo, kept here as the reference the tests hold it to
    (the overlay ships only the written code)."""
    tree = result.tree
    if tree == ("tuple", ()):
        return None
    return _assemble(tree, values, iter(fresh))


def _assemble(node: Any, values: Mapping[str, Any], tensors: Iterator[Any]) -> Any:
    if isinstance(node, tuple):
        items = [_assemble(child, values, tensors) for child in node[1]]
        return tuple(items) if node[0] == "tuple" else items
    if node == "float":
        return next(tensors).item()  # upstream's own host read, made after the op
    if node != "Tensor" and values.get(node) is not None:
        return values[node]
    return next(tensors)


# --- a synthetic flashinfer_jit_cache wheel (tests/unit/test_jit_wheel.py, tests/operator/test_install.py) --


def jit_cache_provenance(data: bytes, flashinfer: str = "flashinfer_python-0.6.8.post1+nvfp4.7-py3-none-any.whl",
                         flashinfer_sha256: str = "x") -> dict[str, Any]:
    """What jit-cache records of one module "m" whose built bytes are `data`, for the patched wheel named."""
    import hashlib
    import json

    module: dict[str, Any] = {"sources": {"<tree>/a.cu": "0" * 64}, "cflags": [], "cuda_cflags": ["-O3"], "ldflags": [],
                              "include_dirs": [], "needs_device_linking": False}
    module["inputs"] = hashlib.sha256(json.dumps(module, sort_keys=True).encode()).hexdigest()
    module.update(included=True, sha256=hashlib.sha256(data).hexdigest(), first_loaded_by=["fp4_quantize", "x"])
    return {"stack": "sglang-0.5.11", "gpu": "sm120", "cuda": {"release": "13.0"}, "modules": {"m": module},
            "flashinfer": {"filename": flashinfer, "sha256": flashinfer_sha256}}


def jit_cache_wheel(directory: Path, data: bytes, provenance: Mapping[str, Any],
                    flashinfer_version: str = "0.6.8.post1+nvfp4.7") -> Path:
    """The cache wheel of module "m" holding `data` (as jit-cache packs it), written into directory."""
    import io

    from nvfp4_overlay.wheel import jit_wheel

    version = jit_wheel.cache_version(flashinfer_version, "13", "sm120")
    files = jit_wheel.members(version, [jit_wheel.Built("m", data)], provenance, f"flashinfer-python=={flashinfer_version}")
    out = io.BytesIO()
    jit_wheel.write(out, files, (1980, 1, 1, 0, 0, 0))
    path = directory / jit_wheel.filename(version)
    path.write_bytes(out.getvalue())
    return path


def tree_copy(tree: Path, dest: Path) -> Path:
    """An unpacked wheel copied for a control, without its .workspace (a probe's JIT workspace, made when
    a probe ran on the tree, holds links to wheel data the tree does not unpack): the copy makes its own."""
    import shutil

    shutil.copytree(tree, dest, ignore=shutil.ignore_patterns(".workspace"))
    return dest


def without_route(patched: Path, dest: Path, name: str) -> Path:
    """The control of a whole-layer run: a copy of the patched FlashInfer tree with entry point `name`'s
    route removed (its entry deleted from the overlay's table)."""
    tree_copy(patched, dest)
    entries = dest / "flashinfer" / "_nvfp4_overlay" / "entries.py"
    entries.write_text(entries.read_text() + f'\n\ndel ENTRIES["{name}"]  # the control: one route removed\n')
    return dest


def without_patch(patched: Path, upstream: Path, dest: Path, patch: Path) -> Path:
    """The control of a whole-layer run: a copy of a patched SGLang tree with one patch of its series undone,
    each file the patch rewrites (its +++ paths, -p1) upstream's again; the series' other patches kept."""
    from unidiff import PatchSet

    tree_copy(patched, dest)
    for changed in PatchSet(patch.read_text(encoding="utf-8")):
        (dest / changed.path).write_bytes((upstream / changed.path).read_bytes())
    return dest


def sources_digest(*paths: Path) -> str:
    """The sha256 of every .py file under each path (or the file itself), names and bytes: the key of a
    probe's kept result (the whole-layer tests)."""
    import hashlib

    digest = hashlib.sha256()
    for root in paths:
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            digest.update(str(path.relative_to(root) if root.is_dir() else path.name).encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def probe_sources_digest(module: str, *trees: Path) -> str:
    """The key of a probe run as `python -m nvfp4_overlay.<module>` over unpacked trees: its module and every
    module of the package it imports (oracle.modules_digest), then the trees' .py files (sources_digest)."""
    import hashlib

    return hashlib.sha256(f"{oracle.modules_digest([module])}\0{sources_digest(*trees)}".encode()).hexdigest()


def rewritten_wheel(wheel: Path, dest: Path, edits: Mapping[str, bytes], *, sums: bool = True) -> Path:
    """A copy of `wheel` in dest with `edits` (member -> its new bytes; a name the wheel lacks is added) and all
    that the wheel says about itself rewritten to match, as whoever can write the file can do: its RECORD rows,
    its provenance's digests (`patched`, `overlay`, and `upstream.record`, the digest of the rows carried over
    from upstream) and, with `sums`, dest's SHA256SUMS line. Only a check anchored outside the wheel tells."""
    import csv
    import hashlib
    import json

    from nvfp4_overlay.records import hash_of as record_hash
    from nvfp4_overlay.records import rows_sha256
    from nvfp4_overlay.wheel.metadata import PROVENANCE

    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zin:
        members = {i.filename: zin.read(i) for i in zin.infolist() if not i.is_dir()}
    members.update(edits)
    (record,) = [n for n in members if n.endswith(".dist-info/RECORD")]
    provenance = record.replace("/RECORD", f"/{PROVENANCE}")
    rows = {r[0]: tuple(r) for r in csv.reader(io.StringIO(members[record].decode())) if r and r[0] != record}
    rows.update({n: (n, record_hash(members[n]), str(len(members[n]))) for n in edits})
    doc = json.loads(members[provenance])
    for table in (doc["patched"], doc["overlay"]):
        table.update({n: hashlib.sha256(members[n]).hexdigest() for n in edits if n in table})
    made = {provenance, *doc["patched"], *doc["overlay"]}
    carried = [rows[n] for n in sorted(rows) if n not in made]
    doc["upstream"]["record"] = {"rows": len(carried), "sha256": rows_sha256(carried)}
    members[provenance] = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
    rows[provenance] = (provenance, record_hash(members[provenance]), str(len(members[provenance])))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([*(rows[n] for n in sorted(rows)), (record, "", "")])
    members[record] = out.getvalue().encode()
    path = dest / wheel.name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout:
        for name in sorted(members, key=lambda n: (n.startswith(record.split("/")[0]), n == record, n)):
            zout.writestr(name, members[name])
    if sums:
        listed = dest / "SHA256SUMS"
        lines = [line for line in (listed.read_text().splitlines() if listed.is_file() else [])
                 if not line.endswith(f"  {path.name}")]
        listed.write_text("".join(f"{line}\n" for line in [*lines, f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}"]))
    return path


def relabelled_wheel(wheel: Path, dest: Path, version: str) -> Path:
    """A copy of `wheel` in dest labelled `version` throughout (the filename, the dist-info, METADATA, RECORD's
    rows, the provenance's version): a wheel that says, consistently, it is a build no checkout here made."""
    import csv
    import json

    from nvfp4_overlay.records import hash_of as record_hash
    from nvfp4_overlay.wheel.metadata import PROVENANCE

    dest.mkdir(parents=True, exist_ok=True)
    name, old = wheel.name.split("-")[:2]
    with zipfile.ZipFile(wheel) as zin:
        members = {i.filename.replace(f"{name}-{old}.dist-info/", f"{name}-{version}.dist-info/"): zin.read(i)
                   for i in zin.infolist() if not i.is_dir()}
    dist_info = f"{name}-{version}.dist-info"
    members[f"{dist_info}/METADATA"] = members[f"{dist_info}/METADATA"].replace(
        f"\nVersion: {old}\n".encode(), f"\nVersion: {version}\n".encode(), 1)
    doc = json.loads(members[f"{dist_info}/{PROVENANCE}"])
    doc["version"] = version
    members[f"{dist_info}/{PROVENANCE}"] = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
    out = io.StringIO()
    rows = [(n, record_hash(d), str(len(d))) for n, d in sorted(members.items()) if n != f"{dist_info}/RECORD"]
    csv.writer(out, lineterminator="\n").writerows([*rows, (f"{dist_info}/RECORD", "", "")])
    members[f"{dist_info}/RECORD"] = out.getvalue().encode()
    path = dest / wheel.name.replace(f"-{old}-", f"-{version}-")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout:
        for member, data in members.items():
            zout.writestr(member, data)
    return path
