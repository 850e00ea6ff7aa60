"""The tool's version moves with its engine: CHANGELOG.md's newest tool section names __version__ and the engine's
digest (oracle.oracle.engine_digest(), the modules that shape a patched wheel), and a changed engine under the
same version fails here, naming the fix.

Every wheel's provenance records the tool's version, so a new version changes every wheel's bytes: it ships
with new labels (docs/maintaining.md, "The tool's version"); verify still holds a wheel of an older tool to the
same members (tests/unit/test_build.py).
"""

from __future__ import annotations

import re

import pytest
from helpers import ROOT

from nvfp4_overlay import __version__
from nvfp4_overlay.oracle import oracle

HEADING = re.compile(r"^## nvfp4-overlay (\S+) \(the tool\)$", re.M)
ENGINE = re.compile(r"^engine: `([0-9a-f]{64})`", re.M)


def judged(changelog: str, version: str, digest: str) -> str:
    """What is wrong with CHANGELOG.md's record of the tool, and the fix; "" when it holds."""
    found = HEADING.search(changelog)
    line = f"engine: `{digest}`"
    if found is None or found.group(1) != version:
        newest = found.group(1) if found else "none"
        return (f"CHANGELOG.md's newest tool section is {newest}, the tool says {version} "
                f"(src/nvfp4_overlay/__init__.py): add '## nvfp4-overlay {version} (the tool)' above the labels' "
                f"sections, what changed, and the line: {line}")
    section = changelog[found.end():].split("\n## ", 1)[0]
    recorded = ENGINE.search(section)
    if recorded is None or recorded.group(1) != digest:
        was = recorded.group(1) if recorded else "nothing"
        return (f"the engine changed (its digest is {digest}; CHANGELOG.md's nvfp4-overlay {version} records {was}): "
                f"give the tool a new version (src/nvfp4_overlay/__init__.py) with a CHANGELOG.md section that says "
                f"what changed and records {line}; only while {version} has built no published wheel, record that "
                f"line under {version} instead")
    return ""


def test_the_changelog_records_this_version_with_this_engine() -> None:
    problem = judged((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), __version__, oracle.engine_digest())
    assert not problem, problem


SECTION = "## nvfp4-overlay 0.3.0 (the tool)\n\nengine: `" + "a" * 64 + "`\n\n- what changed\n\n## older\n"


@pytest.mark.parametrize(("changelog", "version", "digest", "says"), [
    (SECTION, "0.3.0", "a" * 64, ""),
    (SECTION, "0.3.0", "b" * 64, "the engine changed"),
    (SECTION, "0.4.0", "b" * 64, "newest tool section is 0.3.0, the tool says 0.4.0"),
    (SECTION.replace("engine: `" + "a" * 64 + "`\n", ""), "0.3.0", "a" * 64, "records nothing"),
    ("# Changelog\n", "0.3.0", "a" * 64, "newest tool section is none"),
], ids=["holds", "engine-moved", "version-moved-unrecorded", "no-engine-line", "no-section"])
def test_each_way_the_record_goes_wrong_is_named_with_its_fix(changelog: str, version: str, digest: str,
                                                            says: str) -> None:
    problem = judged(changelog, version, digest)
    assert (says in problem and bool(problem)) if says else problem == ""
    if says:
        assert f"engine: `{digest}`" in problem  # the line to record, whole
