"""index: the dist dir as a static simple repository that pip installs from with --index-url file://."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import OVERLAY, PATCHES, cache_dir, cli_args, write_wheel

from nvfp4_overlay import cli

Layout = Callable[..., dict[str, Path]]


def pip_install(index: Path, requirement: str, target: Path) -> subprocess.CompletedProcess[str]:
    """pip as a fleet machine runs it: only this index, no dependencies, into a fresh target."""
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir",
               "--index-url", index.resolve().as_uri(), "--no-deps", "--target", str(target), requirement]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)


@pytest.fixture
def built(project: Layout) -> dict[str, Path]:
    layout = project({"demo/__init__.py": "VALUE = 1\n"}, overlay={"demo/extra.py": "EXTRA = 1\n"}, revision=2)
    assert cli.main(["build", *cli_args(layout, "--quiet")]) == 0
    return layout


def test_index_links_every_wheel_with_its_sha256(built: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    dist = built["dist"]
    # A second project whose name needs normalizing (PEP 503: runs of -_. become -, lower case).
    write_wheel(dist, "Other_Pkg.Tools", "3.1+nvfp4.1", {"other/__init__.py": ""}, extra_metadata="Requires-Python: >=3.10")
    assert cli.main(["index", *cli_args(built, "--json")]) == 0
    document = json.loads(capsys.readouterr().out)
    simple = dist / "simple"
    assert document["index"] == str(simple)
    assert sorted(document["projects"]) == ["demo", "other-pkg-tools"]
    root = (simple / "index.html").read_text()
    assert '<a href="demo/">demo</a>' in root and '<a href="other-pkg-tools/">other-pkg-tools</a>' in root
    for project, filename in [("demo", "demo-1.0+nvfp4.2-py3-none-any.whl"),
                              ("other-pkg-tools", "Other_Pkg.Tools-3.1+nvfp4.1-py3-none-any.whl")]:
        page = (simple / project / "index.html").read_text()
        digest = hashlib.sha256((dist / filename).read_bytes()).hexdigest()
        href = filename.replace("+", "%2B")
        assert f'href="../../{href}#sha256={digest}"' in page, page
        listing = json.loads((simple / project / "index.json").read_text())
        (entry,) = listing["files"]
        assert entry["hashes"] == {"sha256": digest}
        assert entry["url"] == f"../../{href}"
        assert entry["size"] == (dist / filename).stat().st_size
        assert listing["meta"]["api-version"].startswith("1.")
    other = (simple / "other-pkg-tools" / "index.html").read_text()
    assert 'data-requires-python="&gt;=3.10"' in other


def test_metadata_files_match_the_wheel_s_metadata(built: dict[str, Path]) -> None:
    assert cli.main(["index", *cli_args(built, "--quiet")]) == 0
    dist = built["dist"]
    wheel = dist / "demo-1.0+nvfp4.2-py3-none-any.whl"
    sidecar = dist / f"{wheel.name}.metadata"
    assert sidecar.read_bytes().startswith(b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0+nvfp4.2\n")
    digest = hashlib.sha256(sidecar.read_bytes()).hexdigest()
    assert f'data-core-metadata="sha256={digest}"' in (dist / "simple" / "demo" / "index.html").read_text()


def test_reindexing_drops_wheels_that_are_gone(built: dict[str, Path]) -> None:
    dist = built["dist"]
    extra = write_wheel(dist, "gone", "1.0", {"gone.py": ""})
    assert cli.main(["index", *cli_args(built, "--quiet")]) == 0
    assert (dist / "simple" / "gone" / "index.html").exists()
    extra.unlink()
    assert cli.main(["index", *cli_args(built, "--quiet")]) == 0
    assert not (dist / "simple" / "gone").exists()
    assert not (dist / f"{extra.name}.metadata").exists()
    assert "gone" not in (dist / "simple" / "index.html").read_text()
    assert not [p for p in dist.iterdir() if p.name.startswith(".")], "temporary files were left behind"


def test_a_wheel_changed_after_the_build_is_refused(built: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    wheel = built["dist"] / "demo-1.0+nvfp4.2-py3-none-any.whl"
    with wheel.open("ab") as f:
        f.write(b"\0")  # still a readable zip: the end of central directory is found by scanning
    assert cli.main(["index", *cli_args(built)]) == 3
    assert "wheels changed since they were built, refused:\n  demo-1.0+nvfp4.2-py3-none-any.whl: " in capsys.readouterr().err
    assert not (built["dist"] / "simple").exists()


def test_an_empty_dist_dir_is_a_configuration_error(project: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    layout = project({"demo/__init__.py": ""})
    layout["dist"].mkdir()
    assert cli.main(["index", *cli_args(layout)]) == 2
    assert re.search(r"holds no wheels to index; build them first", capsys.readouterr().err)


def test_pip_installs_from_the_index(built: dict[str, Path], tmp_path: Path) -> None:
    assert cli.main(["index", *cli_args(built, "--quiet")]) == 0
    done = pip_install(built["dist"] / "simple", "demo==1.0+nvfp4.2", tmp_path / "target")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "target" / "demo" / "extra.py").read_text() == "EXTRA = 1\n"
    assert (tmp_path / "target" / "demo-1.0+nvfp4.2.dist-info" / "NVFP4_OVERLAY.json").is_file()
    # Control: a version the index does not hold is not found, so pip really read this index.
    missing = pip_install(built["dist"] / "simple", "demo==1.0+nvfp4.9", tmp_path / "other")
    assert missing.returncode != 0 and "No matching distribution" in missing.stderr


@pytest.mark.upstream
def test_pip_installs_patched_flashinfer_from_the_index(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    common = ["--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--dist-dir", str(dist),
              "--cache-dir", str(cache_dir()), "--quiet"]
    assert cli.main(["build", *common, "flashinfer-python==0.6.1"]) == 0
    assert cli.main(["index", *common]) == 0
    (wheel,) = dist.glob("flashinfer_python-*.whl")
    version = wheel.name.split("-")[1]
    assert re.fullmatch(r"0\.6\.1\+nvfp4\.\d+", version)
    done = pip_install(dist / "simple", f"flashinfer-python=={version}", tmp_path / "target")
    assert done.returncode == 0, done.stderr
    provenance = json.loads((tmp_path / "target" / f"flashinfer_python-{version}.dist-info" / "NVFP4_OVERLAY.json").read_text())
    assert provenance["upstream"]["filename"] == "flashinfer_python-0.6.1-py3-none-any.whl"
    assert (tmp_path / "target" / "flashinfer" / "_nvfp4_overlay" / "opaque.py").is_file()
