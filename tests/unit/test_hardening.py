"""Hostile and broken inputs: each is refused with docs/design.md's exit status and a message naming the
file and the next step, and leaves the dist dir and the cache as they were (issue 5's corpus).

The fixtures are under tests/data/, named by scenario; tests/data/make_fixtures.py writes them.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nvfp4_overlay import cli

DATA = Path(__file__).resolve().parents[1] / "data"
sys.path.insert(0, str(DATA))
import make_fixtures

FILENAME = "demo-1.0-py3-none-any.whl"
UPSTREAM = "patches/demo/1.0"
NEXT_STEP = re.compile(r"pin another|download|regenerate|rename|patch in the series|only -p1|list|fix|replace|drift|overlay/ instead|remove the file")


@dataclass(frozen=True)
class Case:
    wheel: str = "good"
    patch: str = "good"
    exit: int = 3
    match: str = ""  # a regex the `error:` message must match (besides the file name and a next step)
    names: str = FILENAME  # the file the message must name
    pin: str | None = None  # the fixture whose sha256 upstream.toml pins (default: the wheel itself)
    where: str = "wheelhouse"  # where the upstream wheel lies: wheelhouse or cache
    series: str | None = None  # the series file's text (default: the one patch)
    overlay: dict[str, str] = field(default_factory=dict)


CORPUS: dict[str, Case] = {
    # --- integrity: digests, corrupt archives, RECORD, metadata (exit 3) ---
    "hash_mismatch_in_wheelhouse": Case("hash_mismatch", pin="good",
                                        match=r"sha256 [0-9a-f]{64} does not match [0-9a-f]{64}"),
    "hash_mismatch_in_cache": Case("hash_mismatch", pin="good", where="cache",
                                   match=r"sha256 [0-9a-f]{64} does not match [0-9a-f]{64}.*cached copy was removed"),
    "truncated_zip": Case("truncated", match="not a readable zip archive"),
    "not_a_zip": Case("not_a_zip", match="not a readable zip archive"),
    "corrupt_member": Case("corrupt_member", match="demo/mod.py is corrupt"),
    "record_hash_mismatch": Case("record_hash_mismatch", match=r"demo/mod.py is sha256=\S+ \(\d+ bytes\), its RECORD says"),
    "record_size_mismatch": Case("record_size_mismatch", match="RECORD says demo/data.txt holds 16 bytes, the archive 15"),
    "record_missing_row": Case("record_missing_row", match="demo/data.txt is not in its RECORD"),
    "record_extra_row": Case("record_extra_row", match="RECORD lists demo/gone.py, which the archive does not hold"),
    "record_malformed": Case("record_malformed", match="size 'fifteen', not a number"),
    "record_missing": Case("record_missing", match="has no member demo-1.0.dist-info/RECORD"),
    "metadata_version_mismatch": Case("metadata_version_mismatch", match="METADATA says demo 2.0"),
    "dist_info_name_mismatch": Case("dist_info_name_mismatch", match="directory is other-1.0.dist-info"),
    "two_dist_infos": Case("two_dist_infos", match="exactly one top-level .dist-info"),
    "nested_dist_info": Case("nested_dist_info", match=".dist-info directory outside the wheel root: demo/demo-1.0"),
    "data_dir_mismatch": Case("data_dir_mismatch", match="evil-6.6.data does not match"),
    # --- unsafe archives (exit 3) ---
    "zip_slip": Case("zip_slip", match=r"'\.\./\.\./evil\.py': '\.\.' or '\.' in the path"),
    "absolute_path": Case("absolute_path", match="'/etc/cron.d/evil': absolute path"),
    "backslash": Case("backslash", match="backslash in the name"),
    "drive_letter": Case("drive_letter", match="'C:/Windows/evil.py': absolute path or drive letter"),
    "symlink": Case("symlink", match="'demo/link': a symlink or device file"),
    "device_file": Case("device_file", match="'demo/tty': a symlink or device file"),
    "duplicate_name": Case("duplicate_name", match="'demo/mod.py': duplicate name"),
    "duplicate_name_case": Case("duplicate_case", match="'demo/MOD.py': duplicate name"),
    "zip_bomb_ratio": Case("zip_bomb_ratio", match="'demo/zeros.bin': compression ratio above 200:1"),
    "zip_bomb_understated_size": Case("zip_bomb_understated", match="demo/mod.py is corrupt .*CRC"),
    "zip_bomb_local_header": Case("zip_bomb_local_header", match="'demo/data.txt': its local header declares 2147483648 bytes"),
    "zip_bomb_overlap": Case("zip_bomb_overlap", match="'demo/__init__.py': its data overlap the next member"),
    "encrypted_member": Case("encrypted", match="'demo/data.txt': encrypted"),
    "unknown_compression": Case("unknown_compression", match="compression method 99"),
    # --- unsafe or broken patches and series (exit 2) ---
    "patch_dotdot_path": Case(patch="dotdot_path", exit=2, names="0001-change.patch", match="'a/../../etc/profile' is outside"),
    "patch_abs_path": Case(patch="abs_path", exit=2, names="0001-change.patch", match="'/etc/profile' is outside"),
    "patch_backslash_path": Case(patch="backslash_path", exit=2, names="0001-change.patch", match="is outside"),
    "patch_touches_dist_info": Case(patch="dist_info", exit=2, names="0001-change.patch", match="METADATA' is outside"),
    "patch_touches_record": Case(patch="record", exit=2, names="0001-change.patch", match="RECORD' is outside"),
    "patch_binary": Case(patch="binary", exit=2, names="0001-change.patch", match="binary diffs are refused"),
    "patch_malformed_hunk_header": Case(patch="malformed_hunk_header", exit=2, names="0001-change.patch",
                                        match=r"malformed hunk header '@@ -3,x \+3 @@'"),
    "patch_hunk_longer_than_header": Case(patch="hunk_longer_than_header", exit=2, names="0001-change.patch",
                                          match="holds more lines than its header counts"),
    "patch_hunk_shorter_than_header": Case(patch="hunk_shorter_than_header", exit=2, names="0001-change.patch",
                                           match="shorter than expected"),
    "patch_misordered_hunks": Case(patch="misordered_hunks", exit=2, names="0001-change.patch",
                                   match="hunk 2 .* starts before hunk 1 ends"),
    "patch_without_hunks": Case(patch="no_hunks", exit=2, names="0001-change.patch", match="changes no line"),
    "series_names_missing_patch": Case(exit=2, names="series", series="0001-change.patch\n0002-missing.patch\n",
                                       match="0002-missing.patch: listed in the series but .* does not exist"),
    "series_strip_level_p0": Case(exit=2, names="series", series="0001-change.patch -p0\n", match="'-p0' after 0001-change.patch"),
    "series_path_outside": Case(exit=2, names="series", series="../0001-change.patch\n", match="plain file names"),
    "overlay_overwrites_upstream": Case(exit=2, names="overlay/demo/demo/data.txt", overlay={"demo/data.txt": "x\n"},
                                        match="would overwrite upstream's demo/data.txt"),
    "overlay_overwrites_upstream_case": Case(exit=2, names="overlay/demo/demo/Data.txt", overlay={"demo/Data.txt": "x\n"},
                                             match="would overwrite upstream's demo/Data.txt"),
    "overlay_adds_metadata": Case(exit=2, names="overlay/demo/demo-1.0.dist-info/entry_points.txt",
                                  overlay={"demo-1.0.dist-info/entry_points.txt": "x\n"}, match="may not add metadata"),
    "overlay_backslash_name": Case(exit=2, names="overlay/demo/demo", overlay={"demo/a\\b.py": "x\n"},
                                   match="backslash in the name"),
    # --- a patch that does not apply (exit 1) ---
    "patch_does_not_apply": Case(patch="does_not_apply", exit=1, names="0001-change.patch",
                                 match=r"hunk 1 \(@@ -3,7 \+3,7 @@\) does not apply to demo/mod.py: line 5 differs"),
    "patch_file_missing_upstream": Case(patch="missing_file", exit=1, names="0001-change.patch",
                                        match="demo/gone.py is not in the wheel"),
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root (hidden temp files too) with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass
class Project:
    root: Path

    @property
    def dist(self) -> Path:
        return self.root / "dist"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def wheelhouse(self) -> Path:
        return self.root / "wheelhouse"

    def verify(self, wheel: Path) -> list[str]:
        """verify of a wheel this project built, held to the pin found where the build found it, offline."""
        return ["verify", str(wheel), "--patches-dir", str(self.root / "patches"), "--overlay-dir",
                str(self.root / "overlay"), "--cache-dir", str(self.cache), "--wheelhouse", str(self.wheelhouse),
                "--offline"]

    def argv(self, *extra: str, offline: bool = True) -> list[str]:
        # Without --offline the wheelhouse stays out too: a wheelhouse means no network (docs/design.md).
        return [
            "build", "--patches-dir", str(self.root / "patches"), "--overlay-dir", str(self.root / "overlay"),
            "--dist-dir", str(self.dist), "--cache-dir", str(self.cache),
            *(["--wheelhouse", str(self.wheelhouse), "--offline"] if offline else []), *extra,
        ]


def make_project(tmp_path: Path, case: Case) -> Project:
    """patches/, overlay/, a wheelhouse or cache with the fixture wheel, and a dist dir and cache in use."""
    project = Project(tmp_path)
    wheel = DATA / "wheels" / f"{case.wheel}.whl"
    series_dir = tmp_path / UPSTREAM
    series_dir.mkdir(parents=True)
    (tmp_path / "patches" / "stacks.toml").write_text('default = "demo"\n[stacks.demo]\ndemo = "1.0"\n')
    pin = sha256(DATA / "wheels" / f"{case.pin or case.wheel}.whl")
    (series_dir / "upstream.toml").write_text(f'revision = 1\n[[wheel]]\nfilename = "{FILENAME}"\nsha256 = "{pin}"\n')
    shutil.copy(DATA / "patches" / f"{case.patch}.patch", series_dir / "0001-change.patch")
    (series_dir / "series").write_text(case.series or "# the one patch\n0001-change.patch\n")
    for path, text in case.overlay.items():
        target = tmp_path / "overlay" / "demo" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (tmp_path / "overlay").mkdir(exist_ok=True)
    home = project.wheelhouse if case.where == "wheelhouse" else project.cache / "wheels"
    home.mkdir(parents=True)
    project.wheelhouse.mkdir(exist_ok=True)
    shutil.copy(wheel, home / FILENAME)
    # A dist dir and a cache already in use: a failed build must leave both byte for byte.
    project.dist.mkdir()
    (project.dist / "demo-0.9+nvfp4.1-py3-none-any.whl").write_bytes(b"an earlier build")
    (project.dist / "SHA256SUMS").write_text(f"{'0' * 64}  demo-0.9+nvfp4.1-py3-none-any.whl\n")
    (project.cache / "wheels").mkdir(parents=True, exist_ok=True)
    (project.cache / "wheels" / "other-2.0-py3-none-any.whl").write_bytes(b"another cached wheel")
    return project


def test_the_docs_quote_the_corpus_size() -> None:
    """docs/reliability.md says how many hostile inputs are refused: the count must be this table's."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "reliability.md").read_text()
    assert f"{len(CORPUS)} refused inputs" in text


@pytest.mark.parametrize("case", CORPUS.values(), ids=CORPUS.keys())
def test_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: Case) -> None:
    project = make_project(tmp_path, case)
    dist_before, cache_before = snapshot(project.dist), snapshot(project.cache)
    wheelhouse_before = snapshot(project.wheelhouse)

    code = cli.main(project.argv())

    err = capsys.readouterr().err
    assert code == case.exit, err
    message = err[err.index("error: "):]
    assert case.names in message
    assert re.search(case.match, message, re.DOTALL), message
    assert NEXT_STEP.search(message), f"no next step in: {message}"
    assert snapshot(project.dist) == dist_before
    assert snapshot(project.wheelhouse) == wheelhouse_before
    if case.where == "cache" and case.exit == 3 and case.pin:
        del cache_before[f"wheels/{FILENAME}"]  # the one change allowed: the bad cached file is gone
    assert snapshot(project.cache) == cache_before


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_the_good_fixture_builds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The corpus is the good case changed in one way: the good case itself must build and verify."""
    project = make_project(tmp_path, Case())
    assert cli.main(project.argv()) == 0
    built = project.dist / "demo-1.0+nvfp4.1-py3-none-any.whl"
    assert built.exists()
    assert built.stat().st_mode & 0o777 == 0o666 & ~_umask()  # as any file written here, not mkstemp's 0600
    assert not [p for p in project.dist.iterdir() if p.name.startswith(".")]
    assert cli.main(project.verify(built)) == 0


# A full disk, a read-only or foreign dist dir: the path, the fix for that errno and the option that points
# elsewhere, exit 2, and the dist dir as it was. The fault is injected where the OS raises it: the wheel's
# bytes written to the open temporary file (ENOSPC names no file), the temporary file made (EROFS, EACCES).
DISK_FAULTS = {
    "full": (errno.ENOSPC, "write", "free space on that file system, or point --dist-dir at another disk"),
    "read-only": (errno.EROFS, "mkstemp", "point --dist-dir at a writable directory"),
    "not-ours": (errno.EACCES, "mkstemp", "fix its permissions, or point --dist-dir at a directory this user may"),
}


@pytest.mark.parametrize("code, where, fix", DISK_FAULTS.values(), ids=DISK_FAULTS.keys())
def test_a_disk_that_refuses_the_write_names_the_path_and_the_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        code: int, where: str, fix: str) -> None:
    from nvfp4_overlay import files
    from nvfp4_overlay.wheel import build

    project = make_project(tmp_path, Case())
    before = snapshot(project.dist)
    if where == "write":
        real = build.write_wheel

        def write_wheel(out: object, *args: object) -> str:
            real(out, *args)  # the bytes go to the temporary file's buffer; the disk refuses them
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(build, "write_wheel", write_wheel)
    else:
        def mkstemp(*args: object, dir: str, **kwargs: object) -> tuple[int, str]:
            raise OSError(code, os.strerror(code), os.path.join(dir, ".demo.tmp"))

        monkeypatch.setattr(files.tempfile, "mkstemp", mkstemp)
    assert cli.main(project.argv("--json")) == 2
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert str(project.dist) in error["path"] and error["item"] == "--dist-dir"
    assert fix in error["fix"] and os.strerror(code) in err and str(project.dist) in err
    assert "Traceback" not in err
    assert snapshot(project.dist) == before


@pytest.mark.parametrize("dist_exists", [True, False], ids=["dist-dir-in-use", "no-dist-dir"])
def test_second_target_failing_leaves_no_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str], dist_exists: bool) -> None:
    """Two targets, the second broken after the first was written to a temp file: nothing lands, no
    temp file stays, and a dist dir the build made is gone again."""
    project = make_project(tmp_path, Case())
    before = snapshot(project.dist)
    if not dist_exists:
        shutil.rmtree(project.dist)
    other = tmp_path / "patches" / "demo" / "1.1"
    other.mkdir()
    (other / "upstream.toml").write_text(
        f'revision = 1\n[[wheel]]\nfilename = "demo-1.1-py3-none-any.whl"\nsha256 = "{"1" * 64}"\n')
    (project.wheelhouse / "demo-1.1-py3-none-any.whl").write_bytes((DATA / "wheels" / "good.whl").read_bytes())
    assert cli.main(project.argv("demo==1.0", "demo==1.1")) == 3
    assert "demo-1.1-py3-none-any.whl: sha256" in capsys.readouterr().err
    assert snapshot(project.dist) == before if dist_exists else not project.dist.exists()


def test_download_with_the_wrong_digest_is_not_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """pip (here from a local --find-links folder, no network) hands over a file that is not the pinned one."""
    project = make_project(tmp_path, Case("hash_mismatch", pin="good"))
    index = tmp_path / "index"
    index.mkdir()
    (project.wheelhouse / FILENAME).rename(index / FILENAME)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    cache_before = snapshot(project.cache)

    assert cli.main(project.argv(offline=False)) == 3

    err = capsys.readouterr().err
    assert re.search(rf"{FILENAME} as pip downloaded it: sha256 [0-9a-f]{{64}} does not match {sha256(DATA / 'wheels' / 'good.whl')}", err)
    assert snapshot(project.cache) == cache_before  # no download kept, no temp dir left
    assert [p.name for p in project.cache.iterdir()] == ["wheels"]


def tree(root: Path) -> list[str]:
    """Every path under root, folders too (an empty temporary folder left behind shows here)."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def use_find_links(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """pip downloads from a local --find-links folder holding the pinned wheel (no network)."""
    index = tmp_path / "index"
    index.mkdir()
    shutil.copy(DATA / "wheels" / "good.whl", index / FILENAME)
    for key, value in {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                       "PIP_NO_CACHE_DIR": "1", "PIP_CONFIG_FILE": os.devnull}.items():
        monkeypatch.setenv(key, value)
    return index


@pytest.mark.parametrize("bad", ["empty", pytest.param("unreadable", marks=pytest.mark.skipif(
    os.geteuid() == 0, reason="root reads a file of mode 000"))])
def test_a_bad_cached_wheel_is_removed_and_the_next_build_downloads_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    """A zero-byte (an interrupted copy, a full disk) or unreadable wheel in the cache is a bad cached file like
    one of another digest: refused, removed, and the next build downloads the pinned one. Before, it was
    refused and kept, and every build failed on it until a person deleted it."""
    project = make_project(tmp_path, Case(where="cache"))
    cached = project.cache / "wheels" / FILENAME
    cached.write_bytes(b"")
    if bad == "unreadable":
        cached.write_bytes((DATA / "wheels" / "good.whl").read_bytes())
        cached.chmod(0)
    use_find_links(monkeypatch, tmp_path)
    assert cli.main(project.argv(offline=False)) == (3 if bad == "empty" else 2)
    err = capsys.readouterr().err
    assert f"{cached}: not the pinned wheel" in err and "the cached copy was removed, the next run downloads it again" in err
    assert not cached.exists() and not any(project.dist.glob("demo-1.0*"))
    assert cli.main(project.argv(offline=False)) == 0
    assert cached.read_bytes() == (DATA / "wheels" / "good.whl").read_bytes()
    assert (project.dist / "demo-1.0+nvfp4.1-py3-none-any.whl").is_file()


def test_a_build_removes_the_temporaries_a_killed_build_left_and_nothing_else(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Temporaries of the build's own names that no process holds (a build killed by SIGKILL or a power loss
    leaves them: 85 MB for the default stack) go; a user's files, and one a live build holds, stay."""
    from nvfp4_overlay import files

    project = make_project(tmp_path, Case())
    stale = [project.dist / ".demo-1.0+nvfp4.1-py3-none-any.whl.k3j_x9aa.tmp", project.dist / ".SHA256SUMS.q0w9e8r7.tmp"]
    for path in stale:
        path.write_bytes(b"half a wheel")
    (project.cache / ".download-a1b2c3d4").mkdir()
    (project.cache / ".download-a1b2c3d4" / FILENAME).write_bytes(b"half a download")
    users = [project.dist / ".notes.whl.tmp", project.dist / "mine.abcdefgh.tmp", project.dist / ".demo.whl.abcdefgh.tmp.keep",
             project.cache / ".download-mine"]
    for path in users:
        path.write_bytes(b"a user's")
    live, lock = files.held_temporary(project.dist, ".other-2.0-py3-none-any.whl.", ".tmp")  # a build running now
    try:
        assert cli.main(project.argv()) == 0
    finally:
        assert lock is not None
        os.close(lock)
    err = capsys.readouterr().err
    assert not any(p.exists() for p in [*stale, project.cache / ".download-a1b2c3d4"])
    assert all(p.exists() for p in [*users, live])
    assert f"removed {stale[0]}: a temporary of a build that was killed" in err
    assert (project.dist / "demo-1.0+nvfp4.1-py3-none-any.whl").is_file()


def test_sigterm_during_a_download_leaves_the_dist_dir_and_the_cache_as_they_were(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real build in a child process, sent SIGTERM while pip downloads into the cache: exit 143 as a shell
    reports it, an Interrupted document under --json, and nothing of it left (before: Python's default
    ended the process at once, silent, and the .download-* folder stayed in the cache)."""
    import signal
    import subprocess
    import time

    project = make_project(tmp_path, Case(where="cache"))
    (project.cache / "wheels" / FILENAME).unlink()  # pip brings it
    use_find_links(monkeypatch, tmp_path)
    dist, cache = (snapshot(project.dist), tree(project.dist)), (snapshot(project.cache), tree(project.cache))
    child = subprocess.Popen([sys.executable, "-m", "nvfp4_overlay.cli", *project.argv("--json", offline=False)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any(project.cache.glob(".download-*")) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert child.poll() is None, "the build ended before its download folder was seen"
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 143, err
    error = json.loads(out)["error"]
    assert (error["kind"], error["exit_code"], error["found"]) == ("Interrupted", 143, "SIGTERM")
    assert "error: terminated (SIGTERM): the command stopped where it was" in err
    assert (snapshot(project.dist), tree(project.dist)) == dist
    assert (snapshot(project.cache), tree(project.cache)) == cache


def test_offline_without_the_wheel_says_where_it_looked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = make_project(tmp_path, Case())
    (project.wheelhouse / FILENAME).unlink()
    assert cli.main(project.argv()) == 2  # an input that is not there: configuration, not the network
    err = capsys.readouterr().err
    assert f"{FILENAME}: not found in {project.wheelhouse} or the cache {project.cache / 'wheels'}" in err
    assert "--offline forbids pip; fill the cache with 'nvfp4-overlay build demo==1.0' once with network access" in err


def test_unlisted_patch_is_a_warning_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = make_project(tmp_path, Case())
    shutil.copy(DATA / "patches" / "does_not_apply.patch", tmp_path / UPSTREAM / "0009-forgotten.patch")
    assert cli.main(project.argv()) == 0
    err = capsys.readouterr().err
    assert f"warning: {tmp_path / UPSTREAM / '0009-forgotten.patch'} is not named in the series and is not applied" in err


@pytest.mark.parametrize("wheel, problem", [
    ("record_hash_mismatch_unpatched", r"demo/data.txt: RECORD says sha256=\S+ \(15 bytes\), the file is sha256="),
    ("corrupt_unpatched_member", r"demo/data.txt is corrupt"),
], ids=["record-hash", "crc"])
def test_unchanged_members_are_checked_by_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str], wheel: str, problem: str) -> None:
    """The documented split: build copies unchanged members raw (fast), verify hashes every member."""
    project = make_project(tmp_path, Case(wheel))
    assert cli.main(project.argv()) == 0
    built = project.dist / "demo-1.0+nvfp4.1-py3-none-any.whl"
    capsys.readouterr()
    assert cli.main(project.verify(built)) == 3
    assert re.search(problem, capsys.readouterr().out)


@pytest.mark.parametrize("wheel, problem", [
    ("zip_slip", r"'\.\./\.\./evil\.py': '\.\.' or '\.' in the path"),
    ("zip_bomb_overlap", "overlap the next member"),
    ("truncated", "not a readable zip archive"),
    ("record_missing_row", "demo/data.txt is in the archive but not in RECORD"),
], ids=["zip-slip", "overlap", "truncated", "record-row"])
def test_verify_refuses_hostile_wheels(tmp_path: Path, capsys: pytest.CaptureFixture[str], wheel: str, problem: str) -> None:
    path = tmp_path / FILENAME
    shutil.copy(DATA / "wheels" / f"{wheel}.whl", path)
    assert cli.main(["verify", str(path)]) == 3
    assert re.search(problem, capsys.readouterr().out)


@pytest.mark.parametrize("name", ["missing.whl", "."], ids=["missing", "directory"])
def test_verify_of_a_path_that_is_no_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """A bad argument (exit 2), not an integrity failure, and not a traceback."""
    assert cli.main(["verify", str(tmp_path / name)]) == 2
    found = "missing" if name == "missing.whl" else "a directory"
    assert f"{tmp_path / name}: {found}, not a wheel file; name a wheel that build wrote" in capsys.readouterr().err


def test_reader_hashes_the_handle_it_reads(tmp_path: Path) -> None:
    """No path opens an unverified upstream file: the reader checks the digest on its own handle."""
    from nvfp4_overlay.errors import HashMismatchError
    from nvfp4_overlay.wheel.archive import WheelReader

    path = tmp_path / FILENAME
    shutil.copy(DATA / "wheels" / "hash_mismatch.whl", path)
    with pytest.raises(HashMismatchError, match=rf"{FILENAME}: sha256 [0-9a-f]{{64}} does not match {'0' * 64}"):
        WheelReader(path, sha256="0" * 64)
    with WheelReader(path, sha256=sha256(path)) as reader:
        assert "demo/mod.py" in reader.names


def test_a_file_that_is_neither_the_pin_nor_a_zip_is_refused_as_not_the_pin(tmp_path: Path) -> None:
    """The digest runs beside the directory checks: a file that fails both (a truncated download, a
    cache entry overwritten) is refused for its digest, which fetch acts on (it removes a bad cached
    copy), not as a corrupt zip; a corrupt file that is the pin is refused as corrupt."""
    from nvfp4_overlay.errors import HashMismatchError, UnsafeArchiveError
    from nvfp4_overlay.wheel.archive import WheelReader

    path = tmp_path / FILENAME
    path.write_bytes(b"PK\x03\x04 not a zip at all" * 1000)
    with pytest.raises(HashMismatchError, match=f"does not match {'0' * 64}"):
        WheelReader(path, sha256="0" * 64)
    with pytest.raises(UnsafeArchiveError, match="not a readable zip archive") as refused:
        WheelReader(path, sha256=sha256(path))
    assert not isinstance(refused.value, HashMismatchError)
    truncated = tmp_path / "truncated.whl"
    truncated.write_bytes((DATA / "wheels" / "hash_mismatch.whl").read_bytes()[:-30])
    with pytest.raises(HashMismatchError):
        WheelReader(truncated, sha256=sha256(DATA / "wheels" / "hash_mismatch.whl"))


def test_fixtures_are_what_the_script_writes(tmp_path: Path) -> None:
    make_fixtures.write(tmp_path)
    for kind in ("wheels", "patches"):
        assert snapshot(tmp_path / kind) == snapshot(DATA / kind), f"run python {DATA / 'make_fixtures.py'}"


def test_every_fixture_is_used() -> None:
    used = {c.wheel for c in CORPUS.values()} | {c.patch for c in CORPUS.values()} | {c.pin for c in CORPUS.values()}
    used |= {"record_hash_mismatch_unpatched", "corrupt_unpatched_member"}
    assert set(make_fixtures.WHEELS) | set(make_fixtures.PATCHES) <= used


def test_fixtures_stay_tiny() -> None:
    assert sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file()) < 100_000
    assert os.path.getsize(DATA / "wheels" / "zip_bomb_ratio.whl") < 5_000
