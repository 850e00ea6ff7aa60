"""Wheels, bytes in and out: fetched and verified upstream wheels, archives read and written, metadata, the recipe, the build."""

from __future__ import annotations

from . import build, cubin_pins, fetch, jit_wheel, metadata, pip, writer
from .archive import WheelReader
from .fetch import Source, default_cache_dir
from .jit_cache import Request, build_cache, rederive
from .metadata import PROVENANCE, DistInfo, find_dist_info, parse_record
from .recipe import NewMember, plan_wheel

__all__ = ["DistInfo", "NewMember", "PROVENANCE", "Request", "Source", "WheelReader", "build", "build_cache", "cubin_pins",
           "default_cache_dir", "fetch", "find_dist_info", "jit_wheel", "metadata", "parse_record", "pip", "plan_wheel",
           "rederive", "writer"]
