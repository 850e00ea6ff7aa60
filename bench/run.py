"""The benchmark suite: every figure measured side by side with its baseline in one run, printed as a table.

    make bench                      # or: .venv/bin/python bench/run.py [--repeat N] [--markdown FILE]

Each pair is timed interleaved (baseline, ours, baseline, ours, ...) so both see the same machine load,
after one untimed warm-up run (page cache warm, upstream wheels already in the cache). Times are the
median wall clock of the child process; CPU is its user+sys time, which a busy machine inflates less.
Needs the upstream wheels in the cache (make wheels, make drift) and the test extras (torch, flashinfer's
import dependencies); `wheel unpack`/`wheel pack` rows need the `wheel` package and are skipped without it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from nvfp4_overlay.patch.manifest import Target, load_stacks, load_upstream
from nvfp4_overlay.wheel import fetch
from nvfp4_overlay.wheel.build import Options, build_targets

PY = sys.executable
PATCHES, OVERLAY = ROOT / "patches", ROOT / "overlay"
BIG = Target("flashinfer-python", "0.7.4")
MiB = 1 << 20


@dataclass
class Timing:
    wall: float  # median seconds
    cpu: float  # median user+sys seconds of the child processes


@dataclass
class Row:
    figure: str
    ours: str
    baseline: str
    ratio: str
    target: str
    met: str


def run_timed(command: Sequence[str], **kw: object) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def side_by_side(repeat: int, **commands: Callable[[], tuple[float, float]]) -> dict[str, Timing]:
    """Run each command once untimed, then `repeat` rounds interleaved; medians per command."""
    for fn in commands.values():
        fn()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, fn in commands.items():
            samples[name].append(fn())
    return {n: Timing(statistics.median(w for w, _ in s), statistics.median(c for _, c in s)) for n, s in samples.items()}


def cache_dir() -> Path:
    return fetch.default_cache_dir()


def upstream_path(target: Target) -> Path:
    upstream = load_upstream(PATCHES, target)
    source = fetch.Source(cache_dir(), offline=True)
    (pin,) = fetch.select_wheels(upstream, source)
    return fetch.upstream_wheel(upstream, pin, source)


def build_one(target: Target, dist_dir: Path, overlay: Path = OVERLAY) -> Path:
    (built,) = build_targets([target], Options(PATCHES, overlay, dist_dir, fetch.Source(cache_dir())))
    return built.wheel


def build_command(dist_dir: Path, *targets: str) -> list[str]:
    return [PY, str(ROOT / "build_wheels.py"), "build", *targets, "--offline", "--quiet", "--dist-dir", str(dist_dir),
            "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--cache-dir", str(cache_dir())]


def fmt_s(t: Timing) -> str:
    return f"{t.wall:.2f} s (cpu {t.cpu:.2f} s)"


# --- 0. one big build against the floor of a checked copy: sha256sum && cp ------------------------


def bench_build_vs_checked_copy(work: Path, repeat: int) -> list[Row]:
    """The build in this process (its wheel hashed once on the way in, once on the way out, for
    SHA256SUMS) against `sha256sum W && cp W` in a shell, alternated, medians of `repeat` pairs."""
    src = upstream_path(BIG)
    options = Options(PATCHES, OVERLAY, work / "checked-dist", fetch.Source(cache_dir(), offline=True))

    def build() -> tuple[float, float]:
        shutil.rmtree(options.dist_dir, ignore_errors=True)
        start, cpu = time.perf_counter(), time.process_time()
        build_targets([BIG], options)
        return time.perf_counter() - start, time.process_time() - cpu

    floor = ["sh", "-c", f"sha256sum '{src}' > /dev/null && cp '{src}' '{work / 'floor.whl'}'"]
    times = side_by_side(repeat, build=build, floor=lambda: run_timed(floor))
    ratio = times["build"].wall / times["floor"].wall
    return [Row(f"build {BIG} in process vs `sha256sum && cp` of its wheel", fmt_s(times["build"]),
                fmt_s(times["floor"]), f"{ratio:.2f}x", "<= 1.5x", "yes" if ratio <= 1.5 else f"no, {ratio / 1.5:.2f}x over")]


def bench_build_process_vs_checked_copy(work: Path, repeat: int) -> list[Row]:
    """`nvfp4-overlay build` as a user runs it, a whole process (interpreter, imports, the build, SHA256SUMS),
    against `sha256sum W && cp W` in a shell, alternated, medians of `repeat` pairs."""
    src = upstream_path(BIG)
    dist = work / "process-dist"

    def build() -> tuple[float, float]:
        shutil.rmtree(dist, ignore_errors=True)
        return run_timed(build_command(dist, str(BIG)))

    floor = ["sh", "-c", f"sha256sum '{src}' > /dev/null && cp '{src}' '{work / 'floor.whl'}'"]
    times = side_by_side(repeat, build=build, floor=lambda: run_timed(floor))
    ratio = times["build"].wall / times["floor"].wall
    return [Row(f"`nvfp4-overlay build {BIG}`, the whole process, vs `sha256sum && cp` of its wheel",
                fmt_s(times["build"]), fmt_s(times["floor"]), f"{ratio:.2f}x", "<= 1.5x",
                "yes" if ratio <= 1.5 else f"no, {ratio / 1.5:.2f}x over")]


# --- 1. one big target against cp, and against wheel unpack + wheel pack --------------------------


def bench_build_vs_copy(work: Path, repeat: int) -> list[Row]:
    src = upstream_path(BIG)
    cp = lambda: run_timed(["cp", str(src), str(work / "copy.whl")])
    build = lambda: run_timed(build_command(work / "dist", str(BIG)))
    commands = {"cp": cp, "build": build}
    has_wheel = subprocess.run([PY, "-c", "import wheel"], check=False, capture_output=True).returncode == 0
    if has_wheel:
        commands["wheel"] = lambda: _wheel_unpack_pack(src, work / "wheel")
    times = side_by_side(repeat, **commands)
    size = src.stat().st_size / 1e6
    with zipfile.ZipFile(src) as zf:
        members = len(zf.infolist())
    figure = f"build {BIG} ({size:.0f} MB, {members:,} members)"
    ratio = times["build"].wall / times["cp"].wall
    rows = [Row(figure + " vs `cp`", fmt_s(times["build"]), fmt_s(times["cp"]), f"{ratio:.1f}x", "<= 3x cp",
                "yes" if ratio <= 3 else f"no, {ratio / 3:.1f}x over")]
    if has_wheel:
        w = times["wheel"]
        rows.append(Row(figure + " vs `wheel unpack` + relabel + `wheel pack`", fmt_s(times["build"]), fmt_s(w),
                        f"{times['build'].wall / w.wall:.2f}x ({w.wall / times['cp'].wall:.0f}x cp)", "", ""))
    else:
        rows.append(Row("`wheel unpack` + `wheel pack`", "", "skipped: the `wheel` package is not installed", "", "", ""))
    return rows


def _wheel_unpack_pack(src: Path, work: Path) -> tuple[float, float]:
    """What a hand-made overlay does: unpack, relabel the dist-info and METADATA, pack again."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([PY, "-m", "wheel", "unpack", "-d", str(work), str(src)], check=True, stdout=subprocess.DEVNULL)
    (tree,) = work.iterdir()
    (info,) = tree.glob("*.dist-info")
    new_info = info.with_name(info.name.replace(f"-{BIG.version}.", f"-{BIG.version}+nvfp4.1."))
    info.rename(new_info)
    metadata = new_info / "METADATA"
    metadata.write_text(metadata.read_text().replace(f"Version: {BIG.version}\n", f"Version: {BIG.version}+nvfp4.1\n", 1))
    (work / "out").mkdir()
    subprocess.run([PY, "-m", "wheel", "pack", "-d", str(work / "out"), str(tree)], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# --- 2. the default stack's make wheels against copying its input wheels ---------------------------


def bench_make_wheels(work: Path, repeat: int) -> list[Row]:
    stacks = load_stacks(PATCHES)
    targets = stacks.get(stacks.default, PATCHES).targets
    source = fetch.Source(cache_dir(), offline=True)
    inputs = [fetch.upstream_wheel(load_upstream(PATCHES, t), pin, source)
              for t in targets for pin in fetch.select_wheels(load_upstream(PATCHES, t), source)]
    make = ["make", "-s", "-C", str(ROOT), "wheels",
            f"ARGS=--offline --quiet --dist-dir {work / 'stack'} --cache-dir {cache_dir()}"]
    times = side_by_side(
        repeat,
        cp=lambda: run_timed(["cp", *map(str, inputs), str(work)]),
        make=lambda: run_timed(make),
    )
    ratio = times["make"].wall / times["cp"].wall
    names = ", ".join(p.name for p in inputs)
    return [Row(f"`make wheels` (default stack {stacks.default}, warm cache) vs `cp` of {names}",
                fmt_s(times["make"]), fmt_s(times["cp"]), f"{ratio:.1f}x", "", "")]


# --- 3. drift over every flashinfer-python release -------------------------------------------------


def bench_drift(work: Path) -> list[Row]:
    if not (ROOT / "src" / "nvfp4_overlay" / "carry" / "drift.py").exists():
        return [Row("`drift --against all`", "", "not measured: drift has not landed", "", "", "")]
    command = [PY, str(ROOT / "build_wheels.py"), "drift", "--against", "all", "--dist", "flashinfer-python",
               "--offline", "--json", "--patches-dir", str(PATCHES), "--cache-dir", str(cache_dir())]
    subprocess.run(command, check=False, capture_output=True)  # warm-up: every release in the cache, pages warm
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cells, releases = _drift_cells(done.stdout)
    per = wall / max(cells, 1)
    return [Row(f"`drift --against all` over {releases} flashinfer-python releases, {cells} release x series cells "
                f"(warm cache, --offline)", f"{wall:.1f} s (cpu {cpu:.1f} s); {per:.2f} s per cell", "", "",
                "<= 1 s per release and series", "yes" if per <= 1 else f"no, {per:.1f} s")]


def _drift_cells(stdout: str) -> tuple[int, int]:
    """Count (series, release) cells in drift's JSON, whatever its exact layout: objects naming both."""
    try:
        document = json.loads(stdout)
    except ValueError:
        return 0, 0
    cells = document.get("cells") or document.get("matrix") or []
    releases = {str(c.get("release") or c.get("version") or c.get("upstream")) for c in cells if isinstance(c, dict)}
    return len(cells), len(releases)


# --- 4. the CUDA version lookups, upstream vs patched ----------------------------------------------

LOOKUP_PROBE = r'''
import json, os, sys, time
scenario = sys.argv[1]
for var in ("CUDA_HOME", "CUDA_PATH"):
    if scenario != "cuda-home":
        os.environ.pop(var, None)
import torch
if scenario == "cuda-torch":
    torch.version.cuda = "12.8"  # as a CUDA build of torch reports it; flashinfer reads it at import
spawned = []
sys.addaudithook(lambda event, args: spawned.append(repr(args[1])[:80]) if event == "subprocess.Popen" else None)
from flashinfer.jit import cpp_ext
spawned.clear()
result = {}
start = time.perf_counter()
cpp_ext.get_cuda_version()
result["first_call_s"] = time.perf_counter() - start
result["first_call_spawned"] = list(spawned)
for name, call in [("get_cuda_version", cpp_ext.get_cuda_version),
                   ("is_cuda_version_at_least", lambda: cpp_ext.is_cuda_version_at_least("12.8"))]:
    spawned.clear()
    n = 200_000
    start = time.perf_counter()
    for _ in range(n):
        call()
    result[name] = {"per_call_us": (time.perf_counter() - start) / n * 1e6, "spawned": len(spawned)}
print(json.dumps(result))
'''


def bench_lookups(work: Path, version: str) -> list[Row]:
    target = Target("flashinfer-python", version)
    trees = {"upstream": work / "upstream-tree", "patched": work / "patched-tree"}
    wheels = {"upstream": upstream_path(target),
              "patched": build_one(target, work / "lookup-dist")}
    for kind, tree in trees.items():
        with zipfile.ZipFile(wheels[kind]) as zf:
            zf.extractall(tree)
    rows = []
    scenarios = [("cuda-torch", "CUDA build of torch (12.8)", {}), ("cpu-torch", "CPU torch, CUDA_HOME unset", {})]
    toolkit = _toolkit()
    if toolkit:
        scenarios.append(("cuda-home", f"CPU torch, CUDA_HOME={toolkit}", {"CUDA_HOME": toolkit}))
    for scenario, label, extra in scenarios:
        found = {}
        for kind, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=str(tree), **extra)
            done = subprocess.run([PY, "-c", LOOKUP_PROBE, scenario], capture_output=True, text=True, env=env, check=True)
            found[kind] = json.loads(done.stdout.strip().splitlines()[-1])
        up, pa = found["upstream"], found["patched"]
        rows.append(Row(f"first `get_cuda_version()`, {label}, flashinfer {version}",
                        f"{_duration(pa['first_call_s'])}, {len(pa['first_call_spawned'])} subprocess(es)",
                        f"{_duration(up['first_call_s'])}, {len(up['first_call_spawned'])} subprocess(es) "
                        f"({', '.join(up['first_call_spawned'])})", "", "no subprocess" if scenario != "cpu-torch" else "",
                        ("yes" if not pa["first_call_spawned"] else "no") if scenario != "cpu-torch" else ""))
        for name in ("get_cuda_version", "is_cuda_version_at_least"):
            rows.append(Row(f"`{name}()` per call after the first, {label}",
                            f"{pa[name]['per_call_us']:.2f} us, {pa[name]['spawned']} subprocesses",
                            f"{up[name]['per_call_us']:.2f} us, {up[name]['spawned']} subprocesses",
                            f"{pa[name]['per_call_us'] / up[name]['per_call_us']:.2f}x", "", ""))
    return rows


def _toolkit() -> str | None:
    """A CUDA toolkit directory (version.json, or include/cuda.h as a pip-installed toolkit has), if any."""
    for candidate in [os.environ.get("CUDA_HOME"), "/usr/local/cuda", *sorted(map(str, Path("/usr/local").glob("cuda-*")))]:
        if candidate and any((Path(candidate) / f).is_file() for f in ("version.json", "include/cuda.h")):
            return candidate
    return None


def _duration(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.1f} ms"


# --- 4b. what routing costs an eager caller ------------------------------------------------------

EAGER_PROBE = r'''
import json, os, sys, time
import torch
from nvfp4_overlay.probes.flashinfer import flashinfer_trace as probe
from nvfp4_overlay.probes.flashinfer.stubs import serving_stubs
from nvfp4_overlay.probes.flashinfer.tables import cases
torch.version.cuda = "12.8"
os.environ["FLASHINFER_WORKSPACE_BASE"] = sys.argv[1]
import flashinfer
from flashinfer.jit import core as jit_core
box = probe.Box(os.path.dirname(flashinfer.__file__))
probe._stub_kernels(jit_core, box)  # the kernel records its arguments and returns: what is left is Python
serving_stubs.install(box)  # the cubin loader, the AutoTuner, the GEMM runners' stream: as the ladder has them
torch.Tensor.cuda = lambda self, *a, **k: self
torch.cuda.current_device = lambda: 0
probe._fake_capability((10, 0))


def first_case(name, routed):
    """The first case of the ladder's table that upstream's function runs without refusing."""
    for _, make in cases.cases(name, routed):
        args, kwargs = make(torch)
        try:
            routed.__wrapped__(*args, **kwargs)
        except Exception:
            continue
        return args, kwargs
    return None


result = {}
for name in json.loads(sys.argv[2]):
    routed = getattr(flashinfer, name, None)
    found = first_case(name, routed) if routed is not None else None
    if found is None:
        continue
    upstream = routed.__wrapped__  # the upstream function the route decorator wraps
    args, kwargs = found
    rounds = {"routed": [], "upstream": []}
    for fn in (routed, upstream):
        for _ in range(50):
            fn(*args, **kwargs)
    for _ in range(60):  # interleaved rounds of 200 calls; the fastest round, the least disturbed
        for key, fn in (("upstream", upstream), ("routed", routed)):
            start = time.perf_counter()
            for _ in range(200):
                fn(*args, **kwargs)
            rounds[key].append((time.perf_counter() - start) / 200 * 1e6)
        del box.launches[:]
    result[name] = {k: min(v) for k, v in rounds.items()}
print(json.dumps(result))
'''


def bench_eager_route(work: Path, version: str) -> list[Row]:
    """An eager call of each routed entry point through the route decorator against the same call of
    the upstream function it wraps, in one process, with the kernel a no-op (CPU tensors, SM100 faked)."""
    from nvfp4_overlay.oracle.behaviour import ROUTED_CANDIDATES

    target = Target("flashinfer-python", version)
    tree = work / "eager-tree"
    with zipfile.ZipFile(build_one(target, work / "eager-dist")) as zf:
        zf.extractall(tree, [n for n in zf.namelist() if n.endswith((".py", ".json"))])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(ROOT / "src")]))
    done = subprocess.run([PY, "-c", EAGER_PROBE, str(work / "eager-ws"), json.dumps(ROUTED_CANDIDATES)],
                          capture_output=True, text=True, env=env, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    rows = []
    for name, t in found.items():
        extra = t["routed"] - t["upstream"]
        rows.append(Row(f"eager `{name}` through the route, flashinfer {version} (kernel a no-op)",
                        f"{t['routed']:.1f} us", f"{t['upstream']:.1f} us (upstream's function)",
                        f"{extra:+.2f} us", "<= +1 us", "yes" if extra <= 1 else "no"))
    return rows


# --- 4c. what routing costs dynamo: tracing a routed call ---------------------------------------------

TRACE_PROBE = EAGER_PROBE.split("result = {}")[0] + r"""
CALLS = int(sys.argv[3])
result = {}
for name in json.loads(sys.argv[2]):
    routed = getattr(flashinfer, name, None)
    found = first_case(name, routed) if routed is not None else None
    if found is None:
        continue
    args, kwargs = found
    times = []
    for _ in range(3):  # the fastest of three compiles, each from a reset dynamo
        torch._dynamo.reset()
        calls = lambda *a: [routed(*a, **kwargs) for _ in range(CALLS)]
        start = time.perf_counter()
        torch.compile(calls, fullgraph=True, backend=lambda gm, example: gm.forward)(*args)
        times.append((time.perf_counter() - start) / CALLS)
    result[name] = min(times) * 1e3
print(json.dumps(result))
"""


def bench_trace_route(work: Path, version: str, baseline: str, calls: int = 16) -> list[Row]:
    """torch.compile(fullgraph=True) of a function that calls one routed entry point `calls` times
    (the first case of the ladder's table, the kernel a no-op), per call: the checkout's overlay
    against the overlay of git revision `baseline`, each in a process of its own."""
    from nvfp4_overlay.oracle.behaviour import ROUTED_CANDIDATES

    target = Target("flashinfer-python", version)
    old_overlay = work / "trace-baseline-overlay"
    old_overlay.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", baseline, "overlay"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(old_overlay), "--strip-components=1"], input=archive.stdout, check=True)
    found = {}
    for kind, overlay in (("ours", OVERLAY), ("baseline", old_overlay)):
        tree = work / f"trace-tree-{kind}"
        with zipfile.ZipFile(build_one(target, work / f"trace-dist-{kind}", overlay)) as zf:
            zf.extractall(tree, [n for n in zf.namelist() if n.endswith((".py", ".json"))])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(ROOT / "src")]))
        done = subprocess.run([PY, "-c", TRACE_PROBE, str(work / f"trace-ws-{kind}"), json.dumps(ROUTED_CANDIDATES),
                               str(calls)], capture_output=True, text=True, env=env, check=True)
        found[kind] = json.loads(done.stdout.strip().splitlines()[-1])
    rows = []
    for name, ours in found["ours"].items():
        theirs = found["baseline"].get(name)
        rows.append(Row(f"tracing a routed `{name}` call, flashinfer {version} ({calls} calls in one fullgraph compile)",
                        f"{ours:.1f} ms a call", f"{theirs:.1f} ms (overlay at {baseline})" if theirs else "",
                        f"{ours / theirs:.2f}x" if theirs else "", "", ""))
    return rows


# --- 5. peak memory of the big build ----------------------------------------------------------------

MEMORY_PROBE = r'''
import resource, sys
from nvfp4_overlay import cli
if sys.argv[1] == "build":
    code = cli.main(sys.argv[2:])
    assert code == 0, code
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux
'''


def bench_memory(work: Path) -> list[Row]:
    src = upstream_path(BIG)
    with zipfile.ZipFile(src) as zf:
        infos = zf.infolist()
    largest = max(infos, key=lambda i: i.file_size)
    total = sum(i.file_size for i in infos)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    args = build_command(work / "memory-dist", str(BIG))[2:]  # from "build" on
    peak = int(subprocess.run([PY, "-c", MEMORY_PROBE, "build", *args], capture_output=True, text=True, env=env,
                              check=True).stdout.split()[-1]) * 1024
    idle = int(subprocess.run([PY, "-c", MEMORY_PROBE, "idle"], capture_output=True, text=True, env=env,
                              check=True).stdout.split()[-1]) * 1024
    target = largest.file_size + 64 * MiB
    return [Row(f"peak RSS of the {BIG} build (largest member {largest.file_size / MiB:.1f} MiB, "
                f"{total / MiB:.0f} MiB uncompressed in all)",
                f"{peak / MiB:.1f} MiB", f"{idle / MiB:.1f} MiB: the interpreter with the tool imported, idle",
                "", f"< {target / MiB:.1f} MiB", "yes" if peak < target else f"no, {(peak - target) / MiB:.1f} MiB over")]


# --- the report -------------------------------------------------------------------------------------


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    mem = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), 0)
    load = os.getloadavg()[0]
    return (f"{os.cpu_count()} CPUs (nproc), {cpu}, {mem / (1 << 20):.0f} GiB memory, Linux {platform.release()}, "
            f"Python {platform.python_version()}; load average {load:.1f} when the run started")


def table(rows: Sequence[Row]) -> str:
    head = ["figure", "nvfp4-overlay", "baseline", "ratio", "target", "met"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += [f"| {r.figure} | {r.ours} | {r.baseline} | {r.ratio} | {r.target} | {r.met} |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds per pair (default 5)")
    parser.add_argument("--markdown", metavar="FILE", help="also write the machine line and the table here")
    parser.add_argument("--lookup-version", default="0.6.8.post1", help="flashinfer-python for the lookup rows")
    parser.add_argument("--only", metavar="NAME", action="append", help="only this figure (repeatable), by its name")
    parser.add_argument("--trace-baseline", default="6226505", metavar="REV",
                        help="the git revision whose overlay the trace-route figure compares with (default: the "
                             "last with the generic binder)")
    args = parser.parse_args(argv)
    about = machine()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="nvfp4-bench-") as tmp:
        work = Path(tmp)
        for name, bench in [("build vs sha256sum && cp", lambda: bench_build_vs_checked_copy(work, args.repeat)),
                            ("build process vs sha256sum && cp",
                             lambda: bench_build_process_vs_checked_copy(work, args.repeat)),
                            ("build vs cp", lambda: bench_build_vs_copy(work, args.repeat)),
                            ("make wheels", lambda: bench_make_wheels(work, args.repeat)),
                            ("drift", lambda: bench_drift(work)),
                            ("lookups", lambda: bench_lookups(work, args.lookup_version)),
                            ("eager route", lambda: bench_eager_route(work, args.lookup_version)),
                            ("trace route", lambda: bench_trace_route(work, args.lookup_version, args.trace_baseline)),
                            ("memory", lambda: bench_memory(work))]:
            if args.only and name not in args.only:
                continue
            print(f"bench: {name} ...", file=sys.stderr, flush=True)
            try:
                rows += bench()
            except (subprocess.CalledProcessError, OSError, ValueError) as exc:  # one broken figure, not the table
                stderr = getattr(exc, "stderr", None) or ""
                rows.append(Row(name, f"failed: {exc} {stderr.strip()[-300:]}".replace("\n", " "), "", "", "", ""))
    text = f"Machine: {about}\n\n{table(rows)}\n"
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
