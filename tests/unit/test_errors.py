"""Errors worded once: what a person reads is composed from the error's fields, and the fix is in it once.

The raise sites are found in src/ with ast (every call of an OverlayError subclass), not kept by hand.
"""

from __future__ import annotations

import ast
import io
import json
import re
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import PATCHES, ROOT, run_cli

from nvfp4_overlay import cli, errors

SRC = ROOT / "src" / "nvfp4_overlay"
ERRORS = {name for name, value in vars(errors).items()
          if isinstance(value, type) and issubclass(value, errors.OverlayError)}


@dataclass(frozen=True)
class Site:
    """One construction of an error in src/: where, which class, and its message and fix as source text
    (an f-string's fields as {expression}), or None where the source does not spell them out."""

    where: str
    kind: str
    message: str | None
    fix: str | None
    fix_name: str | None  # fix=NAME: the name, to catch a message that interpolates the same value


def _text(node: ast.expr | None) -> str | None:
    """A string's text as written: constants as they are, f-string fields as {source}; None if not a string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                       for v in node.values if isinstance(v, ast.Constant | ast.FormattedValue))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None and right is None else (left or "{...}") + (right or "{...}")
    return None


def _assigned(scope: ast.AST, name: str, line: int) -> list[ast.expr]:
    """Every value assigned to `name` in `scope` before `line` (msg = ...; raise X(msg, ...)), each branch's."""
    return [node.value for node in ast.walk(scope) if isinstance(node, ast.Assign) and node.lineno < line
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)]


def _sites() -> list[Site]:
    sites = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ERRORS):
                continue
            scope = min((s for s in scopes if s.lineno <= node.lineno <= (s.end_lineno or 0)),
                        key=lambda s: (s.end_lineno or 0) - s.lineno, default=tree)
            arg = node.args[0] if node.args else None
            messages = _assigned(scope, arg.id, node.lineno) if isinstance(arg, ast.Name) else [arg]
            fix = next((k.value for k in node.keywords if k.arg == "fix"), None)
            texts = [t for t in map(_text, messages) if t is not None]
            sites.append(Site(f"{path.relative_to(ROOT)}:{node.lineno}", node.func.id, "\n".join(texts) or None,
                              _text(fix), fix.id if isinstance(fix, ast.Name) else None))
    return sites


SITES = _sites()


def test_the_raise_sites_are_found() -> None:
    """The scan sees the tree: many sites, most of them with a fix, and every class raised is one of errors'."""
    assert len(SITES) > 100 and sum(s.fix is not None for s in SITES) > 80
    assert {"ConfigError", "Refused", "UnsafeArchiveError", "PatchError"} <= {s.kind for s in SITES}


# The verbs a fix opens with, as this project words them: a clause of a message that opens with one is a fix
# written into the message, where only fix= should word it (the printed text appends fix= once).
_IMPERATIVE = re.compile(
    r"(run|rerun|use|pass|delete|remove|check|name|install|build|rebuild|fix|set|unset|give|add|regenerate|restore|"
    r"verify|report|write|see|put|move|copy|ship|list|port|rename|change|make|classify|route|grant|fill|drop|leave|"
    r"declare|export|correct|edit|try|bring|close|reinstall|pin|free|point)\b(?! (could|did|was|is)\b)", re.I)


def _restates(site: Site) -> str | None:
    """What in the message words a fix: the fix's text or its first three words, the value passed as fix
    interpolated, or a clause (after '; ', ': ' or '. ') that opens with a fix's verb."""
    assert site.message is not None
    if site.fix_name is not None and "{" + site.fix_name + "}" in site.message:
        return "{" + site.fix_name + "}"
    if site.fix is not None:
        opening = " ".join(site.fix.split()[:3])
        if site.fix in site.message or (len(site.fix.split()) >= 3 and opening in site.message):
            return opening
    clauses = [c.strip() for line in site.message.split("\n") for c in re.split(r"; |: |\. ", line)[1:]]
    return next((c for c in clauses if _IMPERATIVE.match(c)), None)


_FIELDS = [s for s in SITES if s.message is not None]
@pytest.mark.parametrize("site", [pytest.param(s, id=s.where) for s in _FIELDS])
def test_no_message_restates_its_fix(site: Site) -> None:
    """The fix is worded once, in fix=: the message neither holds its text nor its first words, nor
    interpolates the value passed as fix, nor words a fix of its own (a clause that opens with a fix's verb)."""
    assert _restates(site) is None, site.message


_RAISED = sorted({s.kind for s in SITES})


def _printed(exc: errors.OverlayError, *flags: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli._report(exc, "--json" in flags, "nvfp4-overlay")
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("kind", _RAISED)
@pytest.mark.parametrize("message", ["demo/mod.py: not what was expected", "refused:\n  one\n  two"],
                         ids=["one-line", "listed"])
def test_every_error_raised_prints_its_fix_once(kind: str, message: str) -> None:
    """For each class src/ raises, the CLI's text holds the message and the fix once, and --json the same
    fields, with the message free of the fix."""
    exc = getattr(errors, kind)(message, path="demo/mod.py", item="demo", expected="this", found="that",
                                fix="run 'nvfp4-overlay drift'")
    code, _, err = _printed(exc)
    assert err.count("run 'nvfp4-overlay drift'") == 1 and message in err
    assert code == int(exc.exit_code)
    code, out, err_json = _printed(exc, "--json")
    data = json.loads(out)["error"]
    assert err_json == err and data["message"] == message and data["fix"] == "run 'nvfp4-overlay drift'"
    assert (data["path"], data["item"], data["expected"], data["found"]) == ("demo/mod.py", "demo", "this", "that")
    assert data["kind"] == kind and data["exit_code"] == code


def test_an_error_without_a_fix_prints_its_message() -> None:
    code, _, err = _printed(errors.ConfigError("demo/mod.py: not found"))
    assert (code, err) == (2, "error: demo/mod.py: not found\n")


def test_refused_takes_its_report_and_problems_when_it_is_made() -> None:
    """No assignment after construction: the fields are read-only, and with_report makes it again."""
    refused = errors.Refused("refused", problems=["a", "b"], fix="port it by hand", item="x==1")
    with pytest.raises(AttributeError):
        refused.problems = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        refused.report = {}  # type: ignore[misc]
    again = refused.with_report({"matrix": 1})
    assert (again.report, again.problems, again.data()) == ({"matrix": 1}, ("a", "b"), refused.data())
    assert refused.report is None and refused.data()["problems"] == ["a", "b"]


def test_no_src_module_assigns_an_error_s_fields_after_it_is_made() -> None:
    fields = r"\b(exc|refused|error|err)\.(report|problems|message|fix|path|item|expected|found)\s*=(?!=)"
    assigned = [f"{p.relative_to(ROOT)}: {line.strip()}" for p in sorted(SRC.rglob("*.py"))
                for line in p.read_text().splitlines() if re.search(fields, line)]
    assert assigned == []


# --- end to end: real refusals through the command line ------------------------------------------------


def _bad_stacks(tmp_path: Path) -> list[str]:
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "stacks.toml").write_text("default = [\n")
    return ["list", "--patches-dir", str(tmp_path / "patches")]


def _missing_series(tmp_path: Path) -> list[str]:
    return ["build", "flashinfer-python==0.6.0", "--offline", "--patches-dir", str(PATCHES),
            "--dist-dir", str(tmp_path / "dist")]


def _refresh_refused(tmp_path: Path) -> list[str]:  # the series it would write is there already
    return ["refresh", "flashinfer-python", "0.6.7", "0.6.8.post1", "--patches-dir", str(PATCHES)]


@pytest.mark.parametrize("argv", [_bad_stacks, _missing_series, _refresh_refused],
                         ids=["bad stacks.toml", "missing series", "refresh refused"])
def test_real_refusals_print_the_fix_once_and_json_carries_the_same_fields(
        tmp_path: Path, argv: Callable[[Path], list[str]]) -> None:
    args = argv(tmp_path)
    code, out, err = run_cli(*args)
    assert code == 2 and out == ""
    code_json, doc, err_json = run_cli(*args, "--json")
    error = json.loads(doc)["error"]
    assert (code_json, err_json) == (code, err) and error["exit_code"] == code
    assert error["fix"] and err.count(error["fix"]) == 1, err
    assert error["fix"] not in error["message"]
    assert err == f"error: {error['message']}; {error['fix']}\n"


def test_refresh_s_version_check_prints_its_fix(tmp_path: Path) -> None:
    """carry/refresh.py's own version check (the CLI's parser checks first; propose calls refresh directly)."""
    from nvfp4_overlay.carry import refresh

    with pytest.raises(errors.ConfigError) as caught:
        refresh._version("not-a-version")
    assert caught.value.fix and str(caught.value).count(caught.value.fix) == 1
    assert caught.value.fix not in caught.value.message


def test_a_corrupt_wheel_s_problem_holds_the_fix_once(tmp_path: Path) -> None:
    """The archive's refusal words its fix once (in fix=), and verify's problem line prints it once."""
    from nvfp4_overlay.wheel import WheelReader

    wheel = tmp_path / "corrupt-0.1-py3-none-any.whl"
    wheel.write_bytes(b"not a zip" * 300)
    with pytest.raises(errors.UnsafeArchiveError) as caught:
        WheelReader(wheel)
    assert caught.value.fix and caught.value.fix not in caught.value.message
    code, out, _ = run_cli("verify", str(wheel), "--patches-dir", str(PATCHES), "--json")
    (problem,) = json.loads(out)["wheels"][0]["problems"]
    assert code == 3 and problem.count("download it again") == 1, problem
    code, text, _ = run_cli("verify", str(wheel), "--patches-dir", str(PATCHES))
    assert code == 3 and text.count("download it again") == 1, text

