"""The README and the install guide do what they say: every command in their fenced blocks is run here,
or dry-run where it needs a serving machine, a GPU or an hour, so the docs and the tool cannot drift apart.

Each command line must match one of the rules below, or the test fails: a command added to the README
is a command this test must learn to run. `/srv/sglang/bin/python` is a fresh virtual environment,
`dist` a dist dir the README's own `make wheels` line fills (offline, from the warm cache), the
fleet's server a `python -m http.server` on the loopback address.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ROOT, cache_dir, fresh_venv, run_cli, write_wheel
from test_index import clean_env, http_server

from nvfp4_overlay.cli.parser import parser

README = ROOT / "README.md"
DOCS = (README, ROOT / "docs" / "install.md", ROOT / "docs" / "maintaining.md")  # in this order: the README's `make wheels` fills the dist dir
SERVING = "/srv/sglang/bin/python"
FLEET = "http://wheels.internal:8000/"


def blocks(text: str) -> list[list[str]]:
    """Every fenced block's command lines: all its lines, or where a block shows a session, its `$ ` lines."""
    found = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    out = []
    for body in found:
        lines = [line.strip() for line in body.splitlines() if line.strip()]
        prompts = [line[2:] for line in lines if line.startswith("$ ")]
        out.append(prompts or lines)
    return out


class World:
    """What the README's commands act on, made once: a serving venv, a dist dir, the fleet's server."""

    def __init__(self, tmp: Path, server: str) -> None:
        self.tmp, self.server = tmp, server
        self.dist = tmp / "dist"
        self.venv = tmp / "serving"
        self.python = fresh_venv(self.venv)

    def substitute(self, argv: list[str]) -> list[str]:
        table = {SERVING: self.python, "dist": str(self.dist), "dist/simple": str(self.dist / "simple"), FLEET: self.server}
        return [table.get(a, a) for a in argv]

    def with_stand_ins(self) -> None:
        """sglang and flashinfer-python stand-ins in the serving venv, for the README's version query."""
        stand_ins = self.tmp / "stand-ins"
        stand_ins.mkdir(exist_ok=True)
        wheels = [write_wheel(stand_ins, "sglang", "0.5.11", {"sglang/__init__.py": ""}),
                  write_wheel(stand_ins, "flashinfer-python", "0.6.8.post1", {"flashinfer/__init__.py": ""})]
        subprocess.run([self.python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", *map(str, wheels)],
                       check=True, env=clean_env())


# --- the rules: (what a line looks like, how it is run) ------------------------------------------


def make_line(world: World, argv: list[str]) -> str:
    """`make TARGET [VAR=...]`: make's own dry run names the recipe; wheels and index run their recipe here."""
    # make's own environment left out: under `make test ARGS=...` make exports ARGS (and MAKEFLAGS
    # carries it), and the README's line would be dry-run with the test run's arguments
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "ARGS", "STACK")}
    done = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), *argv[1:]], capture_output=True,
                          text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    recipe = shlex.split(done.stdout.strip().splitlines()[-1])
    target = argv[1]
    if target in ("wheels", "index"):
        assert recipe[1] == "build_wheels.py", recipe
        extra = ["--offline", "--cache-dir", str(cache_dir())] if target == "wheels" else []
        code, out, err = run_cli(*recipe[2:], "--dist-dir", str(world.dist), *extra)
        assert code == 0, err
        return out
    assert target in ("test", "test-fast") and recipe[1:3] == ["-m", "pytest"], recipe  # not run from inside itself
    return ""


def cli_line(world: World, argv: list[str]) -> str:
    """`python build_wheels.py ...` / `nvfp4-overlay ...`: parsed; run where it is quick and local."""
    args = world.substitute(argv[2:] if argv[0] == "python" else argv[1:])
    parsed = parser().parse_args(args)  # every README command is valid as written
    command = parsed.command
    if command in ("drift", "refresh") or getattr(parsed, "run", False):
        return ""  # minutes to hours, or a real install of torch into the venv: test_drift, test_install
    if command in ("build", "install", "index", "list") and "--dist-dir" not in args:
        args += ["--dist-dir", str(world.dist)]
    if command == "build":
        args += ["--offline", "--cache-dir", str(cache_dir())]
    code, out, err = run_cli(*args)
    expected = 1 if command == "doctor" else 0  # no patched stack there: doctor says what is wrong, and the fix
    assert code == expected, (args, err)
    if command == "doctor":
        assert out.startswith(f"python            {world.python} ") and "\nproblem: " in out
    return out


def piped_pip_line(world: World, argv: list[str]) -> str:
    """`printf '%s\\n' 'REQ --hash=sha256:D' | .../pip install ... -r /dev/stdin`: the hashed pin on pip's stdin."""
    assert argv[:2] == ["printf", "%s\\n"] and argv[3] == "|" and argv[-2:] == ["-r", "/dev/stdin"], argv
    return pip_line(world, argv[4:], stdin=argv[2] + "\n")


def pip_line(world: World, argv: list[str], stdin: str | None = None) -> str:
    """pip in the serving venv: the patched steps dry-run against the dist dir or the fleet's server."""
    args = world.substitute(argv)
    head = args.index("pip") + 1 if "pip" in args else args.index("-m") + 2
    verb, rest = args[head], args[head + 1:]
    command = [world.python, "-m", "pip", verb]
    if verb == "check":
        done = subprocess.run(command, capture_output=True, text=True, env=clean_env())
    else:
        assert verb == "install", args
        # The upstream step resolves ~196 distributions (test_install resolves it); here only its pins are looked up.
        extra = [] if "--no-deps" in rest else ["--no-deps"]
        done = subprocess.run([*command, "--dry-run", *extra, *rest], input=stdin, capture_output=True, text=True,
                              timeout=600)
    assert done.returncode == 0, (args, done.stderr[-2000:])
    return done.stdout


def python_line(world: World, argv: list[str]) -> str:
    """`/srv/sglang/bin/python -c ...`: run in the serving venv, with stand-ins of what it asks about."""
    world.with_stand_ins()
    done = subprocess.run(world.substitute(argv), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0.5.11", "0.6.8.post1"]
    return done.stdout


def server_line(world: World, argv: list[str]) -> str:
    """`python -m http.server ... --directory dist/simple`: the fleet's server, started for the block (see world)."""
    assert argv[:3] == ["python", "-m", "http.server"] and argv[-2:] == ["--directory", "dist/simple"], argv
    return ""


RULES = [
    (lambda a: a[0] == "make", make_line),
    (lambda a: a[:2] == ["python", "build_wheels.py"] or a[0] == "nvfp4-overlay", cli_line),
    (lambda a: a[:3] == ["python", "-m", "http.server"], server_line),
    (lambda a: a[0] == "printf" and "|" in a, piped_pip_line),
    (lambda a: a[0] == "pip" or a[1:3] == ["-m", "pip"], pip_line),
    (lambda a: a[0] == SERVING and a[1] == "-c", python_line),
]


def commands() -> Iterator[tuple[int, list[str]]]:
    for number, block in enumerate(b for doc in DOCS for b in blocks(doc.read_text())):
        for line in block:
            argv = shlex.split(line, comments=True)
            if argv:
                yield number, argv


def test_every_readme_command_has_a_rule() -> None:
    unknown = [shlex.join(a) for _, a in commands() if not any(match(a) for match, _ in RULES)]
    assert unknown == []
    assert len(list(commands())) >= 15  # the docs' commands were found at all
    assert any(a[:2] == ["make", "wheels"] for _, a in commands())


@pytest.mark.upstream
def test_the_readme_top_to_bottom(tmp_path: Path) -> None:
    """In README order, so `make wheels` fills the dist dir that the install and index lines then use."""
    (tmp_path / "dist").mkdir()
    with http_server(tmp_path / "dist") as base:  # serves dist/; the index lands in dist/simple
        world = World(tmp_path, f"{base}/simple/")
        printed = {}
        for number, argv in commands():
            handler = next(h for match, h in RULES if match(argv))
            printed[number, shlex.join(argv)] = handler(world, argv)
    # The lines the README says `install` prints for the default stack are what it prints.
    shown = next(block for block in blocks(README.read_text()) if any(line.startswith(SERVING + " -m pip install")
                                                                      for line in block))
    out = next(text for (_, line), text in printed.items()
               if line == f"python build_wheels.py install --python {SERVING}")
    check, *lines = [line.replace(world.python, SERVING).replace(str(world.dist), "dist")
                     for line in out.splitlines() if not line.startswith("#")]
    assert lines == shown
    assert check.startswith(f"{sys.executable} -m nvfp4_overlay.cli verify ")  # said in prose: this Python's path
