"""What the route costs an eager caller of each function of FlashInfer's own compile list (target <= +1 us a call).

    .venv/bin/python bench/compile_list_eager.py [--version 0.6.8.post1] [--rounds 60] [--markdown FILE]

The patched wheel of the release is built from the checkout and unpacked; one child process imports
it with the compile-list probe's stand-ins (probes/flashinfer/compile_list.py: SM90 faked, CPU
tensors) and every kernel a no-op that records nothing, so what is timed is the wrapper's own
Python, and calls
each function of the list on its first case (probes/flashinfer/tables/compile_cases.py) that upstream runs
without refusing: the routed function (what ``flashinfer.<name>`` is in the patched wheel) against
the upstream function it wraps (``__wrapped__``), in interleaved rounds of 200 calls, the fastest
round of each. A function the overlay does not route is timed alone and reported as such. Upstream's
eager overhead on small ops is what got its own custom-op registration reverted (flashinfer #709):
the figure is per function, not an average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

PROBE = r'''
import json, sys, time, warnings
import torch
from nvfp4_overlay.probes.flashinfer import compile_list
from nvfp4_overlay.probes.flashinfer.tables import compile_cases
from nvfp4_overlay.probes.flashinfer.compile_harness import resolve
warnings.simplefilter("ignore")
flashinfer, box = compile_list.setup({"path": sys.argv[1], "wheel": sys.argv[2]}, (9, 0), "12.8")
from flashinfer.jit import core as jit_core


class Answer:
    """What a no-op kernel returns: a plan's answer, a runner, a count (callable, indexable, an int)."""
    def __call__(self, *args, **kwargs):
        return self
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self
    def __int__(self):
        return 1
    __index__ = __int__
    def __iter__(self):
        return iter(())


ANSWER = Answer()


class NoopModule:
    """A built module whose every kernel does nothing and answers (no recording: its cost is not the wrapper's)."""
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return ANSWER


def build_and_load(self, *args, **kwargs):
    return NoopModule()


for obj in list(vars(jit_core).values()):
    if isinstance(obj, type) and issubclass(obj, jit_core.JitSpec):
        obj.build_and_load = build_and_load
ROUNDS = int(sys.argv[3])
result = {}
for qualname in compile_cases.every_name():
    try:
        holder, attr, routed = resolve(f"flashinfer.{qualname}")
    except (ImportError, AttributeError):
        continue
    upstream = routed.__wrapped__ if getattr(routed, "__nvfp4_overlay_op__", None) is not None else None
    found = None
    for _, make in compile_cases.cases(qualname, flashinfer.__version__):
        try:
            args, kwargs = make(torch)
            (upstream or routed)(*args, **kwargs)
        except Exception:
            continue
        found = args, kwargs
        break
    if found is None:
        result[qualname] = {"refused": True}
        continue
    args, kwargs = found
    pairs = [("upstream", upstream)] if upstream is not None else []
    pairs.append(("routed", routed))
    rounds = {key: [] for key, _ in pairs}
    for _, fn in pairs:
        for _ in range(50):
            fn(*args, **kwargs)
    for _ in range(ROUNDS):  # interleaved rounds of 200 calls; the fastest round, the least disturbed
        for key, fn in pairs:
            start = time.perf_counter()
            for _ in range(200):
                fn(*args, **kwargs)
            rounds[key].append((time.perf_counter() - start) / 200 * 1e6)
        del box.launches[:]
    result[qualname] = {k: min(v) for k, v in rounds.items()}
print(json.dumps(result))
'''


def measure(version: str, rounds: int, work: Path) -> dict[str, dict[str, float]]:
    """{qualname: {"routed": us, "upstream": us}} for the release's patched wheel (upstream absent: not routed)."""
    from nvfp4_overlay.oracle.probe_runner import unpack
    from nvfp4_overlay.patch.manifest import Target, load_upstream
    from nvfp4_overlay.wheel import build, fetch

    source = fetch.Source(fetch.default_cache_dir())
    target = Target("flashinfer-python", version)
    upstream = load_upstream(ROOT / "patches", target)
    (pin,) = fetch.select_wheels(upstream, source)
    wheel = fetch.upstream_wheel(upstream, pin, source)
    (built,) = build.build_targets([target], build.Options(ROOT / "patches", ROOT / "overlay", work / "dist", source))
    tree = unpack(built.wheel, work / "tree")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(ROOT / "src")]),
               FLASHINFER_WORKSPACE_BASE=str(work / "ws"))
    done = subprocess.run([sys.executable, "-c", PROBE, str(tree), str(wheel), str(rounds)], capture_output=True,
                          text=True, env=env, check=True)
    found: dict[str, dict[str, float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def markdown(version: str, found: dict[str, dict[str, float]]) -> str:
    rows = ["| function | routed | upstream's function | difference |", "| --- | --- | --- | --- |"]
    for name, t in found.items():
        if t.get("refused"):
            rows.append(f"| `{name}` | every case refused on the CPU | | |")
        elif "upstream" not in t:
            rows.append(f"| `{name}` | not routed | {t['routed']:.1f} us | |")
        else:
            rows.append(f"| `{name}` | {t['routed']:.1f} us | {t['upstream']:.1f} us | "
                        f"{t['routed'] - t['upstream']:+.2f} us |")
    return f"flashinfer-python {version}, SM90 faked, every kernel a no-op:\n\n" + "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.6.8.post1")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--markdown", metavar="FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nvfp4-bench-compile-") as tmp:
        text = markdown(args.version, measure(args.version, args.rounds, Path(tmp)))
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
