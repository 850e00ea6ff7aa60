"""Progress: a status line on stderr only when it is a terminal, and never under --quiet or --json."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import cli_args

from nvfp4_overlay import cli, progress

CLEAR = "\r\x1b[K"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_status_line_is_drawn_and_erased_on_a_terminal() -> None:
    stream = Terminal()
    with progress.activated(progress.Progress(stream)):
        progress.report("[1/2] flashinfer-python==0.6.1")
        progress.report("[2/2] sglang==0.5.8")
    text = stream.getvalue()
    assert text.count(CLEAR) == 3  # two updates, then the final erase
    assert text.endswith(CLEAR) and "[2/2] sglang==0.5.8" in text


def test_nothing_is_written_to_a_file_or_a_pipe() -> None:
    stream = io.StringIO()
    with progress.activated(progress.Progress(stream)):
        progress.report("[1/1] x")
    assert stream.getvalue() == ""


def test_report_without_an_active_progress_is_silent(capsys: pytest.CaptureFixture[str]) -> None:
    progress.report("nobody is watching")
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(("flags", "drawn"), [((), True), (("--quiet",), False), (("--json",), False)],
                         ids=["terminal", "quiet", "json"])
def test_build_progress_follows_the_flags(project: Callable[..., dict[str, Path]], monkeypatch: pytest.MonkeyPatch,
                                          flags: tuple[str, ...], drawn: bool) -> None:
    layout = project({"demo/__init__.py": "VALUE = 1\n"})
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert cli.main(["build", *cli_args(layout, *flags)]) == 0
    text = terminal.getvalue()
    assert ("[1/1] demo==1.0" in text) is drawn
    assert (CLEAR in text) is drawn
