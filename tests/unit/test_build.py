"""Building small wheels end to end through the CLI: relabelling, RECORD, provenance, atomicity."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import cli_args, data_args

from nvfp4_overlay import cli
from nvfp4_overlay.records import hash_of as record_hash

FILES = {
    "demo/__init__.py": "".join(f"value_{i} = {i}\n" for i in range(30)),
    "demo/tool.sh": "#!/bin/sh\necho hi\n",
}
PATCH = (
    "Description: change value_10\nOrigin: nvfp4-overlay\nForwarded: no\nLast-Update: 2026-11-30\n\n"
    "--- a/demo/__init__.py\n+++ b/demo/__init__.py\n@@ -10,3 +10,3 @@\n value_9 = 9\n-value_10 = 10\n+value_10 = 'ten'\n value_11 = 11\n"
)
Layout = Callable[..., dict[str, Path]]


def snapshot(directory: Path) -> dict[str, bytes]:
    if not directory.exists():
        return {}
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_build_relabels_patches_and_records(project: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    layout = project(FILES, {"0001-ten.patch": PATCH}, overlay={"demo/extra.py": "EXTRA = 1\n"}, revision=3)
    assert cli.main(["build", *cli_args(layout, "--json")]) == 0
    document = json.loads(capsys.readouterr().out)
    wheel = layout["dist"] / "demo-1.0+nvfp4.3-py3-none-any.whl"
    assert document["built"][0]["wheel"] == str(wheel)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert zf.read("demo/__init__.py").decode().splitlines()[10] == "value_10 = 'ten'"
        assert zf.read("demo/extra.py") == b"EXTRA = 1\n"
        assert "Version: 1.0+nvfp4.3\n" in zf.read("demo-1.0+nvfp4.3.dist-info/METADATA").decode()
        rows = {r.split(",")[0]: r.split(",")[1] for r in zf.read("demo-1.0+nvfp4.3.dist-info/RECORD").decode().splitlines()}
        for name in names:
            if not name.endswith("RECORD"):
                assert rows[name] == record_hash(zf.read(name)), name
        provenance = json.loads(zf.read("demo-1.0+nvfp4.3.dist-info/NVFP4_OVERLAY.json"))
    assert not any(n.startswith("demo-1.0.dist-info/") for n in names)
    assert names[-1] == "demo-1.0+nvfp4.3.dist-info/RECORD"
    assert names.index("demo/tool.sh") < names.index("demo-1.0+nvfp4.3.dist-info/METADATA")
    assert provenance["upstream"]["filename"] == "demo-1.0-py3-none-any.whl"
    assert provenance["patches"][0]["name"] == "0001-ten.patch"
    assert provenance["patches"][0]["fields"]["Last-Update"] == "2026-11-30"
    assert list(provenance["overlay"]) == ["demo/extra.py"]
    sums = (layout["dist"] / "SHA256SUMS").read_text()
    assert sums == f"{document['built'][0]['sha256']}  {wheel.name}\n"
    assert cli.main(["verify", *data_args(layout), str(wheel)]) == 0


def test_two_builds_give_the_same_bytes(project: Layout, tmp_path: Path) -> None:
    layout = project(FILES, {"0001-ten.patch": PATCH})
    assert cli.main(["build", *cli_args(layout)]) == 0
    first = snapshot(layout["dist"])
    layout["dist"] = tmp_path / "dist2"
    assert cli.main(["build", *cli_args(layout)]) == 0
    assert snapshot(layout["dist"]) == first


def test_unchanged_members_are_copied_raw(project: Layout) -> None:
    layout = project(FILES, {"0001-ten.patch": PATCH})
    assert cli.main(["build", *cli_args(layout)]) == 0
    with zipfile.ZipFile(layout["wheel"]) as up, zipfile.ZipFile(next(layout["dist"].glob("*.whl"))) as out:
        a, b = up.getinfo("demo/tool.sh"), out.getinfo("demo/tool.sh")
        assert (a.CRC, a.compress_size, a.date_time) == (b.CRC, b.compress_size, b.date_time)


def test_offsets_are_reported(project: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    moved = {**FILES, "demo/__init__.py": "# header\n# more\n" + FILES["demo/__init__.py"]}
    layout = project(moved, {"0001-ten.patch": PATCH})
    assert cli.main(["build", *cli_args(layout, "--json")]) == 0
    captured = capsys.readouterr()
    hunk = json.loads(captured.out)["built"][0]["hunks"][0]
    assert (hunk["offset"], hunk["fuzz"], hunk["header"]) == (2, 0, "@@ -10,3 +10,3 @@")


def test_a_conflict_builds_nothing_and_names_everything(project: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    changed = {**FILES, "demo/__init__.py": FILES["demo/__init__.py"].replace("value_9 = 9", "value_9 = 'nine'")}
    layout = project(changed, {"0001-ten.patch": PATCH})
    layout["dist"].mkdir()
    (layout["dist"] / "keep.txt").write_text("already here\n")
    before = snapshot(layout["dist"])
    assert cli.main(["build", *cli_args(layout)]) == 1
    err = capsys.readouterr().err
    assert "0001-ten.patch: hunk 1 (@@ -10,3 +10,3 @@) does not apply to demo/__init__.py: line 10 differs" in err
    assert snapshot(layout["dist"]) == before
    assert not list(layout["dist"].glob(".*"))


def test_a_wrong_sha256_is_refused_before_opening(project: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    layout = project(FILES, {"0001-ten.patch": PATCH})
    toml = layout["patches"] / "demo" / "1.0" / "upstream.toml"
    text = toml.read_text()
    digest = text.split('sha256 = "')[1].split('"')[0]
    toml.write_text(text.replace(digest, "0" * 64))
    assert cli.main(["build", *cli_args(layout)]) == 3
    err = capsys.readouterr().err
    assert "0" * 64 in err and "does not match" in err and str(layout["wheel"]) in err
    assert not layout["dist"].exists() or not list(layout["dist"].iterdir())


def test_overlay_may_not_replace_an_upstream_file(project: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    layout = project(FILES, overlay={"demo/__init__.py": "x = 1\n"})
    assert cli.main(["build", *cli_args(layout)]) == 2
    assert "would overwrite upstream's demo/__init__.py" in capsys.readouterr().err


def test_empty_series_still_gives_a_valid_relabelled_wheel(project: Layout) -> None:
    layout = project(FILES)
    assert cli.main(["build", *cli_args(layout)]) == 0
    wheel = layout["dist"] / "demo-1.0+nvfp4.1-py3-none-any.whl"
    assert cli.main(["verify", *data_args(layout), str(wheel)]) == 0


def test_verify_catches_a_changed_series_and_a_tampered_member(project: Layout, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    layout = project(FILES, {"0001-ten.patch": PATCH})
    assert cli.main(["build", *cli_args(layout)]) == 0
    wheel = next(layout["dist"].glob("*.whl"))
    (layout["patches"] / "demo" / "1.0" / "0001-ten.patch").write_text(PATCH.replace("'ten'", "'TEN'"))
    assert cli.main(["verify", *data_args(layout), str(wheel)]) == 3
    assert "the series at" in capsys.readouterr().out
    tampered = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tampered, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, data + b"# evil\n" if info.filename == "demo/tool.sh" else data)
    assert cli.main(["verify", *data_args(layout), str(tampered)]) == 3
    assert "demo/tool.sh: RECORD says" in capsys.readouterr().out


def test_unknown_stack_and_bad_target_are_configuration_errors(project: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    layout = project(FILES)
    assert cli.main(["build", "--stack", "nope", *cli_args(layout)]) == 2
    assert "no stack named 'nope'; known stacks: demo" in capsys.readouterr().err
    assert cli.main(["build", "demo=1.0", *cli_args(layout)]) == 2
    assert "expected DIST==VERSION" in capsys.readouterr().err


def test_a_wheelhouse_means_no_network(project: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    layout = project(FILES)
    layout["wheel"].unlink()
    args = [a for a in cli_args(layout) if a != "--offline"]
    assert cli.main(["build", *args]) == 2
    err = capsys.readouterr().err
    assert f"not found in {layout['wheelhouse']} or the cache" in err and "--wheelhouse means no network" in err


def test_a_wheel_an_older_tool_built_verifies_while_its_members_are_equal(
        project: Layout, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A new tool version changes the provenance's tool_version (so the wheel's bytes), nothing else: verify by this
    tool holds a wheel of the version before to the same members, the tool that wrote it aside."""
    from nvfp4_overlay import __version__
    from nvfp4_overlay.wheel import recipe

    layout = project(FILES, {"0001-ten.patch": PATCH})
    monkeypatch.setattr(recipe, "__version__", "0.0.1")
    assert cli.main(["build", *cli_args(layout)]) == 0
    monkeypatch.undo()
    wheel = next(layout["dist"].glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        provenance = json.loads(zf.read(next(n for n in zf.namelist() if n.endswith("NVFP4_OVERLAY.json"))))
    assert provenance["tool_version"] == "0.0.1" != __version__
    capsys.readouterr()
    assert cli.main(["verify", *data_args(layout), str(wheel)]) == 0, capsys.readouterr().out
