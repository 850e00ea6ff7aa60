"""Probe: every routed entry point over its explored space, one side at a time: upstream's wrapper, or the fake.

``run(plan)`` (probes/serve.py) answers, for each tree of the plan, per GPU (the capability faked as
the trace ladder fakes it), per entry point, per explored call (probes/flashinfer/tables/space.py), what
the call gives exactly (space.exact: each tensor's shape, stride, dtype and device, each tuple's and
list's class and fields), or its refusal ``{"error": [kind, message]}``:

- ``side: "wrapper"``: the public function called eagerly, the kernel a recording no-op (the trace
  ladder's stubs): what upstream allocates. An upstream tree and a patched one give the same (the
  patched tree's eager path is upstream's own), so this half is a fact about the upstream wheel;
- ``side: "fake"``: the path a call takes while torch.compile traces (the routed function's
  ``__nvfp4_overlay_traced__``), under a FakeTensorMode made as dynamo makes its own (an address read
  refuses; a host read of a tensor gives a symbol): the op's fake, put back together as the caller gets
  it; ``"upstream"`` where the op does not take the call. This side runs in a process that has made no
  eager call: a derived fake meets cold caches, and what it leaves in FlashInfer's module state (a
  fake tensor kept in a dict or list of a module, a stand-in kernel kept by a cache that an eager call
  then runs) is reported per entry point under ``"left"``, and whether its fake is upstream's own
  wrapper (``"derived"``).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch

from nvfp4_overlay.probes import forking, stdio
from nvfp4_overlay.probes.flashinfer import fake_shapes, flashinfer_trace
from nvfp4_overlay.probes.flashinfer.tables import space


def run(plan: dict[str, Any]) -> dict[str, Any]:
    """{tree key: its answers}, each tree in a child of its own."""
    with stdio.prints_to_stderr():
        return forking.each_tree(plan["trees"], lambda tree: probe_tree(tree, plan), plan.get("jobs", 1))


def probe_tree(tree: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    """Every entry point's explored calls on each GPU of the plan, on fake_shapes' faked machine."""
    flashinfer = fake_shapes.faked_machine(tree, plan)
    entries = {name: fn for name in plan["entries"] if (fn := flashinfer_trace.public(flashinfer, name)) is not None}
    if plan["side"] == "fake":  # the routed ones: the others have no fake to hold
        entries = {n: fn for n, fn in entries.items() if getattr(fn, "__nvfp4_overlay_traced__", None) is not None}
    out: dict[str, Any] = {"version": flashinfer.__version__, "entries": sorted(entries)}
    for cc in plan["gpus"]:  # each GPU in a process of its own, whose first call of each entry point is a fake
        gpu = f"{cc[0]}.{cc[1]}"
        out[gpu] = forking.in_child(functools.partial(run_gpu, entries, tuple(cc), plan, tree["path"]))
    return out


def run_gpu(entries: dict[str, Any], cc: tuple[int, int], plan: dict[str, Any], tree: str) -> dict[str, Any]:
    """Every entry point's explored calls on this GPU; on the fake side only those the plan says
    upstream's wrapper accepts (``accepted``: a refusal is the trace ladder's to hold), and what the
    fakes left behind."""
    flashinfer_trace._fake_capability(cc)
    accepted = plan.get("accepted", {}).get(f"{cc[0]}.{cc[1]}")
    out: dict[str, Any] = {}
    for name, fn in entries.items():
        made = list(space.calls(name, fn, quick=plan.get("quick", False)))
        if plan["side"] == "wrapper":
            out[name] = {"calls": {call: _cleaned(wrapper_answer(fn, make), tree) for call, make in made}}
            continue
        wanted = None if accepted is None else set(accepted.get(name, ()))
        mode = fake_mode()
        out[name] = {"calls": {call: _cleaned(fake_answer(mode, fn, make), tree) for call, make in made
                               if wanted is None or call in wanted},
                     "left": left_behind(fn, made[0][1] if made else None), "derived": _derived(name)}
    return out


def _derived(name: str) -> bool:
    """Whether the entry point's fake is upstream's own wrapper (the overlay's entries.py names none)."""
    from flashinfer._nvfp4_overlay.entries import ENTRIES

    return ENTRIES[name].fake is None


def wrapper_answer(fn: Any, make: Any) -> Any:
    try:
        args, kwargs = make(torch)
    except space.NotExplored as exc:  # counted as a refusal: the fake is never asked this call
        return {"error": ["NotExplored", str(exc)[:300]]}
    try:
        return space.exact(fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - upstream's refusal is an answer
        return {"error": [type(exc).__name__, str(exc)[:300]]}


def fake_mode() -> Any:
    """A FakeTensorMode made as dynamo makes its own: an address read (data_ptr) refuses; a host read
    (.item()) is a symbol, as dynamo captures it. One for every call of an entry point (a ShapeEnv
    takes a while to make)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with torch._functorch.config.patch(fake_tensor_allow_unsafe_data_ptr_access=False):
        return FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())


def fake_answer(mode: Any, fn: Any, make: Any) -> Any:
    from torch.utils._pytree import tree_map

    args, kwargs = make(torch)

    def fake(value: Any) -> Any:  # the sizes are the inputs' own
        return mode.from_tensor(value, static_shapes=True) if isinstance(value, torch.Tensor) else value

    try:
        args, kwargs = tree_map(fake, args), tree_map(fake, kwargs)
        with mode:
            result = fn.__nvfp4_overlay_traced__(*args, **kwargs)
        return "upstream" if type(result).__name__ == "_Upstream" else space.exact(result)
    except Exception as exc:  # noqa: BLE001 - a fake that fails is an answer (it differs)
        return {"error": [type(exc).__name__, str(exc)[:300]]}


def left_behind(fn: Any, make: Any) -> list[str]:
    """What the fakes left in FlashInfer's module state: a fake tensor in a module's dict, list or tuple,
    and an eager call that then meets a stand-in kernel (a cache kept it)."""
    from torch._subclasses.fake_tensor import FakeTensor

    found = []
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("flashinfer") or "_nvfp4_overlay" in module_name:
            continue
        for attr, value in list(vars(module).items()):
            held = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
            if any(isinstance(v, FakeTensor) for v in held):
                found.append(f"{module_name}.{attr} holds a fake tensor")
    if make is not None:
        args, kwargs = make(torch)
        try:
            fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - only a stand-in met eagerly is the fakes' doing
            if "stand-in of a kernel" in str(exc):
                found.append(f"an eager call after the fakes met a stand-in kernel: {str(exc)[:200]}")
    return found


def _cleaned(answer: Any, tree: str) -> Any:
    if isinstance(answer, dict) and "error" in answer:
        kind, message = answer["error"]
        return {"error": [kind, flashinfer_trace._clean(message, tree)]}
    return answer
