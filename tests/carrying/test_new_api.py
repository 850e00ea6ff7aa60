"""A new release's new public API is found, not missed: drift flags it, refresh refuses it, doctor reports it.

The real 0.7.4 wheel repacked as 0.7.5 (tests/synthetic_release.py) with one change a release can bring:
a public ``nvfp4_quantize_v2`` beside ``nvfp4_quantize`` in quantization/fp4_quantization.py, on the
same JIT loader (get_fp4_quantization_module). The overlay does not route it and the serving-API
audit (patches/flashinfer-python/audit-serving-api.json) does not classify it: unrouted, it breaks
torch.compile(fullgraph=True) as 0.7.4's quantizers did. Every series still applies to 0.7.5 (its
text is 0.7.4's but for the new function), so only the API audit can tell.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import OVERLAY, PATCHES, cache_dir, private_cache
from synthetic_release import repack

from nvfp4_overlay import cli
from nvfp4_overlay.errors import Refused
from nvfp4_overlay.oracle import probe_runner
from nvfp4_overlay.patch.manifest import Target, load_upstream
from nvfp4_overlay.wheel import fetch

pytestmark = [pytest.mark.upstream, pytest.mark.xdist_group("synthetic-new-api")]

NEW = "0.7.5"
MODULE = "flashinfer/quantization/fp4_quantization.py"
FUNCTION = "flashinfer.quantization.fp4_quantization.nvfp4_quantize_v2"
NEW_API = '''

@flashinfer_api
def nvfp4_quantize_v2(a, a_global_sf, sf_vec_size=16):
    """A new public quantizer of a release after the carried ones, on the same JIT loader."""
    major, minor = get_compute_capability(a.device)
    return get_fp4_quantization_module(f"{major * 10 + minor}").fp4_quantize_sm100(a, a_global_sf, sf_vec_size)
'''


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real 0.7.4 and the synthetic 0.7.5, as a maintainer's wheelhouse would hold them."""
    house = tmp_path_factory.mktemp("wheelhouse")
    upstream = load_upstream(PATCHES, Target("flashinfer-python", "0.7.4"))
    origin = fetch.upstream_wheel(upstream, upstream.wheels[0], fetch.Source(cache_dir()))
    (house / origin.name).symlink_to(origin)
    repack(origin, NEW, house, {MODULE: lambda text: text + NEW_API})
    return house


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _inputs(wheelhouse: Path, cache: Path) -> list[str]:
    return ["--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--cache-dir", str(cache),
            "--wheelhouse", str(wheelhouse), "--offline"]


def test_drift_flags_the_new_api_as_its_own_state(wheelhouse: Path, tmp_path: Path) -> None:
    code, output, log = _cli("drift", "--dist", "flashinfer-python", "--against", NEW, "--json",
                             *_inputs(wheelhouse, private_cache(tmp_path / "cache")))
    report: dict[str, Any] = json.loads(output)
    assert code == 1, log[-2000:]
    (found,) = report["new_apis"][f"flashinfer-python=={NEW}"]
    assert found["function"] == FUNCTION and found["loaders"] == ["jit"]
    assert "get_fp4_quantization_module" in found["via"][1]  # its own call of the loader's getter
    cell = next(c for c in report["cells"] if c["series"] == "0.7.4" and c["release"] == NEW)
    assert cell["new_apis"] == [FUNCTION]
    assert cell["state"] in ("exact", "offset", "merges")  # the text ports: the new state is the API's
    assert FUNCTION in log  # and the log says what to do
    code, text, _ = _cli("drift", "--dist", "flashinfer-python", "--against", NEW,
                         *_inputs(wheelhouse, private_cache(tmp_path / "cache")))
    assert code == 1 and FUNCTION in text and "new public API function(s)" in text


def test_refresh_refuses_the_release_naming_the_new_function(wheelhouse: Path, tmp_path: Path) -> None:
    code, output, log = _cli("refresh", "flashinfer-python", "0.7.4", NEW, "--dry-run", "--json",
                             *_inputs(wheelhouse, private_cache(tmp_path / "cache")))
    assert code == 1, log[-2000:]
    document = json.loads(output)
    assert "refresh refused, nothing written" in document["error"]["message"]
    assert FUNCTION in document["error"]["message"] and "audit-serving-api.json" in document["error"]["message"]
    assert [f["function"] for f in document["new_apis"][f"flashinfer-python=={NEW}"]] == [FUNCTION]
    assert not (PATCHES / "flashinfer-python" / NEW).exists()


def test_a_new_function_the_overlay_routes_is_not_new_api(wheelhouse: Path, tmp_path: Path) -> None:
    """docs/maintaining.md's recipe: the new function routed first (entries.py names it), then refresh. Its
    scan, and the behaviour checks' own, let the release through to the build (the ladder holds the new
    route there; `make audit-api` records it once the release is carried, which the audit, made from the
    carried releases, cannot do before). The scan step alone: a whole refresh of 0.7.4's size builds and
    probes for minutes (tests/carrying/test_synthetic_releases.py runs those)."""
    from nvfp4_overlay.audit import routes
    from nvfp4_overlay.carry import refresh
    from nvfp4_overlay.carry.matrix import Matrix
    from nvfp4_overlay.carry.releases import ReleaseWheel

    overlay = tmp_path / "overlay"
    shutil.copytree(OVERLAY, overlay)
    entries = overlay / "flashinfer-python" / routes.ENTRIES
    table = "ENTRIES: Dict[str, Entry] = {\n"
    entries.write_text(entries.read_text().replace(table, table + '    "nvfp4_quantize_v2": Entry(),\n', 1))
    target = Target("flashinfer-python", NEW)
    (path,) = wheelhouse.glob(f"flashinfer_python-{NEW}-*.whl")
    wheel = ReleaseWheel(target, path.name, "", path, pinned=False)
    matrix = Matrix([], {})
    with pytest.raises(Refused, match="nvfp4_quantize_v2"):  # the checkout's overlay does not route it
        refresh._no_new_api(PATCHES, OVERLAY, target, wheel, matrix, lambda line: None)
    refresh._no_new_api(PATCHES, overlay, target, wheel, matrix, lambda line: None)
    assert matrix.new_apis[target] == ()


def test_doctor_reports_the_installed_releases_new_function(wheelhouse: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """0.7.5 installed (its Python files and dist-info on the path of the examined interpreter; the
    sources under flashinfer/data/ left out, which doctor reports as missing): doctor names the function
    as a problem. The control, 0.7.4 installed the same way: a carried release, no new API."""
    found = {}
    for version, wheel in ((NEW, next(wheelhouse.glob(f"*-{NEW}-*.whl"))), ("0.7.4", next(wheelhouse.glob("*-0.7.4-*.whl")))):
        tree = probe_runner.unpack(wheel, tmp_path / version)
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]))
        code, output, log = _cli("doctor", "--no-trace", "--json", "--patches-dir", str(PATCHES))
        found[version] = (code, json.loads(output))
    code, document = found[NEW]
    flashinfer = document["distributions"]["flashinfer-python"]
    assert flashinfer["version"] == NEW
    assert [f["function"] for f in flashinfer["new_apis"]] == [FUNCTION]
    assert any(FUNCTION in p and "does not classify" in p for p in document["problems"])
    assert code != 0
    code, document = found["0.7.4"]
    assert document["distributions"]["flashinfer-python"]["version"] == "0.7.4"
    assert "new_apis" not in document["distributions"]["flashinfer-python"]
    assert not any("does not classify" in p for p in document["problems"])
