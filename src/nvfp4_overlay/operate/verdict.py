"""The verdict on one wheel (ok, refused, cannot be verified here, taken on trust) and the checks every verifier shares.

A verifier (patched_verify.py, jit_verify.py, cubins.verify_mirror) fills one Verdict: its problems
refuse the wheel (exit 3), `unverified` says why what vouches for it cannot be had here (4), `trusted`
names the members taken on their builder's word (5); a refusal outranks the rest, and `ok` (0) is what
is left. Two checks are the same for every wheel this tool builds: its RECORD against its members
(check_record) and its line in the SHA256SUMS of its folder (check_sums), whose caller says whether a
wheel that list does not name is refused everywhere or only beside a list (Sums).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from .. import records
from ..errors import Exit
from ..files import SHA256SUMS, read_sums, sha256_file
from ..wheel import WheelReader, parse_record


@dataclass(frozen=True)
class MemberProblem:
    """A member the build does not explain: what it is, what it should be, what it is, and the fix."""

    member: str
    kind: str  # overlay | patched | upstream | provenance | unexplained | missing
    expected: str
    found: str
    fix: str

    def __str__(self) -> str:
        return f"{self.member} ({_KINDS[self.kind]}): should be {self.expected}, is {self.found}; {self.fix}"

    def data(self) -> dict[str, str]:
        return {"member": self.member, "kind": self.kind, "expected": self.expected, "found": self.found, "fix": self.fix}


_KINDS = {
    "overlay": "an overlay file",
    "patched": "a file the series or the relabelling rewrites",
    "upstream": "upstream's, unchanged by the series",
    "provenance": "the provenance the build writes",
    "unexplained": "neither upstream's, nor the series', nor the overlay's",
    "missing": "missing from the wheel",
}


@dataclass
class Verdict:
    """ok only when every member equals the build made again (checked_against "upstream"); `unverified` says
    why that could not be done here, where nothing else refuses the wheel."""

    wheel: Path
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provenance: dict[str, Any] | None = None
    members: list[MemberProblem] = field(default_factory=list)
    checked_against: str | None = None  # "upstream": the plan made again from the pinned upstream wheel; "pin"
    unverified: str | None = None  # "cannot be verified here: ..." (exit 4)
    trusted: list[str] = field(default_factory=list)  # members taken on their builder's word, each with why (exit 5)

    @property
    def ok(self) -> bool:
        return not self.problems and self.unverified is None and not self.trusted

    @property
    def exit_code(self) -> Exit:
        """3 refused, 4 cannot be verified here, 5 taken on trust (a JIT module not built again here), 0 ok: a
        refusal outranks the rest."""
        if self.problems:
            return Exit.INTEGRITY
        if self.unverified:
            return Exit.UNVERIFIED
        return Exit.TAKEN_ON_TRUST if self.trusted else Exit.OK

    @property
    def state(self) -> str:
        return {Exit.INTEGRITY: "refused", Exit.UNVERIFIED: "unverified", Exit.TAKEN_ON_TRUST: "taken on trust",
                Exit.OK: "ok"}[self.exit_code]

    def refuse(self, problem: MemberProblem) -> None:
        self.members.append(problem)
        self.problems.append(str(problem))

    def data(self) -> dict[str, Any]:
        return {"wheel": str(self.wheel), "ok": self.ok, "verdict": self.state, "exit_code": int(self.exit_code),
                "unverified": self.unverified, "problems": self.problems, "taken_on_trust": self.trusted, "notes": self.notes,
                "members": [m.data() for m in self.members], "checked_against": self.checked_against}


def worst(verdicts: list[Verdict]) -> Exit:
    """The exit status of a run over several wheels: any refusal (3), else any that cannot be verified (4), else any
    taken on trust (5), else 0."""
    codes = {v.exit_code for v in verdicts}
    return next((c for c in (Exit.INTEGRITY, Exit.UNVERIFIED, Exit.TAKEN_ON_TRUST) if c in codes), Exit.OK)


# --- what every wheel this tool builds is held to --------------------------------------------------


def check_record(reader: WheelReader, dist_info: str,
                 verdict: Verdict) -> tuple[dict[str, tuple[str, str, str]], dict[str, str]]:
    """RECORD's rows, and each member's own digest (as RECORD writes it); every disagreement a problem."""
    record_name = f"{dist_info}/RECORD"
    if record_name not in reader.infos:
        verdict.problems.append(f"{record_name} is missing")
        return {}, {}
    parsed = parse_record(reader.read(record_name), f"{reader.path}: {record_name}")
    rows = {n: (r.path, r.hash, r.size) for n, r in parsed.items() if n != record_name}
    digests: dict[str, str] = {}
    for name in reader.names:
        if name == record_name:
            continue
        data = reader.read(name)
        digests[name] = records.hash_of(data)
        row = parsed.pop(name, None)
        if row is None:
            verdict.problems.append(f"{name} is in the archive but not in RECORD")
        elif not row.matches(data):
            verdict.problems.append(f"{name}: RECORD says {row.hash} ({row.size} bytes), the file is {digests[name]} ({len(data)} bytes)")
    parsed.pop(record_name, None)
    verdict.problems += [f"{name} is in RECORD but not in the archive" for name in sorted(parsed)]
    return rows, digests


class Sums(Enum):
    """What a wheel the SHA256SUMS of its folder does not list means; each caller of verify says which.

    The build and jit-cache list every wheel they write in the dist dir's SHA256SUMS, so a wheel of a
    dist dir that the list does not name was not written there by them. `index` and `install --run`
    publish and install a dist dir's wheels: one the list does not name (or a dist dir without the
    list) is refused (REQUIRED). `verify` is also handed a wheel copied out alone (downloaded from a
    fleet index, say): it is held to what vouches for its members, and to the list only where one is
    beside it (BESIDE). A patched wheel and a JIT cache wheel are judged alike: both are this tool's
    builds, listed by what wrote them."""

    REQUIRED = "required"
    BESIDE = "where one is beside it"


def check_sums(path: Path, verdict: Verdict, sums: Sums) -> None:
    """The wheel's line in the SHA256SUMS of its folder: its digest, and whether it must be there (`sums`)."""
    listing = path.parent / SHA256SUMS
    listed = read_sums(listing).get(path.name)
    if listed is None and sums is Sums.REQUIRED and not listing.is_file():
        verdict.problems.append(f"{path.name}: {listing} is missing (the build writes it beside the wheels it writes), "
                                f"so nothing says the build wrote this file here; rebuild it")
    elif listed is None and listing.is_file():
        verdict.problems.append(f"{path.name}: {listing} does not list it: the build did not write this file here; "
                                f"rebuild it and find out where this one came from")
    elif listed is not None and (found := sha256_file(path)) != listed:
        verdict.problems.append(f"{path.name}: sha256 {found}, {listing} says {listed}: the file changed after the "
                                f"build wrote it; rebuild it and find out who changed it")
