"""The command line's arguments and help, written for the people who run it; nothing here imports the commands.

Each command takes only the options it uses, and no option is ever matched by an abbreviation
(`allow_abbrev=False`: `--python` is not `--python-version`). A bad argument raises UsageError,
which the CLI reports like any other error: exit 2, and under --json a JSON document on stdout.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, NoReturn

from .. import __version__
from ..errors import UsageError
from .generators import GENERATORS

DAY = 86400  # the longest --trace-timeout
LAUNCH_GPUS = ("sm90", "sm100", "sm120", "sm121")  # doctor --gpu: the families audit/sglang_launch.py fakes
PROG = "nvfp4-overlay"  # the installed command; from a clone `python build_wheels.py` (cli.main's prog)

DESCRIPTION = """\
Patched FlashInfer and SGLang wheels whose NVFP4 path survives torch.compile(fullgraph=True) and
SGLang's piecewise CUDA graphs. A stack is an SGLang release and the flashinfer-python release it
pins; `list` shows them. Each command's --help has examples."""

EPILOG = """\
examples:
  nvfp4-overlay list                                  the stacks, and which are built
  nvfp4-overlay build                                 the default stack's wheels into dist/
  nvfp4-overlay build --stack sglang-0.5.19           another stack
  nvfp4-overlay install --python /srv/sglang/bin/python   the commands that install it there
  nvfp4-overlay doctor --python /srv/sglang/bin/python    is that environment patched, does FP4 trace?
  nvfp4-overlay drift --against all                   do the series still apply to newer releases?
  nvfp4-overlay refresh flashinfer-python 0.7.2 0.7.4 port a series to a new release

exit status: 0 done; 1 needs a person (a patch did not apply, drift, an unpatched install);
2 bad arguments, configuration, environment or paths (a full or read-only disk too); 3 integrity (hash
mismatch, unsafe archive, a wheel or install that is not what the build makes); 4 cannot be verified
here (the pinned upstream wheel it is made from cannot be had); 130 interrupted (Ctrl-C)"""

# name -> (module under cli/ that runs it, one line, examples)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "build": ("build", "patched wheels of a stack (the default one if none is named), or of DIST==VERSION targets",
              "  nvfp4-overlay build\n"
              "  nvfp4-overlay build --stack sglang-0.5.11 --python-version 3.12 --platform manylinux_2_34_aarch64\n"
              "  nvfp4-overlay build flashinfer-python==0.6.18\n"
              "  nvfp4-overlay build --stack all --all-platforms\n"
              "It prints the commands that install what it built."),
    "verify": ("build", "check built wheels: every member explained by upstream's RECORD, the series or the overlay, "
               "its RECORD and SHA256SUMS, and the provenance against the series it names",
               "  nvfp4-overlay verify dist/*.whl\n"
               "  nvfp4-overlay verify --offline --wheelhouse /srv/upstream dist/*.whl\n"
               "Every member is held to the build made again from the pinned upstream wheel (the wheelhouse, the cache, "
               "else pip downloads it). exit 0: every member is what the build makes; 2: not a wheel; 3: refused; "
               "4: cannot be verified here (that upstream wheel cannot be had: --offline, no index)"),
    "list": ("listing", "the stacks (sorted by release), the series and their revisions, and which are built",
             "  nvfp4-overlay list\n  nvfp4-overlay list --json"),
    "install": ("operate", "the commands that install a stack into a serving environment: its upstream "
                "dependencies from your index, then the patched wheels (printed, or run with --run)",
                "  nvfp4-overlay install                                  the default stack, with pip\n"
                "  nvfp4-overlay install --stack sglang-0.5.19 --uv\n"
                "  nvfp4-overlay install --python /srv/sglang/bin/python --run\n"
                "  nvfp4-overlay install --fleet-index https://wheels.example/simple --python /srv/sglang/bin/python"),
    "rollback": ("operate", "the commands that put the exact upstream releases back in place of the patched builds "
                 "an environment has installed (its releases kept)",
                 "  nvfp4-overlay rollback --python /srv/sglang/bin/python\n"
                 "  nvfp4-overlay rollback --uv --python /srv/sglang/bin/python --run\n"
                 "  nvfp4-overlay rollback --stack sglang-0.5.19 --switch-release --python /srv/sglang/bin/python\n"
                 "A --stack the environment does not run is refused (exit 2) unless --switch-release says so."),
    "doctor": ("doctor", "what a Python environment has installed, patched or not, and whether the FP4 path traces",
               "  nvfp4-overlay doctor --python /srv/sglang/bin/python\n  nvfp4-overlay doctor --json --no-trace\n"
               "exit 0: patched, every installed file what this checkout's build makes, imports and traces; 1: "
               "unpatched, not importable, the trace check failed, or no answer within --trace-timeout; "
               "2: --python is no usable interpreter; 3: an installed file differs from its RECORD or from what the "
               "build makes, or is missing; 4: cannot be verified here (the pinned upstream wheel cannot be had)"),
    "index": ("operate", "a static PEP 503/691 index of the dist dir, for a fleet; any static file server serves it",
              "  nvfp4-overlay index\n  nvfp4-overlay index --output /srv/wheels/simple\n"
              "It publishes only wheels SHA256SUMS lists and verify passes: otherwise it writes nothing and names "
              "them (exit 3; 4 where one cannot be verified here)."),
    "jit-cache": ("jit", "prebuild the FlashInfer JIT modules a stack's NVFP4 serving path loads on a GPU family, "
                  "with the real nvcc, into a flashinfer_jit_cache wheel FlashInfer loads without building",
                  "  nvfp4-overlay jit-cache --gpu sm120                     the default stack, RTX PRO 6000 / RTX 50\n"
                  "  nvfp4-overlay jit-cache --stack sglang-0.5.11 --gpu sm100 --module fp4_kv_quant\n"
                  "  nvfp4-overlay jit-cache --gpu sm120 --plan              which modules, for which SGLang call site\n"
                  "  nvfp4-overlay jit-cache --gpu sm120 --all-routes        every routed entry point's modules\n"
                  "It needs the patched wheel in the dist dir (build), nvcc (CUDA_HOME) and torch in this interpreter; "
                  "an interrupted build resumes where it stopped."),
    "drift": ("commands", "apply every series to other upstream releases and say, hunk by hunk, what each needs",
              "  nvfp4-overlay drift                         every series against the newest release\n"
              "  nvfp4-overlay drift --against pinned        each series against its own release (CI gate)\n"
              "  nvfp4-overlay drift --against all --markdown drift.md\n"
              "  nvfp4-overlay drift --dist flashinfer-python --against 0.7.4\n"
              "  nvfp4-overlay drift --against latest --check  the newest release: applies, and works?"),
    "refresh": ("commands", "port a series to another release: exact, offset or three-way merged hunks, checked by "
                "behaviour against upstream before it is written",
                "  nvfp4-overlay refresh flashinfer-python 0.7.2 0.7.4\n"
                "  nvfp4-overlay refresh sglang 0.5.10.post1 0.5.11 --drop-upstream\n"
                "  nvfp4-overlay refresh flashinfer-python 0.7.4 0.7.5 --dry-run\n"
                "It needs torch in this interpreter (make test's .venv has it): the checks run the trace ladder."),
    "propose": ("commands", "port each upstream release newer than the carried ones, check it, and open a pull "
                "request (or, refused, an issue) with the report",
                "  nvfp4-overlay propose --dry-run            print what it would open\n"
                "  GITHUB_TOKEN=... nvfp4-overlay propose --repo OWNER/NAME\n"
                "The refresh workflow runs it weekly; exit 1 when a release needs a person (an issue)."),
    "generate": ("generate", "write a committed file with its generator (routes, audits, the documents' tables), "
                 "or with --check say whether the committed one is what it writes; --list names them",
                 "  nvfp4-overlay generate --list                     each generator, what it writes and reads\n"
                 "  nvfp4-overlay generate routes 0.7.4               patch 0002 of that release\n"
                 "  nvfp4-overlay generate cuda-docs --check          CI: exit 1 if a committed file differs\n"
                 "  nvfp4-overlay generate compile-list 0.7.4         torch: the compile-list probe\n"
                 "make check-generated runs every generator that has --check."),
    "routes": ("generate", "write patch 0002 (the route patch) of flashinfer-python releases from their own text: "
               "every entry point the overlay routes, placed by name (the same as 'generate routes')",
               "  nvfp4-overlay routes                  every carried release\n"
               "  nvfp4-overlay routes 0.7.4 0.7.2\n"
               "  nvfp4-overlay routes --check          CI: exit 1 if a committed patch differs"),
    "launch-table": ("generate", "render docs/patches.md's launch-line table and the README's release table from "
                     "patches/sglang/audit-launch.json (--resolve: write it anew from each SGLang release's own code; "
                     "the same as 'generate launch-table')",
                     "  nvfp4-overlay launch-table --check              CI: exit 1 if a document differs\n"
                     "  nvfp4-overlay launch-table --resolve 0.5.20     that release's matrix, resolved again (torch)\n"
                     "--resolve needs torch in this interpreter (make test's .venv) and the pinned wheels in the cache."),
    "audit-api": ("generate", "write the serving-API audit (patches/flashinfer-python/audit-serving-api.json) from "
                  "scans of every carried flashinfer-python release, and docs/serving-api.md's table from it (the same "
                  "as 'generate audit-api')",
                  "  nvfp4-overlay audit-api\n"
                  "  nvfp4-overlay audit-api --check       CI: exit 1 if the committed audit differs"),
}


class Parser(argparse.ArgumentParser):
    """argparse, with its errors raised as UsageError instead of printed and exited (the CLI reports them)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """A launch line given as the next word (`--sglang-args "--enable-torch-compile"`) is that option's value,
        as `--sglang-args=...` is: argparse would take a value that starts with '-' for an option."""
        words = list(sys.argv[1:] if args is None else args)
        for i, word in enumerate(words[:-1]):
            if word == "--sglang-args":
                words[i:i + 2] = [f"--sglang-args={words[i + 1]}"]
                break
        return super().parse_known_args(words, namespace)

    def error(self, message: str) -> NoReturn:
        msg = f"{self.prog}: {message}; see '{self.prog} --help'"
        # argparse names what it refused in one of these ways; the item is that, not the whole command
        named = re.match(r"argument ([^:]+):|the following arguments are required: (.+)|unrecognized arguments: (.+)",
                         message)
        item = next((g for g in named.groups() if g), self.prog) if named else self.prog
        raise UsageError(msg, item=item, found=message, fix=f"see '{self.prog} --help'")


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The arguments; `prog` is how the user runs the tool, and the examples say it so."""
    def spoken(text: str) -> str:
        return text.replace(f"{PROG} ", f"{prog} ")

    top = Parser(prog=prog, description=DESCRIPTION, epilog=spoken(EPILOG))
    top.add_argument("--version", action="version", version=f"{PROG} {__version__}")  # the product, however run
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str) -> argparse.ArgumentParser:
        _, summary, examples = COMMANDS[name]
        return sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                              epilog="examples:\n" + spoken(examples))

    p = command("build")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="DIST==VERSION, e.g. flashinfer-python==0.6.18 (default: the stack's releases)")
    p.add_argument("--stack", type=_name, help="a stack from 'list', or 'all' (default: the default stack)")
    p.add_argument("--fuzz", type=_count, default=0, metavar="N",
                   help="allow up to N lines of fuzz (default 0: exact context)")
    _data(p)
    _dist(p)
    _source(p)
    _output(p)

    p = command("verify")
    p.add_argument("wheels", nargs="+", metavar="WHEEL", help="a wheel that build wrote")
    _data(p)
    _upstream_lookup(p)
    _output(p)

    p = command("list")
    _data(p)  # the overlay says what the patched FlashInfer routes (what each SGLang stack leaves raw)
    _dist(p)
    _output(p)

    for name in ("install", "rollback"):
        p = command(name)
        p.add_argument("--stack", type=_name, help="a stack from 'list' (default: the default stack)" if name == "install"
                       else "a stack from 'list' (default: what the environment has installed)")
        p.add_argument("--python", metavar="PATH", help="the serving environment's Python (default: this one)")
        p.add_argument("--uv", action="store_true", help="uv pip commands instead of pip's")
        p.add_argument("--run", action="store_true", help="run the commands, stopping at the first that fails")
        if name == "install":
            p.add_argument("--fleet-index", type=_url, metavar="URL", help="take the patched wheels from this index "
                           "('nvfp4-overlay index' writes one) instead of the dist dir")
            p.add_argument("--gpu", choices=["sm90", "sm100", "sm120", "sm121"],
                           help="also install the prebuilt JIT modules for this GPU family ('nvfp4-overlay jit-cache')")
            _dist(p)
            _data(p)  # --run verifies the wheels against the series and overlay before it installs anything
            _upstream_lookup(p)
        else:
            p.add_argument("--switch-release", action="store_true",
                           help="with --stack: install that stack's upstream releases even where the environment "
                                "runs other releases (changes releases; may add a distribution)")
            _data(p, overlay=False)
        _output(p)

    p = command("doctor")
    p.add_argument("--python", metavar="PATH", help="examine this interpreter's environment (default: this one)")
    p.add_argument("--no-trace", action="store_true",
                   help="skip the live torch.compile(fullgraph=True) check (flashinfer is still imported)")
    p.add_argument("--trace-timeout", type=_seconds, default=300, metavar="SECONDS",
                   help="give doctor's probe this long to answer (default 300; a cold trace takes minutes)")
    p.add_argument("--sglang-args", metavar="ARGS", help="the SGLang server's launch arguments, quoted: whether "
                   "that SGLang (installed there, else the default stack's) compiles a fullgraph region for them, "
                   "asked of its own argument handling, and what stays raw in it")
    p.add_argument("--model-arch", metavar="NAME", help="with --sglang-args: the model's architecture "
                   "(config.json's architectures[0], e.g. GlmMoeDsaForCausalLM) where --model-path names no local "
                   "directory with a config.json")
    p.add_argument("--gpu", choices=sorted(LAUNCH_GPUS), help="with --sglang-args: the serving GPU's family "
                   "(default: the GPU doctor sees there, else sm120)")
    _data(p)  # the installed patched builds are held to what this checkout's series and overlay make
    _upstream_lookup(p)
    _output(p)

    p = command("index")
    p.add_argument("--output", metavar="DIR", help="where the index goes (default: DIST_DIR/simple)")
    p.add_argument("--url", type=_url, help="the address the fleet will reach it at, for the install lines it prints "
                   "(default: its file:// URL)")
    p.add_argument("--cubins", action="store_true", help="bring each built stack's flashinfer-cubin into the dist dir "
                   "first (pip, about 300 MB each; the cache is read first), so the fleet fetches no cubin at run time")
    p.add_argument("--offline", action="store_true", help="never run pip: with --cubins, say what is missing; a wheel "
                   "whose pinned upstream wheel is in neither the wheelhouse nor the cache cannot be verified (exit 4)")
    _dist(p)
    _data(p)  # every wheel is verified before the index publishes it
    _upstream_lookup(p, offline=False)
    _output(p)

    p = command("jit-cache")
    p.add_argument("--stack", help="a stack from 'list' (default: the default stack)")
    p.add_argument("--gpu", required=True, choices=["sm90", "sm100", "sm120", "sm121"], help="the GPU family")
    p.add_argument("--module", action="append", metavar="NAME",
                   help="build only this module of the plan (repeatable; default: every one)")
    p.add_argument("--all-routes", action="store_true",
                   help="plan the modules of every routed entry point (the superset), not only of those the "
                        "stack's SGLang calls")
    p.add_argument("--plan", action="store_true", help="plan only: which modules, loaded by which entry point, "
                   "needed at which SGLang call site; nothing is built")
    p.add_argument("--torch-cuda", metavar="X.Y",
                   help="the CUDA release of the serving torch (default: the toolkit's); FlashInfer picks "
                        "some modules by it")
    p.add_argument("--cache-dir", dest="build_cache", metavar="CACHE_DIR", help="where modules are built and kept between runs "
                   "(default: $NVFP4_OVERLAY_CACHE or ~/.cache/nvfp4-overlay)")
    _dist(p)
    _data(p, overlay=False)
    _output(p)

    p = command("drift")
    p.add_argument("--against", nargs="+", default=["latest"], metavar="pinned|latest|all|VERSION",
                   help="the releases to check each series on (default: latest)")
    p.add_argument("--dist", help="only this distribution's series")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown")
    p.add_argument("--check", action="store_true",
                   help="for each release newer than a distribution's newest series, port that series there "
                        "(a refresh that writes nothing) and check it by behaviour: does it work, not only apply")
    _data(p)
    _dist(p, used=False)
    _source(p)
    _output(p)

    p = command("refresh")
    p.add_argument("dist", metavar="DIST", help="flashinfer-python or sglang")
    p.add_argument("from_version", type=_version, metavar="FROM_VERSION", help="a release that has a series")
    p.add_argument("to_version", type=_version, metavar="TO_VERSION", help="the release to port it to")
    p.add_argument("--drop-upstream", action="store_true", help="drop hunks upstream already has, and say so")
    p.add_argument("--dry-run", action="store_true", help="port, build and check, but write nothing")
    p.add_argument("--quick", action="store_true",
                   help="the trace ladder's first case of each entry point on the patched wheel, as make test runs "
                        "it for a release no stack pins (default: every case); the CUDA grid whole either way")
    _data(p)
    _dist(p, used=False)
    _source(p)
    _output(p)

    p = command("propose")
    p.add_argument("--repo", metavar="OWNER/NAME", help="the repository (default: $GITHUB_REPOSITORY)")
    p.add_argument("--base", metavar="BRANCH", help="the pull requests' base (default: the default branch)")
    p.add_argument("--dry-run", action="store_true", help="port and check, print the proposals, open nothing")
    p.add_argument("--quick", action="store_true", help="refresh --quick for each port (default: every case)")
    _data(p)
    _source(p)
    _output(p)

    p = command("launch-table")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a document differs")
    p.add_argument("--resolve", nargs="*", metavar="RELEASE", default=None,
                   help="resolve the matrix again with these SGLang releases' own code (none named: every one)")
    _data(p, overlay=False)
    _source(p)
    _output(p)

    _generate(command("generate"), prog)

    for name in ("routes", "audit-api"):
        p = command(name)
        if name == "routes":
            p.add_argument("releases", nargs="*", metavar="RELEASE", help="a carried release (default: every one)")
        p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a committed file differs")
        _data(p)
        _source(p)
        _output(p)
    return top


def _generate(p: argparse.ArgumentParser, prog: str) -> None:
    """generate's own sub-commands, one a generator of cli/generators.py, each with only the options it takes."""
    p.add_argument("--list", action="store_true", help="name each generator, what it writes and reads, "
                   "whether it needs torch and has --check")
    _output(p)
    sub = p.add_subparsers(dest="generator", metavar="NAME", parser_class=Parser)
    for g in GENERATORS:
        one = sub.add_parser(g.name, help=g.summary, description=g.summary[0].upper() + g.summary[1:] + ".",
                             prog=f"{prog} generate {g.name}")
        if g.positional:
            one.add_argument("releases", nargs="*", metavar=g.positional,
                             help="limit it to these releases (default: every one)")
        if g.check:
            one.add_argument("--check", action="store_true", help="write nothing; exit 1 if a committed file differs")
        if g.name == "launch-table":
            one.add_argument("--resolve", nargs="*", metavar="RELEASE", default=None, help="resolve the matrix again "
                             "with these SGLang releases' own code (none named: every one; torch)")
        _data(one)
        if g.upstream or g.name == "launch-table":
            _source(one)
        _output(one, inner=True)


def _data(parser: argparse.ArgumentParser, *, overlay: bool = True) -> None:
    group = parser.add_argument_group("the project's data")
    group.add_argument("--patches-dir", help="the series (default: ./patches, else the installed copy)")
    if overlay:
        group.add_argument("--overlay-dir", help="whole files to add (default: ./overlay, else the installed copy)")


def _dist(parser: argparse.ArgumentParser, *, used: bool = True) -> None:
    helptext = "where patched wheels go (default: dist)" if used else "accepted with the build's options; unused here"
    parser.add_argument("--dist-dir", default="dist", help=helptext)


def _source(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("upstream wheels")
    group.add_argument("--cache-dir", help="upstream wheel cache (default: $NVFP4_OVERLAY_CACHE or ~/.cache/nvfp4-overlay)")
    group.add_argument("--wheelhouse", help="take upstream wheels from this folder only (no network)")
    group.add_argument("--offline", action="store_true", help="never run pip; use the wheelhouse and cache only")
    group.add_argument("--all-platforms", action="store_true", help="every pinned wheel, not only this platform's")
    group.add_argument("--python-version", type=_python_version, metavar="X.Y",
                       help="build the wheel for this Python (X.Y), as pip takes it")
    group.add_argument("--platform", type=_platform, action="append", help="build the wheel for this platform tag (repeatable)")


def _upstream_lookup(parser: argparse.ArgumentParser, *, offline: bool = True) -> None:
    """Where a command that checks built wheels or an install finds the pinned upstream wheels it holds them to:
    the wheelhouse, the cache, then pip (as build finds them), unless --offline."""
    group = parser.add_argument_group("the pinned upstream wheels (what a wheel is held to)")
    group.add_argument("--cache-dir", help="upstream wheel cache (default: $NVFP4_OVERLAY_CACHE or ~/.cache/nvfp4-overlay)")
    group.add_argument("--wheelhouse", help="take upstream wheels from this folder only (no network)")
    if offline:
        group.add_argument("--offline", action="store_true", help="never run pip; without the pinned upstream wheel in "
                           "the wheelhouse or the cache the answer is 'cannot be verified here' (exit 4)")
    parser.set_defaults(all_platforms=False, python_version=None, platform=None)


def _output(parser: argparse.ArgumentParser, *, inner: bool = False) -> None:
    """--json and --quiet; `inner`: a sub-command's, unset unless given, so that `generate --json NAME` keeps it."""
    unset = {"default": argparse.SUPPRESS} if inner else {}
    group = parser.add_argument_group("output")
    group.add_argument("--json", action="store_true", help="one JSON document on stdout (errors too); logs on stderr",
                       **unset)  # type: ignore[arg-type]
    group.add_argument("--quiet", action="store_true", help="no progress on stderr", **unset)  # type: ignore[arg-type]


# Option values, refused by argparse (exit 2, naming the option) before any work: ArgumentTypeError's
# message is what the user reads after "argument --OPTION: ".


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of lines (0 or more), e.g. 2")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= DAY:  # NaN too; past 24.8 days the wait's poll() overflows (milliseconds in a C int)
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0 and up to {DAY}, e.g. 600")
    return value


def _python_version(text: str) -> str:
    if not re.fullmatch(r"3\.\d{1,2}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Python version as X.Y, e.g. 3.12")
    return text


def _name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("empty; name one ('list' names them)")
    return text


def _url(text: str) -> str:
    """An index's address as pip takes it: http(s) or file, with somewhere to go."""
    scheme, _, rest = text.partition("://")
    if scheme not in ("http", "https", "file") or not rest.strip("/") or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an http://, https:// or file:// address, "
                                         f"e.g. https://wheels.example/simple")
    return text


def _platform(text: str) -> str:
    if not re.fullmatch(r"[a-z0-9_.]+", text):  # a wheel's platform tag (PEP 425): lower case, digits, _ and .
        raise argparse.ArgumentTypeError(f"{text!r} is not a platform tag, e.g. manylinux_2_34_x86_64")
    return text


def _version(text: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        Version(text)
    except InvalidVersion:
        raise argparse.ArgumentTypeError(f"{text!r} is not a release version (PEP 440), e.g. 0.7.4") from None
    return text
