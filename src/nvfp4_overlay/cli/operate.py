"""The commands that serve a fleet: install, rollback, index."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError, Exit, IntegrityError, StepFailed, TakenOnTrust, Unverified
from ..operate import Step, Sums, Tool, doctor, index, install_steps, missing_wheels, verify_wheel
from ..patch import Stack, Stacks, Target, load_stacks, load_upstream
from .context import Context


def cmd_install(ctx: Context) -> int:
    stacks = load_stacks(ctx.patches_dir)
    stack = stacks.get(ctx.args.stack or stacks.default, ctx.patches_dir / "stacks.toml")
    locals_ = _local_versions(ctx, stack)
    tool = _tool(ctx)
    fleet = ctx.args.fleet_index
    dist = ctx.dist_dir.resolve()
    patterns = [] if fleet else [f"{_stem(ctx, t)}-{v}-*.whl" for t, v in locals_.items()]
    missing = [] if fleet else missing_wheels(dist, [(_stem(ctx, t), v) for t, v in locals_.items()])
    if missing:
        msg = (f"{dist} holds no {', '.join(missing)}: build the stack first ('nvfp4-overlay build --stack "
               f"{stack.name}'), or take the wheels from an index (--fleet-index URL)")
        if ctx.args.run:
            raise ConfigError(msg, path=dist, item=stack.name, expected=", ".join(missing), found="not built",
                              fix=f"nvfp4-overlay build --stack {stack.name}")
        ctx.log(f"warning: {msg}")
    wheels = [w for pattern in patterns for w in sorted(dist.glob(pattern))]
    if ctx.args.gpu and not fleet:  # the JIT cache step 2 installs is checked with the patched wheels
        wheels += _jit_cache_wheels(ctx, stack, dist)[-1:]
    if ctx.args.run and wheels:
        _verify_before_install(ctx, stack, dist, wheels)
    steps = install_steps(stack, locals_, tool, dist_dir=None if fleet else dist, fleet_index=fleet)
    _warn_cubins(ctx, stack, dist, fleet)
    steps = _with_jit_cache(ctx, stack, tool, _with_cubins(ctx, stack, tool, steps, fleet), dist, fleet)
    document: dict[str, Any] = {"stack": stack.name, "missing": missing}
    check = None if fleet else _verify_step(ctx, [str(w) for w in wheels] or [str(dist / p) for p in patterns])
    return _print_or_run(ctx, steps, document, check)


def _verify_step(ctx: Context, wheels: list[str]) -> Step:
    """The line that checks the wheels as install --run does, for the operator who runs the steps by hand."""
    data = [*(["--patches-dir", str(ctx.args.patches_dir)] if ctx.args.patches_dir else []),
            *(["--overlay-dir", str(ctx.args.overlay_dir)] if ctx.args.overlay_dir else []),
            *(["--cache-dir", str(ctx.args.cache_dir)] if ctx.args.cache_dir else []),
            *(["--wheelhouse", str(ctx.args.wheelhouse)] if ctx.args.wheelhouse else []),
            *(["--offline"] if ctx.args.offline else [])]
    return Step("first check the wheels: SHA256SUMS, and every member what the build makes from the pinned upstream "
                "wheels (install --run does this itself)",
                (sys.executable, "-m", "nvfp4_overlay.cli", "verify", *data, *wheels))


def _verify_before_install(ctx: Context, stack: Stack, dist: Path, wheels: list[Path]) -> None:
    """Every wheel step 2 may install, against the dist dir's SHA256SUMS and verify, before step 1: refused (exit 3),
    or, where the pinned upstream wheels cannot be had, not verified (exit 4); either way nothing is installed."""
    problems, unverified, trusted = [], [], []
    for wheel in wheels:
        ctx.log(f"verifying {wheel.name}")
        verdict = verify_wheel(wheel, ctx.patches_dir, ctx.overlay_dir, ctx.source, sums=Sums.REQUIRED)
        problems += [f"{wheel.name}: {p}" for p in verdict.problems]
        unverified += [f"{wheel.name}: {verdict.unverified}"] if verdict.unverified else []
        trusted += [f"{wheel.name}: {t}" for t in verdict.trusted]
    if problems:
        fix = f"rebuild the stack ('nvfp4-overlay build --stack {stack.name}') and find out who changed these wheels"
        msg = (f"install --run: refused before step 1, nothing was installed; the wheels in {dist} are not the ones "
               f"the build makes:\n  " + "\n  ".join(problems + unverified) + f"\n{fix[0].upper()}{fix[1:]}")
        raise IntegrityError(msg, path=dist, item=", ".join(w.name for w in wheels),
                             expected="wheels listed in SHA256SUMS, every member what the build makes",
                             found="; ".join(problems), fix=fix)
    if unverified:
        fix = "run it where the pinned upstream wheels can be had: without --offline, or with --wheelhouse DIR"
        msg = ("install --run: not verified, so nothing was installed:\n  " + "\n  ".join(unverified) + f"\n"
               f"{fix[0].upper()}{fix[1:]}")
        raise Unverified(msg, path=dist, item=", ".join(w.name for w in wheels),
                         expected="every wheel held to the build made again from its pinned upstream wheel",
                         found="; ".join(unverified), fix=fix)
    if trusted:
        _refuse_trusted(dist, wheels, trusted)


def _refuse_trusted(dist: Path, wheels: list[Path], trusted: list[str]) -> None:
    """Nothing is installed on its builder's word alone (a JIT module verify could not build again here): exit 5."""
    fix = "verify them where they can be built again (the builder's toolchain, the patched wheel beside them)"
    msg = ("install --run: refused before step 1, nothing was installed; verify could not derive these here and "
           "would take them on their builder's word:\n  " + "\n  ".join(trusted) + f"\n{fix[0].upper()}{fix[1:]}")
    raise TakenOnTrust(msg, path=dist, item=", ".join(w.name for w in wheels), expected="every member derived here",
                       found="; ".join(trusted), fix=fix)


def _with_jit_cache(ctx: Context, stack: Stack, tool: Tool, steps: list[Step], dist: Path,
                    fleet: str | None) -> list[Step]:
    """With --gpu: the stack's flashinfer_jit_cache wheel for that GPU family, found in the dist dir, pinned
    exactly, before the check (wheel/jit_cache.py)."""
    if not ctx.args.gpu:
        return steps
    from ..wheel import jit_wheel

    local = next(v for t, v in _local_versions(ctx, stack).items() if t.dist == "flashinfer-python")
    found = _jit_cache_wheels(ctx, stack, dist)
    if not found:
        fix = f"nvfp4-overlay jit-cache --stack {stack.name} --gpu {ctx.args.gpu}"
        msg = f"{dist} holds no JIT cache of {stack.name} for {ctx.args.gpu}: build it first ('{fix}')"
        if ctx.args.run:
            raise ConfigError(msg, path=dist, item="--gpu", expected=f"{jit_wheel.PACKAGE}-{local}.cu*.{ctx.args.gpu}",
                              found="not built", fix=fix)
        ctx.log(f"warning: {msg}")
        return steps
    version = found[-1].name.split("-")[1]
    where = (["--extra-index-url", fleet] if tool.uv else ["--index-url", fleet]) if fleet else \
        ["--no-index", "--find-links", str(dist)]
    step = Step(f"FlashInfer's JIT modules prebuilt for {ctx.args.gpu}: the serving path's first calls build nothing",
                tuple(tool.command("install") + ["--no-deps", *where, f"{jit_wheel.DIST}=={version}"]))
    return [*steps[:-1], step, steps[-1]]


def _jit_cache_wheels(ctx: Context, stack: Stack, dist: Path) -> list[Path]:
    """The stack's flashinfer_jit_cache wheels of --gpu's family in the dist dir, oldest first."""
    from ..wheel import jit_wheel

    local = next(v for t, v in _local_versions(ctx, stack).items() if t.dist == "flashinfer-python")
    return sorted(dist.glob(f"{jit_wheel.PACKAGE}-{local}.cu*.{ctx.args.gpu}-*.whl"))


def _warn_cubins(ctx: Context, stack: Stack, dist: Path, fleet: str | None) -> None:
    from ..operate import cubins

    line = None if fleet else cubins.missing_line(stack, ctx.patches_dir, [dist])
    if line:
        ctx.log(f"note: {line}")


def _with_cubins(ctx: Context, stack: Stack, tool: Tool, steps: list[Step], fleet: str | None) -> list[Step]:
    """flashinfer-cubin of the stack's release, hashed, before the upstream step (operate/cubins.py says why)."""
    from ..operate import cubins

    return cubins.first_of(steps, stack, tool, ctx.patches_dir, fleet)


def cmd_rollback(ctx: Context) -> int:
    from ..operate import cubins, rollback

    stacks = load_stacks(ctx.patches_dir)
    named = stacks.get(ctx.args.stack, ctx.patches_dir / "stacks.toml") if ctx.args.stack else None
    if ctx.args.switch_release and named is None:
        msg = "--switch-release: it switches to the releases of a stack; name one with --stack NAME"
        raise ConfigError(msg, item="--switch-release", expected="--stack NAME", found="no --stack",
                          fix="add --stack NAME, or leave out --switch-release")
    tool = _tool(ctx, always=True)
    python = str(tool.python)
    installed = rollback.installed_from_facts(doctor.installed_distributions(python, rollback.READS))
    targets = rollback.rollback_targets(installed, named, switch_release=ctx.args.switch_release, where=python)
    switch = named if ctx.args.switch_release else None
    remove = rollback.leftovers(installed, switch, ctx.patches_dir)
    document: dict[str, Any] = {"stack": named.name if named else None, "installed": [str(i) for i in installed],
                                "targets": [str(t) for t in targets], "remove": [str(i) for i in remove]}
    if not targets and not remove:
        document["steps"] = []
        ctx.emit(document, f"nothing to roll back: {python} has no patched build installed "
                           f"({', '.join(map(str, installed)) or 'neither flashinfer-python nor sglang'})")
        return Exit.OK
    label = f"stack {named.name}" if named else f"installed in {python}"
    steps = rollback.rollback_steps(label, targets, rollback.hashed(targets, ctx.patches_dir), tool, remove=remove,
                                    switch=switch)
    if switch is not None:  # the hashed cubin before the step that resolves SGLang's requirement on it
        steps = cubins.first_of(steps, switch, tool, ctx.patches_dir)
    return _print_or_run(ctx, steps, document)


def _local_versions(ctx: Context, stack: Stack) -> dict[Target, str]:
    return {t: load_upstream(ctx.patches_dir, t).local_version for t in stack.targets}


def _stem(ctx: Context, target: Target) -> str:
    return load_upstream(ctx.patches_dir, target).wheels[0].filename.split("-", 1)[0]


def _tool(ctx: Context, *, always: bool = False) -> Tool:
    """pip or uv for the environment of --python; with --run (or `always`: rollback reads it), this one's by default."""
    python = ctx.args.python
    if python is not None:
        doctor.check_python(python)
    elif ctx.args.run or always:
        python = sys.executable  # --run without --python: this environment, as doctor examines it
    if ctx.args.uv and ctx.args.run and shutil.which("uv") is None:
        msg = "--uv --run: uv is not on PATH; install it ('pip install uv') or leave out --uv to use pip"
        raise ConfigError(msg, item="--uv", expected="uv on PATH", found="missing", fix="pip install uv")
    return Tool(uv=ctx.args.uv, python=python)


def _print_or_run(ctx: Context, steps: list[Step], document: dict[str, Any], check: Step | None = None) -> int:
    document["steps"] = [{"why": s.why, "argv": list(s.argv), "shell": s.shell, **({"stdin": s.stdin} if s.stdin else {})}
                         for s in steps]
    if check is not None:
        document["verify"] = {"why": check.why, "argv": list(check.argv), "shell": check.shell}
    if not ctx.args.run:
        ctx.emit(document, "\n".join(f"# {s.why}\n{s.shell}" for s in ([check] if check else []) + steps))
        return Exit.OK
    for number, step in enumerate(steps, start=1):
        ctx.log(f"[{number}/{len(steps)}] {step.shell}")
        done = _run(step.argv, step.stdin)
        if done.returncode != 0:
            msg = (f"step {number} of {len(steps)} ({step.shell}) exited {done.returncode}; the steps after it did "
                   f"not run. Its own message is above; fix what it names and run the command again")
            raise StepFailed(msg, item=step.shell, expected="exit 0", found=f"exit {done.returncode}",
                             fix="fix what the command's message names, then run it again")
    ctx.emit({**document, "ran": True}, f"done: {len(steps)} steps")
    return Exit.OK


def _run(argv: tuple[str, ...], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The step's output goes to stderr with the logs (so --json keeps stdout to one document), as it comes;
    its stdin is the step's requirements text (a hashed pin), or nothing."""
    sys.stderr.flush()
    given = None if stdin is None else f"{stdin}\n"
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):  # stderr is no file (captured): relay it after
        done = subprocess.run(argv, check=False, input=given, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(done.stdout, file=sys.stderr, end="")
        return done
    return subprocess.run(argv, check=False, input=given, stdout=sys.stderr, stderr=sys.stderr, text=True)


def cmd_index(ctx: Context) -> int:
    output = Path(ctx.args.output) if ctx.args.output else ctx.dist_dir / "simple"
    if ctx.args.cubins:
        _bring_cubins(ctx)
    published, withheld = index.publishable(ctx.dist_dir, ctx.patches_dir, ctx.overlay_dir, ctx.source)
    if withheld:  # nothing is published: the index a fleet reads stays as it was
        raise index.refusal(ctx.dist_dir, withheld)
    by_project = index.write_index(ctx.dist_dir, output, published)
    url = ctx.args.url or output.resolve().as_uri()
    stacks = load_stacks(ctx.patches_dir)
    commands = _stack_commands(ctx, stacks, by_project, url)
    document = {
        "index": str(output),
        "url": url,
        "projects": {
            p: [{"filename": w.filename, "version": w.version, "sha256": w.sha256, "size": w.size} for w in ws]
            for p, ws in by_project.items()
        },
        "stacks": {name: [s.shell for s in steps] for name, steps in commands.items()},
    }
    lines = [f"wrote {output} ({sum(len(ws) for ws in by_project.values())} wheels)"]
    for project, found in by_project.items():
        lines += [f"  {project}: {', '.join(w.version for w in found)}"]
    for name, steps in commands.items():
        lines += [f"install stack {name} with:", *(f"  {s.shell}" for s in steps)]
    if not commands:
        lines.append("it holds no stack whole (every patched wheel of one stack); 'nvfp4-overlay list' names them")
    ctx.emit(document, "\n".join(lines))
    return Exit.OK


def _bring_cubins(ctx: Context) -> None:
    """Each stack's flashinfer-cubin into the dist dir, for the index to mirror (operate/cubins.py)."""
    from ..operate import cubins

    stacks = load_stacks(ctx.patches_dir)
    for stack in stacks.ordered():
        built = [any(ctx.dist_dir.glob(f"{_stem(ctx, t)}-{v}-*.whl")) for t, v in _local_versions(ctx, stack).items()]
        if not all(built):
            continue  # a stack not built whole here: the index serves none of it
        wheel = cubins.bring(stack, ctx.patches_dir, ctx.dist_dir, ctx.source.cache_dir, offline=ctx.args.offline)
        if wheel is not None:
            ctx.log(f"{stack.name}: {wheel.name} in {ctx.dist_dir}")


def _stack_commands(ctx: Context, stacks: Stacks, by_project: dict[str, list[index.IndexedWheel]],
                    url: str) -> dict[str, list[Step]]:
    """For each stack whose patched wheels the index holds, all of them, the commands that install it."""
    held = {(p, w.version) for p, ws in by_project.items() for w in ws}
    out: dict[str, list[Step]] = {}
    for stack in stacks.ordered():
        try:
            versions = _local_versions(ctx, stack)
        except ConfigError:
            continue  # a stack whose series is not here: nothing to match
        if all((t.dist, v) in held for t, v in versions.items()):
            out[stack.name] = _with_cubins(ctx, stack, Tool(), install_steps(stack, versions, Tool(), fleet_index=url)[:2],
                                           url if _mirrors_cubins(ctx, stack, held) else None)
    return out


def _mirrors_cubins(ctx: Context, stack: Stack, held: set[tuple[str, str]]) -> bool:
    """Whether the index holds the stack's pinned flashinfer-cubin (`index --cubins` mirrored it)."""
    from ..wheel import cubin_pins

    pin = cubin_pins.pin_for(stack, ctx.patches_dir)
    return pin is not None and (cubin_pins.DIST, pin.version) in held
