"""The patched wheels' labels: +nvfp4.<overlay>.<series>, a function of the overlay's revision (one edit in
patches/<dist>/overlay.toml) and the series' own, sorting above every label published before for pip and uv."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest
from helpers import PATCHES
from packaging.version import Version

from nvfp4_overlay.errors import ConfigError
from nvfp4_overlay.patch.manifest import (
    OVERLAY_REVISION,
    all_targets,
    load_overlay_revision,
    load_upstream,
    local_version,
)

TARGETS = all_targets(PATCHES)


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_the_new_label_sorts_above_every_published_one(target: object) -> None:
    """Published so far: +nvfp4.1 .. +nvfp4.<the series' revision> (the one-number scheme: the revision only rose)."""
    upstream = load_upstream(PATCHES, target)  # type: ignore[arg-type]
    new = Version(upstream.local_version)
    assert new.local == f"nvfp4.{upstream.overlay_revision}.{upstream.revision}"
    for published in range(1, upstream.revision + 1):
        old = Version(f"{upstream.target.version}+nvfp4.{published}")
        assert old < new and old.public == new.public, (old, new)


def test_every_distribution_records_its_overlay_revision_once() -> None:
    for dist in sorted({t.dist for t in TARGETS}):
        assert (PATCHES / dist / OVERLAY_REVISION).is_file(), dist
        overlay = load_overlay_revision(PATCHES, dist)
        assert overlay is not None
        highest = max(load_upstream(PATCHES, t).revision for t in TARGETS if t.dist == dist)
        assert overlay > highest, (dist, overlay, highest)


def test_the_label_is_a_function_of_the_two_revisions_and_grows_with_each() -> None:
    pairs = list(itertools.product(range(1, 12), range(1, 12)))
    labels = {pair: Version(local_version("0.7.4", *pair)) for pair in pairs}
    assert len(set(labels.values())) == len(pairs)  # one label never names two builds
    for (o, s), label in labels.items():
        assert labels.get((o + 1, s), Version("9999")) > label and labels.get((o, s + 1), Version("9999")) > label
        assert labels.get((o + 1, 1), Version("9999")) > label  # an overlay bump sorts above any series revision


def test_one_edit_moves_every_label_of_the_distribution(tmp_path: Path) -> None:
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES, patches)
    before = {t: load_upstream(patches, t).local_version for t in TARGETS}
    path = patches / "flashinfer-python" / OVERLAY_REVISION
    current = load_overlay_revision(patches, "flashinfer-python")
    path.write_text(path.read_text().replace(f"\nrevision = {current}\n", f"\nrevision = {current + 1}\n"))
    after = {t: load_upstream(patches, t).local_version for t in TARGETS}
    for target in TARGETS:
        if target.dist == "flashinfer-python":
            assert Version(after[target]) > Version(before[target]), target
        else:
            assert after[target] == before[target], target


@pytest.mark.parametrize("text", ["revision = 0\n", "revision = 'eight'\n", "# nothing\n", "revision = [\n"])
def test_a_malformed_overlay_revision_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / OVERLAY_REVISION).write_text(text)
    with pytest.raises(ConfigError, match="overlay.toml"):
        load_overlay_revision(tmp_path, "sglang")
