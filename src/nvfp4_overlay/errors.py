"""The one error hierarchy, and the command line's exit codes (the one table of them).

An error is its fields: `message` says what went wrong (naming the file or item, what was expected and
found), `fix` the next step, and path/item/expected/found the same facts as data. The text a person
reads is composed from them once, in `text()` (as pip's diagnostic errors compose message and hint):
the message, then the fix. `--json` reports the same fields, so the two cannot disagree; a raise site
words the fix once, in `fix=`, never again in the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from pathlib import Path
from typing import Any


class Exit(IntEnum):
    """docs/design.md's exit statuses."""

    OK = 0
    NEEDS_PERSON = 1  # a patch did not apply, drift a person must look at, an unpatched install
    CONFIG = 2  # bad arguments, configuration, environment or paths
    INTEGRITY = 3  # a hash mismatch, a corrupt or unsafe archive, a wheel that fails verify
    UNVERIFIED = 4  # cannot be verified here: the pinned upstream wheel the check derives from is not at hand
    TAKEN_ON_TRUST = 5  # nothing contradicts it, and part of it could not be derived here (a JIT module not rebuilt)
    INTERRUPTED = 130  # Ctrl-C (SIGINT), as a shell reports a command it killed: 128 + 2
    TERMINATED = 143  # SIGTERM (kill, systemd, a CI runner's cancel): 128 + 15


class OverlayError(Exception):
    """Base of every error the tool reports to the user; the message says what to do next."""

    exit_code: Exit = Exit.NEEDS_PERSON

    def __init__(self, message: str, *, path: Path | str | None = None, item: str | None = None,
                 expected: str | None = None, found: str | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message  # what went wrong; the fix is its own field, never restated here
        self.path = None if path is None else str(path)
        self.item, self.expected, self.found, self.fix = item, expected, found, fix

    def text(self) -> str:
        """What a person reads: the message and then the fix, once. A one-line message takes the fix as its
        last clause; a message that lists things line by line takes it on a line of its own after them."""
        if not self.fix:
            return self.message
        return f"{self.message}\nfix: {self.fix}" if "\n" in self.message else f"{self.message}; {self.fix}"

    def __str__(self) -> str:
        return self.text()

    def data(self) -> dict[str, Any]:
        fields = {"path": self.path, "item": self.item, "expected": self.expected, "found": self.found,
                  "fix": self.fix}
        return {"kind": type(self).__name__, "exit_code": int(self.exit_code), "message": self.message,
                **{k: v for k, v in fields.items() if v is not None}}


class ConfigError(OverlayError, ValueError):
    """Bad arguments or configuration: stacks.toml, upstream.toml, a series, an overlay, a path (exit 2)."""

    exit_code = Exit.CONFIG


class UsageError(ConfigError):
    """A command line argparse refused: an unknown option, a missing or malformed argument (exit 2)."""


class PatchError(OverlayError):
    """A patch did not apply (exit 1)."""

    exit_code = Exit.NEEDS_PERSON


class Refused(PatchError):
    """refresh found a hunk that neither applies nor merges, or a port that does not behave: nothing written.

    `report` is the drift matrix that says which hunk and why; `problems` the behaviour checks' findings.
    Both are given when it is made and read-only after (`with_report` makes the refusal again with a report).
    """

    def __init__(self, message: str, *, report: Any = None, problems: Sequence[str] = (), **fields: Any) -> None:
        super().__init__(message, **fields)
        self._report, self._problems = report, tuple(problems)

    @property
    def report(self) -> Any:
        return self._report

    @property
    def problems(self) -> tuple[str, ...]:
        return self._problems

    def with_report(self, report: Any) -> Refused:
        """The same refusal, carrying `report` (refresh adds the drift matrix as the refusal passes by)."""
        return Refused(self.message, report=report, problems=self.problems, path=self.path, item=self.item,
                       expected=self.expected, found=self.found, fix=self.fix)

    def data(self) -> dict[str, Any]:
        return {**super().data(), **({"problems": list(self.problems)} if self.problems else {})}


class Interrupted(OverlayError):
    """Ctrl-C (SIGINT, exit 130) or SIGTERM (exit 143): the command stopped where it was; what it writes whole
    was not written, and its temporaries were removed."""

    exit_code = Exit.INTERRUPTED

    def __init__(self, message: str, *, terminated: bool = False, **fields: Any) -> None:
        super().__init__(message, **fields)
        if terminated:
            self.exit_code = Exit.TERMINATED


class TimedOut(OverlayError):
    """A child process gave no answer within the time it was given: slow or hung, not proven broken (exit 1)."""

    exit_code = Exit.NEEDS_PERSON


class StepFailed(OverlayError):
    """A command that install or rollback ran (pip, uv) failed; the steps after it did not run (exit 1)."""

    exit_code = Exit.NEEDS_PERSON


class IntegrityError(OverlayError):
    """A hash mismatch, or a corrupt or unsafe archive (exit 3)."""

    exit_code = Exit.INTEGRITY


class Unverified(OverlayError):
    """Cannot be verified here: what the wheel must equal (the build made again from the pinned upstream
    wheel with this checkout's series and overlay) cannot be had, so nothing vouches for it (exit 4).

    Never a pass: a digest the wheel carries about itself is no anchor.
    """

    exit_code = Exit.UNVERIFIED


class TakenOnTrust(OverlayError):
    """Nothing contradicts a file, and it could not be derived here: it would be taken on its builder's word (exit 5)."""

    exit_code = Exit.TAKEN_ON_TRUST


class HashMismatchError(IntegrityError):
    """An upstream file's sha256 differs from the one pinned in upstream.toml."""


class UnsafeArchiveError(IntegrityError, ValueError):
    """An archive that is corrupt, or whose members would escape the wheel root."""


class FetchError(OverlayError):
    """pip could not provide an upstream wheel (exit 1: the network or the index, not the input)."""

    exit_code = Exit.NEEDS_PERSON


class NotInCache(FetchError, ConfigError):
    """--offline or --wheelhouse, and the pinned wheel is in neither: the input is missing (exit 2).

    A FetchError too, so that drift skips such a release as it skips one pip cannot provide.
    """

    exit_code = Exit.CONFIG
