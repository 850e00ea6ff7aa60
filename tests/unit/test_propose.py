"""propose on synthetic releases: the pin, the stack it writes, what is already proposed, the token's
errors, the dry run; GitHub's API is a fake behind github.Send. End to end on real wheels repacked as
new releases: tests/carrying/test_propose_real.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fake_github import FakeGitHub
from helpers import OVERLAY, PATCHES, run_cli, sglang_after_newest, sglang_stack_releases, write_wheel

from nvfp4_overlay.carry import propose
from nvfp4_overlay.carry.github import GitHub, Proposal
from nvfp4_overlay.errors import ConfigError
from nvfp4_overlay.patch.manifest import Target, load_stacks
from nvfp4_overlay.wheel.fetch import Source

# SGLang releases no stack has yet (the newest's + 1 and + 2), read from patches/stacks.toml: a new
# stack there moves them on rather than failing these tests.
NEW, NEWER = sglang_after_newest(1), sglang_after_newest(2)

# --- the GitHub seam ---------------------------------------------------------------------------------


def test_a_pull_request_is_one_commit_of_its_files_on_a_new_branch() -> None:
    fake = FakeGitHub()
    files = {"patches/flashinfer-python/9.0/series": b"0001-a.patch\n", "patches/stacks.toml": b"default = 'x'\n"}
    url = GitHub("o/r", fake.send).open(Proposal("pull", "title", "the report", "nvfp4-overlay/x", files))
    assert url == "https://example.invalid/o/r/pulls/1"
    assert fake.committed("nvfp4-overlay/x") == files
    assert fake.pulls[0] | {"html_url": ""} == {"title": "title", "head": "nvfp4-overlay/x", "base": "main",
                                               "body": "the report", "html_url": ""}
    assert GitHub("o/r", fake.send).open(Proposal("issue", "t", "b")) == "https://example.invalid/o/r/issues/1"


def test_what_is_already_proposed_is_found_by_branch_or_issue_title() -> None:
    fake = FakeGitHub(branches={"nvfp4-overlay/x": "c9"}, issues=[{"title": "t", "html_url": "u"}])
    forge = GitHub("o/r", fake.send)
    assert forge.existing(Proposal("pull", "", "", "nvfp4-overlay/x")) == "branch nvfp4-overlay/x"
    assert forge.existing(Proposal("pull", "", "", "nvfp4-overlay/y")) is None
    assert forge.existing(Proposal("issue", "t", "")) == "u"
    assert forge.existing(Proposal("issue", "other", "")) is None


def test_a_token_without_permission_is_exit_2_naming_the_call_and_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"GitHub POST /repos/o/r/issues: HTTP 403 Resource not accessible") as info:
        GitHub("o/r", FakeGitHub(fail=403).send).open(Proposal("issue", "t", "b"))
    assert info.value.exit_code == 2 and "permission" in (info.value.fix or "")


def test_propose_without_a_token_says_which_variable_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    code, out, err = run_cli("propose", "--repo", "o/r", "--json", "--patches-dir", str(PATCHES), "--offline")
    assert code == 2
    assert json.loads(out)["error"]["item"] == "GITHUB_TOKEN"


# --- the pieces: the pin, the stack -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("requires", "pin"),
    [
        (["torch==2.14.1", "flashinfer_python==0.7.2"], "0.7.2"),
        (["flashinfer-python[cu13]==0.6.12"], "0.6.12"),
        (["flashinfer-python==0.7.2", 'flashinfer-python==0.6.1; extra == "old"'], "0.7.2"),
        (["flashinfer-python>=0.7"], None),
        (["flashinfer-python==0.7.*"], None),
        (["flashinfer-python==0.7.2; python_version < '3'", "torch"], None),
        (["flashinfer-python==0.7.2", "flashinfer-python==0.7.3"], None),
    ],
    ids=["plain", "extra-of-the-pin", "other-extra", "range", "wildcard", "marker-false", "two-pins"],
)
def test_the_pin_is_one_exact_release_outside_extras(requires: list[str], pin: str | None) -> None:
    assert propose.pinned_release(requires, "flashinfer-python") == pin


def test_a_stack_goes_after_the_last_sglang_stack_and_the_file_still_reads(tmp_path: Path) -> None:
    text = propose.with_stack((PATCHES / "stacks.toml").read_text(), NEW, "0.7.4")
    (tmp_path / "stacks.toml").write_text(text)
    stacks = {s.name: s for s in load_stacks(tmp_path).stacks}
    new = stacks[f"sglang-{NEW}"]
    assert (new.targets, new.upstream) == ((Target("flashinfer-python", "0.7.4"),), (Target("sglang", NEW),))
    newest = sglang_stack_releases()[-1]
    assert text.index(f'[stacks."sglang-{newest}"]') < text.index(f'[stacks."sglang-{NEW}"]') < text.index(
        "# FlashInfer alone")
    assert text.replace(f'[stacks."sglang-{NEW}"]\nsglang = {{ version = "{NEW}", patched = false }}\n'
                        'flashinfer-python = "0.7.4"\n\n', "") == (PATCHES / "stacks.toml").read_text()


# --- SGLang releases, with the behaviour checks replaced (their own proof is the end-to-end test) -------


@pytest.fixture
def stack_project(tmp_path: Path) -> dict[str, Path]:
    """The real stacks.toml and 0.7.2 series; an empty cache; a wheelhouse for new SGLang releases."""
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES / "flashinfer-python" / "0.7.2", patches / "flashinfer-python" / "0.7.2")
    shutil.copy(PATCHES / "stacks.toml", patches)
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    return {"patches": patches, "wheelhouse": wheelhouse, "cache": tmp_path / "cache"}


def sglang(where: Path, version: str, requires: str) -> Path:
    return write_wheel(where, "sglang", version, {"sglang/__init__.py": ""}, extra_metadata=requires)


@pytest.mark.parametrize(
    ("requires", "problems", "kind", "says"),
    [
        ("Requires-Dist: flashinfer_python==0.7.2\nRequires-Dist: torch==2.14.1", [], "pull",
         "pins flashinfer-python==0.7.2 (Requires-Dist)"),
        ("Requires-Dist: flashinfer_python==0.7.2", ["flashinfer-python==0.7.2: fp4_quantize: does not compile"],
         "issue", "whose series does not behave:\n\n- flashinfer-python==0.7.2: fp4_quantize: does not compile"),
        ("Requires-Dist: flashinfer_python==0.7.3", [], "issue", "which no series carries"),
        ("Requires-Dist: flashinfer_python>=0.7", [], "issue", "pins no single flashinfer-python release"),
    ],
    ids=["stack", "pin-does-not-behave", "pin-not-carried", "no-pin"],
)
def test_a_new_sglang_release_becomes_a_stack_over_its_pin(
    stack_project: dict[str, Path], monkeypatch: pytest.MonkeyPatch, requires: str, problems: list[str], kind: str,
    says: str,
) -> None:
    checked: list[Target] = []
    monkeypatch.setattr(propose.behaviour, "check_series", lambda target, *a, **k: checked.append(target) or problems)
    sglang(stack_project["wheelhouse"], NEW, requires)
    fake = FakeGitHub()
    source = Source(stack_project["cache"], stack_project["wheelhouse"], offline=True)
    (outcome,) = propose.propose(stack_project["patches"], OVERLAY, source, GitHub("o/r", fake.send),
                                 root=stack_project["patches"].parent)
    assert (outcome.release, outcome.proposal.kind) == (Target("sglang", NEW), kind)
    assert says in outcome.proposal.body
    assert checked == ([Target("flashinfer-python", "0.7.2")] if "0.7.2" in requires else [])
    if kind == "pull":
        files = fake.committed(f"nvfp4-overlay/stack-sglang-{NEW}")
        assert list(files) == ["patches/stacks.toml"]
        assert f'[stacks."sglang-{NEW}"]\nsglang = {{ version = "{NEW}", patched = false }}\n'.encode() in files[
            "patches/stacks.toml"]
        assert fake.pulls[0]["title"] == f"sglang {NEW}: a stack over flashinfer-python 0.7.2"
    else:
        assert fake.issues[0]["title"] == f"sglang {NEW}: no stack proposed"
    assert (stack_project["patches"] / "stacks.toml").read_text() == (PATCHES / "stacks.toml").read_text()


def test_a_release_already_proposed_is_not_proposed_again(stack_project: dict[str, Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(propose.behaviour, "check_series", lambda *a, **k: pytest.fail("checked again"))
    sglang(stack_project["wheelhouse"], NEW, "Requires-Dist: flashinfer_python==0.7.2")
    fake = FakeGitHub(branches={f"nvfp4-overlay/stack-sglang-{NEW}": "c5"})
    source = Source(stack_project["cache"], stack_project["wheelhouse"], offline=True)
    (outcome,) = propose.propose(stack_project["patches"], OVERLAY, source, GitHub("o/r", fake.send))
    assert outcome.already == f"branch nvfp4-overlay/stack-sglang-{NEW}" and outcome.url is None
    assert not fake.pulls and not fake.issues


def test_propose_dry_run_prints_the_proposals_and_opens_nothing(stack_project: dict[str, Path],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(propose.behaviour, "check_series", lambda *a, **k: [])
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    sglang(stack_project["wheelhouse"], NEW, "Requires-Dist: flashinfer_python==0.7.2")
    args = ["--patches-dir", str(stack_project["patches"]), "--cache-dir", str(stack_project["cache"]),
            "--wheelhouse", str(stack_project["wheelhouse"]), "--offline"]
    code, out, err = run_cli("propose", "--dry-run", *args)
    assert code == 0, err
    assert out.startswith(f"sglang=={NEW}: pull: sglang {NEW}: a stack over flashinfer-python 0.7.2 -> "
                          f"(dry run: branch nvfp4-overlay/stack-sglang-{NEW})\n")
    assert "pins flashinfer-python==0.7.2 (Requires-Dist)" in out
    sglang(stack_project["wheelhouse"], NEWER, "Requires-Dist: flashinfer_python==0.7.3")
    code, out, _ = run_cli("propose", "--dry-run", "--json", *args)
    assert code == 1  # a release needs a person: its issue is the report
    assert [(p["release"], p["kind"]) for p in json.loads(out)["proposals"]] == [
        (f"sglang=={NEW}", "pull"), (f"sglang=={NEWER}", "issue")]


