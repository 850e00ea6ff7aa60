"""The command line at its edges: bad environment and paths get exit 2 and a sentence, never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import PATCHES, cli_args

from nvfp4_overlay import cli

MOD = "demo/mod.py"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def layout(project: Callable[..., dict[str, Path]]) -> dict[str, Path]:
    return project({MOD: "a\n"})


@pytest.mark.parametrize("value", ["abc", "", "1.5", "-3"], ids=["letters", "empty", "fraction", "negative"])
def test_a_bad_source_date_epoch_is_exit_2_naming_the_variable(
        layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    code, out, err = run("build", "demo==1.0", *cli_args(layout))
    assert code == 2
    assert "SOURCE_DATE_EPOCH" in err and "Traceback" not in err
    assert not layout["dist"].exists()  # nothing written


@pytest.mark.parametrize("option", ["--dist-dir", "--cache-dir", "--wheelhouse", "--patches-dir"])
def test_a_file_where_a_directory_belongs_is_exit_2_naming_the_option(
        layout: dict[str, Path], tmp_path: Path, option: str) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    args = cli_args(layout)
    args[args.index(option) + 1] = str(a_file)
    code, out, err = run("build", "demo==1.0", *args)
    assert code == 2
    assert f"{option} {a_file}: is a file, not a directory" in err


def test_the_cache_variable_that_names_a_file_is_exit_2_naming_it(
        layout: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a_file = tmp_path / "cache-file"
    a_file.write_text("x")
    monkeypatch.setenv("NVFP4_OVERLAY_CACHE", str(a_file))
    args = [a for a in cli_args(layout)]
    i = args.index("--cache-dir")
    del args[i:i + 2]
    code, _, err = run("list", *args)
    assert code == 2
    assert "NVFP4_OVERLAY_CACHE" in err


def test_drift_markdown_into_a_missing_directory_fails_before_the_work(layout: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "drift.md"
    code, out, err = run("drift", "--against", "pinned", "--markdown", str(target), *cli_args(layout))
    assert code == 2
    assert "does not exist" in err and str(target.parent) in err
    assert out == ""  # refused before any drift ran


def test_json_errors_are_data(layout: dict[str, Path]) -> None:
    code, out, err = run("build", "demo==9.0", "--json", *cli_args(layout))
    assert code == 2
    error = json.loads(out)["error"]
    assert error["kind"] == "ConfigError" and error["exit_code"] == 2
    assert error["item"] == "demo==9.0" and error["found"] == "9.0"
    assert "1.0" in error["fix"]  # the nearest carried release


def test_an_unknown_release_names_the_nearest_carried_ones() -> None:
    code, _, err = run("build", "flashinfer-python==0.6.19", "--patches-dir", str(PATCHES), "--offline")
    assert code == 2
    assert "the nearest carried: 0.6.18.post1, 0.6.18, 0.7.0" in err


def test_help_is_written_for_users_with_examples() -> None:
    for command in ("build", "verify", "list", "drift", "refresh", "doctor", "index"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            cli.main([command, "--help"])
        text = out.getvalue()
        assert "examples:" in text and "nvfp4-overlay " + command in text, command
        assert "nvfp4_overlay" not in text.split("examples:")[0]  # no module internals
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.main(["build", "--help"])
    assert "DIST==VERSION, e.g. flashinfer-python==0.6.18" in out.getvalue()


def test_list_sorts_stacks_by_release() -> None:
    code, out, _ = run("list", "--patches-dir", str(PATCHES))
    assert code == 0
    names = [line.split(":")[0].strip().split()[0] for line in out.split("series:")[0].splitlines()[1:]]
    sglang = [n for n in names if n.startswith("sglang-")]
    assert sglang.index("sglang-0.5.8") < sglang.index("sglang-0.5.9") < sglang.index("sglang-0.5.10")
    assert sglang[-1] == "sglang-0.5.23"
