"""The oracle's bookkeeping without a probe run: committed halves name no machine, the rotating sample
visits every release, the engine digest is what builds and unpacks a patched tree, and a result is
kept whole or not at all (a crash never). The committed halves and the cache on the real wheels:
tests/releases/test_oracle_releases.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import COMMITTED_ORACLE, flashinfer_releases

from nvfp4_overlay.oracle import oracle

RELEASES = flashinfer_releases()


def test_committed_halves_name_no_machine() -> None:
    """No path of the machine that made them: a fact about the wheel, the same on every machine."""
    for path in sorted(COMMITTED_ORACLE.glob("*.json")):
        text = path.read_text()
        for needle in ("/tmp/", "/root/", "/home/", "site-packages", str(Path.home())):
            assert needle not in text, f"{path.name}: {needle}"
    assert sorted(p.stem for p in COMMITTED_ORACLE.glob("*.json")) == sorted(RELEASES)  # one per carried release


def test_the_rotating_sample_visits_every_release() -> None:
    from helpers import rotating_sample

    seen = {r for day in range(100) for r in rotating_sample(RELEASES, 2, day)}
    assert seen == set(RELEASES)
    assert all(len(rotating_sample(RELEASES, 2, day)) in (1, 2) for day in range(40))
    assert rotating_sample(RELEASES, 2, 7) != rotating_sample(RELEASES, 2, 8)


# --- the cache: one byte changed in an input, the result computed again -----------------------------


def test_the_engine_is_what_builds_and_unpacks_a_patched_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A patched result's key holds the modules that make its tree (the build, the unpacker and what
    they import): one byte of one of them is a new key; one byte of an audit, the oracle or the CLI
    is not (it shapes no patched file, and every patched result would be probed again for nothing)."""
    engine = oracle.engine_sources()
    assert {"wheel/build.py", "patch/patching.py", "wheel/archive.py", "wheel/metadata.py", "oracle/probe_runner.py"} <= engine
    assert not engine & {"oracle/oracle.py", "audit/api_audit.py", "audit/api_scan.py", "oracle/behaviour.py", "carry/refresh.py",
                      "audit/cuda_scan.py"}
    package = tmp_path / "nvfp4_overlay"
    shutil.copytree(oracle.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(oracle, "PACKAGE", package)
    before = oracle.engine_digest()
    for outside in ("audit/api_audit.py", "oracle/oracle.py", "cli/commands.py"):
        (package / outside).write_bytes((package / outside).read_bytes() + b"\n")
    assert oracle.engine_digest() == before
    for inside in ("patch/patching.py", "files.py"):  # files.py: imported by the build, not named by ENGINE_ROOTS
        (package / inside).write_bytes((package / inside).read_bytes() + b"\n")
        assert oracle.engine_digest() != before
        before = oracle.engine_digest()


def test_a_crash_is_not_kept(tmp_path: Path) -> None:
    results = oracle.Results(tmp_path)
    side = oracle.Side("1.0", "upstream", {"wheel": "x"}, lambda: tmp_path)
    assert results.computed("p", side, {"k": 1}, lambda: {"crash": "out of memory"}) == {"crash": "out of memory"}
    assert results.computed("p", side, {"k": 1}, lambda: {"n": 1}) == {"n": 1}


def test_a_result_is_kept_whole_or_not_at_all(tmp_path: Path) -> None:
    """A result file cut short (a crash mid-write, a full disk) is computed again, not trusted."""
    results = oracle.Results(tmp_path)
    side = oracle.Side("1.0", "upstream", {"wheel": "x"}, lambda: tmp_path)
    key = {"k": 1}
    assert results.computed("p", side, key, lambda: {"n": 1}) == {"n": 1}
    (path,) = (tmp_path / "p").glob("*.json")
    path.write_text(path.read_text()[:5])
    assert results.computed("p", side, key, lambda: {"n": 2}) == {"n": 2}
    assert results.computed("p", side, key, lambda: {"n": 3}) == {"n": 2}


def test_a_gpu_whose_fake_shape_probe_crashed_is_a_problem_not_a_traceback() -> None:
    """The fake-shape probe answers {"crash": traceback} for a GPU whose child died (refresh of a release
    with a new entry point whose rows the case table did not apply: CaseTableError); the check says so."""
    from nvfp4_overlay.oracle import behaviour

    crash = "Traceback ...\nCaseTableError: flashinfer 0.7.5: fp4_quantize_rowwise has 0 cases, fewer than 3"
    shapes = {"12.0": {"crash": crash}, "10.0": {"fp4_quantize": {"m40@2": {"wrapper": "x", "fake": "x"}}}}
    (problem,) = behaviour.shape_problems("0.7.5", shapes)
    assert problem.startswith("0.7.5: sm120: the fake-shape probe crashed: ") and "fewer than 3" in problem

