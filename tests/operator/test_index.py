"""index: the dist dir as a self-contained static simple repository, installed from with pip and uv.

Served by `python -m http.server` rooted at dist/ and at dist/simple (the links work from either),
from `file://`, and by nginx with the configuration docs/design.md gives for PEP 691's JSON form.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import OVERLAY, PATCHES, ROOT, cache_dir, cli_args, write_wheel
from packaging.utils import canonicalize_name

from nvfp4_overlay import cli

Layout = Callable[..., dict[str, Path]]
UV = shutil.which("uv") or (str(Path(sys.executable).parent / "uv") if (Path(sys.executable).parent / "uv").exists() else None)
needs_uv = pytest.mark.skipif(UV is None, reason="uv is not installed here (pip install uv)")


def clean_env() -> dict[str, str]:
    """No pip or uv configuration of this machine: only the index the test names is used."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def pip_install(index: str, requirement: str, target: Path) -> subprocess.CompletedProcess[str]:
    """pip as a fleet machine runs it: only this index, no dependencies, into a fresh target."""
    command = [sys.executable, "-m", "pip", "install", "-v", "--no-cache-dir", "--index-url", index,
               "--no-deps", "--target", str(target), requirement]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=300, env=clean_env())


def uv_install(index: str, requirement: str, venv: Path) -> subprocess.CompletedProcess[str]:
    assert UV is not None
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    command = [UV, "pip", "install", "--no-config", "--no-cache", "--python", str(venv / "bin" / "python"),
               "--index-url", index, "--no-deps", requirement]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=300, env=clean_env())


def index_args(layout: dict[str, Path], *extra: str) -> list[str]:
    """index over the layout's dist dir, every wheel verified against the pins in its wheelhouse, offline."""
    return ["--dist-dir", str(layout["dist"]), "--patches-dir", str(layout["patches"]), "--overlay-dir",
            str(layout["overlay"]), "--cache-dir", str(layout["cache"]), "--wheelhouse", str(layout["wheelhouse"]),
            "--offline", *extra]


def add_built(layout: dict[str, Path], name: str, version: str, files: dict[str, str | bytes], **kw: str) -> Path:
    """Another release pinned in the layout (an empty series) and built into its dist dir: a wheel index publishes."""
    wheel = write_wheel(layout["wheelhouse"], name, version, files, **kw)  # type: ignore[arg-type]
    series = layout["patches"] / canonicalize_name(name) / version
    series.mkdir(parents=True)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (series / "upstream.toml").write_text(f'revision = 1\n[[wheel]]\nfilename = "{wheel.name}"\nsha256 = "{digest}"\n')
    (series / "series").write_text("")
    assert cli.main(["build", *cli_args(layout, "--quiet"), f"{name}=={version}"]) == 0
    return next(layout["dist"].glob(f"{wheel.name.split('-')[0]}-{version}+*.whl"))


@contextlib.contextmanager
def http_server(root: Path) -> Iterator[str]:
    """`python -m http.server` on a free loopback port, rooted at root: a plain static server."""
    server = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
                               "--directory", str(root)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        port = re.search(r"port (\d+)", server.stdout.readline())
        assert port, "http.server did not say its port"
        yield f"http://127.0.0.1:{port.group(1)}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def built(project: Layout) -> dict[str, Path]:
    layout = project({"demo/__init__.py": "VALUE = 1\n"}, overlay={"demo/extra.py": "EXTRA = 1\n"}, revision=2)
    assert cli.main(["build", *cli_args(layout, "--quiet")]) == 0
    return layout


def test_index_links_every_wheel_beside_its_page(built: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    dist = built["dist"]
    # A second project whose name needs normalizing (PEP 503: runs of -_. become -, lower case).
    add_built(built, "Other_Pkg.Tools", "3.1", {"other/__init__.py": ""}, extra_metadata="Requires-Python: >=3.10")
    capsys.readouterr()
    assert cli.main(["index", *index_args(built, "--json")]) == 0
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
        assert f'href="{href}#sha256={digest}"' in page, page
        assert (simple / project / filename).read_bytes() == (dist / filename).read_bytes()
        listing = json.loads((simple / project / "index.json").read_text())
        (entry,) = listing["files"]
        assert entry["hashes"] == {"sha256": digest}
        assert entry["url"] == href
        assert entry["size"] == (dist / filename).stat().st_size
        assert listing["meta"]["api-version"].startswith("1.")
    other = (simple / "other-pkg-tools" / "index.html").read_text()
    assert 'data-requires-python="&gt;=3.10"' in other


def test_metadata_files_match_the_wheel_s_metadata(built: dict[str, Path]) -> None:
    assert cli.main(["index", *index_args(built, "--quiet")]) == 0
    page = built["dist"] / "simple" / "demo"
    sidecar = page / "demo-1.0+nvfp4.2-py3-none-any.whl.metadata"
    assert sidecar.read_bytes().startswith(b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0+nvfp4.2\n")
    digest = hashlib.sha256(sidecar.read_bytes()).hexdigest()
    assert f'data-core-metadata="sha256={digest}"' in (page / "index.html").read_text()


def test_reindexing_drops_wheels_that_are_gone(built: dict[str, Path]) -> None:
    dist = built["dist"]
    extra = add_built(built, "gone", "1.0", {"gone.py": ""})
    assert cli.main(["index", *index_args(built, "--quiet")]) == 0
    assert (dist / "simple" / "gone" / extra.name).exists()
    extra.unlink()
    assert cli.main(["index", *index_args(built, "--quiet")]) == 0
    assert not (dist / "simple" / "gone").exists()
    assert "gone" not in (dist / "simple" / "index.html").read_text()
    assert not [p for p in dist.iterdir() if p.name.startswith(".")], "temporary files were left behind"


def test_a_wheel_changed_after_the_build_is_refused(built: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    wheel = built["dist"] / "demo-1.0+nvfp4.2-py3-none-any.whl"
    with wheel.open("ab") as f:
        f.write(b"\0")  # still a readable zip: the end of central directory is found by scanning
    assert cli.main(["index", *index_args(built)]) == 3
    err = capsys.readouterr().err
    assert "index: refused, nothing was published; it publishes only wheels SHA256SUMS lists and verify passes:\n" in err
    assert "  demo-1.0+nvfp4.2-py3-none-any.whl: sha256 " in err
    assert "the file changed after the build wrote it" in err
    assert not (built["dist"] / "simple").exists()


def test_an_empty_dist_dir_is_a_configuration_error(project: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    layout = project({"demo/__init__.py": ""})
    layout["dist"].mkdir()
    assert cli.main(["index", *index_args(layout)]) == 2
    assert re.search(r"holds no wheels to index; build them first", capsys.readouterr().err)


def test_versions_are_listed_by_version_not_by_string(built: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    for version in ("0.6.10", "0.6.2", "0.6.2.post1"):
        add_built(built, "flashinfer-python", version, {"flashinfer/__init__.py": ""})
    assert cli.main(["index", *index_args(built)]) == 0
    assert "  flashinfer-python: 0.6.2+nvfp4.1, 0.6.2.post1+nvfp4.1, 0.6.10+nvfp4.1\n" in capsys.readouterr().out
    page = (built["dist"] / "simple" / "flashinfer-python" / "index.html").read_text()
    assert page.index("0.6.2%2B") < page.index("0.6.2.post1%2B") < page.index("0.6.10%2B")


def test_index_prints_the_install_line_of_each_stack_it_holds(built: dict[str, Path],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    url = "https://wheels.example/simple"
    assert cli.main(["index", *index_args(built, "--url", url)]) == 0
    out = capsys.readouterr().out
    assert "install stack demo with:\n  pip install demo==1.0\n" in out
    assert f"  pip install --no-deps --index-url {url} demo==1.0+nvfp4.2\n" in out


def test_build_refreshes_the_index_it_finds_in_the_dist_dir(built: dict[str, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """With what index would publish: the new build; the old one, which this checkout no longer builds and so
    cannot verify, is left out and named."""
    assert cli.main(["index", *index_args(built, "--quiet")]) == 0
    toml = built["patches"] / "demo" / "1.0" / "upstream.toml"
    toml.write_text(toml.read_text().replace("revision = 2", "revision = 3"))
    capsys.readouterr()
    assert cli.main(["build", *cli_args(built, "--quiet")]) == 0
    page = (built["dist"] / "simple" / "demo" / "index.html").read_text()
    assert "demo-1.0%2Bnvfp4.3-py3-none-any.whl" in page and "demo-1.0%2Bnvfp4.2-py3-none-any.whl" not in page
    assert ("warning: the index " in (err := capsys.readouterr().err) and "leaves out demo-1.0+nvfp4.2-py3-none-any.whl: "
            "cannot be verified here: it is labelled 1.0+nvfp4.2, and this checkout builds demo==1.0 as 1.0+nvfp4.3") in err


@pytest.mark.parametrize("root", ["dist", "dist/simple", "file"], ids=["served-at-dist", "served-at-simple", "file-url"])
def test_pip_installs_from_the_index_wherever_it_is_rooted(built: dict[str, Path], tmp_path: Path, root: str) -> None:
    assert cli.main(["index", *index_args(built, "--quiet")]) == 0
    simple = built["dist"] / "simple"
    with contextlib.ExitStack() as stack:
        if root == "file":
            url = simple.as_uri()
        else:
            base = stack.enter_context(http_server(built["dist"] if root == "dist" else simple))
            url = f"{base}/simple/" if root == "dist" else f"{base}/"
        done = pip_install(url, "demo==1.0+nvfp4.2", tmp_path / "target")
        assert done.returncode == 0, done.stdout + done.stderr
        if root != "file":  # PEP 658: pip read the metadata file beside the wheel, then the wheel
            assert ".whl.metadata" in done.stdout, done.stdout
        # Control: a version the index does not hold is not found, so pip really read this index.
        missing = pip_install(url, "demo==1.0+nvfp4.9", tmp_path / "other")
    assert (tmp_path / "target" / "demo" / "extra.py").read_text() == "EXTRA = 1\n"
    assert (tmp_path / "target" / "demo-1.0+nvfp4.2.dist-info" / "NVFP4_OVERLAY.json").is_file()
    assert missing.returncode != 0 and "No matching distribution" in missing.stderr


@needs_uv
@pytest.mark.parametrize("root", ["dist", "dist/simple"], ids=["served-at-dist", "served-at-simple"])
def test_uv_installs_from_the_index_wherever_it_is_rooted(built: dict[str, Path], tmp_path: Path, root: str) -> None:
    assert cli.main(["index", *index_args(built, "--quiet")]) == 0
    simple = built["dist"] / "simple"
    with http_server(built["dist"] if root == "dist" else simple) as base:
        url = f"{base}/simple/" if root == "dist" else f"{base}/"
        done = uv_install(url, "demo==1.0+nvfp4.2", tmp_path / "venv")
    assert done.returncode == 0, done.stderr
    (site,) = (tmp_path / "venv" / "lib").glob("python*/site-packages")
    assert (site / "demo" / "extra.py").read_text() == "EXTRA = 1\n"


NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


@contextlib.contextmanager
def nginx(root: Path, tmp_path: Path) -> Iterator[str]:
    """nginx with docs/nginx-simple.conf's location blocks, on a free loopback port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert root.name == "simple"
    block = (ROOT / "docs" / "nginx-simple.conf").read_text().replace("/srv/wheels", str(root.parent))
    tmp_path.mkdir(parents=True, exist_ok=True)
    conf = tmp_path / "nginx.conf"
    # Workers as this user: pytest's temporary folders are private to it.
    user = f"user {getpass.getuser()};\n" if os.geteuid() == 0 else ""
    conf.write_text(f"{user}daemon off; pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;\n"
                    f"events {{}}\nhttp {{ access_log off; include /etc/nginx/mime.types;\n"
                    f"  client_body_temp_path {tmp_path}; proxy_temp_path {tmp_path}; fastcgi_temp_path {tmp_path};\n"
                    f"  uwsgi_temp_path {tmp_path}; scgi_temp_path {tmp_path};\n"
                    f"  server {{ listen 127.0.0.1:{port};\n{block}\n  }}\n}}\n")
    assert NGINX is not None
    server = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(tmp_path)], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(100):  # up to 10 s for nginx to listen
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.1):
                break
            time.sleep(0.1)
            server.poll()
            assert server.returncode is None, server.stderr.read() if server.stderr else ""
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.skipif(NGINX is None, reason="nginx is not installed here (apt-get install nginx-light)")
def test_nginx_with_the_documented_configuration_serves_pep_691_json(built: dict[str, Path], tmp_path: Path) -> None:
    assert cli.main(["index", *index_args(built, "--quiet")]) == 0
    simple = built["dist"] / "simple"
    with nginx(simple, tmp_path / "nginx") as base:
        def get(path: str, accept: str) -> tuple[str, bytes]:
            request = urllib.request.Request(base + path, headers={"Accept": accept})
            with urllib.request.urlopen(request, timeout=10) as response:  # loopback only
                return response.headers["Content-Type"], response.read()

        kind, body = get("/simple/demo/", "application/vnd.pypi.simple.v1+json")
        assert kind == "application/vnd.pypi.simple.v1+json"
        assert json.loads(body)["versions"] == ["1.0+nvfp4.2"]
        kind, body = get("/simple/demo/", "text/html")
        assert kind.startswith("text/html") and b"demo-1.0%2Bnvfp4.2-py3-none-any.whl" in body
        kind, body = get("/simple/", "application/vnd.pypi.simple.v1+json")
        assert json.loads(body)["projects"] == [{"name": "demo"}]
        done = pip_install(f"{base}/simple/", "demo==1.0+nvfp4.2", tmp_path / "target")
    assert done.returncode == 0, done.stderr
    # pip asked for JSON first (its Accept header), got it, and took PEP 658's metadata from it.
    assert "demo-1.0%2Bnvfp4.2-py3-none-any.whl.metadata" in done.stdout


@pytest.mark.upstream
def test_pip_installs_patched_flashinfer_from_the_index(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    common = ["--patches-dir", str(PATCHES), "--dist-dir", str(dist), "--quiet"]
    assert cli.main(["build", *common, "--overlay-dir", str(OVERLAY), "--cache-dir", str(cache_dir()),
                     "flashinfer-python==0.6.1"]) == 0
    assert cli.main(["index", *common]) == 0
    (wheel,) = dist.glob("flashinfer_python-*.whl")
    version = wheel.name.split("-")[1]
    assert re.fullmatch(r"0\.6\.1\+nvfp4\.\d+(\.\d+)?", version)
    with http_server(dist / "simple") as base:
        done = pip_install(f"{base}/", f"flashinfer-python=={version}", tmp_path / "target")
    assert done.returncode == 0, done.stderr
    provenance = json.loads((tmp_path / "target" / f"flashinfer_python-{version}.dist-info" / "NVFP4_OVERLAY.json").read_text())
    assert provenance["upstream"]["filename"] == "flashinfer_python-0.6.1-py3-none-any.whl"
    assert (tmp_path / "target" / "flashinfer" / "_nvfp4_overlay" / "opaque.py").is_file()
