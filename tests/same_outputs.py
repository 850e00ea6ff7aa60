"""What a refactor of the build and the gates must leave as it was: wheels, SHA256SUMS, and what verify and index say.

Run it by hand before and after a change that should change no behaviour, into the same WORK folder
(the outputs name their paths), and compare the two records:

    .venv/bin/python tests/same_outputs.py /tmp/same/work > /tmp/same/before.txt
    ... the change ...
    .venv/bin/python tests/same_outputs.py /tmp/same/work > /tmp/same/after.txt
    diff /tmp/same/before.txt /tmp/same/after.txt

It builds the default stack and flashinfer-python 0.7.4 (`build --offline`: the pinned upstream wheels
from the cache), records every wheel's sha256, SHA256SUMS and each command's stdout, stderr and exit
code, then runs `verify` (text and --json) on them and on refusals made from them: an edited member
(with its RECORD row and SHA256SUMS line rewritten to match, and without), a wheel SHA256SUMS does not
list, a RECORD row removed, a flashinfer-cubin file no pin names and one a pin names with other bytes;
`verify` where the pinned upstream wheel cannot be had (an empty cache: exit 4, the members held to
the wheel's own provenance as a diagnosis); and `index` over the refusals. Every copy is written with the original members' dates, so two runs
make the same bytes. Not a test (it takes minutes and the real upstream wheels); `make test` holds
each behaviour on its own.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
Edit = Callable[[dict[str, bytes]], dict[str, bytes]]


def run(label: str, *args: str) -> None:
    """One command of the tool, its exit code, stdout and stderr, as they are."""
    done = subprocess.run([sys.executable, str(ROOT / "build_wheels.py"), *args], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    print(f"=== {label}: exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}")


def digests(directory: Path) -> None:
    for path in sorted(directory.iterdir()):
        if path.is_file():
            print(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}")
    print(f"--- {directory.name}/SHA256SUMS\n{(directory / 'SHA256SUMS').read_text()}")


def rewrite(source: Path, target: Path, edit: Edit) -> None:
    """The wheel with its members edited, each kept at its place with its date and mode."""
    with zipfile.ZipFile(source) as zf:
        infos = zf.infolist()
        members = edit({i.filename: zf.read(i) for i in infos})
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for info in infos:
            if info.filename in members:
                out.writestr(info, members[info.filename])


def record_hash(data: bytes) -> str:  # written here so that this record does not lean on the code it checks
    import base64

    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def edited_member(rewrite_record: bool) -> Edit:
    def edit(members: dict[str, bytes]) -> dict[str, bytes]:
        name = next(n for n in sorted(members) if n.endswith("/__init__.py"))
        members[name] += b"\nimport os  # an edit\n"
        if rewrite_record:
            record = next(n for n in members if n.endswith(".dist-info/RECORD"))
            rows = [f"{name},{record_hash(members[name])},{len(members[name])}" if r.startswith(f"{name},") else r
                    for r in members[record].decode().splitlines()]
            members[record] = ("\n".join(rows) + "\n").encode()
        return members
    return edit


def row_removed(members: dict[str, bytes]) -> dict[str, bytes]:
    record = next(n for n in members if n.endswith(".dist-info/RECORD"))
    rows = members[record].decode().splitlines()
    gone = next(r for r in rows if "/__init__.py," in r)  # a member the wheel holds
    members[record] = ("\n".join(r for r in rows if r != gone) + "\n").encode()
    return members


def sums(directory: Path, names: list[str]) -> None:
    lines = [f"{hashlib.sha256((directory / n).read_bytes()).hexdigest()}  {n}\n" for n in sorted(names)]
    (directory / "SHA256SUMS").write_text("".join(lines))


def cubin(path: Path) -> None:
    """A small wheel under a flashinfer-cubin name: not upstream's file, whatever its name says."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("flashinfer_cubin/__init__.py", (1980, 1, 1, 0, 0, 0)), b"")


def refusals(work: Path, wheel: Path, other: Path) -> list[Path]:
    """Each refusal in a dist dir of its own (with `other`, a good wheel, beside it), SHA256SUMS as the case says."""
    made = []
    cases: dict[str, tuple[Edit | None, bool]] = {
        "edited-hostile": (edited_member(rewrite_record=True), True),  # RECORD and SHA256SUMS rewritten to match
        "edited": (edited_member(rewrite_record=False), False),  # SHA256SUMS keeps the built digest
        "unlisted": (None, False),  # SHA256SUMS does not list it
        "row-removed": (row_removed, True),
    }
    for case, (edit, listed) in cases.items():
        directory = work / case
        directory.mkdir()
        shutil.copyfile(other, directory / other.name)
        target = directory / wheel.name
        shutil.copyfile(wheel, target) if edit is None else rewrite(wheel, target, edit)
        if edit is not None and not listed:  # the digest the build wrote, for the original bytes
            (directory / "SHA256SUMS").write_text(f"{hashlib.sha256(wheel.read_bytes()).hexdigest()}  {wheel.name}\n"
                                                  f"{hashlib.sha256(other.read_bytes()).hexdigest()}  {other.name}\n")
        else:
            sums(directory, [other.name, *([wheel.name] if listed else [])])
        made.append(target)
    directory = work / "cubins"
    directory.mkdir()
    shutil.copyfile(other, directory / other.name)
    sums(directory, [other.name])
    for name in ("flashinfer_cubin-0.0.1-py3-none-any.whl", "flashinfer_cubin-0.6.8.post1-py3-none-any.whl"):
        cubin(directory / name)  # no pin names the first; a pin names the second, with another sha256
        made.append(directory / name)
    return made


def main(work: Path) -> int:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    default, newest = work / "dist-default", work / "dist-0.7.4"
    run("build (the default stack)", "build", "--offline", "--dist-dir", str(default))
    run("build flashinfer-python==0.7.4", "build", "--offline", "--dist-dir", str(newest), "flashinfer-python==0.7.4")
    digests(default)
    digests(newest)
    built = sorted(default.glob("*.whl")) + sorted(newest.glob("*.whl"))
    run("verify (built)", "verify", "--offline", *map(str, built))
    run("verify --json (built)", "verify", "--offline", "--json", *map(str, built))
    sglang = next(p for p in built if p.name.startswith("sglang-"))
    flashinfer = next(p for p in built if p.name.startswith("flashinfer_python-0.6.8"))
    made = refusals(work, sglang, flashinfer)
    for path in made:
        digests(path.parent) if path.parent.name != "cubins" or path.name.startswith("flashinfer_cubin-0.0") else None
        run(f"verify {path.parent.name}/{path.name}", "verify", "--offline", str(path))
        run(f"verify --json {path.parent.name}/{path.name}", "verify", "--offline", "--json", str(path))
    empty = work / "empty-cache"  # no pinned upstream wheel at hand: exit 4, the provenance a diagnosis
    empty.mkdir()
    for path in [*built, *(p for p in made if p.parent.name in ("edited-hostile", "row-removed"))]:
        run(f"verify without the anchor {path.parent.name}/{path.name}", "verify", "--offline", "--json",
            "--cache-dir", str(empty), str(path))
    for directory in sorted({p.parent for p in made}):
        run(f"index {directory.name}", "index", "--offline", "--dist-dir", str(directory), "--output",
            str(directory / "simple"))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
