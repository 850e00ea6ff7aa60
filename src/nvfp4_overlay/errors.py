"""The one error hierarchy; each class carries the exit status DESIGN.md gives it."""

from __future__ import annotations


class OverlayError(Exception):
    """Base of every error the tool reports to the user; the message says what to do next."""

    exit_code = 1


class ConfigError(OverlayError, ValueError):
    """Bad arguments or configuration: stacks.toml, upstream.toml, a series, an overlay (exit 2)."""

    exit_code = 2


class PatchError(OverlayError):
    """A patch did not apply (exit 1)."""

    exit_code = 1


class IntegrityError(OverlayError):
    """A hash mismatch, or a corrupt or unsafe archive (exit 3)."""

    exit_code = 3


class HashMismatchError(IntegrityError):
    """An upstream file's sha256 differs from the one pinned in upstream.toml."""


class UnsafeArchiveError(IntegrityError, ValueError):
    """An archive that is corrupt, or whose members would escape the wheel root."""


class FetchError(OverlayError):
    """pip could not provide an upstream wheel (exit 1: the network or the index, not the input)."""

    exit_code = 1
