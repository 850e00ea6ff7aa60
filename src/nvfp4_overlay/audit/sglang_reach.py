"""Which SGLang regions no torch.compile(fullgraph=True) region reaches, per release (patches/sglang/region-reach.toml).

The region probe traces each region with fullgraph=True whether or not SGLang compiles it there: what
it finds is a fact about tracing (audit-regions.json keeps it). A region that no compiled region of
the release reaches (code that runs inside one of SGLang's own custom ops, code nothing calls, a
release with no fullgraph compile) breaks no server, so what remains raw in it is not counted as
remaining (sglang_audit.stack_remaining). Each entry is a reading of the release's files; its
``evidence`` names what every release of its range holds (``has``), lacks (``lacks``) or where a text
alone occurs under sglang/srt (``only_in``), and the tests check it in the pinned wheels, so a
release whose code moves fails until the entry is read anew. Pure, but for reading the files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from ..errors import ConfigError
from ..formats import read_toml
from ..wheel import WheelReader

REACH = "region-reach.toml"
EVERY_REGION = "*"
SOURCES = "sglang/srt/"  # where only_in looks: SGLang's runtime, not its tests or benchmarks


@dataclass(frozen=True)
class Evidence:
    """One fact of the release's files: a file has or lacks a text, or a text occurs only in some files."""

    text: str
    file: str = ""
    lacks: bool = False
    only_in: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unreached:
    """Regions (or every region, "*") that no compiled region reaches in the releases of a specifier."""

    regions: tuple[str, ...]
    releases: SpecifierSet
    why: str
    evidence: tuple[Evidence, ...]

    def covers(self, release: str, region: str) -> bool:
        return (region in self.regions or EVERY_REGION in self.regions) and \
            self.releases.contains(Version(release), prereleases=True)


def load_reach(patches_dir: Path) -> tuple[Unreached, ...]:
    """patches/sglang/region-reach.toml, every problem collected before raising (none there: no entries)."""
    path = patches_dir / "sglang" / REACH
    if not path.is_file():
        return ()
    data = read_toml(path)
    entries, problems = [], []
    for i, table in enumerate(data.get("unreached", []), start=1):
        try:
            entries.append(_entry(table))
        except (KeyError, TypeError, ValueError, InvalidSpecifier) as exc:
            problems.append(f"[[unreached]] #{i}: {exc}")
    if problems:
        msg = (f"{path}:\n  " + "\n  ".join(problems) + "\nEach entry needs regions = [...], releases (a PEP 440 "
               "specifier), why, and evidence = [{file, has | lacks} | {text, only_in}]")
        raise ConfigError(msg, path=path, item=problems[0], fix="write each [[unreached]] entry in full")
    return tuple(entries)


def _entry(table: Mapping[str, object]) -> Unreached:
    regions, why, evidence = table["regions"], table["why"], table["evidence"]
    if not isinstance(regions, list) or not regions or not all(isinstance(r, str) for r in regions):
        raise ValueError("regions must be a non-empty list of region names (or [\"*\"])")
    if not isinstance(why, str) or not why or not isinstance(evidence, list) or not evidence:
        raise ValueError("why must say why, and evidence must name at least one fact of the files")
    return Unreached(tuple(regions), SpecifierSet(str(table["releases"])), why, tuple(_evidence(e) for e in evidence))


def _evidence(table: object) -> Evidence:
    if not isinstance(table, dict):
        raise TypeError(f"evidence {table!r} is not a table")
    if "only_in" in table:
        return Evidence(str(table["text"]), only_in=tuple(str(f) for f in table["only_in"]))
    kind = "has" if "has" in table else "lacks"
    return Evidence(str(table[kind]), file=str(table["file"]), lacks=kind == "lacks")


def unreached(entries: Sequence[Unreached], release: str, region: str) -> Unreached | None:
    """The entry that says no compiled region of this release reaches the region, if one does."""
    return next((e for e in entries if e.covers(release, region)), None)


def evidence_problems(entry: Unreached, sources: Mapping[str, str]) -> list[str]:
    """Where a release's sources (path -> text, as release_sources reads them) disagree with the entry."""
    problems = []
    for fact in entry.evidence:
        if fact.only_in:
            where = sorted(p for p, text in sources.items() if p.startswith(SOURCES) and fact.text in text)
            if not set(where) <= set(fact.only_in):
                problems.append(f"{fact.text!r} occurs outside {list(fact.only_in)}: in {where}")
        elif fact.file not in sources:
            problems.append(f"{fact.file} is not in the release")
        elif (fact.text in sources[fact.file]) == fact.lacks:
            problems.append(f"{fact.file} {'holds' if fact.lacks else 'lacks'} {fact.text!r}")
    return problems


def release_sources(wheel: Path) -> dict[str, str]:
    """Every .py file of an SGLang wheel: path in the wheel -> text."""
    with WheelReader(wheel) as reader:
        return {name: reader.read(name).decode("utf-8", "replace") for name in reader.infos if name.endswith(".py")}
