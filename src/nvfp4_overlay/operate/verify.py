"""verify: the verdict on any wheel of a dist dir, each held to what vouches for it (docs/reliability.md).

A wheel this tool patched is held to the build made again from its pinned upstream wheel
(patched_verify.py); a flashinfer_jit_cache wheel to its modules built again from the patched wheel
beside it (jit_verify.py); the flashinfer-cubin file `index --cubins` mirrors, upstream's and no build
of this tool, to its pin (cubins.verify_mirror). Each caller says what the SHA256SUMS beside a wheel
must say of it (verdict.Sums): `verify` BESIDE, `index` and `install --run` REQUIRED.
"""

from __future__ import annotations

from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion

from ..errors import ConfigError
from ..wheel import Source
from . import cubins, jit_verify, patched_verify
from .verdict import Sums, Verdict


def verify_wheel(path: Path, patches_dir: Path, overlay_dir: Path, source: Source, *, sums: Sums) -> Verdict:
    """The verdict on one wheel; a path that is no wheel file is a bad argument (exit 2), not an integrity failure.

    `source`: where the pinned upstream wheel is found (the wheelhouse, the cache, then pip unless offline).
    """
    _check_argument(path)
    if jit_verify.is_cache_wheel(path):
        return jit_verify.verify_cache_wheel(path, patches_dir, overlay_dir, source, sums=sums)
    if cubins.is_mirror(path):  # not in SHA256SUMS (no build wrote it): its pin is what vouches for it
        return cubins.verify_mirror(path, patches_dir)
    return patched_verify.verify_patched(path, patches_dir, overlay_dir, source, sums=sums)


def _check_argument(path: Path) -> None:
    if not path.is_file():
        found = "a directory" if path.is_dir() else "missing"
        msg = f"{path}: {found}, not a wheel file; name a wheel that build wrote, e.g. dist/*.whl"
        raise ConfigError(msg, path=path, item="WHEEL", expected="a wheel file", found=found,
                          fix="name a wheel that build wrote")
    try:
        parse_wheel_filename(path.name)
    except (InvalidWheelFilename, InvalidVersion) as exc:
        msg = (f"{path}: not a wheel (a wheel is named NAME-VERSION-TAGS.whl: {exc}); name a wheel that build "
               f"wrote, e.g. dist/*.whl")
        raise ConfigError(msg, path=path, item="WHEEL", expected="a wheel file (NAME-VERSION-TAGS.whl)",
                          found="not a wheel", fix="name a wheel that build wrote, e.g. dist/*.whl") from exc

