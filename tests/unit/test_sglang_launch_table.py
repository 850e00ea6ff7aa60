"""The launch-line table as committed (patches/sglang/audit-launch.json) and what renders it; doctor's
--sglang-args checked before any probe runs. The table against SGLang's own code:
tests/releases/test_sglang_launch.py; doctor asking it: tests/operator/test_doctor_launch.py."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from helpers import PATCHES, ROOT

from nvfp4_overlay import cli
from nvfp4_overlay.audit import sglang_launch, sglang_launch_table, sglang_models
from nvfp4_overlay.cli.parser import parser
from nvfp4_overlay.errors import UsageError
from nvfp4_overlay.oracle import sglang_releases

TABLE = sglang_launch_table.load(PATCHES)


def run(*argv: str) -> tuple[int, dict[str, object]]:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = cli.main([*argv, "--json"])
    return code, json.loads(out.getvalue())


def test_every_release_of_a_stack_has_the_whole_matrix() -> None:
    keys = [line["key"] for line in sglang_launch.matrix()]
    assert len(keys) == len(set(keys))
    assert TABLE["matrix"] == sglang_launch.matrix(), "run `make sglang-launch-table`"
    assert list(TABLE["releases"]) == [r.version for r in sglang_releases.audit_releases(PATCHES)]
    for release, entry in TABLE["releases"].items():
        assert set(entry["lines"]) == set(keys), release
        assert not [k for k, v in entry["lines"].items() if "probe_error" in v], release


def test_the_documents_are_rendered_from_the_committed_table() -> None:
    """What `launch-table --check` (make check-generated) holds, without the CLI."""
    for name, render in (("docs/patches.md", sglang_launch_table.render_docs), ("README.md", sglang_launch_table.render_readme)):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert render(text, TABLE) == text, f"{name}: run `nvfp4-overlay launch-table`"
    code, document = run("launch-table", "--check", "--patches-dir", str(PATCHES))
    assert code == 0 and document["differ"] == [], document


def test_a_table_cell_says_what_sglang_said() -> None:
    """A line the parser refuses is 'refused'; a compiled region names its rule; the runner's no is its line."""
    rows = [r for r in sglang_launch_table.markdown(TABLE).splitlines()
            if r.startswith("| qwen3-moe (`Qwen3MoeForCausalLM`), sm120: `--enable-torch-compile` |")]
    assert rows and all("| no |" in r for r in rows), rows  # never compiled whole: SGLang turns it off
    assert any("refused" in r for r in sglang_launch_table.markdown(TABLE).splitlines()
               if "`--cuda-graph-backend-prefill tc_piecewise` | 0.5.22" in r)
    assert sglang_launch.verdict({"refused": "flag", "message": "x"}) == "refused"
    assert sglang_launch.verdict({"fullgraph": None}) == "unknown"
    assert sglang_launch.rule_text({"by": "flag", "flag": "--x"}) == "the flag --x"
    assert sglang_launch.rule_text({"by": "server_args", "file": "f.py", "line": 3, "function": "g", "text": "t"}) == \
        "f.py:3 g: t"


def test_a_one_flag_launch_line_is_the_options_value() -> None:
    """As the README writes it: argparse would take `--enable-torch-compile` for an option of doctor's."""
    args = parser().parse_args(["doctor", "--sglang-args", "--enable-torch-compile", "--model-arch", "X"])
    assert args.sglang_args == "--enable-torch-compile" and args.model_arch == "X"
    args = parser().parse_args(["doctor", "--sglang-args=--tp 2", "--gpu", "sm90"])
    assert args.sglang_args == "--tp 2" and args.gpu == "sm90"


def test_doctor_refuses_before_any_probe_a_line_it_cannot_ask_about(tmp_path: object) -> None:
    with pytest.raises(UsageError, match="--sglang-args: No closing quotation"):
        sglang_launch.split_args('--model "unclosed')
    code, document = run("doctor", "--no-trace", "--sglang-args", '--x "y')
    assert code == 2 and document["error"]["item"] == "--sglang-args"  # type: ignore[index]
    code, document = run("doctor", "--no-trace", "--sglang-args", "--enable-torch-compile")
    assert code == 2 and document["error"]["item"] == "--model-arch", document  # type: ignore[index]
    code, document = run("doctor", "--no-trace", "--sglang-args", "--tp 2", "--gpu", "sm80")
    assert code == 2 and "--gpu" in document["error"]["message"]  # type: ignore[index]


def test_the_target_models_are_configs_of_their_architecture() -> None:
    for name, config in sglang_models.MODELS.items():
        assert sglang_models.config_for(name) == config
        assert sglang_models.config_for(config["architectures"][0])["architectures"] == config["architectures"]
    plain = sglang_models.config_for("SomeNewForCausalLM")
    assert plain["architectures"] == ["SomeNewForCausalLM"] and plain["num_hidden_layers"] > 0
