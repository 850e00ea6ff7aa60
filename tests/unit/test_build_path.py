"""One wheel through `build`: the pin, the fetch, the pure plan, the write, each once, in order (docs/design.md).

The build is run through the CLI under `sys.setprofile`, and every function of the package that runs
beneath `build_targets` is recorded in call order with its module. A module serves one step (STEPS);
the path, collapsed to steps, must be the four steps once each, so a module the wheel has left is
never entered again. Not on the path, as docs/design.md says: the conductor (`wheel/build.py`, which
calls the steps in turn), what the build says on the way (`progress`, the log), and the methods of
objects a step was handed or made (a method runs on its object's behalf: the plan reading the
fetched handle, the pin's `local_version`); what those methods call is theirs too. A constructor is
a visit: making an object of a module is entering it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from helpers import cli_args

from nvfp4_overlay import cli
from nvfp4_overlay.wheel import build

STEPS = {
    "pin": ("nvfp4_overlay.patch.manifest", "nvfp4_overlay.formats"),
    "fetch": ("nvfp4_overlay.wheel.fetch", "nvfp4_overlay.wheel.pip", "nvfp4_overlay.wheel.archive"),
    "plan": ("nvfp4_overlay.wheel.recipe", "nvfp4_overlay.wheel.metadata", "nvfp4_overlay.patch.patching",
             "nvfp4_overlay.patch.placement", "nvfp4_overlay.patch.merge", "nvfp4_overlay.patch.conflicts",
             "nvfp4_overlay.records"),
    "write": ("nvfp4_overlay.wheel.writer", "nvfp4_overlay.files"),
}
# Rules and data more than one step holds to, not places on the path: the series' model and text
# codec (parsed at the pin, applied by the plan), the names a wheel member may have (the fetch holds
# upstream's to it, the plan the patched wheel's), and the errors any step raises.
SHARED = ("nvfp4_overlay.patch.series", "nvfp4_overlay.wheel.names", "nvfp4_overlay.errors")
NOT_ON_PATH = ("nvfp4_overlay.wheel.build", "nvfp4_overlay.progress")
CONSTRUCTORS = ("__init__", "__new__", "__post_init__")

FILES = {"demo/__init__.py": "".join(f"value_{i} = {i}\n" for i in range(30)), "demo/tool.sh": "#!/bin/sh\n"}
PATCH = ("--- a/demo/__init__.py\n+++ b/demo/__init__.py\n@@ -10,3 +10,3 @@\n"
         " value_9 = 9\n-value_10 = 10\n+value_10 = 'ten'\n value_11 = 11\n")


def _is_method(frame: FrameType) -> bool:
    code = frame.f_code
    return code.co_argcount > 0 and code.co_varnames[0] in ("self", "cls") and code.co_name not in CONSTRUCTORS


def _path_of(run: Callable[[], Any]) -> list[str]:
    """The package's modules entered beneath build_targets, in call order, as this module's docstring counts them."""
    entered: list[str] = []
    inside: list[FrameType] = []  # build_targets' frame, while it runs
    skipped: list[FrameType] = []  # the frame whose subtree is not on the path (a method, the voice)
    thread = threading.get_ident()

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if threading.get_ident() != thread or event not in ("call", "return"):
            return
        if event == "return":
            if skipped and frame is skipped[-1]:
                skipped.pop()
            elif inside and frame is inside[-1]:
                inside.pop()
            return
        if frame.f_code is build.build_targets.__code__:
            inside.append(frame)
        module = frame.f_globals.get("__name__", "")
        if not inside or skipped or not module.startswith("nvfp4_overlay"):
            return
        if module in NOT_ON_PATH[1:] or _is_method(frame):
            skipped.append(frame)
        elif module not in NOT_ON_PATH and (not entered or entered[-1] != module):
            entered.append(module)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entered


def _steps(modules: list[str]) -> Iterator[str]:
    step_of = {m: step for step, members in STEPS.items() for m in members}
    unplaced = sorted({m for m in modules if m not in step_of and m not in SHARED})
    assert unplaced == [], f"modules on the path that no step names (place each in STEPS): {unplaced}"
    last = None
    for module in modules:
        step = step_of.get(module)
        if step is not None and step != last:
            yield step
            last = step


def test_one_wheel_goes_pin_fetch_plan_write(project: Callable[..., dict[str, Path]]) -> None:
    layout = project(FILES, {"0001-ten.patch": PATCH}, overlay={"demo/extra.py": "EXTRA = 1\n"})
    codes: list[int] = []
    modules = _path_of(lambda: codes.append(cli.main(["build", *cli_args(layout, "--quiet")])))
    assert codes == [0]
    steps = list(_steps(modules))
    path = "\n  ".join(modules)
    assert steps == ["pin", "fetch", "plan", "write"], f"steps {' -> '.join(steps)}; module by module:\n  {path}"


def test_the_path_records_a_return(project: Callable[..., dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder sees a step called out of turn: a plan that reads the pin again is a return."""
    from nvfp4_overlay.patch import manifest

    layout = project(FILES, {"0001-ten.patch": PATCH})
    plan = build.plan_wheel

    def plan_reading_the_pin_again(*args: Any, **kwargs: Any) -> Any:
        manifest.load_stacks(layout["patches"])
        return plan(*args, **kwargs)

    monkeypatch.setattr(build, "plan_wheel", plan_reading_the_pin_again)
    modules = _path_of(lambda: cli.main(["build", *cli_args(layout, "--quiet")]))
    assert list(_steps(modules)) == ["pin", "fetch", "pin", "plan", "write"]
