"""The compile harness (probes/flashinfer/compile_harness.py) cannot count an eager call as a pass.

A package of the test's own stands for FlashInfer: a function defined in one module, imported by
name into the package's top level and, under another name, into a third module; a method of a
class; a custom op of a namespace of the test's own as the opaque op. FlashInfer's own compile mode
(its tests/conftest.py) replaces the defining module's name alone; the harness replaces them all,
and counts a call as compiled only when a graph dynamo made for it ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from nvfp4_overlay.probes.flashinfer.compile_harness import Counts, Harness

pytestmark = pytest.mark.torch

PACKAGE = {
    "__init__.py": "from .ops import scale, Box\nfrom . import user\n",
    "ops.py": """
        import os
        import torch

        @torch.library.custom_op("harness_test::double", mutates_args=())
        def double(t: torch.Tensor) -> torch.Tensor:
            return t * 2

        @double.register_fake
        def _(t):
            return torch.empty_like(t)

        def scale(t):
            return double(t)

        def no_tensor_op(t):
            return len(t) * 2

        def reads_a_file(t):
            os.stat(__file__)
            return double(t)

        class Box:
            def run(self, t):
                return double(t) + 1
    """,
    "user.py": "from .ops import scale as rescale\n\ndef call(t):\n    return rescale(t)\n",
}


@pytest.fixture
def package(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A package standing for FlashInfer, under a name of this test's own."""
    import importlib

    name = f"harness_pkg_{request.node.name.replace('[', '_').replace(']', '_').replace('-', '_')}"
    root = tmp_path / name
    root.mkdir()
    for file, text in PACKAGE.items():
        (root / file).write_text(textwrap.dedent(text))
    sys.path.insert(0, str(tmp_path))
    torch._dynamo.reset()
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))
        for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[module]


def test_every_name_the_function_is_bound_to_is_replaced(package: Any) -> None:
    harness = Harness("aot_eager")
    replaced = harness.install([f"{package.__name__}.ops.scale"], package=package.__name__)
    name = package.__name__
    assert sorted(replaced[f"{name}.ops.scale"]) == sorted([f"{name}.ops.scale", f"{name}.scale", f"{name}.user.rescale"])
    try:
        for call in (package.scale, package.ops.scale, package.user.call):  # the top level, the module, an importer
            with harness.case() as counts:
                assert torch.equal(call(torch.ones(3)), torch.full((3,), 2.0))
            assert (counts.calls, counts.compiled_runs, counts.uncompiled, counts.opaque_ops) == (1, 1, 0, 1), call
            assert counts.ops == {"harness_test.double.default": 1} and counts.passed()
    finally:
        harness.uninstall()
    assert package.scale is package.ops.scale is package.user.rescale  # put back as it was


def test_a_method_is_replaced_on_its_class(package: Any) -> None:
    harness = Harness()
    harness.install([f"{package.__name__}.ops.Box.run"], package=package.__name__)
    try:
        with harness.case() as counts:
            assert torch.equal(package.Box().run(torch.ones(2)), torch.full((2,), 3.0))
        assert counts.passed() and counts.ops == {"harness_test.double.default": 1}
    finally:
        harness.uninstall()


def test_a_cache_hit_counts_as_a_compiled_run(package: Any) -> None:
    harness = Harness()
    harness.install([f"{package.__name__}.ops.scale"], package=package.__name__)
    try:
        for _ in range(3):
            with harness.case() as counts:
                package.scale(torch.ones(4))
        assert (counts.graphs, counts.compiled_runs, counts.opaque_ops) == (0, 1, 1)  # the third: no new graph, one run
    finally:
        harness.uninstall()


def test_a_call_that_compiles_nothing_is_no_pass(package: Any) -> None:
    harness = Harness()
    harness.install([f"{package.__name__}.ops.no_tensor_op"], package=package.__name__)
    try:
        with harness.case() as counts:
            assert package.ops.no_tensor_op(torch.ones(2)) == 4  # dynamo makes no graph: the call ran as Python
        assert (counts.calls, counts.compiled_runs, counts.uncompiled, counts.graphs) == (1, 0, 1, 0)
        assert not counts.passed()
    finally:
        harness.uninstall()


def test_a_compile_error_is_counted_and_raised(package: Any) -> None:
    harness = Harness()
    harness.install([f"{package.__name__}.ops.reads_a_file"], package=package.__name__)
    try:
        with harness.case() as counts, pytest.raises(Exception, match="stat"):
            package.ops.reads_a_file(torch.ones(2))
        assert (counts.calls, counts.compiled_runs, counts.uncompiled) == (1, 0, 1)
        assert len(counts.errors) == 1 and not counts.passed()
    finally:
        harness.uninstall()


def test_no_opaque_op_is_no_pass() -> None:
    counts = Counts(calls=2, compiled_runs=2, opaque_ops=1)
    assert not counts.passed()  # one call's graph held no opaque op: it traced through
    assert Counts(calls=2, compiled_runs=2, opaque_ops=2).passed()
    assert not Counts().passed()  # a test that made no call is no case


TEST_FILE = """
import {name}

def test_top_level():
    assert {name}.scale(__import__("torch").ones(2)).sum().item() == 4.0

def test_importer():
    {name}.user.call(__import__("torch").ones(2))

def test_nothing():
    {name}.ops.no_tensor_op(__import__("torch").ones(2))

def test_untouched():
    pass

def test_left_out():
    {name}.scale(__import__("torch").ones(2))

@__import__("pytest").mark.parametrize("n", range(5))
def test_many(n):
    {name}.scale(__import__("torch").ones(n + 1))
"""


def test_the_plugin_reports_each_test(package: Any, tmp_path: Path) -> None:
    """FlashInfer's own tests on the GPU run under the plugin: each test's counts in the report, a
    test that calls no target reported with no calls, NVFP4_COMPILE_PER_TEST parametrizations of each."""
    name = package.__name__
    (tmp_path / f"test_{name}.py").write_text(TEST_FILE.format(name=name))
    report = tmp_path / "report.jsonl"
    env = {**os.environ, "NVFP4_COMPILE_TARGETS": f"{name}.ops.scale,{name}.ops.no_tensor_op",
           "NVFP4_COMPILE_BACKEND": "eager", "NVFP4_COMPILE_REPORT": str(report), "NVFP4_COMPILE_PER_TEST": "2",
           "NVFP4_COMPILE_ONLY": ",".join(f"test_{name}.py::{t}" for t in ("test_top_level", "test_importer", "test_nothing",
                                                                         "test_untouched", "test_many")),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "nvfp4_overlay.probes.flashinfer.compile_plugin",
                          "-p", "no:cacheprovider", "-n", "0", "-q", str(tmp_path / f"test_{name}.py")],
                         env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert sorted(lines[0]["replaced"][f"{name}.ops.scale"]) == sorted([f"{name}.ops.scale", f"{name}.scale",
                                                                         f"{name}.user.rescale"])
    tests = {line["test"].rsplit("::", 1)[1]: line for line in lines[1:]}
    assert tests["test_top_level"]["counts"]["compiled_runs"] == 1 and tests["test_top_level"]["outcome"] == "passed"
    assert tests["test_importer"]["counts"]["compiled_runs"] == 1
    assert tests["test_nothing"]["counts"]["uncompiled"] == 1 and tests["test_nothing"]["counts"]["compiled_runs"] == 0
    assert tests["test_untouched"]["counts"]["calls"] == 0
    assert sorted(t for t in tests if t.startswith("test_many")) == ["test_many[0]", "test_many[4]"]  # 2 of 5, spread
    assert "test_left_out" not in tests  # not in NVFP4_COMPILE_ONLY
