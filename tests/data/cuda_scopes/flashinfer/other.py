"""A second module: a forwarder of flashinfer/scopes.py called from here, under an alias."""

from .scopes import _forwarder as _toolkit_at_least


def case_forwarder_across_modules():
    return _toolkit_at_least("13.0")
