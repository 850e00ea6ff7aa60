"""sglang_launch against the wheels: each flag its per-release table names is an argument of the first
and last SGLang release of its row (the table read alone: tests/unit/test_sglang_launch_table.py)."""

from __future__ import annotations

import re
import zipfile

import pytest
from helpers import PATCHES, cache_dir

from nvfp4_overlay.audit import sglang_launch
from nvfp4_overlay.oracle import sglang_releases
from nvfp4_overlay.wheel import fetch

BY_VERSION = {r.version: r for r in sglang_releases.audit_releases(PATCHES)}
RELEASES = list(BY_VERSION)


def _argument_names(version: str) -> set[str]:
    wheel = sglang_releases.upstream_wheel(PATCHES, BY_VERSION[version], fetch.Source(cache_dir()))
    names: set[str] = set()
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            if member == "sglang/srt/server_args.py" or member.startswith("sglang/srt/arg_groups/"):
                text = zf.read(member).decode("utf-8", "replace")
                names |= set(re.findall(r"[\"'](--[a-z0-9-]+)[\"']", text))
                # 0.5.20 on: fields declared as annotated attributes, their flags derived from the names
                names |= {"--" + n.replace("_", "-") for n in re.findall(r"^    ([a-z0-9_]+): A\[", text, re.M)}
    return names


@pytest.mark.upstream
@pytest.mark.parametrize("mode", sglang_launch.MODES, ids=[f"{m.first}-{m.last}" for m in sglang_launch.MODES])
def test_the_flags_the_table_names_are_the_wheels(mode: sglang_launch.Mode) -> None:
    """Each flag a row names is an argument of the first and last audited release of the row; the
    enforce flag of 0.5.10-0.5.19 is gone from 0.5.20."""
    ends = [v for v in RELEASES if sglang_launch.mode_of(v) == mode]
    for version in (ends[0], ends[-1]):
        names = _argument_names(version)
        for flag in (*mode.on_flags, *mode.off_flags, *([mode.enforce] if mode.enforce else [])):
            assert flag.split("=")[0] in names, (version, flag)
        assert ("--enforce-piecewise-cuda-graph" in names) == (sglang_launch.Version(version) <
                                                                sglang_launch.Version("0.5.20")
                                                                and version not in ("0.5.8", "0.5.8.post1", "0.5.9")), version


