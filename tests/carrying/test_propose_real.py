"""propose end to end on real wheels repacked as new releases: ported, checked by behaviour and proposed
(a pull request), or refused and reported (an issue); GitHub's API is a fake behind github.Send. The
pieces on synthetic releases: tests/unit/test_propose.py."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from fake_github import FakeGitHub
from helpers import OVERLAY, PATCHES, cache_dir, fetch_upstream, private_cache

from nvfp4_overlay import records
from nvfp4_overlay.carry import propose
from nvfp4_overlay.carry.github import GitHub
from nvfp4_overlay.oracle import sglang_releases
from nvfp4_overlay.patch.series import read_series
from nvfp4_overlay.wheel.archive import WheelReader
from nvfp4_overlay.wheel.fetch import Source
from nvfp4_overlay.wheel.metadata import find_dist_info, parse_record, set_version
from nvfp4_overlay.wheel.recipe import CopiedMember, NewMember
from nvfp4_overlay.wheel.writer import write_wheel as write_archive

# --- end to end: real wheels repacked as new releases ------------------------------------------------


def repack(wheel: Path, version: str, dest: Path, edits: Mapping[str, Callable[[bytes], bytes]] | None = None) -> Path:
    """The wheel as release `version`: its file name, .dist-info, METADATA and RECORD all say so; members
    in `edits` changed (their RECORD rows too), every other member copied as it is."""
    edits = dict(edits or {})
    with WheelReader(wheel) as reader:
        old = find_dist_info(wheel.name, reader.names, reader.read)
        new = old.relabelled(version)
        rows = parse_record(reader.read(f"{old.dist_info}/RECORD"), wheel.name)
        meta = f"{old.dist_info}/METADATA"
        edit_meta = edits.get(meta, lambda data: data)
        edits[meta] = lambda data: set_version(edit_meta(data), version)
        entries: list[CopiedMember | NewMember] = []
        record: list[records.Row] = []
        for name in reader.names:
            if name == f"{old.dist_info}/RECORD":
                continue
            renamed = old.rename(name, new)
            if name in edits:
                data = edits[name](reader.read(name))
                entries.append(NewMember(renamed, data))
                record.append(records.Row(renamed, records.hash_of(data), str(len(data))))
            else:
                entries.append(CopiedMember(renamed, reader.infos[name]))
                record.append(records.Row(renamed, rows[name].hash, rows[name].size))
        entries.append(NewMember(f"{new.dist_info}/RECORD", records.write(f"{new.dist_info}/RECORD", record)))
        out = dest / wheel.name.replace(f"-{old.version}-", f"-{version}-")
        with out.open("wb") as f:
            write_archive(f, reader, entries, (2026, 1, 1, 0, 0, 0))
    return out


def link(src: Path, into: Path) -> None:
    try:
        os.link(src, into / src.name)
    except OSError:
        shutil.copy(src, into)


@pytest.mark.upstream
@pytest.mark.torch
def test_new_releases_are_ported_checked_and_proposed_end_to_end(tmp_path: Path) -> None:
    """flashinfer-python 0.7.5 (the real 0.7.4 wheel repacked) is ported from 0.7.4, checked by behaviour
    and proposed with its report; 0.7.6 (fp4_quantize renamed) is refused and reported as an issue; SGLang
    0.5.24 (0.5.23's wheel, pinning 0.7.5) becomes a stack over the series this run ported. The cache is
    the test's own: synthetic files never enter the shared one's record of what the index served."""
    patches, wheelhouse, cache = tmp_path / "patches", tmp_path / "wheelhouse", private_cache(tmp_path / "cache")
    shutil.copytree(PATCHES / "flashinfer-python" / "0.7.4", patches / "flashinfer-python" / "0.7.4")
    for audit in ("audit-cuda-versions.json", "audit-serving-api.json"):
        shutil.copy(PATCHES / "flashinfer-python" / audit, patches / "flashinfer-python")
    shutil.copy(PATCHES / "stacks.toml", patches)
    wheelhouse.mkdir()
    # The real wheels, fetched (or taken from the shared cache) here: no other test need have run first.
    flashinfer_0_7_4 = fetch_upstream("flashinfer-python", "0.7.4", patches_dir=PATCHES, cache_dir=cache_dir())
    sglang_0_5_23 = sglang_releases.upstream_wheel(PATCHES, sglang_releases.Release("0.5.23", carried=False),
                                                   Source(cache_dir()))  # shipped unpatched: its pin
    link(flashinfer_0_7_4, wheelhouse)  # the merge's base, pinned
    repack(flashinfer_0_7_4, "0.7.5", wheelhouse)
    member = "flashinfer/quantization/fp4_quantization.py"
    repack(flashinfer_0_7_4, "0.7.6", wheelhouse,
           {member: lambda data: data.replace(b"def fp4_quantize(", b"def fp4_quantize_v2(")})
    metadata = "sglang-0.5.23.dist-info/METADATA"
    repack(sglang_0_5_23, "0.5.24", wheelhouse,
           {metadata: lambda data: data.replace(b"Requires-Dist: flashinfer_python[cu13]==0.7.2",
                                                b"Requires-Dist: flashinfer_python[cu13]==0.7.5")})
    fake = FakeGitHub()
    source = Source(cache, wheelhouse, offline=True)
    outcomes = propose.propose(patches, OVERLAY, source, GitHub("o/r", fake.send), root=tmp_path, quick=True)
    assert [(str(o.release), o.proposal.kind) for o in outcomes] == [
        ("flashinfer-python==0.7.5", "pull"), ("flashinfer-python==0.7.6", "issue"), ("sglang==0.5.24", "pull")]
    assert not (patches / "flashinfer-python" / "0.7.5").exists()  # proposed, not written into the project

    ported = fake.committed("nvfp4-overlay/refresh-flashinfer-python-0.7.5")
    prefix = "patches/flashinfer-python/0.7.5/"
    assert sorted(ported) == [prefix + n for n in ("0001-cuda-version-without-subprocess.patch",
                                                   "0002-fp4-mxfp8-entry-points-opaque-to-dynamo.patch", "series",
                                                   "upstream.toml")]
    written = tmp_path / "ported"
    written.mkdir()
    for path, data in ported.items():
        (written / path.rsplit("/", 1)[1]).write_bytes(data)
    ours, theirs = read_series(written).patches, read_series(PATCHES / "flashinfer-python" / "0.7.4").patches
    assert [[h for f in p.files for h in f.hunks] for p in ours] == [[h for f in p.files for h in f.hunks]
                                                                      for p in theirs]  # the same file text
    wheel = wheelhouse / "flashinfer_python-0.7.5-py3-none-any.whl"
    assert f'filename = "{wheel.name}"' in ported[prefix + "upstream.toml"].decode()
    body = fake.pulls[0]["body"]
    assert "`nvfp4-overlay refresh flashinfer-python 0.7.4 0.7.5 --drop-upstream` ported the 0.7.4 series" in body
    assert "the behaviour checks found no problem" in body
    assert "- flashinfer/jit/cpp_ext.py hunks 1-3: exact 0.7.5" in body  # how each hunk is placed
    assert f"| {wheel.name} |" in body

    issue = fake.issues[0]
    assert issue["title"] == "flashinfer-python 0.7.6: the port needs a person"
    assert "refused the port: nothing was written" in issue["body"]
    assert "upstream's file has no fp4_quantize" in issue["body"]

    stack = fake.committed("nvfp4-overlay/stack-sglang-0.5.24")
    assert sorted(stack) == sorted(["patches/stacks.toml", *ported])
    assert stack[prefix + "upstream.toml"] == ported[prefix + "upstream.toml"]
    assert b'[stacks."sglang-0.5.24"]\nsglang = { version = "0.5.24", patched = false }\nflashinfer-python = "0.7.5"' \
        in stack["patches/stacks.toml"]
    assert "pins flashinfer-python==0.7.5 (Requires-Dist)" in fake.pulls[1]["body"]
