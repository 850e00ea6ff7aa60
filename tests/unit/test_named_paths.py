"""Every path of this repository that the documents name exists: README.md, docs/*.md and every module's docstring.

What is checked is what a reader would open: a path from a top-level folder (`tests/unit/test_cli.py`,
`patches/stacks.toml`), a path inside the package from its wing (`operate/verify.py`, `oracle/sglang_layer`),
a module by its dotted name (`nvfp4_overlay.probes.doctor.doctor_files`, `oracle.grid_for`), the bare files
listed after a path in one backticked list (`cli/build.py`, `listing.py`: both in cli/, or in the package's
base), and a Markdown link. A file moved or renamed without its mentions fails here, naming the document.
Bare words, user paths (`.venv/`, `dist/`, `~/.cache`) and upstream's own paths (`flashinfer/...`) are not
read as repository paths; placeholders (`patches/<dist>/`, `patches/DIST/TO`, `patches/.../`) are skipped.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "src" / "nvfp4_overlay"
TOPS = ("src", "tests", "docs", "patches", "overlay", "bench", "proofs", ".ci", ".github")
WINGS = tuple(sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()))
TOKEN = re.compile(r"(?<![\w./<>{}*~-])[\w./<>{}*-]+")
DOTTED = re.compile(r"(?:nvfp4_overlay\.)?((?:" + "|".join(WINGS) + r")(?:\.\w+)+)")
LINK = re.compile(r"\]\(([^)#\s]+)")
CHAIN = re.compile(r"`([\w./-]+/)[\w.-]+\.py`((?:,\s*(?:and\s+)?`[\w.-]+\.py`)+)")
SUFFIXES = ("py", "md", "toml", "json", "txt")
# Paths of another repository that a document names as such: (document, prefix) -> whose.
ELSEWHERE = {
    ("docs/proof.md", "tests/utils/"): "FlashInfer's own test suite, run against the patched wheel",
    ("docs/proof.md", "tests/attention/"): "FlashInfer's own test suite, run against the patched wheel",
}


def documents() -> Iterator[tuple[str, str]]:
    """(repo-relative name, text) of README.md, docs/*.md and every module docstring of the repo's Python."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        yield path.relative_to(ROOT).as_posix(), path.read_text()
    for folder in ("src", "tests", "bench", "proofs", "overlay"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            doc = ast.get_docstring(ast.parse(path.read_text()))
            if doc:
                yield path.relative_to(ROOT).as_posix(), doc
    yield "build_wheels.py", (ROOT / "build_wheels.py").read_text()  # the door: its comments too


def _placeholder(token: str) -> bool:
    segments = token.strip("/").split("/")
    return any(c in token for c in "<>{}") or "..." in token or any(s.isupper() and s.isalpha() for s in segments)


def _defines(module: Path, name: str) -> bool:
    if not module.is_file():
        return False
    return re.search(rf"^(?:def|class)\s+{name}\b|^{name}\b\s*[:=]|^(?:from\s+\S+\s+)?import\b.*\b{name}\b",
                     module.read_text(), re.M) is not None


def module_exists(dotted: str) -> bool:
    """`probes.doctor.doctor_files`, `oracle.grid_for` (the oracle wing's oracle.py): a module or package of
    the package, or a name its last module defines."""
    here = PACKAGE
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if (here / part).is_dir() or (here / f"{part}.py").is_file():
            here = here / part if (here / part).is_dir() else here / f"{part}.py"
            continue
        last = i == len(parts) - 1
        modules = [here] if here.is_file() else [here / "__init__.py", here / f"{here.name}.py"]
        return last and any(_defines(m, part) for m in modules)
    return True


def path_exists(token: str) -> bool | None:
    """Whether a repository path the token names exists; None when the token names none."""
    if "/" in token and token.split("/")[0] in TOPS:
        if "*" in token:
            return any(ROOT.glob(token.rstrip("/")))
        return (ROOT / token).exists()
    if "/" in token and token.split("/")[0] in WINGS:
        return (PACKAGE / token).exists() or (PACKAGE / f"{token}.py").exists()
    if token.startswith("nvfp4_overlay/"):
        return (ROOT / "src" / token).exists()
    named = DOTTED.fullmatch(token)
    if named and token.rsplit(".", 1)[1] not in SUFFIXES:
        return module_exists(named.group(1))
    return None


def missing_in(name: str, text: str) -> list[str]:
    """The repository paths `text` (document `name`) names that do not exist."""
    gone = []
    for raw in TOKEN.findall(text):
        token = raw.rstrip(".,;:")
        if _placeholder(token) or any(name == doc and token.startswith(p) for doc, p in ELSEWHERE):
            continue
        if path_exists(token) is False:
            gone.append(token)
    for chain in CHAIN.finditer(text.replace("\n", " ")):
        folder = chain.group(1)
        base = PACKAGE / folder if folder.split("/")[0] in WINGS else ROOT / folder
        gone += [f"{folder}{bare}" for bare in re.findall(r"`([\w.-]+\.py)`", chain.group(2))
                 if not (base / bare).exists() and not (PACKAGE / bare).exists()]
    if name.endswith(".md"):
        here = (ROOT / name).parent
        gone += [f"link {t}" for t in LINK.findall(text) if "://" not in t and not (here / t).exists()]
    return gone


def test_every_repository_path_a_document_names_exists() -> None:
    gone = {name: found for name, text in documents() if (found := missing_in(name, text))}
    assert gone == {}, "named but not in the repository (move the mention with the file): " + repr(gone)


def test_the_reader_sees_a_missing_path_of_each_kind() -> None:
    """The check itself: each form of mention, pointing at nothing, is reported (and the real ones are not)."""
    text = ("`tests/test_door.py`, `cli/serve.py`, `probes.doctor_files`, `nvfp4_overlay.oracle.no_such`, "
            "`probes/jit_plan`; (`cli/build.py`, `listing.py`, `serve.py`) [x](nowhere.md) "
            "`tests/unit/test_cli.py`, `oracle.grid_for`, `oracle/sglang_layer`, `patches/<dist>/x`, "
            "`patches/DIST/TO`, `.venv/bin/python`, `flashinfer/fp4_quantization.py`, (`wheel/recipe.py`, `records.py`)")
    assert missing_in("docs/x.md", text) == ["tests/test_door.py", "cli/serve.py", "probes.doctor_files",
                                             "nvfp4_overlay.oracle.no_such", "probes/jit_plan", "cli/serve.py",
                                             "link nowhere.md"]
