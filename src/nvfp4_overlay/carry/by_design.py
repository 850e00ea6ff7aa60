"""Releases shipped unpatched by design: where a series is not needed, read from the stacks and the region audit.

A stack may ship a distribution as upstream publishes it (patches/stacks.toml, ``patched = false``).
That is by design, and a series of an older release has nothing to do there, only when the data
says so: the SGLang region audit (patches/sglang/audit-regions.json, less the regions
patches/sglang/region-reach.toml says no compiled region reaches) leaves nothing raw under that
stack, with the FlashInfer routes of the overlay. A release a stack ships unpatched that the audit
has not seen, or where something remains raw, is not by design: drift keeps it a person's. Only
SGLang has such an audit; any other distribution shipped unpatched stays a person's too. Pure, but
for reading the committed files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..audit import sglang_audit, sglang_reach
from ..errors import ConfigError
from ..oracle import SGLANG, audit_releases
from ..patch import Target, load_stacks

__all__ = ["shipped_unpatched"]


def shipped_unpatched(patches_dir: Path, overlay_dir: Path, log: Callable[[str], None]) -> dict[Target, str]:
    """Release -> why a series is not needed there: the stack that ships it unpatched, whose region
    audit leaves nothing raw. A stack the audit cannot vouch for is logged and left out (a person's)."""
    stacks = [(s, t) for s in load_stacks(patches_dir).stacks for t in s.upstream]
    if not stacks:
        return {}
    carried = {t for s in load_stacks(patches_dir).stacks for t in s.targets}
    out: dict[Target, str] = {}
    for stack, target in stacks:
        if target in carried:
            continue  # another stack patches it: its own series is what ships there
        if target.dist != SGLANG:
            log(f"warning: {target}: stack {stack.name} ships it unpatched, and no audit says nothing raw remains there")
            continue
        clear, why = _nothing_raw(patches_dir, overlay_dir, target.version)
        if clear:
            out[target] = f"stack {stack.name} ships it unpatched and {why}"
        else:
            log(f"warning: {target}: stack {stack.name} ships it unpatched, yet {why}: a series there needs a person")
    return out


def _nothing_raw(patches_dir: Path, overlay_dir: Path, version: str) -> tuple[bool, str]:
    """Whether the region audit leaves nothing raw under the SGLang release's stack, and what it says."""
    try:
        table = sglang_audit.load_table(patches_dir)
        reach = sglang_reach.load_reach(patches_dir)
        known = {r.version: r.carried for r in audit_releases(patches_dir)}
        routes = sglang_audit.read_routes(overlay_dir / "flashinfer-python")
        left = sglang_audit.stack_remaining(table, version, known.get(version, False), routes, reach)
    except ConfigError as exc:
        return False, f"the region audit cannot say ({exc.message.splitlines()[0]})"
    if left:
        return False, f"the region audit leaves raw calls in {', '.join(sorted(left))}"
    if any(e.covers(version, sglang_reach.EVERY_REGION) for e in reach):
        return True, (f"the region audit leaves nothing raw: no region compiles with fullgraph=True there "
                      f"(patches/sglang/{sglang_reach.REACH})")
    return True, f"the region audit (patches/sglang/{sglang_audit.AUDIT}) leaves nothing raw under it"
