"""nvfp4-overlay: the form of what upstream returned, read off its result by a derived fake and rebuilt around the op's tensors.

An op returns tensors only. For an entry point whose fake is upstream's own wrapper (faking.py), what
upstream returns is not declared: the fake reads its form off the result (``flatten``): the nesting,
each tuple's or list's own class (a NamedTuple comes back a NamedTuple, with its fields), and each
leaf: a fresh tensor (the op returns it), a host float (returned as a 0-dim float64 CPU tensor and
read back after the op, as entries.py's "float"), a parameter handed back as it was given, or a
constant (None, a bool, an int, a string). The number of fresh tensors is the op's own (``Tensor[]``),
so an arity that follows an argument's value follows it here.

The traced path cannot run the fake's Python while dynamo traces, and dynamo cannot carry a Python
object out of an op. So the fake records the form under the call's key (``key_of``: what no two calls
of one form tell apart, read from the values the op gets: each value, or for a tensor its dtype and
rank, None-ness for an optional one; not a size, not a float), and the traced path asks for it
(``form_of``), a function dynamo calls once while it traces and keeps the answer of as a constant
(torch._dynamo.assume_constant_result): the fake has just run, for this very call. The traced path
then calls the form's rebuilder, written once per form as straight-line code dynamo inlines cheaply.
"""

import sys
from typing import Any, Callable, Dict, List, Sequence, Tuple

import torch

Form = Any  # "T" | "F" | ("P", index) | ("C", value) | ("tuple" | "list", class id, (Form, ...))
_CONSTANTS = (type(None), bool, int, str)

_seen: Dict[Tuple[str, Any], str] = {}  # (op name, call key) -> the id of the form its fake recorded
_ids: Dict[Form, str] = {}  # a form -> its id
REBUILDERS: Dict[str, Callable[..., Any]] = {}  # a form's id -> its rebuilder (fresh, *parameters) -> result
_classes: Dict[str, type] = {}  # a class id -> the tuple or list subclass upstream returned


def flatten(result: Any, given: Sequence[Any]) -> Tuple[str, List[Any]]:
    """(the id of result's form, its fresh tensors in order, host floats as 0-dim float64 CPU tensors);
    `given`: the call's values, in the op's order (a tensor among them handed back is no fresh one)."""
    fresh: List[Any] = []
    form = _form(result, given, fresh)
    found = _ids.get(form)
    if found is None:
        found = _ids[form] = f"form{len(_ids)}"
        REBUILDERS[found] = _rebuilder(form, found)
    return found, fresh


def _form(value: Any, given: Sequence[Any], fresh: List[Any]) -> Form:
    if isinstance(value, torch.Tensor):
        for i, g in enumerate(given):
            if value is g:
                return ("P", i)
        fresh.append(value)
        return "T"
    if isinstance(value, float):
        fresh.append(torch.tensor(value, dtype=torch.float64))
        return "F"
    if isinstance(value, _CONSTANTS):
        return ("C", value)
    if isinstance(value, (tuple, list)):
        cls = type(value)
        kind = "tuple" if isinstance(value, tuple) else "list"
        class_id = None if cls in (tuple, list) else _class_id(cls)
        return (kind, class_id, tuple(_form(v, given, fresh) for v in value))
    raise TypeError(f"nvfp4-overlay: upstream returned a {type(value).__qualname__}, which an op cannot carry")


def _class_id(cls: type) -> str:
    found = f"{cls.__module__}.{cls.__qualname__}#{id(cls)}"
    _classes[found] = cls
    return found


def _rebuilder(form: Form, form_id: str) -> Callable[..., Any]:
    """(fresh, *parameters) -> upstream's result: written out for the form (as opaque's traced path is),
    so that dynamo inlines a few straight-line statements."""
    scope: Dict[str, Any] = {}
    counter = [0]
    expression = _expression(form, scope, counter)
    source = f"def _nvfp4_rebuild(_nvfp4_fresh, *_nvfp4_given):\n    return {expression}\n"
    exec(compile(source, f"<nvfp4-overlay: {form_id}>", "exec"), scope)  # noqa: S102 - written above from the form
    rebuild: Callable[..., Any] = scope["_nvfp4_rebuild"]
    return rebuild


def _expression(form: Form, scope: Dict[str, Any], counter: List[int]) -> str:
    if form == "T" or form == "F":
        index = counter[0]
        counter[0] += 1
        return f"_nvfp4_fresh[{index}]" + (".item()" if form == "F" else "")  # upstream's own host read, after the op
    if form[0] == "P":
        return f"_nvfp4_given[{form[1]}]"
    if form[0] == "C":
        return repr(form[1])
    kind, class_id, children = form
    items = [_expression(child, scope, counter) for child in children]
    if class_id is None:
        return f"({''.join(i + ', ' for i in items)})" if kind == "tuple" else f"[{', '.join(items)}]"
    name = f"_nvfp4_class{len(scope)}"
    scope[name] = cls = _classes[class_id]
    if hasattr(cls, "_fields"):  # a NamedTuple takes its fields as arguments
        return f"{name}({', '.join(items)})"
    return f"{name}(({''.join(i + ', ' for i in items)}))" if kind == "tuple" else f"{name}([{', '.join(items)}])"


def record(op: str, key: Any, form_id: str) -> None:
    """What the fake saw for a call of this key (the latest call: the one being traced)."""
    _seen[op, key] = form_id
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None and not getattr(form_of, "_dynamo_marked_constant", False):
        dynamo.assume_constant_result(form_of)  # while dynamo traces, form_of's answer is a constant


def form_of(op: str, key: Any) -> str:
    """The id of the form the op's fake recorded for a call of this key."""
    try:
        return _seen[op, key]
    except KeyError:
        msg = f"nvfp4-overlay: no form recorded for {op} {key!r}: the op's fake did not run before the traced path asked"
        raise RuntimeError(msg) from None


# What a call's key reads of each value, by the op's schema type: what dynamo holds constant while it
# traces (a value, a tensor's dtype and rank, None-ness), never a size or a float.
def key_expression(name: str, schema_type: str) -> str:
    base, optional = schema_type.split("(")[0].rstrip("?"), schema_type.endswith("?")
    if base == "Tensor":
        expression = f"({name}.dtype, {name}.dim())"
    elif base.endswith("[]"):
        expression = f"len({name})"
    elif base == "float":
        expression = "0"
    elif base == "int":
        expression = f"({name} if type({name}) is int else -1)"
    else:  # bool, str, ScalarType, Device
        expression = name
    return f"(None if {name} is None else {expression})" if optional or base == "float" else expression


def key_function(types: Sequence[str]) -> Callable[..., Any]:
    """The key of a call from the op's values, written from the same expressions as the traced path's."""
    values = [f"_nvfp4_v{i}" for i in range(len(types))]
    keys = "".join(key_expression(v, t) + ", " for v, t in zip(values, types))
    scope: Dict[str, Any] = {}
    exec(compile(f"def _nvfp4_key({', '.join(values)}):\n    return ({keys})\n", "<nvfp4-overlay: a call's key>", "exec"),
         scope)  # noqa: S102 - written above from the op's schema types
    key: Callable[..., Any] = scope["_nvfp4_key"]
    return key
