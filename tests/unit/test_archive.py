"""names.name_problem: the fast split must refuse exactly what the PurePosixPath version refused."""

from __future__ import annotations

import itertools
from pathlib import PurePosixPath

from hypothesis import given
from hypothesis import strategies as st

from nvfp4_overlay.wheel.names import name_problem


def reference(name: str) -> str | None:
    """name_problem as it was written with pathlib, before bench/run.py showed its cost."""
    parts = PurePosixPath(name).parts
    if name.startswith("/") or (parts and ":" in parts[0]):
        return "absolute path or drive letter"
    if "\\" in name:
        return "backslash in the name"
    if ".." in parts or "." in name.split("/"):
        return "'..' or '.' in the path"
    if "\x00" in name or not parts or "" in name.rstrip("/").split("/"):
        return "empty component or NUL in the name"
    return None


TOKENS = ["a", "b", "/", ".", "..", ":", "\\", "\x00", "C:"]


def test_every_short_name_gets_the_same_verdict() -> None:
    names = ["".join(combo) for n in range(6) for combo in itertools.product(TOKENS, repeat=n)]
    assert len(names) > 60_000
    assert [n for n in names if name_problem(n) != reference(n)] == []


@given(st.lists(st.sampled_from([*TOKENS, "flashinfer", "data", "x.py", "é"]), max_size=12).map("".join))
def test_any_name_gets_the_same_verdict(name: str) -> None:
    assert name_problem(name) == reference(name)
