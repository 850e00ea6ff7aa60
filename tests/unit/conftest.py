"""tests/unit is the unit layer (`make test-fast`): no test here needs an upstream wheel or torch.

A test that carries the upstream or torch marker, or asks for a real release's tree (the wheel_tree
and release_oracle fixtures), is refused as the run collects, naming it and where it belongs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

LAYER = Path(__file__).resolve().parent
REAL = ("wheel_tree", "release_oracle")  # tests/conftest.py's fixtures over the real pinned wheels


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wrong = [item.nodeid for item in items if LAYER in Path(item.path).resolve().parents and (
        item.get_closest_marker("upstream") or item.get_closest_marker("torch")
        or set(REAL) & set(getattr(item, "fixturenames", ())))]
    if wrong:
        msg = (f"tests/unit is the unit layer (no upstream wheel, no torch), but {len(wrong)} test(s) there need one: "
               f"{', '.join(wrong[:5])}{' ...' if len(wrong) > 5 else ''}; move them to tests/releases (or the "
               "layer they test: tests/carrying, tests/operator)")
        raise pytest.UsageError(msg)
