"""The whole-layer probe (probe.py) at tensor parallel N: N ranks, each compiling its shard of the layer.

    python -m nvfp4_overlay.probes.sglang.layer.tp_probe SGLANG_TREE FLASHINFER_TREE MAJOR MINOR [BACKEND]
        [--model MODEL] [--allreduce-fusion] [--tp N]

The launcher starts N fresh interpreters (ranks 0..N-1, each in its own directory under the current
one) and prints one JSON line: {"tp": N, "ranks": [each rank's result]}. Each rank runs the probe's
own build and compile (probe.build, compile_layer: SGLang's install_torch_compiled
(fullgraph=True) and SGLangBackend), with the probe's single-rank world replaced, from outside the
probe, by the world SGLang's model runner makes (0.5.11 ModelRunner.init_torch_distributed, 0.5.20
distributed/bootstrap.py):

- torch.distributed of N real processes, gloo (a CPU has no NCCL), rendezvous through a file;
  SGLang's own set_custom_all_reduce(False) as `--disable-custom-all-reduce` sets it, its
  init_distributed_environment, initialize_model_parallel(tensor_model_parallel_size=N) (every
  GroupCoordinator with its gloo device and CPU groups; PyNcclCommunicator built by SGLang, its NCCL
  library absent here, so available False as SGLang leaves it on a machine without NCCL: the object
  exists, as on a GPU server), 0.5.20's set_flashinfer_allreduce_only and
  _tag_groups_for_flashinfer_allreduce_only, initialize_dp_attention (no DP attention); the server
  arguments `--tp N --disable-custom-all-reduce`, so every layer shards its weights as SGLang does;
- the hidden states are CUDA tensors on a server and CPU tensors here: GroupCoordinator.all_reduce's
  `if input_.is_cpu:` branch (SGLang's CPU server: torch.distributed.all_reduce or its shm kernel) is
  the one line of SGLang read otherwise, as False (the method recompiled from its source, file and
  lines kept), so the trace takes the branch a GPU server takes;
- with --allreduce-fusion, FlashInfer's fusion workspace as the server pre-allocates it before its
  CUDA graphs (pre_initialize_workspaces, SGLang's own, run eagerly): FlashInfer's
  create_allreduce_fusion_workspace (CUDA IPC memory) and SGLang's cuMem preflight are stood in for by
  a workspace object that answers what SGLang asks of it eagerly (backend trtllm, its size check) and
  records every attribute read; dynamo cannot trace it (a custom __getattribute__), so a trace that
  touches it fails.

Each rank's result is the probe's (whole, error, pieces and their custom ops, split ops,
flashinfer_frames, allreduce_fusion) and: tp_size and tp_rank as SGLang reports them, the layer's
parameter shapes (its shard), the collective nodes of each piece (torch's own, outside SGLang's ops),
and what ran while dynamo traced: process starts and file opens (Python's audit events, less the
tracer reading source), torch.distributed collectives executed (ProcessGroup methods), and
workspace reads.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from nvfp4_overlay.probes import io_audit
from nvfp4_overlay.probes.sglang import sglang_drivers
from nvfp4_overlay.probes.sglang.layer import models, piecewise, probe, server

COLLECTIVES = ("allreduce", "allgather", "broadcast", "barrier", "reduce_scatter", "alltoall", "send", "recv",
               "gather", "scatter", "reduce", "allgather_into_tensor_coalesced", "_allgather_base",
               "_reduce_scatter_base")
CPU_BRANCH = "if input_.is_cpu:"
MODULE = "nvfp4_overlay.probes.sglang.layer.tp_probe"  # each rank runs it anew
STDLIB = os.path.dirname(os.__file__) + os.sep


class Watch:
    """What runs while dynamo traces: process starts and file opens (audit events), collectives
    executed, the stand-in workspace's attributes read."""

    def __init__(self) -> None:
        self.phase = "setup"
        self.io: list[list[str]] = []
        self.collectives: list[str] = []
        self.workspace: list[list[str]] = []
        self.tracer_opens = 0
        self.trees: tuple[str, ...] = ()

    def install(self) -> None:
        sys.addaudithook(self.audit)
        group = torch._C._distributed_c10d.ProcessGroup
        for name in COLLECTIVES:
            if hasattr(group, name):
                setattr(group, name, self.counted(name, getattr(group, name)))

    def counted(self, name: str, method: Any) -> Any:
        watch = self

        def collective(self: Any, *args: Any, **kwargs: Any) -> Any:
            if watch.phase == "trace":
                watch.collectives.append(name)
            return method(self, *args, **kwargs)

        return collective

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.phase != "trace":
            return
        if io_audit.is_spawn(event):
            self.io.append([event, repr(args[0])[:160], self.runs_in_trees() or "the tracer"])
        elif event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            by = self.runs_in_trees()
            if by is not None:
                self.io.append(["open", os.fsdecode(args[0]), by])
            else:
                self.tracer_opens += 1

    def runs_in_trees(self) -> str | None:
        """The running code that asked, when it is SGLang's or FlashInfer's ("sglang/...py:line function",
        relative to its tree): the innermost frame outside the standard library and the import system;
        None where that frame is the tracer's own (dynamo reading a source, torch importing what it uses)."""
        frame: Any = sys._getframe(2)
        while frame is not None and (frame.f_code.co_filename.startswith(("<frozen", STDLIB))
                                     or frame.f_code.co_filename == __file__):
            frame = frame.f_back
        file = frame.f_code.co_filename if frame is not None else ""
        root = next((tree for tree in self.trees if file.startswith(tree)), None)
        return None if root is None else f"{file[len(root):]}:{frame.f_lineno} {frame.f_code.co_name}"


WATCH = Watch()


class StandInWorkspace:
    """FlashInfer's allreduce fusion workspace (CUDA IPC buffers on a server), as SGLang reads it eagerly:
    the trtllm backend, its metadata, its size check. Every attribute read is recorded with the phase;
    dynamo refuses an object with its own __getattribute__, so a trace that reads one fails."""

    def __getattribute__(self, name: str) -> Any:
        WATCH.workspace.append([WATCH.phase, name])
        return object.__getattribute__(self, name)

    backend = "trtllm"
    metadata = {"use_fp32_lamport": False}  # noqa: RUF012 - FlashInfer's trtllm workspace's

    def is_buffer_size_sufficient(self, tp_size: int, num_tokens: int, hidden_dim: int, dtype: Any,
                                  use_oneshot: Any = None) -> bool:
        return True

    def destroy(self) -> None:
        return None


def cuda_hidden_states(parallel_state: Any) -> str:
    """GroupCoordinator.all_reduce with its CPU branch read as False (the hidden states are CUDA tensors on
    a server), recompiled from its own source under its own file and lines."""
    method = parallel_state.GroupCoordinator.all_reduce
    source = textwrap.dedent(inspect.getsource(method))
    if source.count(CPU_BRANCH) != 1:
        msg = f"GroupCoordinator.all_reduce has {source.count(CPU_BRANCH)} '{CPU_BRANCH}' lines, expected 1"
        raise LookupError(msg)
    tree = ast.parse(source.replace(CPU_BRANCH, "if False:"))
    ast.increment_lineno(tree, method.__code__.co_firstlineno - 1)
    namespace: dict[str, Any] = {}
    exec(compile(tree, method.__code__.co_filename, "exec"), vars(parallel_state), namespace)  # noqa: S102
    replaced = namespace["all_reduce"]
    replaced.__qualname__ = method.__qualname__
    parallel_state.GroupCoordinator.all_reduce = replaced
    return f"{method.__code__.co_filename.split('sglang/srt/')[-1]}:GroupCoordinator.all_reduce '{CPU_BRANCH}' as False"


def tp_world(tp: int, rank: int, store: str) -> dict[str, Any]:
    """SGLang's own process groups of `tp` ranks, as its model runner makes them (see the module's doc)."""
    state = importlib.import_module("sglang.srt.distributed.parallel_state")
    args = probe_server_args()
    # the TP group's shared-memory broadcaster of scheduler requests (zmq, absent here) is off the layer's path
    os.environ["SGLANG_USE_MESSAGE_QUEUE_BROADCASTER"] = "false"
    state.set_custom_all_reduce(False)  # --disable-custom-all-reduce
    if hasattr(state, "set_flashinfer_allreduce_only"):  # 0.5.20: the fusion backend named, or not
        state.set_flashinfer_allreduce_only(getattr(args, "flashinfer_allreduce_fusion_backend", None) is not None)
    state.init_distributed_environment(world_size=tp, rank=rank, local_rank=rank, backend="gloo",
                                       distributed_init_method=f"file://{store}")
    state.initialize_model_parallel(tensor_model_parallel_size=tp)
    if hasattr(state, "_tag_groups_for_flashinfer_allreduce_only"):
        state._tag_groups_for_flashinfer_allreduce_only()
    model_config = types.SimpleNamespace(hidden_size=256, dtype=torch.bfloat16, hf_config=types.SimpleNamespace())
    importlib.import_module("sglang.srt.layers.dp_attention").initialize_dp_attention(args, model_config)
    tp_group = state.get_tp_group()
    return {"pynccl": None if tp_group.pynccl_comm is None else {"available": tp_group.pynccl_comm.available},
            "custom_all_reduce": tp_group.ca_comm is not None, "stubbed": cuda_hidden_states(state)}


def probe_server_args() -> Any:
    module = importlib.import_module("sglang.srt.server_args")
    getter = getattr(module, "get_global_server_args", None)
    try:
        return getter()  # type: ignore[misc]
    except Exception:  # noqa: BLE001 - 0.5.20 retired it: the runtime context holds them
        return importlib.import_module("sglang.srt.runtime_context").get_server_args()


def pre_initialize_workspaces(hidden: int) -> list[str]:
    """What the server runs before its CUDA graphs with the fusion on: SGLang's own pre_initialize_workspaces,
    FlashInfer's workspace allocation and SGLang's cuMem preflight stood in for (StandInWorkspace)."""
    fusion: Any = importlib.import_module("sglang.srt.layers.flashinfer_comm_fusion")
    fusion._preflight_check_workspace_memory = lambda **kwargs: True
    create = lambda **kwargs: StandInWorkspace()  # noqa: E731
    comm: Any = importlib.import_module("flashinfer.comm")
    comm.create_allreduce_fusion_workspace = create  # 0.5.11 calls it there
    if hasattr(fusion, "_create_allreduce_fusion_workspace"):  # 0.5.20 binds it at import
        fusion._create_allreduce_fusion_workspace = create
    fusion.pre_initialize_workspaces(max_token_num=2048, hidden_dim=hidden, dtype=torch.bfloat16)
    return ["flashinfer.comm.create_allreduce_fusion_workspace: StandInWorkspace",
            "flashinfer_comm_fusion._preflight_check_workspace_memory: True"]


def rank_main(args: argparse.Namespace) -> dict[str, Any]:
    """One rank: the probe's build and compile in the TP world, watched while dynamo traces."""
    WATCH.trees = tuple(os.path.join(os.path.abspath(t), "") for t in (args.sglang_tree, args.flashinfer_tree))
    WATCH.install()
    world: dict[str, Any] = {}
    serve = sglang_drivers.serve

    def tp_serve(ctx: sglang_drivers.Context, moe_runner_backend: str = "auto",
                 options: Mapping[str, Any] | None = None) -> None:  # `--tp N --disable-custom-all-reduce`
        serve(ctx, moe_runner_backend, {**(options or {}), "tp_size": args.tp, "disable_custom_all_reduce": True,
                                        "device": "cuda"})

    sglang_drivers.serve = tp_serve
    sglang_drivers.single_process_parallel = lambda ctx: world.update(tp_world(args.tp, args.rank, args.store))
    server.single_rank_dp_attention = lambda: None  # initialize_dp_attention has run, in tp_world
    built = probe.build(args.sglang_tree, args.flashinfer_tree, (args.major, args.minor), args.backend,
                        args.allreduce_fusion, models.model(args.model))
    ctx, layer, _, chosen = built
    if args.allreduce_fusion:
        world["workspace"] = pre_initialize_workspaces(chosen.config().hidden_size)
    collectives: list[list[str]] = []
    watched_contexts(collectives)
    result = {**probe.compile_layer(*built), "allreduce_fusion": piecewise.fusion_applies(ctx, probe.TOKENS)}
    state = importlib.import_module("sglang.srt.distributed.parallel_state")
    return {**result, "rank": args.rank, "tp_size": state.get_tensor_model_parallel_world_size(),
            "tp_rank": state.get_tensor_model_parallel_rank(), "world": world, "collective_nodes": collectives,
            "shapes": {name: list(p.shape) for name, p in layer.named_parameters()},
            "trace_io": WATCH.io, "tracer_opens": WATCH.tracer_opens,
            "trace_collectives": WATCH.collectives,
            "workspace_reads": sorted({f"{phase}:{name}" for phase, name in WATCH.workspace})}


def watched_contexts(collectives: list[list[str]]) -> None:
    """The trace's window (the probe's piecewise contexts, entered around the compiled call) and each
    graph's collective nodes (as SGLangBackend receives the graph)."""
    contexts, frames = piecewise.piecewise_contexts, probe.flashinfer_frames

    def piecewise_contexts(ctx: Any, batch: Any, layer: Any, quant: Any, chosen: models.Model) -> contextlib.ExitStack:
        stack = contexts(ctx, batch, layer, quant, chosen)
        WATCH.phase = "trace"
        stack.callback(setattr, WATCH, "phase", "after")
        return stack

    def flashinfer_frames(gm: Any) -> set[str]:
        WATCH.phase = "backend"  # the trace is over: SGLangBackend splits and compiles the graph now
        targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        collectives.append([t for t in targets if "c10d" in t or any(
            k in t for k in ("all_reduce", "allreduce", "all_gather", "reduce_scatter", "broadcast"))])
        return frames(gm)

    piecewise.piecewise_contexts, probe.flashinfer_frames = piecewise_contexts, flashinfer_frames


def launch(argv: list[str], tp: int) -> dict[str, Any]:
    """`tp` ranks, each a fresh interpreter in its own directory; their results in rank order."""
    store = Path.cwd() / "dist-store"
    store.unlink(missing_ok=True)
    runs = []
    for rank in range(tp):
        where = Path.cwd() / f"rank{rank}"
        where.mkdir(exist_ok=True)
        out, err = (where / "stdout").open("w"), (where / "stderr").open("w")
        runs.append((where, subprocess.Popen([sys.executable, "-m", MODULE, *argv, "--rank", str(rank), "--store",
                                              str(store)], cwd=where, stdout=out, stderr=err)))
    ranks = []
    for rank, (where, process) in enumerate(runs):
        code = process.wait()
        lines = (where / "stdout").read_text().strip().splitlines()
        ranks.append(json.loads(lines[-1]) if lines else {
            "setup_error": f"rank {rank} exited {code} without a result: {(where / 'stderr').read_text()[-2000:]}"})
    return {"tp": tp, "ranks": ranks}


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    for name in ("sglang_tree", "flashinfer_tree"):
        parser.add_argument(name)
    parser.add_argument("major", type=int)
    parser.add_argument("minor", type=int)
    parser.add_argument("backend", nargs="?", default="flashinfer_cutlass", help="--moe-runner-backend")
    parser.add_argument("--allreduce-fusion", action="store_true", help="--enable-flashinfer-allreduce-fusion")
    parser.add_argument("--model", default=models.DEFAULT, help="a name of the layer probe's models.py")
    parser.add_argument("--tp", type=int, default=2, help="--tp: the ranks started")
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)  # a rank's own run, started by the launcher
    parser.add_argument("--store", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main() -> None:
    args = arguments(sys.argv[1:])
    if args.rank is None:
        print(json.dumps(launch(sys.argv[1:], args.tp)))
        return
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", os.path.join(os.getcwd(), "flashinfer-workspace"))
    torch.compile(lambda t: t + 1, fullgraph=True, backend="eager")(torch.zeros(1))
    importlib.import_module("torch._inductor.compile_fx")
    if not probe.cuda_runtime():
        print(json.dumps({"no_cuda_runtime": "no libcudart.so* under $CUDA_HOME/lib64 (default /usr/local/cuda)"}))
        return
    try:
        result = rank_main(args)
    except Exception:  # noqa: BLE001 - SGLang's own set-up failed at this rank: the finding
        import traceback

        result = {"setup_error": traceback.format_exc()[-2500:], "rank": args.rank}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
