"""The generators behind one command (`nvfp4-overlay generate NAME [--check]`, `generate --list`), the Makefile
calling only it, and `python -m nvfp4_overlay`: run on the committed files and on a copy with one changed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import PATCHES, ROOT, run_cli

MAKEFILE = (ROOT / "Makefile").read_text()


def recipe(target: str) -> list[str]:
    """The Makefile's recipe lines of one target."""
    body = MAKEFILE.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in body.splitlines()[1:] if line.startswith("\t")]


def listed() -> dict[str, dict[str, object]]:
    code, out, err = run_cli("generate", "--list", "--json")
    assert code == 0, err
    return {g["name"]: g for g in json.loads(out)["generators"]}


def test_the_list_names_each_generator_with_what_it_writes_reads_and_needs() -> None:
    generators = listed()
    assert {"routes", "audit-api", "launch-table", "cuda-audit", "cuda-docs", "compile-list", "compile-list-docs",
            "sglang-regions", "sglang-regions-docs"} <= set(generators)
    for name, g in generators.items():
        assert g["writes"] and g["reads"] and g["torch"] in ("no", "yes", "with --resolve"), name
    assert generators["compile-list"]["torch"] == "yes" and generators["cuda-docs"]["torch"] == "no"
    code, out, _ = run_cli("generate", "--list")
    assert code == 0
    for name, g in generators.items():  # the text names each, and where it writes
        line = next(line for line in out.splitlines() if line.split()[:1] == [name])
        assert str(g["writes"][0]) in out, (name, line)  # type: ignore[index]


def test_check_generated_runs_every_generator_that_has_a_check() -> None:
    checked = {line.split("generate ", 1)[1].split()[0] for line in recipe("check-generated")
               if " generate " in line and "--check" in line}
    assert checked == {name for name, g in listed().items() if g["check"]}


def test_the_makefile_reaches_the_package_only_through_generate_and_runs_no_inline_python() -> None:
    assert not re.search(r"\$\(PY\) -c\b", MAKEFILE), "an inline -c block: make it a generator"
    modules = re.findall(r"\$\(PY\) -m (nvfp4_overlay[\w.]*)(?: (\S+))?", MAKEFILE)
    assert modules and all(m == ("nvfp4_overlay", "generate") for m in modules), modules


def test_check_says_which_document_differs_and_writes_nothing(tmp_path: Path) -> None:
    """compile-list-docs on a copy of the project whose document lost a row: --check exits 1 naming it and
    leaves it; without --check it writes the committed bytes back."""
    shutil.copytree(PATCHES, tmp_path / "patches")
    (tmp_path / "docs").mkdir()
    document = tmp_path / "docs" / "compile-list.md"
    committed = (ROOT / "docs" / "compile-list.md").read_text(encoding="utf-8")
    row = next(line for line in committed.splitlines() if line.startswith("| ") and "---" not in line)
    changed = committed.replace(row + "\n", "", 1)
    document.write_text(changed, encoding="utf-8")
    args = ["generate", "compile-list-docs", "--patches-dir", str(tmp_path / "patches")]
    code, out, err = run_cli(*args, "--check", "--json")
    assert code == 1, err
    assert json.loads(out)["differ"] == ["docs/compile-list.md"]
    assert run_cli("generate", "--json", *args[1:], "--check")[:2] == (code, out)  # --json before the name too
    assert document.read_text(encoding="utf-8") == changed
    code, out, err = run_cli(*args)
    assert code == 0, err
    assert "wrote docs/compile-list.md" in out
    assert document.read_text(encoding="utf-8") == committed
    assert run_cli(*args, "--check")[0] == 0


def test_a_name_that_is_no_generator_is_exit_2_naming_the_list() -> None:
    code, out, err = run_cli("generate", "no-such-generator")
    assert code == 2 and "Traceback" not in err
    assert "routes" in err  # argparse names the choices
    code, _, err = run_cli("generate")
    assert code == 2 and "generate --list" in err


def test_the_old_spelling_runs_the_same_generator() -> None:
    """`nvfp4-overlay launch-table` (scripts of operators call it) is `generate launch-table`: same answer."""
    old = run_cli("launch-table", "--check", "--json", "--patches-dir", str(PATCHES))
    new = run_cli("generate", "launch-table", "--check", "--json", "--patches-dir", str(PATCHES))
    assert old == new and old[0] == 0 and json.loads(old[1])["differ"] == []


def test_python_dash_m_runs_the_command_line() -> None:
    from nvfp4_overlay import __version__

    done = subprocess.run([sys.executable, "-m", "nvfp4_overlay", "--version"], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, f"nvfp4-overlay {__version__}"), done.stderr
    done = subprocess.run([sys.executable, "-m", "nvfp4_overlay", "list", "--no-such-option"], capture_output=True,
                          text=True, cwd=ROOT, check=False)
    assert done.returncode == 2 and "--no-such-option" in done.stderr and "Traceback" not in done.stderr


def test_each_check_that_reads_only_committed_files_passes_on_the_committed_tree() -> None:
    """The generators that read no upstream wheel (make check-generated runs the others; tests/releases too)."""
    local = [name for name, g in listed().items() if g["check"] and not g["upstream_wheels"]]
    assert {"cuda-docs", "compile-list-docs", "sglang-regions-docs", "launch-table"} <= set(local)
    for name in local:
        code, out, err = run_cli("generate", name, "--check", "--json", "--patches-dir", str(PATCHES))
        assert (code, json.loads(out)["differ"]) == (0, []), (name, err)


def test_the_torch_generators_reach_their_tables_with_the_named_releases(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    """compile-list and sglang-regions probe for minutes under torch (make compile-list-table and
    sglang-regions-table run them whole); here only what the command hands them: the project's data, the
    releases named, the cache the options name."""
    from nvfp4_overlay.oracle import compile_table, sglang_table

    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(compile_table, "write_table", lambda *a: calls.append(a) or tmp_path / "c.json")
    monkeypatch.setattr(sglang_table, "write_table", lambda *a: calls.append(a) or tmp_path / "s.json")
    data = ["--patches-dir", str(PATCHES), "--overlay-dir", str(ROOT / "overlay"), "--cache-dir", str(tmp_path)]
    assert run_cli("generate", "compile-list", "0.7.4", *data)[0] == 0
    assert run_cli("generate", "sglang-regions", "0.5.9", "0.5.11", *data)[0] == 0
    (patches, overlay, releases, cache), (patches2, _, versions, source) = calls
    assert (patches, overlay, releases, cache) == (PATCHES, ROOT / "overlay", ["0.7.4"], tmp_path)
    assert (patches2, versions, source.cache_dir) == (PATCHES, ["0.5.9", "0.5.11"], tmp_path)  # type: ignore[attr-defined]


def test_a_document_missing_beside_the_patches_is_exit_2_naming_it(tmp_path: Path) -> None:
    """Run outside a clone (the installed copy's patches, or a copy without docs/): a sentence, not a traceback."""
    shutil.copytree(PATCHES, tmp_path / "patches")
    code, out, err = run_cli("generate", "compile-list-docs", "--check", "--json", "--patches-dir",
                             str(tmp_path / "patches"))
    assert code == 2 and "Traceback" not in err
    error = json.loads(out)["error"]
    assert error["path"] == str(tmp_path / "docs" / "compile-list.md") and "run it in the clone" in error["fix"]
