"""The explored space of a routed entry point: the calls its fake is held to upstream's wrapper on.

From each row of the case table (probes/flashinfer/tables/cases.py), three axes, each varied alone:

- ``m``: the rows of the first tensor input (its dimension -2, and that size wherever another tensor
  input has it: a MoE's tokens in its scales and routing), at the powers of two to 16k, odd sizes, and
  one below, at and one above every integer constant the wrapper's shape code compares or rounds
  with (read with ast from its source and the FlashInfer functions it names, however deep: the
  module getter and the kernel wrapper a getter defines among them);
- ``k``: the last dimension of the first tensor input, at multiples of 16 around the same constants
  and the powers of two, and sizes upstream refuses;
- every optional parameter of the signature (and the keywords a decorator of upstream's takes) in
  each state: None, its default given, and another value of its type (every member of an enum,
  every value of a Literal, the other bool, a doubled int, a (1,) float32 tensor where it may be one).

``quick`` explores the first row of each entry point, at fewer odd sizes and columns; the full space
every row (the weekly run and refresh without --quick). A call is named ``<row>@<axis>=<value>``; the space is a function of the
tree's own source, so two trees of one release explore the same calls.
"""

from __future__ import annotations

import ast
import enum
import inspect
import textwrap
import typing
from collections.abc import Callable, Iterator
from typing import Any

from nvfp4_overlay.probes.flashinfer.stubs.recording import describe
from nvfp4_overlay.probes.flashinfer.tables import cases as case_table

Make = case_table.Make
LARGEST = 16384
# An input the explored space would make larger than this is not made: the call is not explored (on a
# CPU machine a many-dimension size at LARGEST asks for tens of GB, which the allocator refuses).
LARGEST_INPUT_BYTES = 2 << 30


class NotExplored(Exception):
    """A call whose inputs the explored space does not make (LARGEST_INPUT_BYTES)."""
POWERS = tuple(2 ** i for i in range(15))  # 1 .. 16384
ODD = (3, 5, 7, 9, 15, 17, 33, 65, 100, 255, 257, 1000, 1100, 2047, 2049, 4095, 4097, 8191, 8193, 16383)
QUICK_ODD = (3, 100, 1000, 16383)
K_REFUSED = (8, 24, 200)  # not a multiple of 16: upstream's refusals, explored too
QUICK_K = (16, 32, 48, 64, 112, 224, 8192, 16384, 200)
DEPTH = 4  # how deep the functions a wrapper names are followed for constants


def calls(name: str, fn: Callable[..., Any], *, quick: bool) -> Iterator[tuple[str, Make]]:
    """Every explored call of the entry point: (its id, the maker of its inputs)."""
    rows = list(case_table.cases(name, fn))
    constants = shape_constants(fn)
    ms, ks = row_sizes(constants, QUICK_ODD if quick else ODD), list(QUICK_K) if quick else column_sizes(constants)
    states = parameter_states(fn)
    for row, make in rows[:1] if quick else rows:
        yield row, make
        first = _first_tensor(make)
        if first is not None and first[1].dim() >= 2:
            base_m, base_k = first[1].shape[-2], first[1].shape[-1]
            yield from ((f"{row}@m={m}", _resized(make, first[0], -2, base_m, m)) for m in ms if m != base_m)
            yield from ((f"{row}@k={k}", _resized(make, first[0], -1, base_k, k, alone=True))
                        for k in ks if k != base_k)
        for param, label, value in states:
            yield f"{row}@{param}={label}", _with(make, param, value)


# --- the constants of the wrapper's shape code --------------------------------------------------------


def shape_constants(fn: Callable[..., Any]) -> list[int]:
    """The integers (2 to 16k) the wrapper and the FlashInfer functions it names compare, round or
    compute sizes with: in comparisons, arithmetic, calls' arguments and conditional expressions."""
    found: set[int] = set()
    seen: set[int] = set()
    waiting = [(f, 0) for f in _levels(fn)]
    while waiting:
        function, depth = waiting.pop()
        if id(function) in seen or depth > DEPTH:
            continue
        seen.add(id(function))
        constants, callees = _read(function)
        found |= constants
        waiting += [(callee, depth + 1) for callee in callees]
    return sorted(c for c in found if 2 <= c <= LARGEST)


_reads: dict[Any, tuple[set[int], list[Any]]] = {}  # a function's code -> its constants and the functions it names


def _read(function: Any) -> tuple[set[int], list[Any]]:
    code = getattr(function, "__code__", None)
    if code in _reads:
        return _reads[code]
    tree = _parsed(function)
    scope = getattr(function, "__globals__", {})
    found: tuple[set[int], list[Any]] = (set(), [])
    if tree is not None:
        named = [scope[n.id] for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in scope]
        held = [c.cell_contents for c in getattr(function, "__closure__", None) or () if _filled(c)]
        found = (_constants(tree), [f for value in [*named, *held] for f in _levels(value)])
    _reads[code] = found
    return found


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _parsed(function: Any) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None


def _levels(value: Any) -> list[Any]:
    """FlashInfer's own functions in value and down its __wrapped__ chain (a decorator's wrapper, a
    functools.cache'd getter's body), the overlay's left out: the same in an upstream and a patched tree."""
    found = []
    for _ in range(8):
        code = getattr(value, "__code__", None)
        if inspect.isfunction(value) and code is not None and "flashinfer" in code.co_filename \
                and "nvfp4_overlay" not in code.co_filename:  # the overlay's, and this project's stand-ins
            found.append(value)
        value = getattr(value, "__wrapped__", None)
        if value is None:
            break
    return found


def _constants(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Compare, ast.BinOp, ast.Call, ast.IfExp, ast.AugAssign)):
            for child in ast.iter_child_nodes(node):
                for leaf in ([child] if isinstance(child, ast.Constant) else
                             [c for c in ast.iter_child_nodes(child) if isinstance(c, ast.Constant)]
                             if isinstance(child, (ast.keyword, ast.IfExp)) else []):
                    if type(leaf.value) is int:
                        found.add(leaf.value)
    return found


def row_sizes(constants: list[int], odd: tuple[int, ...] = ODD) -> list[int]:
    around = {c + d for c in constants for d in (-1, 0, 1)}
    return sorted(s for s in {*POWERS, *odd, *around} if 1 <= s <= LARGEST)


def column_sizes(constants: list[int]) -> list[int]:
    multiples = {16 * c + d for c in constants for d in (-16, 0, 16) if 16 * c <= LARGEST}
    return sorted(s for s in {*multiples, *(p for p in POWERS if p >= 16), 48, 80, 112, 224, *K_REFUSED}
                  if 1 <= s <= LARGEST)


# --- inputs of another size ----------------------------------------------------------------------------


def _first_tensor(make: Make) -> tuple[Any, Any] | None:
    """(where the first tensor input is: a position or a keyword, the tensor), from one call of make."""
    import torch

    args, kwargs = make(torch)
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            return i, a
    return next(((k, v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)), None)


def _resized(make: Make, where: Any, dim: int, old: int, new: int, alone: bool = False) -> Make:
    """make's call with the first tensor's dimension `dim` at `new` (an empty tensor of the same dtype,
    device and dimension order), and with `alone` False every other tensor input's dimensions of size
    `old` at `new` too."""
    def made(torch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        given, kwargs = make(torch)
        args = list(given)

        def resize(t: Any, first: bool) -> Any:
            if not isinstance(t, torch.Tensor) or t.dim() == 0:
                return t
            shape = list(t.shape)
            if first:
                shape[dim] = new
            elif not alone:
                shape = [new if s == old else s for s in shape]
            if shape == list(t.shape):
                return t
            size = t.element_size()
            for s in shape:
                size *= s
            if size > LARGEST_INPUT_BYTES:
                raise NotExplored(f"an input of shape {shape} would take {size} bytes (over {LARGEST_INPUT_BYTES})")
            order = sorted(range(t.dim()), key=lambda d: -t.stride(d))  # the layout kept (a transposed input)
            fresh = torch.empty([shape[d] for d in order], dtype=t.dtype, device=t.device)
            return fresh.permute([order.index(d) for d in range(t.dim())])

        for i, a in enumerate(args):
            args[i] = resize(a, i == where)
        kwargs = {k: resize(v, k == where) for k, v in kwargs.items()}
        return tuple(args), kwargs

    return made


# --- every optional parameter in each state ------------------------------------------------------------


def parameter_states(fn: Callable[..., Any]) -> list[tuple[str, str, Any]]:
    """(parameter, label, value or a maker of it) for every optional parameter and hidden keyword."""
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(inspect.unwrap(fn))
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: its states from the default alone
        hints = {}
    states: list[tuple[str, str, Any]] = []
    for p in signature.parameters.values():
        if p.default is p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        states += [(p.name, label, value) for label, value in _states(p.default, hints.get(p.name))]
    for keyword in case_table.parameters(fn)[len(signature.parameters):]:  # backend_requirement's skip_check
        states += [(keyword, "True", True), (keyword, "False", False)]
    return states


def _states(default: Any, hint: Any) -> list[tuple[str, Any]]:
    import torch

    found: dict[str, Any] = {"None": None, "default": default}
    options = [a for a in typing.get_args(hint) if a is not type(None)] if typing.get_origin(hint) is typing.Union \
        else [hint]
    for option in options:
        if typing.get_origin(option) is typing.Literal:
            found.update((repr(v), v) for v in typing.get_args(option))
        elif isinstance(option, type) and issubclass(option, enum.Enum):
            found.update((m.name, m) for m in option)
        elif option is bool:
            found.update({"True": True, "False": False})
        elif option is int and isinstance(default, int) and not isinstance(default, bool):
            found[str(default * 2 or 1)] = default * 2 or 1
        elif option is float:
            found["2.0"] = 2.0
        elif option is torch.Tensor:
            found["tensor"] = lambda torch: torch.tensor([2.0])
        elif option is torch.dtype:
            found.update({"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32})
    if isinstance(default, enum.Enum):
        found.update((m.name, m) for m in type(default))
    return list(found.items())


def _with(make: Make, param: str, value: Any) -> Make:
    def made(torch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args, kwargs = make(torch)
        return args, {**kwargs, param: value(torch) if callable(value) and not isinstance(value, type) else value}

    return made


# --- what a call gives, exactly -------------------------------------------------------------------------


def exact(value: Any) -> Any:
    """describe() of a value, with each tuple's and list's own class and fields, and a host float as a float."""
    import torch

    if isinstance(value, (tuple, list)):
        kind = type(value)
        items = [exact(v) for v in value]
        if kind in (tuple, list):
            return [kind.__name__, items]
        return [kind.__name__, f"{kind.__module__}.{kind.__qualname__}", list(getattr(value, "_fields", ())), items]
    if isinstance(value, (float, torch.SymFloat)):
        return ["float"]
    return describe(value)
