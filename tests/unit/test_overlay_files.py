"""overlay/<dist>/releases.toml: an overlay file goes only into the releases its specifier names.

A synthetic project (one distribution, two releases) built through the CLI; a bad rule is refused
naming the file and the fix. On the pinned SGLang wheels: tests/releases/test_overlay_releases.py."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from helpers import write_wheel

from nvfp4_overlay import cli

EXTRA = "demo/extra.py"


def _layout(tmp_path: Path, rules: str | None, overlay: tuple[str, ...] = (EXTRA, "demo/always.py")) -> list[str]:
    """demo 1.0 and 2.0 carried with empty series, the overlay files, and releases.toml if given."""
    patches, wheelhouse = tmp_path / "patches", tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    stacks = ['default = "demo-1.0"']
    for version in ("1.0", "2.0"):
        wheel = write_wheel(wheelhouse, "demo", version, {"demo/__init__.py": "x = 1\n"})
        series = patches / "demo" / version
        series.mkdir(parents=True)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        (series / "upstream.toml").write_text(f'revision = 1\n[[wheel]]\nfilename = "{wheel.name}"\nsha256 = "{digest}"\n')
        (series / "series").write_text("")
        stacks.append(f'[stacks."demo-{version}"]\ndemo = "{version}"')
    (patches / "stacks.toml").write_text("\n".join(stacks) + "\n")
    root = tmp_path / "overlay" / "demo"
    for rel in overlay:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("EXTRA = 1\n")
    if rules is not None:
        (root / "releases.toml").write_text(rules)
    return ["--patches-dir", str(patches), "--overlay-dir", str(tmp_path / "overlay"), "--dist-dir",
            str(tmp_path / "dist"), "--cache-dir", str(tmp_path / "cache"), "--wheelhouse", str(wheelhouse), "--offline"]


def _members(dist: Path, version: str) -> set[str]:
    (wheel,) = dist.glob(f"demo-{version}+nvfp4.1-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def test_a_file_goes_only_into_the_releases_its_specifier_names(tmp_path: Path) -> None:
    args = _layout(tmp_path, f'[files."{EXTRA}"]\nreleases = "<2"\nwhy = "imported by 0001 of 1.x"\n')
    assert cli.main(["build", *args, "demo==1.0", "demo==2.0"]) == 0
    old, new = _members(tmp_path / "dist", "1.0"), _members(tmp_path / "dist", "2.0")
    assert EXTRA in old and EXTRA not in new
    assert "demo/always.py" in old and "demo/always.py" in new  # a file releases.toml does not name: everywhere
    assert not any(name.endswith("releases.toml") for name in old | new)  # the rule is no file of a wheel


def test_without_releases_toml_every_release_gets_every_file(tmp_path: Path) -> None:
    args = _layout(tmp_path, None)
    assert cli.main(["build", *args, "demo==1.0", "demo==2.0"]) == 0
    assert EXTRA in _members(tmp_path / "dist", "1.0") and EXTRA in _members(tmp_path / "dist", "2.0")


@pytest.mark.parametrize(("rules", "says"), [
    (f'[files."{EXTRA}"]\nreleases = "before 2"\nwhy = "x"\n', "'before 2' is not a PEP 440 specifier"),
    (f'[files."{EXTRA}"]\nwhy = "x"\n', "None is not a PEP 440 specifier"),
    ('[files."demo/gone.py"]\nreleases = "<2"\nwhy = "x"\n', "names no file under"),
    (f'[files."{EXTRA}"]\nreleases = "<2"\n', "needs why"),
    (f'[file."{EXTRA}"]\nreleases = "<2"\nwhy = "x"\n', "[file]: unknown table"),
    ("[files\n", "not valid TOML"),
])
def test_a_bad_rule_is_refused_naming_the_file_and_the_fix(tmp_path: Path, rules: str, says: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    args = _layout(tmp_path, rules)
    assert cli.main(["build", *args, "--json", "demo==1.0"]) == 2
    out = capsys.readouterr()
    text = out.out + out.err
    assert says in text and "releases.toml" in text and "Traceback" not in text
    assert not list((tmp_path / "dist").glob("*.whl"))  # nothing built, nothing lost


