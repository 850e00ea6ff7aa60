"""The command line at its edges: bad environment and paths get exit 2 and a sentence, never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import OVERLAY, PATCHES, ROOT, cli_args, run_cli

from nvfp4_overlay import cli
from nvfp4_overlay.cli.parser import COMMANDS

MOD = "demo/mod.py"


@pytest.fixture
def layout(project: Callable[..., dict[str, Path]]) -> dict[str, Path]:
    return project({MOD: "a\n"})


@pytest.mark.parametrize("value", ["abc", "", "1.5", "-3"], ids=["letters", "empty", "fraction", "negative"])
def test_a_bad_source_date_epoch_is_exit_2_naming_the_variable(
        layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    code, out, err = run_cli("build", "demo==1.0", *cli_args(layout))
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
    code, out, err = run_cli("build", "demo==1.0", *args)
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
    code, _, err = run_cli("build", *args)
    assert code == 2
    assert "NVFP4_OVERLAY_CACHE" in err


def test_drift_markdown_into_a_missing_directory_fails_before_the_work(layout: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "drift.md"
    code, out, err = run_cli("drift", "--against", "pinned", "--markdown", str(target), *cli_args(layout))
    assert code == 2
    assert "does not exist" in err and str(target.parent) in err
    assert out == ""  # refused before any drift ran


def test_json_errors_are_data(layout: dict[str, Path]) -> None:
    code, out, err = run_cli("build", "demo==9.0", "--json", *cli_args(layout))
    assert code == 2
    error = json.loads(out)["error"]
    assert error["kind"] == "ConfigError" and error["exit_code"] == 2
    assert error["item"] == "demo==9.0" and error["found"] == "9.0"
    assert "1.0" in error["fix"]  # the nearest carried release


def test_an_unknown_release_names_the_nearest_carried_ones() -> None:
    code, _, err = run_cli("build", "flashinfer-python==0.6.19", "--patches-dir", str(PATCHES), "--offline")
    assert code == 2
    assert "the nearest carried: 0.6.18, 0.6.18.post1, 0.7.0" in err  # by version
    assert "'nvfp4-overlay refresh flashinfer-python 0.6.18.post1 0.6.19'" in err  # from the release just below


def test_help_is_written_for_users_with_examples() -> None:
    for command in COMMANDS:
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
    code, out, _ = run_cli("list", "--patches-dir", str(PATCHES))
    assert code == 0
    names = [line.split(":")[0].strip().split()[0] for line in out.split("series:")[0].splitlines()[1:]]
    sglang = [n for n in names if n.startswith("sglang-")]
    assert sglang.index("sglang-0.5.8") < sglang.index("sglang-0.5.9") < sglang.index("sglang-0.5.10")
    assert sglang[-1] == "sglang-0.5.23"


# --- the exit status table (errors.Exit), over every command --------------------------------------

# Every command, with an option it does not take: argparse's refusal is exit 2 and, under --json, one
# JSON document on stdout like any other error.
UNKNOWN_OPTION = {name: [name, "--no-such-option"] for name in COMMANDS}
# Every command, with a path that is not there.
MISSING_PATH = {
    "build": ["build", "--patches-dir", "/no/such/patches"],
    "verify": ["verify", "/no/such/wheel.whl"],
    "list": ["list", "--patches-dir", "/no/such/patches"],
    "install": ["install", "--python", "/no/such/python"],
    "rollback": ["rollback", "--python", "/no/such/python"],
    "doctor": ["doctor", "--python", "/no/such/python", "--no-trace"],
    "index": ["index", "--dist-dir", "/no/such/dist"],
    "jit-cache": ["jit-cache", "--gpu", "sm120", "--patches-dir", "/no/such/patches"],
    "drift": ["drift", "--patches-dir", "/no/such/patches", "--offline"],
    "refresh": ["refresh", "flashinfer-python", "0.7.4", "0.7.5", "--patches-dir", "/no/such/patches", "--offline"],
    "propose": ["propose", "--dry-run", "--patches-dir", "/no/such/patches", "--offline"],
    "routes": ["routes", "--check", "--patches-dir", "/no/such/patches", "--offline"],
    "audit-api": ["audit-api", "--check", "--patches-dir", "/no/such/patches", "--offline"],
    "launch-table": ["launch-table", "--check", "--patches-dir", "/no/such/patches", "--offline"],
    "generate": ["generate", "routes", "--check", "--patches-dir", "/no/such/patches", "--offline"],
}


def test_every_command_has_its_bad_input_cases() -> None:
    assert sorted(UNKNOWN_OPTION) == sorted(MISSING_PATH) == sorted(COMMANDS)


@pytest.mark.parametrize("table", ["unknown-option", "missing-path"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_bad_input_is_exit_2_and_one_json_document(command: str, table: str) -> None:
    argv = (UNKNOWN_OPTION if table == "unknown-option" else MISSING_PATH)[command]
    code, out, err = run_cli(*argv, "--json")
    assert code == 2, err
    error = json.loads(out)["error"]  # the whole of stdout is one JSON document
    assert error["exit_code"] == 2 and error["kind"] in {"UsageError", "ConfigError"}
    assert error["message"] in err and "Traceback" not in err
    if table == "missing-path":
        assert "/no/such/" in error["path"]
    else:  # what argparse refused (verify and refresh miss their positionals first), not the whole command
        assert error["item"] in error["found"] and not error["item"].startswith("nvfp4-overlay")
    # Without --json nothing goes to stdout.
    code, out, err = run_cli(*argv)
    assert (code, out) == (2, "")


@pytest.mark.parametrize("argv", [["verify"], ["refresh", "flashinfer-python"], ["build", "--fuzz", "two"], [],
                                  ["no-such-command"]], ids=["no-wheel", "missing-positionals", "not-a-number",
                                                              "no-command", "unknown-command"])
def test_argument_errors_under_json_are_a_document(argv: list[str]) -> None:
    code, out, err = run_cli(*argv, "--json")
    assert code == 2
    assert json.loads(out)["error"]["kind"] == "UsageError"


# A value a user mistypes: refused by the parser, before any work (no probe runs, no wheel is read),
# exit 2 naming the option, and under --json one document whose item is that option.
BAD_VALUES = {
    "python-version-words": (["build", "--python-version", "three"], "--python-version"),
    "python-version-tag": (["build", "--python-version", "cp312"], "--python-version"),
    "fuzz-negative": (["build", "--fuzz", "-1"], "--fuzz"),
    "fuzz-words": (["build", "--fuzz", "two"], "--fuzz"),
    "platform-words": (["build", "--platform", "linux x86"], "--platform"),
    "stack-empty": (["install", "--stack", ""], "--stack"),
    "fleet-index-no-scheme": (["install", "--fleet-index", "wheels.example/simple"], "--fleet-index"),
    "url-ftp": (["index", "--url", "ftp://wheels.example/simple"], "--url"),
    "trace-timeout-zero": (["doctor", "--trace-timeout", "0"], "--trace-timeout"),
    "trace-timeout-negative": (["doctor", "--trace-timeout", "-5"], "--trace-timeout"),
    "trace-timeout-nan": (["doctor", "--trace-timeout", "nan"], "--trace-timeout"),
    "trace-timeout-huge": (["doctor", "--trace-timeout", "1e12"], "--trace-timeout"),
    "refresh-from-words": (["refresh", "demo", "abc", "1.1"], "FROM_VERSION"),
    "refresh-to-words": (["refresh", "demo", "1.0", "abc"], "TO_VERSION"),
}


@pytest.mark.parametrize("argv, option", BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_a_bad_option_value_is_exit_2_naming_the_option(layout: dict[str, Path], argv: list[str], option: str) -> None:
    extra = cli_args(layout) if argv[0] in ("build", "refresh") else ["--patches-dir", str(layout["patches"])]
    code, out, err = run_cli(*argv, *extra, "--json")
    assert code == 2, err
    error = json.loads(out)["error"]
    assert error["item"] == option and f"argument {option}:" in error["message"]
    assert "Traceback" not in err and not layout["dist"].exists()


@pytest.mark.parametrize("argv, expected", [
    (["verify", str(PATCHES / "stacks.toml")], "not a wheel"),
    (["drift", "--against", "pinned", "--offline", "--markdown", str(ROOT)], "is a directory; name a file"),
    (["index", "--output", str(PATCHES / "stacks.toml")], "--output"),
], ids=["verify-a-toml", "markdown-a-directory", "index-output-a-file"])
def test_a_file_given_for_a_directory_or_the_reverse_is_exit_2(argv: list[str], expected: str) -> None:
    """A README given to verify is a bad argument (exit 2), not a wheel that fails its hashes (exit 3); a file
    where index writes its directory is refused, not replaced; a --markdown directory is refused before drift runs."""
    before = (PATCHES / "stacks.toml").read_bytes()
    code, out, err = run_cli(*argv, "--patches-dir", str(PATCHES), "--json")
    assert code == 2, err
    assert expected in json.loads(out)["error"]["message"]
    assert (PATCHES / "stacks.toml").read_bytes() == before


@pytest.mark.parametrize("target", ["demo=1.0", "==1.0", "demo==abc", "demo==1.0==2"],
                         ids=["one-equals", "no-dist", "version-words", "two-versions"])
def test_a_target_that_is_no_dist_and_version_is_exit_2_naming_it(layout: dict[str, Path], target: str) -> None:
    code, out, err = run_cli("build", target, *cli_args(layout), "--json")
    assert code == 2, err
    error = json.loads(out)["error"]
    assert error["item"] == target and error["expected"] == "DIST==VERSION"
    assert "refresh" not in error["message"]  # no port to a version that is none


def test_a_source_date_epoch_past_zip_dates_is_exit_2(layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "99999999999999999999")
    code, out, err = run_cli("build", "demo==1.0", *cli_args(layout))
    assert code == 2 and "SOURCE_DATE_EPOCH" in err and "Traceback" not in err
    assert not layout["dist"].exists()


# --- the hints the tool prints, as the user runs it ------------------------------------------------


def test_the_commands_suggested_are_spelled_as_the_user_ran_the_tool(tmp_path: Path) -> None:
    """From a clone the tool is `python build_wheels.py`, not the `nvfp4-overlay` only an install puts on PATH."""
    argv = ["build", "flashinfer-python==0.6.1", "--patches-dir", str(PATCHES), "--offline",
            "--cache-dir", str(tmp_path / "empty"), "--dist-dir", str(tmp_path / "dist"), "--json"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv, prog="python build_wheels.py")
    assert code == 2
    assert json.loads(out.getvalue())["error"]["fix"] == "python build_wheels.py build flashinfer-python==0.6.1"
    assert "'python build_wheels.py build flashinfer-python==0.6.1'" in err.getvalue()
    assert "nvfp4-overlay" not in err.getvalue().replace(str(tmp_path), "")
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
        cli.main(["build", "--help"], prog="python build_wheels.py")
    assert "  python build_wheels.py build --stack all --all-platforms" in help_text.getvalue()


def test_a_path_that_holds_the_tools_name_is_not_a_hint() -> None:
    from nvfp4_overlay.cli.output import as_invoked

    text = "the cache ~/.cache/nvfp4-overlay list; 'nvfp4-overlay list' names them; pip install nvfp4-overlay[test]"
    assert as_invoked(text, "python3 build_wheels.py") == (
        "the cache ~/.cache/nvfp4-overlay list; 'python3 build_wheels.py list' names them; "
        "pip install nvfp4-overlay[test]")


# --- a closed stdout, Ctrl-C, a module this interpreter lacks --------------------------------------


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cli(*argv: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "nvfp4_overlay.cli", *argv], cwd=ROOT, **kwargs)


@pytest.mark.parametrize("argv", [["list"], ["list", "--json"], ["doctor", "--no-trace", "--json"],
                                  ["verify", "/no/such/wheel.whl", "--json"], ["build", "--help"]],
                         ids=["list", "list-json", "doctor-json", "error-json", "help"])
def test_a_reader_gone_away_ends_the_output_quietly_with_the_commands_verdict(argv: list[str]) -> None:
    """`doctor --json | head -2`: the reader closes the pipe; the command still exits with its own verdict
    (a deploy gate reads it), and says nothing about the pipe. Here the reader is gone before the first write."""
    verdict = _cli(*argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).wait()
    read, write = os.pipe()
    os.close(read)
    with _cli(*argv, stdout=write, stderr=subprocess.PIPE) as proc:
        os.close(write)
        _, err = proc.communicate()
    assert proc.returncode == verdict, err.decode()
    assert b"Traceback" not in err and b"Broken pipe" not in err and b"BrokenPipe" not in err


def test_a_broken_pipe_outside_the_cli_s_own_writes_is_not_called_done(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe that breaks where the command's verdict is not known yet (a child's output relayed): exit 1, quietly."""
    from nvfp4_overlay.cli import listing

    def relayed(ctx: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(listing, "cmd_list", relayed)
    code, out, err = run_cli("list", "--patches-dir", str(PATCHES))
    assert (code, out, err) == (1, "", "")


def test_ctrl_c_is_exit_130_and_under_json_a_document(monkeypatch: pytest.MonkeyPatch) -> None:
    from nvfp4_overlay.cli import listing

    def interrupted(ctx: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(listing, "cmd_list", interrupted)
    code, out, err = run_cli("list", "--json", "--patches-dir", str(PATCHES))
    assert code == 130
    error = json.loads(out)["error"]
    assert (error["kind"], error["exit_code"]) == ("Interrupted", 130) and "Ctrl-C" in error["message"]
    assert "Ctrl-C" in err and "Traceback" not in err


def test_sigint_while_a_child_runs_is_exit_130_and_a_document(tmp_path: Path) -> None:
    """A real SIGINT, while doctor waits on its probe (a --python that sleeps): exit 130, one JSON document."""
    started = tmp_path / "started"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ntouch {started}\nexec sleep 60\n")
    python.chmod(0o755)
    # SIGINT as an interactive shell leaves it: a background job (`make test &`) inherits it ignored,
    # and Python then installs no KeyboardInterrupt handler
    with _cli("doctor", "--python", str(python), "--no-trace", "--json", stdout=subprocess.PIPE,
              stderr=subprocess.PIPE, preexec_fn=_sigint_default) as proc:
        while not started.exists() and proc.poll() is None:
            time.sleep(0.01)  # until the probe runs: the signal then lands in doctor's wait on it
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate()
    assert proc.returncode == 130, err.decode()
    assert json.loads(out)["error"]["kind"] == "Interrupted"
    assert b"Traceback" not in err


def test_sigterm_while_a_child_runs_is_exit_143_and_a_document(tmp_path: Path) -> None:
    """A real SIGTERM (kill, systemd, a CI runner's cancel), while doctor waits on its probe: handled as Ctrl-C
    is, exit 143 as a shell reports it, one JSON document, and the probe it started stopped. Before, Python's
    default ended the process at once: no document, no message, the probe left running."""
    started, python = tmp_path / "started", tmp_path / "python"
    python.write_text(f"#!/bin/sh\necho $$ > {started}\nexec sleep 60\n")
    python.chmod(0o755)
    with _cli("doctor", "--python", str(python), "--no-trace", "--json", stdout=subprocess.PIPE,
              stderr=subprocess.PIPE) as proc:
        while not (started.exists() and started.read_text().strip()) and proc.poll() is None:
            time.sleep(0.01)
        # Until doctor waits on the probe: a signal between the fork and subprocess.run's try (any Python
        # program's window) leaves no handle to kill the child with
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate()
    assert proc.returncode == 143, err.decode()
    error = json.loads(out)["error"]
    assert (error["kind"], error["exit_code"], error["found"]) == ("Interrupted", 143, "SIGTERM")
    assert b"error: terminated (SIGTERM)" in err and b"Traceback" not in err
    with pytest.raises(ProcessLookupError):  # the probe went with it (killed and reaped)
        os.kill(int(started.read_text()), 0)


def test_a_module_this_interpreter_lacks_is_exit_2_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from nvfp4_overlay.cli import listing

    def lacking(ctx: object) -> int:
        raise ModuleNotFoundError("No module named 'unidiff'", name="unidiff")

    monkeypatch.setattr(listing, "cmd_list", lacking)
    code, out, err = run_cli("list", "--json", "--patches-dir", str(PATCHES))
    assert code == 2
    error = json.loads(out)["error"]
    assert error["item"] == "unidiff" and error["fix"] == "make wheels" and "Traceback" not in err


def test_a_probe_that_times_out_is_not_called_a_broken_interpreter(tmp_path: Path) -> None:
    """--trace-timeout too short for a slow start: doctor says it timed out and names the option (exit 1), not
    that the interpreter is no Python (exit 2)."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexec sleep 60\n")
    python.chmod(0o755)
    code, out, err = run_cli("doctor", "--python", str(python), "--no-trace", "--trace-timeout", "0.5", "--json",
                         "--patches-dir", str(PATCHES))
    assert code == 1, err
    error = json.loads(out)["error"]
    assert (error["kind"], error["item"]) == ("TimedOut", "--trace-timeout")
    assert "no answer within 0.5 s" in error["message"] and "larger --trace-timeout" in error["message"]
    assert "name the serving environment" not in error["message"]


def test_a_wheel_missing_offline_is_exit_2_naming_the_cache_and_the_command_that_fills_it(tmp_path: Path) -> None:
    code, out, err = run_cli("build", "flashinfer-python==0.6.1", "--patches-dir", str(PATCHES), "--offline",
                         "--cache-dir", str(tmp_path / "empty"), "--dist-dir", str(tmp_path / "dist"), "--json")
    assert code == 2
    error = json.loads(out)["error"]
    assert error["path"] == str(tmp_path / "empty" / "wheels")
    assert error["item"] == "flashinfer_python-0.6.1-py3-none-any.whl"
    assert error["fix"] == "nvfp4-overlay build flashinfer-python==0.6.1"
    assert not (tmp_path / "dist").exists()


def test_a_distribution_name_that_is_not_carried_suggests_the_one_meant() -> None:
    code, out, err = run_cli("build", "flashinfer==0.7.4", "--patches-dir", str(PATCHES), "--offline", "--json")
    assert code == 2
    error = json.loads(out)["error"]
    assert "did you mean flashinfer-python==0.7.4?" in error["message"]
    assert error["fix"] == "flashinfer-python==0.7.4" and error["found"] == "flashinfer"


def test_an_unknown_stack_lists_the_stacks_by_release() -> None:
    code, _, err = run_cli("build", "--stack", "sglang-9", "--patches-dir", str(PATCHES), "--offline")
    assert code == 2
    known = err.split("known stacks: ")[1].split(" (or 'all')")[0].split(", ")  # build also takes all
    sglang = [s for s in known if s.startswith("sglang-")]
    assert sglang.index("sglang-0.5.8") < sglang.index("sglang-0.5.9") < sglang.index("sglang-0.5.10")
    assert sglang[-1] == "sglang-0.5.23"
    code, _, err = run_cli("install", "--stack", "all", "--patches-dir", str(PATCHES))
    assert code == 2 and "(or 'all')" not in err  # install takes one stack


def test_a_sample_of_errors_carries_its_data_under_json(layout: dict[str, Path], tmp_path: Path) -> None:
    """--json carries path, item, expected, found and fix from the raise site, not only the sentence."""
    cases = {
        "missing wheel": (["verify", str(tmp_path / "gone.whl")], {"path": str(tmp_path / "gone.whl"), "found": "missing"}),
        "bad target": (["build", "demo", *cli_args(layout)], {"item": "demo", "expected": "DIST==VERSION"}),
        "unknown stack": (["install", "--stack", "nope", "--patches-dir", str(layout["patches"])],
                          {"item": "nope", "path": str(layout["patches"] / "stacks.toml")}),
        "bad toml": (["list", "--patches-dir", str(_bad_toml(tmp_path))], {"expected": "TOML"}),
    }
    for name, (argv, expected) in cases.items():
        code, out, _ = run_cli(*argv, "--json")
        error = json.loads(out)["error"]
        assert code == 2, name
        assert {k: error.get(k) for k in expected} == expected, name
        assert error.get("fix"), name


def _bad_toml(tmp_path: Path) -> Path:
    patches = tmp_path / "bad-patches"
    patches.mkdir()
    (patches / "stacks.toml").write_text("default = [\n")
    return patches


def test_list_states_what_each_sglang_stack_leaves_raw() -> None:
    """Every SGLang stack gets a line (none is the goal), and the JSON holds the region audit's answer."""
    from nvfp4_overlay.audit import sglang_audit, sglang_raw
    from nvfp4_overlay.oracle import sglang_releases

    code, out, _ = run_cli("list", "--json", "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY))
    assert code == 0
    remaining = json.loads(out)["remaining_raw"]
    expected = sglang_releases.remaining_by_stack(PATCHES, sglang_audit.read_routes(OVERLAY / "flashinfer-python"))
    assert remaining == json.loads(json.dumps(expected))
    assert sorted(remaining) == sorted(s for s in json.loads(out)["stacks"] if s.startswith("sglang-"))
    code, text, _ = run_cli("list", "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY))
    assert text.count("SGLang's compiled regions, raw FlashInfer or SGLang code left:") == len(remaining)
    lines = text.splitlines()
    for stack, regions in remaining.items():
        (at,) = [i for i, line in enumerate(lines) if line.startswith((f"  {stack}:", f"  {stack} (default):"))]
        assert "raw FlashInfer or SGLang code left:" in lines[at + 1]
        # never an unqualified "none": the audited regions' scope on each stack's line ...
        assert lines[at + 1].endswith(" in the audited regions") and "outside them" not in lines[at + 1]
        for region in regions:
            assert region in lines[at + 1], (stack, region)
    # ... and what lies outside them, the same for every stack, said once after the stacks
    (outside,) = [line for line in lines if "outside the audited regions" in line]
    assert lines.index(outside) < lines.index("series:")
    assert "fp8_blockscale_gemm_sm90 (SM90" in outside and "tinygemm_bf16 (GPT-OSS (forward_dwdp)): routed" in outside
    assert text.count(sglang_raw.NOT_TRACED) == 1 and sglang_raw.NOT_TRACED in outside
    assert [c["function"] for c in json.loads(out)["conditional_raw"] if c["routed"]] == [
        "fp8_blockscale_gemm_sm90", "tinygemm_bf16"]


CARRIED_INKLING = ("0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21")


def test_list_and_doctor_state_what_the_inkling_series_leave_raw() -> None:
    """0.5.16-0.5.21 patch SGLang: Inkling's packed top-k is no longer left raw, nor per-token
    activation's nvfp4_quantize (the patched FlashInfer routes it); the KV-cache quantize no compiled
    region reaches is not counted, nor anything in 0.5.22-0.5.23 (no fullgraph region). doctor answers
    as list does for an installed patched SGLang, and names the ContextVar for an upstream one."""
    from nvfp4_overlay.operate import doctor
    from nvfp4_overlay.operate.installed import Finding

    code, out, _ = run_cli("list", "--json", "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY))
    assert code == 0
    remaining = json.loads(out)["remaining_raw"]
    for version in CARRIED_INKLING:
        left = remaining[f"sglang-{version}"]
        assert left == {}, (version, left)
    assert remaining["sglang-0.5.22"] == {} and remaining["sglang-0.5.23"] == {}
    fi = {"installed": True, "patched": True}
    routes = doctor.installed_routes(fi, OVERLAY)  # this checkout's overlay: never the installed entries.py

    def installed(version: str, patched: bool) -> dict[str, Any] | None:
        sglang = {"installed": True, "version": version, "patched": patched}
        return doctor._remaining_raw(PATCHES, {"sglang": sglang, "flashinfer-python": fi}, routes, Finding())

    assert installed("0.5.19+nvfp4.1", True) == remaining["sglang-0.5.19"]
    upstream = installed("0.5.19", False)
    assert upstream is not None
    assert any("ContextVar" in text for by in upstream["inkling_packed_topk"].values() for text in by)


def test_a_probe_that_stops_after_its_first_answer_is_exit_1_not_a_traceback(tmp_path: Path) -> None:
    """The probe named the interpreter, then died before it read the distributions: doctor says so (exit 1);
    it does not report flashinfer as not installed, nor end in a KeyError."""
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\necho \'{"python": {"version": "3.12.0"}}\'\necho "MemoryError" >&2\nexit 5\n')
    python.chmod(0o755)
    code, out, err = run_cli("doctor", "--python", str(python), "--no-trace", "--json", "--patches-dir", str(PATCHES))
    assert code == 1, err
    error = json.loads(out)["error"]
    assert "the probe exited 5: MemoryError" in error["message"] and "not installed" not in error["message"]


@pytest.mark.parametrize("doc", ["docs/design.md", "docs/install.md"])
def test_the_exit_tables_name_every_exit_status(doc: str) -> None:
    """Each exit table a user reads lists every status errors.Exit can give, and no other (5: taken on trust)."""
    from nvfp4_overlay.errors import Exit

    rows = {int(m.group(1)) for m in re.finditer(r"^\| (\d+) \|", (ROOT / doc).read_text(), re.M)}
    assert rows == {int(e) for e in Exit}
