"""What every command gets: the resolved directories and wheel source, checked at the edge, and the output.

A command is given only the options it declares (cli/parser.py); what it did not declare reads as
unset here. The wheel source and the build options import the build machinery, so they are made
only for the commands that ask for them: `list` and `--help` start without it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import progress
from ..errors import ConfigError
from .output import as_invoked, document_text, say
from .parser import PROG

if TYPE_CHECKING:
    from ..wheel import build, fetch

PACKAGE_DATA = Path(__file__).resolve().parent.parent
ZIP_EPOCH = 315532800  # 1980-01-01, zip's earliest date: SOURCE_DATE_EPOCH unset
ZIP_LAST = 4354819198  # 2107-12-31 23:59:58, zip's last (its year field ends at 1980 + 127)


class Context:
    """The command's arguments, with every path and variable it names checked before any work starts."""

    def __init__(self, args: argparse.Namespace, prog: str = PROG) -> None:
        self.args = args
        self.prog = prog  # how the user runs the tool: the commands printed say it so
        self.json = bool(getattr(args, "json", False))
        self.quiet = bool(getattr(args, "quiet", False)) or self.json
        self.patches_dir = _data_dir(getattr(args, "patches_dir", None), "patches", "--patches-dir")
        self.overlay_dir = _data_dir(getattr(args, "overlay_dir", None), "overlay", "--overlay-dir", may_be_missing=True)
        self.dist_dir = _directory(Path(getattr(args, "dist_dir", None) or "dist"), "--dist-dir", may_be_missing=True)
        if getattr(args, "output", None):  # index --output: a directory it replaces whole, never a file
            _directory(Path(args.output), "--output", may_be_missing=True)
        self._source: fetch.Source | None = None
        if hasattr(args, "cache_dir"):
            self.source  # noqa: B018 - the paths it names are checked now, before any work

    @property
    def source(self) -> fetch.Source:
        if self._source is None:
            from ..wheel import fetch  # the build machinery: only for the commands that read upstream wheels

            args = self.args
            cache = Path(args.cache_dir) if args.cache_dir else fetch.default_cache_dir()
            what = self._cache_option
            self._source = fetch.Source(
                cache_dir=_directory(cache, what, may_be_missing=True),
                wheelhouse=_directory(Path(args.wheelhouse), "--wheelhouse") if args.wheelhouse else None,
                offline=bool(args.offline),
                all_platforms=bool(args.all_platforms),
                python_version=args.python_version,
                platforms=tuple(args.platform or ()),
            )
        return self._source

    @property
    def _cache_option(self) -> str:
        if getattr(self.args, "cache_dir", None):
            return "--cache-dir"
        return "NVFP4_OVERLAY_CACHE" if os.environ.get("NVFP4_OVERLAY_CACHE") else "the cache ~/.cache/nvfp4-overlay"

    def log(self, message: str) -> None:
        """Human progress and warnings: always stderr, so --json keeps stdout to one document."""
        if not self.quiet or message.startswith(("warning:", "error:")):
            progress.clear()  # the status line, if one is drawn, gives way to the log line
            say(as_invoked(message, self.prog), sys.stderr)

    def options(self) -> build.Options:
        """The build's options; the new members' timestamp made here, where SOURCE_DATE_EPOCH is read."""
        from ..wheel import build, writer

        return build.Options(self.patches_dir, self.overlay_dir, self.dist_dir, self.source,
                             fuzz=getattr(self.args, "fuzz", 0), date_time=writer.zip_date_time(source_date_epoch()))

    def emit(self, document: Any, human: str) -> None:
        say(document_text(document, self.prog) if self.json else as_invoked(human, self.prog))

    def writes(self) -> dict[str, Path]:
        """Where this command may write, by the option (or variable) that moves it: a full or read-only disk
        is reported with the option that points elsewhere."""
        named = {"--dist-dir": self.dist_dir, "--patches-dir": self.patches_dir}
        if self._source is not None:
            named["--cache-dir"] = self._source.cache_dir
        for option in ("output", "markdown"):
            if getattr(self.args, option, None):
                named[f"--{option}"] = Path(getattr(self.args, option))
        return named


def source_date_epoch() -> int:
    """SOURCE_DATE_EPOCH (reproducible-builds.org): a whole number of seconds, else zip's first date."""
    text = os.environ.get("SOURCE_DATE_EPOCH")
    if text is None:
        return ZIP_EPOCH
    if not text.strip().isdigit() or int(text) > ZIP_LAST:
        msg = (f"SOURCE_DATE_EPOCH={text!r} is not a whole number of seconds since 1970 up to {ZIP_LAST} (zip's last "
               f"date, 2107)")
        raise ConfigError(msg, item="SOURCE_DATE_EPOCH", expected="seconds since 1970", found=text,
                          fix="unset it, or set it to one (e.g. SOURCE_DATE_EPOCH=$(git log -1 --format=%ct))")
    return int(text)


def _data_dir(given: str | None, name: str, option: str, *, may_be_missing: bool = False) -> Path:
    """The project's patches/ or overlay/: as given, else ./NAME, else the copy the package carries."""
    if given:
        return _directory(Path(given), option, may_be_missing=may_be_missing)
    here = Path(name)
    return here if here.is_dir() else PACKAGE_DATA / name


def _directory(path: Path, what: str, *, may_be_missing: bool = False) -> Path:
    if path.is_dir() or (may_be_missing and not path.exists() and not _under_a_file(path)):
        return path
    found = "a file" if path.exists() else "missing"
    msg = f"{what} {path}: is {found}, not a directory"
    fix = "name a directory" + (" (it is made if missing)" if may_be_missing else "")
    raise ConfigError(msg, path=path, item=what, expected="a directory", found=found, fix=fix)


def _under_a_file(path: Path) -> bool:
    return any(p.exists() and not p.is_dir() for p in path.parents)
