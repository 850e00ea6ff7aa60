"""drift and refresh on the real releases: `make drift` is green on the committed tree, SGLang's series are
obsolete on 0.5.12, and refresh and the three-way merge give the committed series (its patched files,
byte for byte). Every hunk state on small releases built in the test: tests/unit/test_drift.py."""

from __future__ import annotations

import dataclasses
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from helpers import OVERLAY, PATCHES, build_one, cache_dir, run_cli

from nvfp4_overlay.carry.drift import drift_series
from nvfp4_overlay.patch.manifest import Target, load_upstream
from nvfp4_overlay.patch.patching import apply_series, read_series
from nvfp4_overlay.wheel import fetch

# --- the real releases -----------------------------------------------------------------------------


def real_args(tmp_path: Path, wheelhouse: Path | None = None) -> list[str]:
    args = [
        "--patches-dir",
        str(tmp_path / "patches"),
        "--overlay-dir",
        str(tmp_path / "overlay"),
        "--dist-dir",
        str(tmp_path / "dist"),
        "--cache-dir",
        str(cache_dir()),
        "--quiet",
    ]
    return args + (["--wheelhouse", str(wheelhouse), "--offline"] if wheelhouse else [])


@pytest.mark.upstream
def test_real_sglang_series_are_obsolete_on_0_5_12(tmp_path: Path) -> None:
    """SGLang 0.5.12 took the fix in its own form: every series' 0001 says drop me, and why. (0.5.9's 0002, the
    DSA indexer's split op, still merges there: 0.5.10-0.5.12 turn piecewise off for DSA models instead, and
    0.5.15 took it, by its header.)"""
    code, out, err = run_cli(
        "drift",
        "--dist",
        "sglang",
        "--against",
        "0.5.12",
        "--json",
        "--patches-dir",
        str(PATCHES),
        "--cache-dir",
        str(cache_dir()),
    )
    assert code == 0, err  # obsolete by the patches' own headers: refresh drops them, no person needed
    doc = json.loads(out)
    assert {c["series"] for c in doc["cells"]} >= {"0.5.8", "0.5.9", "0.5.10", "0.5.10.post1", "0.5.11"}
    for cell in doc["cells"]:
        patch, *others = cell["patches"]
        assert [(p["patch"], p["state"]) for p in others] == ([("0002-nsa-indexer-split-op.patch", "merges")]
                                                            if cell["series"] == "0.5.9" else []), cell
        assert patch["state"] == "obsolete", cell["series"]
        assert [h["state"] for h in patch["hunks"]] == ["conflict"]
        assert "'from flashinfer import fp4_quantize', is nowhere in the file" in patch["reason"]


@pytest.mark.upstream
@pytest.mark.parametrize("dist", [pytest.param(d, id=d, marks=pytest.mark.xdist_group(f"drift-committed-{d}"))
                                  for d in ("sglang", "flashinfer-python")])
def test_make_drift_is_green_on_the_committed_tree(dist: str) -> None:
    """`make drift` (--against pinned all) and `drift --against latest`, the help's first example, on the
    committed series, stacks and audits: no cell needs a person, nothing skipped, no new API unclassified.

    Of `all`, the releases without a series of their own (on the index, newer than the oldest series):
    only there, and on a series' own release, can a cell need a person; on a release that carries its
    own series a cell is news at worst (Cell.verdict; the synthetic news test holds that). Every
    flashinfer-python release after 0.6.1 carries a series, so its 703 news-at-most cells of `all`
    (about 90 s of CPU) are left to `make drift`; a new upstream release is in the plan the day the
    index has it. A distribution per xdist worker."""
    from packaging.version import Version

    from nvfp4_overlay.carry.releases import index_versions
    from nvfp4_overlay.patch.manifest import all_targets

    carried = [Version(t.version) for t in all_targets(PATCHES) if t.dist == dist]
    uncarried = [str(v) for v in index_versions(dist, fetch.Source(cache_dir()), PATCHES)
                 if v > min(carried) and v not in carried]
    code, out, err = run_cli("drift", "--dist", dist, "--against", "pinned", "latest", *uncarried, "--json",
                            "--patches-dir", str(PATCHES), "--overlay-dir", str(OVERLAY), "--cache-dir", str(cache_dir()))
    doc = json.loads(out)
    assert code == 0, (f"exit {code}: cells needing a person {doc['cells_needing_a_person']}, skipped "
                       f"{doc['skipped']}; {err[-3000:]}")
    failing = [(c["series"], c["release"], c["state"]) for c in doc["cells"] if c["verdict"] == "needs-a-person"]
    assert (failing, doc["skipped"], {k: v for k, v in doc["new_apis"].items() if v}) == ([], {}, {})
    if dist == "sglang":  # the releases shipped unpatched by design: the newer series are not needed there
        unneeded = {c["release"] for c in doc["cells"] if c["verdict"] == "not-needed-there"}
        assert unneeded >= {"0.5.22", "0.5.23"}, unneeded


REAL_PORTS = [
    pytest.param(
        "sglang",
        "0.5.10.post1",
        "0.5.11",
        "sglang/srt/layers/quantization/modelopt_quant.py",
        id="sglang-offset",
    ),
    pytest.param(
        "flashinfer-python", "0.6.7.post2", "0.6.7.post3", "flashinfer/jit/cpp_ext.py", id="flashinfer-exact"
    ),
]


@pytest.mark.upstream
@pytest.mark.parametrize(("dist", "old", "new", "member"), REAL_PORTS)
def test_real_refresh_gives_the_committed_series(
    tmp_path: Path, dist: str, old: str, new: str, member: str
) -> None:
    """A real series refreshed onto its neighbour (sglang: offset +2) is the series committed for it:
    the same hunks, the same wheel pin, and a build whose patched file is byte for byte the one the
    trace tests run on."""
    shutil.copytree(PATCHES / dist / old, tmp_path / "patches" / dist / old)
    shutil.copytree(OVERLAY / dist, tmp_path / "overlay" / dist)
    shutil.copy(PATCHES / "stacks.toml", tmp_path / "patches")
    for audit in (PATCHES / dist).glob("audit-*.json"):  # refresh's behaviour checks read the audit
        shutil.copy(audit, tmp_path / "patches" / dist)
    pinned = load_upstream(PATCHES, Target(dist, new))
    source = fetch.Source(cache_dir())
    (pin,) = fetch.select_wheels(pinned, source)
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    shutil.copy(fetch.upstream_wheel(pinned, pin, source), wheelhouse)
    code, _, err = run_cli("refresh", dist, old, new, *real_args(tmp_path, wheelhouse))
    assert code == 0, err
    refreshed = load_upstream(tmp_path / "patches", Target(dist, new))
    assert [(w.filename, w.sha256) for w in refreshed.wheels] == [(pin.filename, pin.sha256)]
    ours, theirs = read_series(refreshed.directory).patches, read_series(PATCHES / dist / new).patches
    assert [[h for fp in p.files for h in fp.hunks] for p in ours] == [
        [h for fp in p.files for h in fp.hunks] for p in theirs
    ]
    assert [p.fields.get("Description") for p in ours] == [
        p.fields.get("Description") for p in read_series(PATCHES / dist / old).patches
    ]
    code, _, err = run_cli("build", f"{dist}=={new}", *real_args(tmp_path, wheelhouse))
    assert code == 0, err
    committed = build_one(
        dist, new, patches_dir=PATCHES, overlay_dir=OVERLAY, dist_dir=tmp_path / "ref", cache_dir=cache_dir()
    )
    built = next((tmp_path / "dist").glob(f"{committed.name.split('-')[0]}-{new}+nvfp4.*-*.whl"))
    with zipfile.ZipFile(built) as a, zipfile.ZipFile(committed) as b:
        assert a.read(member) == b.read(member)


ROUTE = b'# nvfp4-overlay: one opaque op while dynamo traces (flashinfer/_nvfp4_overlay/opaque.py)\n'


def _routed_names(series_dir: Path) -> set[str]:
    """The entry points patch 0002 of a series routes, as its description lists them."""
    text = (series_dir / "0002-fp4-mxfp8-entry-points-opaque-to-dynamo.patch").read_text()
    listed = text.split("this release defines\n (", 1)[1].split(")", 1)[0]
    return {name.strip() for name in listed.split(",")}


def _without_routes(text: bytes, names: set[str]) -> bytes:
    """text less the two route lines above each def of these names."""
    pieces = text.split(ROUTE)
    out = pieces[0]
    for piece in pieces[1:]:
        name = piece.split(b"\ndef ", 1)[1].split(b"(", 1)[0].decode() if b"\ndef " in piece else ""
        out += piece.split(b"\n", 1)[1] if name in names else ROUTE + piece
    return out


# (series, release, placed by name somewhere): the rewritten releases, and two refreshes docs/drift.md shows
REAL_MERGES = [("0.6.7", "0.6.16", True), ("0.6.7.post3", "0.7.4", True), ("0.6.8.post1", "0.6.18.post1", True),
               ("0.6.8.post1", "0.6.14", True), ("0.7.2.post1", "0.7.4", False)]


@pytest.mark.upstream
@pytest.mark.parametrize(("old", "new", "by_name"), REAL_MERGES, ids=[f"{a}-onto-{b}" for a, b, _ in REAL_MERGES])
def test_real_merges_give_the_committed_series_patched_files(old: str, new: str, by_name: bool) -> None:
    """The old series drifted onto a release upstream rewrote around the routed functions (0.6.16 gave
    nvfp4_quantize a cute-dsl branch and reordered functions): every patched file the merge gives is,
    byte for byte, the one the committed series gives (its own patches, less those the old one lacks,
    less the routes of entry points the old release does not define),
    and the hunks merge3 leaves as conflicts are placed by the functions' names."""
    from nvfp4_overlay.carry.matrix import ReleaseFiles
    from nvfp4_overlay.carry.releases import release_wheel
    from nvfp4_overlay.wheel.archive import WheelReader

    dist, source = "flashinfer-python", fetch.Source(cache_dir(), offline=True)
    series = read_series(PATCHES / dist / old)
    committed = read_series(PATCHES / dist / new)
    committed = dataclasses.replace(committed, patches=tuple(
        p for p in committed.patches if p.name in {q.name for q in series.patches}))
    with (WheelReader(release_wheel(PATCHES, Target(dist, old), source).path) as origin,
          WheelReader(release_wheel(PATCHES, Target(dist, new), source).path) as release):
        base, files = ReleaseFiles(origin), ReleaseFiles(release)
        drifts = drift_series(series, files.read, files.names, dist, new, base.read)
        expected = apply_series(committed, files.read).files
    ported = {image.patch.path: "".join(image.after or ()) for d in drifts for image in d.images}
    assert sorted(ported) == sorted(expected)
    # An entry point the old release does not define has no route in the old series: its port cannot
    # have one (refresh writes the route patch anew: tests/releases/test_routes.py).
    missing = _routed_names(PATCHES / dist / new) - _routed_names(PATCHES / dist / old)
    for path, text in ported.items():
        assert text.encode("utf-8", "surrogateescape") == _without_routes(expected[path], missing), path
    placed = {h.placed for d in drifts for h in d.hunks}
    assert placed <= {"exact", "offset", "merge3", "by-name"} and ("by-name" in placed) is by_name, placed


