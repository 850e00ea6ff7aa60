"""flashinfer-cubin's pins (patches/flashinfer-cubin/upstream-pins.toml): the exact file of each release, its sha256.

flashinfer-cubin ships the trtllm-gen cubins of one FlashInfer release and the headers its trtllm-gen
modules compile against (flashinfer_cubin/cubins/<artifact>/include/..., checksums.txt); FlashInfer
takes both from it when it is installed (jit/env.py: FLASHINFER_CUBIN_DIR) and refuses one of another
release at import. It is pinned as the upstream wheels are (upstream.toml's [[wheel]] filename and
sha256), and every reader checks a file against its pin before it opens it.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from ..errors import ConfigError, HashMismatchError
from ..files import replace_dir, sha256_file, staging_dir
from ..formats import read_toml
from ..patch import Stack

DIST = "flashinfer-cubin"
PINS = Path(DIST) / "upstream-pins.toml"
CUBINS = "flashinfer_cubin/cubins/"  # where the wheel keeps the artifacts (FlashInfer's FLASHINFER_CUBIN_DIR)
STAMP = ".nvfp4-overlay-artifacts"  # names the sha256 of the wheel an extracted directory came from


@dataclass(frozen=True)
class CubinPin:
    version: str  # the public version, FlashInfer's own (0.6.8.post1)
    filename: str
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{DIST}=={self.version}"

    @property
    def hashed(self) -> str:
        """The requirement line pip's hash-checking mode takes (a requirements file's syntax)."""
        return f"{self.requirement} --hash=sha256:{self.sha256}"


def load_pins(patches_dir: Path) -> dict[str, CubinPin]:
    """Release -> its pin; every malformed entry collected before raising (no file: no pins)."""
    path = patches_dir / PINS
    if not path.is_file():
        return {}
    pins, problems = {}, []
    for i, entry in enumerate(read_toml(path).get("wheel", []), start=1):
        try:
            name, version = parse_wheel_filename(str(entry["filename"]))[:2]
            digest = str(entry["sha256"])
            if name != DIST or len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
                raise ValueError(f"not a {DIST} wheel with a sha256 of 64 hex digits")
        except (KeyError, TypeError, ValueError, InvalidWheelFilename) as exc:
            problems.append(f"[[wheel]] #{i}: {exc}")
            continue
        pins[str(version)] = CubinPin(str(version), str(entry["filename"]), digest)
    if problems:
        msg = f"{path}:\n  " + "\n  ".join(problems) + "\nEach [[wheel]] needs filename (a flashinfer_cubin wheel) and sha256"
        raise ConfigError(msg, path=path, item=problems[0], fix="write each [[wheel]] entry in full")
    return pins


def pin_for(stack: Stack, patches_dir: Path) -> CubinPin | None:
    """The pin of the stack's FlashInfer release, or None where none is pinned (FlashInfer fetches at run time)."""
    target = next((t for t in stack.targets if t.dist == "flashinfer-python"), None)
    if target is None:
        return None
    return load_pins(patches_dir).get(str(Version(Version(target.version).public)))


def check(path: Path, pin: CubinPin) -> None:
    """HashMismatchError (exit 3) naming the file, both digests and the fix when path is not the pinned file."""
    found = sha256_file(path)
    if found != pin.sha256:
        fix = (f"delete {path} and bring the pinned file again ('nvfp4-overlay index --cubins', online); if upstream "
               f"re-published the file, check why before changing the pin")
        msg = f"{path}: sha256 {found} is not {pin.sha256}, the digest of {pin.filename} pinned in patches/{PINS}"
        raise HashMismatchError(msg, path=path, item=pin.requirement, expected=pin.sha256, found=found, fix=fix)


def unpacked(dest: Path, pin: CubinPin) -> bool:
    """Whether dest holds the artifacts of the pinned file (its stamp names the digest it was unpacked from)."""
    stamp = dest / STAMP
    return stamp.is_file() and stamp.read_text().strip() == pin.sha256


def artifacts(wheel: Path, pin: CubinPin, dest: Path) -> Path:
    """The wheel's artifacts but the cubins (headers, checksum lists: what a trtllm-gen module compiles
    against), unpacked once into dest, which is then laid out as FlashInfer's cubin directory; the wheel is
    checked against its pin first. A directory already stamped with the pinned digest is kept."""
    if unpacked(dest, pin):
        return dest
    check(wheel, pin)
    staged = staging_dir(dest)
    with zipfile.ZipFile(wheel) as zf:  # checked against its pin above
        for info in zf.infolist():
            name = info.filename
            if name.startswith(CUBINS) and not name.endswith((".cubin", "/")) and ".." not in name.split("/"):
                target = staged / name[len(CUBINS):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(info))
    (staged / STAMP).write_text(pin.sha256 + "\n")
    replace_dir(staged, dest)
    return dest
