"""The command line's arguments and help, written for the people who run it."""

from __future__ import annotations

import argparse

from .. import __version__

DESCRIPTION = """\
Patched FlashInfer and SGLang wheels whose NVFP4 path survives torch.compile(fullgraph=True) and
SGLang's piecewise CUDA graphs. A stack is an SGLang release and the flashinfer-python release it
pins; `list` shows them. Each command's --help has examples."""

EPILOG = """\
examples:
  nvfp4-overlay list                                  the stacks, and which are built
  nvfp4-overlay build                                 the default stack's wheels into dist/
  nvfp4-overlay build --stack sglang-0.5.19           another stack
  nvfp4-overlay doctor                                is this environment patched, does FP4 trace?
  nvfp4-overlay drift --against all                   do the series still apply to newer releases?
  nvfp4-overlay refresh flashinfer-python 0.7.2 0.7.4 port a series to a new release

exit status: 0 done; 1 needs a person (a patch did not apply, drift, an unpatched install);
2 bad arguments, configuration, environment or paths; 3 integrity (hash mismatch, unsafe archive)"""

COMMANDS: dict[str, tuple[str, str]] = {  # name -> (one line, examples)
    "build": (
        "patched wheels of a stack (the default one if none is named), or of DIST==VERSION targets",
        "  nvfp4-overlay build\n"
        "  nvfp4-overlay build --stack sglang-0.5.11 --python-version 3.12 --platform manylinux_2_34_aarch64\n"
        "  nvfp4-overlay build flashinfer-python==0.6.18\n"
        "  nvfp4-overlay build --stack all --all-platforms\n"
        "It prints the pip commands that install what it built.",
    ),
    "verify": ("check built wheels: every RECORD hash, and the provenance against the series it names",
               "  nvfp4-overlay verify dist/*.whl"),
    "list": ("the stacks (sorted by release), the series and their revisions, and which are built",
             "  nvfp4-overlay list\n  nvfp4-overlay list --json"),
    "drift": (
        "apply every series to other upstream releases and say, hunk by hunk, what each needs",
        "  nvfp4-overlay drift                         every series against the newest release\n"
        "  nvfp4-overlay drift --against pinned        each series against its own release (CI gate)\n"
        "  nvfp4-overlay drift --against all --markdown drift.md\n"
        "  nvfp4-overlay drift --dist flashinfer-python --against 0.7.4\n"
        "  nvfp4-overlay drift --against latest --check  the newest release: applies, and works?",
    ),
    "refresh": (
        "port a series to another release: exact, offset or three-way merged hunks, checked by behaviour "
        "against upstream before it is written",
        "  nvfp4-overlay refresh flashinfer-python 0.7.2 0.7.4\n"
        "  nvfp4-overlay refresh sglang 0.5.10.post1 0.5.11 --drop-upstream\n"
        "  nvfp4-overlay refresh flashinfer-python 0.7.4 0.7.5 --dry-run\n"
        "It needs torch in this interpreter (make test's .venv has it): the checks run the trace ladder.",
    ),
    "doctor": (
        "what this Python environment has installed, patched or not, and whether the FP4 path traces",
        "  /srv/sglang/bin/nvfp4-overlay doctor\n  nvfp4-overlay doctor --json --no-trace\n"
        "exit 0: patched and intact; 1: unpatched, or the trace check failed; 3: an installed file differs "
        "from its RECORD",
    ),
    "index": ("a static PEP 503/691 index of the dist dir, for a fleet",
              "  nvfp4-overlay index\n  nvfp4-overlay index --output /srv/wheels/simple"),
    "propose": ("port each upstream release newer than the carried ones, check it, and open a pull request "
                "(or, refused, an issue) with the report",
                "  nvfp4-overlay propose --dry-run            print what it would open\n"
                "  GITHUB_TOKEN=... nvfp4-overlay propose --repo OWNER/NAME\n"
                "The refresh workflow runs it weekly; exit 1 when a release needs a person (an issue)."),
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="nvfp4-overlay", description=DESCRIPTION, epilog=EPILOG,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str) -> argparse.ArgumentParser:
        summary, examples = COMMANDS[name]
        return sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                              epilog="examples:\n" + examples, formatter_class=argparse.RawDescriptionHelpFormatter)

    p = command("build")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="DIST==VERSION, e.g. flashinfer-python==0.6.18 (default: the stack's releases)")
    p.add_argument("--stack", help="a stack from 'list', or 'all' (default: the default stack)")
    p.add_argument("--fuzz", type=int, default=0, help="allow up to N lines of fuzz (default 0: exact context)")
    _common(p)

    p = command("verify")
    p.add_argument("wheels", nargs="+", metavar="WHEEL", help="a wheel that build wrote")
    _common(p)

    _common(command("list"))

    p = command("drift")
    p.add_argument("--against", nargs="+", default=["latest"], metavar="pinned|latest|all|VERSION",
                   help="the releases to check each series on (default: latest)")
    p.add_argument("--dist", help="only this distribution's series")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown")
    p.add_argument("--check", action="store_true",
                   help="for each release newer than a distribution's newest series, port that series there "
                        "(a refresh that writes nothing) and check it by behaviour: does it work, not only apply")
    _common(p)

    p = command("refresh")
    p.add_argument("dist", metavar="DIST", help="flashinfer-python or sglang")
    p.add_argument("from_version", metavar="FROM_VERSION", help="a release that has a series")
    p.add_argument("to_version", metavar="TO_VERSION", help="the release to port it to")
    p.add_argument("--drop-upstream", action="store_true", help="drop hunks upstream already has, and say so")
    p.add_argument("--dry-run", action="store_true", help="port, build and check, but write nothing")
    _common(p)

    p = command("doctor")
    p.add_argument("--no-trace", action="store_true", help="skip the live torch.compile(fullgraph=True) check")
    p.add_argument("--trace-timeout", type=float, default=300, metavar="SECONDS",
                   help="give the trace check this long before calling it hung (default 300)")
    _common(p)

    p = command("index")
    p.add_argument("--output", metavar="DIR", help="where the index goes (default: DIST_DIR/simple)")
    _common(p)

    p = command("propose")
    p.add_argument("--repo", metavar="OWNER/NAME", help="the repository (default: $GITHUB_REPOSITORY)")
    p.add_argument("--base", metavar="BRANCH", help="the pull requests' base (default: the default branch)")
    p.add_argument("--dry-run", action="store_true", help="port and check, print the proposals, open nothing")
    _common(p)
    return top


def _common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("inputs and outputs")
    group.add_argument("--patches-dir", help="the series (default: ./patches, else the installed copy)")
    group.add_argument("--overlay-dir", help="whole files to add (default: ./overlay, else the installed copy)")
    group.add_argument("--dist-dir", default="dist", help="where patched wheels go (default: dist)")
    group.add_argument("--cache-dir", help="upstream wheel cache (default: $NVFP4_OVERLAY_CACHE or ~/.cache/nvfp4-overlay)")
    group.add_argument("--wheelhouse", help="take upstream wheels from this folder only (no network)")
    group.add_argument("--offline", action="store_true", help="never run pip; use the wheelhouse and cache only")
    group.add_argument("--json", action="store_true", help="one JSON document on stdout (errors too); logs on stderr")
    group.add_argument("--quiet", action="store_true", help="no progress on stderr")
    group.add_argument("--all-platforms", action="store_true", help="every pinned wheel, not only this platform's")
    group.add_argument("--python-version", help="build the wheel for this Python (X.Y), as pip takes it")
    group.add_argument("--platform", action="append", help="build the wheel for this platform tag (repeatable)")
