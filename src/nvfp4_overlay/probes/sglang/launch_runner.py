"""The model runner's own gate on the prefill graph, run over a stand-in runner.

The release's ModelRunner method that sets its prefill graph runner up (``init_prefill_cuda_graph``,
0.5.14 on; ``init_piecewise_cuda_graphs`` before) runs unbound over an object of a ModelRunner
subclass made without ``__init__``, carrying only what the gates read before the loaded model:
the resolved ServerArgs (published as the scheduler publishes it, ``set_global_server_args_for_scheduler``,
and the MoE config it initialises), the model config SGLang built from it, ``is_draft_worker``
False (the target model), ``pp_size``/``tp_size`` from the ServerArgs, the speculative algorithm
of the line, no LoRA manager, the eager runner as a marker. Reading ``model`` stops the gate:
every gate on the launch line has passed and what follows reads the loaded model's layers (a layer
that is not standard attention still turns it off there; the answer says so). A return before
that is the runner turning the region off: the line it returned at, and the ``can_run_*`` check that
said no, are the rule.
"""

from __future__ import annotations

import importlib
import linecache
import os
import sys
from typing import Any

METHODS = ("init_prefill_cuda_graph", "init_piecewise_cuda_graphs")
GATES = ("capture_prefill_graph", *METHODS)  # 0.5.20 on: the method asks cuda_graph_setup's function


class ReachedModel(Exception):
    """The gate read the loaded model: every check on the launch line passed."""


def gate(made: Any, sglang_dir: str, rules: Any) -> dict[str, Any]:
    """{"method", "reached_model": bool, "returned_at": rule, "checks": [...]} or {"not_run": why}."""
    try:
        runner_module = importlib.import_module("sglang.srt.model_executor.model_runner")
        cls = runner_module.ModelRunner
    except Exception as exc:  # noqa: BLE001 - the answer says the runner's gate was not asked
        return {"not_run": f"model_runner does not import here: {type(exc).__name__}: {str(exc)[:300]}"}
    method = next((m for m in METHODS if isinstance(getattr(cls, m, None), type(gate))), None)
    if method is None:
        return {"not_run": "ModelRunner has no prefill graph initialiser"}
    try:
        stand_in = _stand_in(cls, made)
    except Exception as exc:  # noqa: BLE001
        return {"not_run": f"the stand-in runner could not be made: {type(exc).__name__}: {str(exc)[:300]}"}
    returns: list[dict[str, Any]] = []
    tracer = _Returns(sglang_dir, returns)
    sys.settrace(tracer.global_trace)
    try:
        getattr(cls, method)(stand_in)
        reached = False
    except ReachedModel:
        reached = True
    except Exception as exc:  # noqa: BLE001 - a gate read what the stand-in does not carry
        if "prefill_cuda_graph_runner" not in vars(stand_in):  # not after the gate chose (0.5.20's bookkeeping)
            return {"method": method, "not_run": f"{type(exc).__name__}: {str(exc)[:300]}"}
        reached = False
    finally:
        sys.settrace(None)
    out: dict[str, Any] = {"method": method, "reached_model": reached}
    if not reached:
        said_no = [r for r in returns if r["function"].rsplit(".", 1)[-1].startswith("can_run") and r["value"] is False]
        decided = [r for r in returns if r["function"].rsplit(".", 1)[-1] in GATES]
        out["returned_at"] = (said_no or decided or [{}])[0]
        out["checks"] = said_no
    return out


def _stand_in(cls: Any, made: Any) -> Any:
    server_args = sys.modules["sglang.srt.server_args"]
    if hasattr(server_args, "set_global_server_args_for_scheduler"):
        server_args.set_global_server_args_for_scheduler(made)
    _initialise_moe(made)
    model_config = made.get_model_config() if hasattr(made, "get_model_config") else None
    if model_config is None:
        config_module = importlib.import_module("sglang.srt.configs.model_config")
        model_config = config_module.ModelConfig.from_server_args(made)

    def model(self: Any) -> Any:
        raise ReachedModel

    runner = type("StandInRunner", (cls,), {"model": property(model), "__init__": lambda self: None,
                                            "__module__": cls.__module__})
    stand_in: Any = object.__new__(runner)
    values = {"server_args": made, "model_config": model_config, "is_draft_worker": False,
              "pp_size": getattr(made, "pp_size", 1), "tp_size": getattr(made, "tp_size", 1),
              "spec_algorithm": _speculative(made), "eager_runner": "eager-runner", "lora_manager": None,
              "device": "cuda", "gpu_id": 0, "use_mla_backend": False}
    for key, value in values.items():
        object.__setattr__(stand_in, key, value)
    return stand_in


def _initialise_moe(made: Any) -> None:
    try:
        utils = importlib.import_module("sglang.srt.layers.moe.utils")
    except Exception:  # noqa: BLE001 - a release without it
        return
    initialise = getattr(utils, "initialize_moe_config", None)
    if initialise is None:
        return
    try:
        initialise(made)
    except TypeError:  # 0.5.20 on: reads the published config itself
        initialise()


def _speculative(made: Any) -> Any:
    try:
        spec = importlib.import_module("sglang.srt.speculative.spec_info")
    except Exception:  # noqa: BLE001
        return None
    algorithm = getattr(spec, "SpeculativeAlgorithm", None)
    return algorithm.from_string(getattr(made, "speculative_algorithm", None)) if algorithm else None


class _Returns:
    """Where the gates returned (GATES, can_run_*): file, line, function, the value (a type name unless a bool or
    None); an exception passing through a gate is a return of None (ReachedModel)."""

    def __init__(self, sglang_dir: str, found: list[dict[str, Any]]) -> None:
        self.root, self.top, self.found = sglang_dir + os.sep, os.path.dirname(sglang_dir) + os.sep, found

    def global_trace(self, frame: Any, event: str, arg: Any) -> Any:
        return self.local if frame.f_code.co_filename.startswith(self.root) else None

    def local(self, frame: Any, event: str, arg: Any) -> Any:
        name = frame.f_code.co_name
        if event == "return" and (name in GATES or name.startswith("can_run")):
            code, line = frame.f_code, frame.f_lineno
            value = arg if arg is None or isinstance(arg, bool) else type(arg).__name__
            self.found.append({"file": code.co_filename[len(self.top):].replace(os.sep, "/"), "line": line,
                               "function": getattr(code, "co_qualname", code.co_name), "value": value,
                               "text": linecache.getline(code.co_filename, line).strip()[:200]})
        return self.local
