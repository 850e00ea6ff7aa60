"""A new upstream release that the carried series would port silently wrong is refused, naming what and where.

The real 0.7.4 wheel repacked as 0.7.5 (tests/synthetic_release.py) with two changes a release can bring:

- a new JIT module whose nvcc architecture flags follow the toolkit, through the check imported
  under an alias (probes/flashinfer/stubs/cuda_control.py): the audit has never seen the call site;
- upstream fixing its own lookup (get_cuda_path takes pip's nvcc first, get_cuda_version reads the
  headers before it runs nvcc): patch 0001's decorator lines still apply, and would put the old
  lookup back.

``refresh 0.7.4 0.7.5 --dry-run`` must refuse, naming both (the second also by the CUDA grid's layout
with pip's nvcc beside the system's); ``drift`` sees every hunk apply (it reads text, the refusal is
behaviour's). Built anyway from the 0.7.4 series, the patched wheel answers the
new call site as upstream does (the toolkit's release, and one warning), and where pip's toolkit
sits beside the system's the two lookups pick different toolkits: what the refusal is for.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import OVERLAY, PATCHES, cache_dir, run_python
from helpers import private_cache as private_cache_at
from synthetic_release import PIP_NVCC, pip_toolkit_first, repack

from nvfp4_overlay import cli
from nvfp4_overlay.oracle import behaviour, grid, oracle, probe_runner
from nvfp4_overlay.patch.manifest import Target
from nvfp4_overlay.probes.flashinfer.stubs import cuda_control
from nvfp4_overlay.wheel import build, fetch

pytestmark = [pytest.mark.upstream, pytest.mark.torch, pytest.mark.xdist_group("synthetic-release")]  # one build

NEW = "0.7.5"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real 0.7.4 and the synthetic 0.7.5, as a maintainer's wheelhouse would hold them."""
    house = tmp_path_factory.mktemp("wheelhouse")
    origin = fetch.upstream_wheel(*_pin("0.7.4"), fetch.Source(cache_dir()))
    (house / origin.name).symlink_to(origin)
    repack(origin, NEW, house, {cuda_control.PATH: lambda _: cuda_control.SOURCE,
                                "flashinfer/jit/cpp_ext.py": pip_toolkit_first})
    return house


@pytest.fixture(scope="module")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache of the tests' own: the shared one records the sha256 of every unpinned release it sees."""
    return private_cache_at(tmp_path_factory.mktemp("cache"))


def _pin(version: str) -> tuple[Any, Any]:
    from nvfp4_overlay.patch.manifest import load_upstream

    upstream = load_upstream(PATCHES, Target("flashinfer-python", version))
    return upstream, upstream.wheels[0]


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _inputs(wheelhouse: Path, cache: Path) -> list[str]:
    return ["--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--cache-dir", str(cache),
            "--wheelhouse", str(wheelhouse), "--offline"]


def test_refresh_refuses_the_release_naming_the_new_call_site_and_the_new_lookup(
        wheelhouse: Path, private_cache: Path) -> None:
    code, _, output = _cli("refresh", "flashinfer-python", "0.7.4", NEW, "--dry-run",
                           *_inputs(wheelhouse, private_cache))
    assert code == 1, output
    assert "refresh refused, nothing written" in output
    module, function = cuda_control.SITE
    assert f"{module} {function} calls _toolkit_at_least(\"12.9\")" in output
    assert "upstream's get_cuda_path changed" in output and "upstream's get_cuda_version changed" in output
    # the text refuses it first; the probes are not run (by behaviour, with pip's toolkit beside the
    # system's nvcc would get the other toolkit's flags: test_with_pips_toolkit_beside_the_systems_...)
    assert "the CUDA grid and the trace ladder were not run" in output
    assert not (PATCHES / "flashinfer-python" / NEW).exists()


def test_drift_sees_every_hunk_of_0001_apply(wheelhouse: Path, private_cache: Path) -> None:
    """The text ports: what refuses the release is behaviour, not drift's placement."""
    _, output, _ = _cli("drift", "--dist", "flashinfer-python", "--against", NEW, "--json",
                           *_inputs(wheelhouse, private_cache))
    report = json.loads(output)
    cell = next(c for c in report["cells"] if c["series"] == "0.7.4" and c["release"] == NEW)
    patch = next(p for p in cell["patches"] if p["patch"].startswith("0001"))
    assert patch["state"] in ("exact", "offset"), patch  # upstream's new lines sit inside the functions
    assert cell["state"] in ("exact", "offset", "merges"), cell["state"]  # the 0.7.4 series ports: no person


@pytest.fixture(scope="module")
def series(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The 0.7.4 series as it stands, pinning the synthetic release: {"patches", "wheel", "sha256"}."""
    patches = tmp_path_factory.mktemp("patches")
    series = patches / "flashinfer-python" / NEW
    shutil.copytree(PATCHES / "flashinfer-python" / "0.7.4", series)
    (wheel,) = wheelhouse.glob(f"*-{NEW}-*.whl")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (series / "upstream.toml").write_text(
        f'revision = 3\n\n[[wheel]]\nfilename = "{wheel.name}"\nsha256 = "{digest}"\n')
    return {"patches": patches, "wheel": wheel, "sha256": digest}


@pytest.fixture(scope="module")
def trees(series: dict[str, Any], wheelhouse: Path, private_cache: Path,
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The synthetic release unpacked, upstream and patched with the 0.7.4 series as it stands."""
    source = fetch.Source(private_cache, wheelhouse=wheelhouse, offline=True)
    options = build.Options(series["patches"], OVERLAY, tmp_path_factory.mktemp("dist"), source)
    (built,) = build.build_targets([Target("flashinfer-python", NEW)], options)
    return {"upstream": probe_runner.unpack(series["wheel"], tmp_path_factory.mktemp("upstream")),
            "patched": probe_runner.unpack(built.wheel, tmp_path_factory.mktemp("patched"))}


ASK = f'''
import json, sys, warnings
import torch
torch.version.cuda = "12.8"
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import {cuda_control.MODULE} as control
    flags = control.sm120_nvcc_flags()
    control.sm120_nvcc_flags()
json.dump({{"flags": flags, "warnings": [str(w.message) for w in caught if "nvfp4-overlay" in str(w.message)]}},
          sys.stdout)
'''


def _ask(tree: Path, env: dict[str, str], path: tuple[Path, ...] = ()) -> dict[str, Any]:
    done = run_python(ASK, [tree, *path], env={"PATH": "/usr/bin:/bin", **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


def test_the_patched_release_answers_a_new_caller_as_upstream_does(trees: dict[str, Path], tmp_path: Path) -> None:
    """cu128 torch, a 13.0 toolkit: upstream builds 120f (nvcc >= 12.9); so does the patch, saying once it
    does not know the call site (the old overlay answered torch's 12.8 here, and built 120a)."""
    toolkit = grid.make_toolkit(tmp_path, "13.0")
    upstream = _ask(trees["upstream"], {"CUDA_HOME": str(toolkit)})
    patched = _ask(trees["patched"], {"CUDA_HOME": str(toolkit)})
    assert upstream["flags"] == cuda_control.nvcc_flags(True) == patched["flags"]
    assert upstream["warnings"] == []
    assert len(patched["warnings"]) == 1 and " ".join(cuda_control.SITE) in patched["warnings"][0]


def test_with_pips_toolkit_beside_the_systems_the_two_lookups_differ(trees: dict[str, Path], tmp_path: Path) -> None:
    """Why the new lookup must refuse the port: pip's 12.8 nvcc beside a system 13.0 one, upstream's new
    get_cuda_path takes pip's (120a), 0001's mirror of the old one CUDA_HOME's (120f)."""
    site = tmp_path / "site-packages"
    pip_home = grid.make_toolkit(tmp_path, "12.8", ("cuda.h",))
    (site / PIP_NVCC).parent.mkdir(parents=True)
    shutil.copytree(pip_home, site / PIP_NVCC)
    system = grid.make_toolkit(tmp_path, "13.0")
    upstream = _ask(trees["upstream"], {"CUDA_HOME": str(system)}, (site,))
    patched = _ask(trees["patched"], {"CUDA_HOME": str(system)}, (site,))
    assert upstream["flags"] == cuda_control.nvcc_flags(False)
    assert patched["flags"] == cuda_control.nvcc_flags(True)


def test_the_grid_refuses_the_new_lookup_by_behaviour_too(series: dict[str, Any], trees: dict[str, Path],
                                                         tmp_path: Path) -> None:
    """Behind the audit, a second line: the grid's layout with pip's toolkit beside the system's hands
    nvcc other flags patched than upstream, and the verdict says which layout. Each half is kept in the
    shared result cache under its inputs, as a carried release's (the repacked wheel is the same bytes
    each run)."""
    results = oracle.Results(cache_dir() / "oracle")
    sides = oracle.release_sides(NEW, series["sha256"], series["patches"], OVERLAY, "flashinfer-python",
                                 lambda: trees["upstream"], lambda: trees["patched"])
    theirs, ours = (oracle.grid_for(side, results=results, toolkits=tmp_path) for side in sides)
    cells, variants = grid.grid_cells()
    both = {"cells": cells, "variant_names": list(variants), "upstream": theirs["cells"], "patched": ours["cells"],
            "upstream_variants": theirs["variants"], "patched_variants": ours["variants"]}
    problems = behaviour.grid_problems(NEW, both)
    assert f"{NEW}: toolkit layout 'pip-beside': nvcc would get other flags than upstream's" in problems, problems
