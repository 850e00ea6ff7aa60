"""Probe: what a release's own argument handling makes of a launch line, on a CPU, answered as JSON.

``python -m nvfp4_overlay.probes.sglang.sglang_launch < plan.json``: the plan names the SGLang to
ask (``sglang``: an unpacked tree, or null for the interpreter's installed one), a FlashInfer tree to
put beside it (or null), the GPU to fake (``gpu``: [major, minor]) and the launch lines (``lines``:
``key``, ``argv``, and the model as a directory holding config.json, ``model_dir``, or the config
itself, ``config``). Per line, in a forked child of one interpreter that imported the release once:

1. SGLang's own parser (``ServerArgs.add_cli_args``, as ``prepare_server_args`` builds it) judges
   the flags: its error is the answer (``refused``: ``flag``);
2. the model's ``architectures[0]`` is looked up in the release's model registry, read from its
   tree (``refused``: ``architecture``);
3. ``prepare_server_args`` runs: the parser, ``ServerArgs`` and its ``__post_init__`` handlers (the
   arg-group hooks, ``--cuda-graph-config``), every line of SGLang traced so that each change of
   the graph settings is kept with the SGLang line that made it (launch_rules.py);
4. the model runner's own gate on the prefill graph runs over a stand-in runner
   (launch_runner.py): the line where it returns, or that it reached the loaded model.

What is stood in for: launch_machine.py (transformers' config reading, the GPU's memory, no
process) and sglang_machine.FakeGpu (the capability), sglang_imports (absent modules).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import sys
import tempfile
import traceback
from typing import Any

from nvfp4_overlay.probes import forking
from nvfp4_overlay.probes.sglang import launch_machine, launch_rules, launch_runner, sglang_imports, sglang_machine

NEEDS = ("sglang.srt.server_args", "sglang.srt.configs.model_config", "sglang.srt.model_executor.model_runner")


def main() -> None:
    json.dump(run(json.load(sys.stdin)), sys.stdout)


def run(plan: dict[str, Any]) -> dict[str, Any]:
    """{"release", "registry", "stubbed", "lines": {key: answer}}: the release imported once, a child a line."""
    import torch

    sglang_dir = _sglang_dir(plan)
    gpu = (int(plan["gpu"][0]), int(plan["gpu"][1]))
    fake = sglang_machine.FakeGpu(torch, gpu, [sglang_dir])
    fake.setup()
    launch_machine.transformers_stand_in()
    if plan.get("flashinfer"):
        sys.path.insert(0, plan["flashinfer"])
    _install(sglang_dir)
    server_args = _import("sglang.srt.server_args")
    try:  # once here, not in every line's child: the runner's gate (launch_runner) reads it
        _import("sglang.srt.model_executor.model_runner")
    except Exception:  # noqa: BLE001 - the gate says it was not asked, and why
        pass
    modules = {n: m for n, m in sys.modules.items() if n.startswith("sglang.") and m is not None}
    out: dict[str, Any] = {"release": _version(sglang_dir), "gpu": list(gpu),
                           "memory_mib": launch_machine.gpu_memory(torch, gpu, modules)}
    registry = launch_machine.registry(sglang_dir)
    launch_machine.refuse_processes()
    with tempfile.TemporaryDirectory(prefix="nvfp4-launch-") as scratch:
        out["lines"] = {line["key"]: forking.in_child(functools.partial(
            _answer, server_args, sglang_dir, registry, line, scratch)) for line in plan["lines"]}
    out["stubbed"] = dict(sorted(sglang_imports.STUBBED.items()))
    out["registry_size"] = len(registry)
    return out


def _answer(server_args: Any, sglang_dir: str, registry: dict[str, str], line: dict[str, Any],
            scratch: str) -> dict[str, Any]:
    try:
        return resolve(server_args, sglang_dir, registry, line, scratch)
    except Exception as exc:  # noqa: BLE001 - the probe's own failure, reported as data
        return {"probe_error": f"{type(exc).__name__}: {str(exc)[:600]}", "traceback": traceback.format_exc()[-3000:]}


def resolve(server_args: Any, sglang_dir: str, registry: dict[str, str], line: dict[str, Any],
            scratch: str) -> dict[str, Any]:
    argv = list(line["argv"])
    refused = _parser_refuses(server_args, argv)
    if refused:
        return {"refused": {"kind": "flag", "message": refused}}
    model_dir = line.get("model_dir") or _model_dir(line["config"], scratch, line["key"])
    arch = (launch_machine.read_config(model_dir).get("architectures") or [None])[0]
    if arch not in registry:
        return {"refused": {"kind": "architecture", "architecture": arch, "registry": len(registry)}}
    argv = _with_model(argv, model_dir)
    rules = launch_rules.Recorder(sglang_dir, server_args)
    try:
        with rules.tracing(), contextlib.redirect_stdout(io.StringIO()):
            made = server_args.prepare_server_args(argv)
        if hasattr(made, "resolve_once"):  # 0.5.19 on: construction keeps the record raw; the launcher resolves
            with rules.watching(made), contextlib.redirect_stdout(io.StringIO()):
                made.resolve_once()
    except SystemExit as exc:  # the parser again (a value it refuses once the model is known)
        return {"refused": {"kind": "flag", "message": str(exc)}}
    except Exception as exc:  # noqa: BLE001 - SGLang's own validation refused the line: its words
        return {"refused": {"kind": "server_args", "message": f"{type(exc).__name__}: {str(exc)[:800]}",
                            "where": launch_rules.raised_at(exc, sglang_dir)}, "architecture": arch}
    answer = {"architecture": arch, "model_module": registry[arch], **rules.resolution(made)}
    answer["runner"] = launch_runner.gate(made, sglang_dir, rules)
    answer.update(graphs(answer["settings"], answer["runner"]))
    answer["rule"] = _rule(answer, argv, sglang_dir)
    return answer


def _rule(answer: dict[str, Any], argv: list[str], sglang_dir: str) -> dict[str, Any]:
    """The SGLang rule that decided whether the fullgraph region is compiled: the runner's return where
    its gate said no, else the last change of the deciding setting, else the flag given or its default."""
    runner = answer["runner"]
    if runner.get("returned_at") and answer["prefill"] in COMPILED:
        return {**{k: v for k, v in runner["returned_at"].items() if k != "value"}, "by": "runner"}
    settings = answer["settings"]
    key = ("prefill" if "prefill" in settings else "enable_breakable_cuda_graph"
           if settings.get("enable_breakable_cuda_graph") else "enable_piecewise_cuda_graph"
           if "enable_piecewise_cuda_graph" in settings else "disable_piecewise_cuda_graph")
    decided = answer["decided_by"].get(key, {"initial": True})
    if not decided.get("initial"):
        return {**decided, "by": "server_args", "setting": key}
    flag = "--" + key.replace("_", "-")
    if any(a == flag or a.startswith(flag + "=") for a in argv):
        return {"by": "flag", "setting": key, "flag": flag}
    return {"by": "default", "setting": key, **launch_machine.field_site(sglang_dir, key)}


COMPILED = ("piecewise", "tc_piecewise")  # the runners that compile with torch.compile(fullgraph=True)


def graphs(settings: dict[str, Any], runner: dict[str, Any]) -> dict[str, Any]:
    """The graph backends SGLang chose (its 0.5.14 names; ``piecewise`` is 0.5.8-0.5.13's torch.compile
    runner), and whether a fullgraph region is compiled: a compiling prefill backend the runner's gate let
    through to the model."""
    if "prefill" in settings:
        prefill, decode = settings["prefill"], settings["decode"]
    else:
        on = (settings["enable_piecewise_cuda_graph"] if "enable_piecewise_cuda_graph" in settings
              else not settings.get("disable_piecewise_cuda_graph", True))
        prefill = ("breakable" if settings.get("enable_breakable_cuda_graph") else "piecewise") if on else "disabled"
        decode = "disabled" if settings.get("disable_cuda_graph") else "full"
    gate_open = runner.get("reached_model", True) if "not_run" not in runner else None
    compiled = prefill in COMPILED and gate_open is not False
    return {"prefill": prefill, "decode": decode, "fullgraph": compiled if gate_open is not None or
            prefill not in COMPILED else None, "torch_compile": bool(settings.get("enable_torch_compile"))}


def _parser_refuses(server_args: Any, argv: list[str]) -> str | None:
    """SGLang's own parser over the flags: its error message, None if it takes them."""
    parser = argparse.ArgumentParser(prog="sglang serve", exit_on_error=False)
    server_args.ServerArgs.add_cli_args(parser)
    if not any(a in ("--model-path", "--model") or a.startswith(("--model-path=", "--model=")) for a in argv):
        argv = [*argv, "--model-path", "m"]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
    except SystemExit:
        return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "the parser refused the line"
    except argparse.ArgumentError as exc:
        return f"sglang serve: error: {exc}"
    return None


def _model_dir(config: dict[str, Any], scratch: str, key: str) -> str:
    path = os.path.join(scratch, "model-" + "".join(c if c.isalnum() else "-" for c in key)[:80])
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(config, handle)
    return path


def _with_model(argv: list[str], model_dir: str) -> list[str]:
    """The launch line with its model at the directory the probe reads (a hub name is never fetched)."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word in ("--model-path", "--model"):
            skip = True
            continue
        if word.startswith(("--model-path=", "--model=")):
            continue
        out.append(word)
    return [*out, "--model-path", model_dir]


def _install(sglang_dir: str) -> None:
    """SGLang importable from its directory without running its __init__ (sglang_imports' stand-ins for
    the absent modules); nothing is written there."""
    import types

    sys.path.insert(0, os.path.dirname(sglang_dir))
    package = types.ModuleType("sglang")
    package.__path__ = [sglang_dir]
    sys.modules["sglang"] = package
    sys.meta_path.insert(0, sglang_imports.FallibleSglang(NEEDS))
    sys.meta_path.append(sglang_imports.AbsentModules(sglang_dir))


def _sglang_dir(plan: dict[str, Any]) -> str:
    if plan.get("sglang"):
        return os.path.join(plan["sglang"], "sglang")
    import importlib.util

    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        msg = "sglang is not installed in this interpreter"
        raise RuntimeError(msg)
    return str(list(spec.submodule_search_locations)[0])


def _version(sglang_dir: str) -> str | None:
    scope: dict[str, Any] = {}
    try:
        with open(os.path.join(sglang_dir, "version.py"), encoding="utf-8") as handle:
            exec(compile(handle.read(), "version.py", "exec"), scope)  # noqa: S102 - the child's own read
    except OSError:
        return None
    return str(scope.get("__version__"))


def _import(name: str) -> Any:
    import importlib

    return importlib.import_module(name)


if __name__ == "__main__":
    main()
