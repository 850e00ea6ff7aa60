"""Carrying the series to new releases: releases, drift, the matrix and its report, refresh, propose."""

from __future__ import annotations

from . import by_design, drift_json, github, matrix, propose, refresh, releases, report

__all__ = ["by_design", "drift_json", "github", "matrix", "propose", "refresh", "releases", "report"]
