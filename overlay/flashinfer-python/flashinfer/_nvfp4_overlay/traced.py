"""nvfp4-overlay: the path a routed call takes while dynamo traces, written out for each entry point's signature.

opaque.py routes; this module writes the function dynamo traces in upstream's place (traced_path):
it binds the call as Python binds it, checks what the op takes, calls the op and puts upstream's
result back together, with no Python call of its own that dynamo would have to inline (each costs
milliseconds of tracing). A call the op does not take goes back to upstream's function (UPSTREAM).
"""

import inspect
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

import torch

from . import forms
from .results import _parse


class _Upstream:
    """What the traced path returns for a call the op does not take (upstream's path)."""

    def __repr__(self) -> str:
        return "<upstream's path>"


UPSTREAM = _Upstream()
_PREFIX = "_nvfp4_"  # the generated function's own names; no parameter of upstream's may start so


def traced_path(plan: Any) -> Callable[..., Any]:
    """The path a call takes while dynamo traces, written out for this entry point's signature.

    Dynamo inlines every Python call the traced path makes, each at a cost of milliseconds (a
    generic binder, its generator expressions and the result's parser cost about 170 ms of tracing
    a call): this function binds the call by its own signature (upstream's, every required
    parameter defaulted to a marker), checks the routed values, the types the op takes and
    entries.py's condition in the order the entry gives them, allocates with the fake a parameter a
    mutating op hands back that the call left None, calls the op with each value encoded, and puts
    upstream's result back together, with no call but the codecs', the condition's, the fake's (that
    allocation), the op's and, for a derived fake, the form's (forms.py). It returns UPSTREAM for a
    call the op does not take: a value it cannot carry, a parameter missing, one too many, or a
    keyword upstream does not know. Written as source and compiled once when the entry point is
    routed, as dataclasses writes __init__: no library writes a function for a signature.
    """
    fn, names = plan.fn, plan.names
    if any(n.startswith(_PREFIX) for n in names):
        raise TypeError(f"a parameter named {_PREFIX}*: the traced path's own names")
    scope: Dict[str, Any] = {f"{_PREFIX}UPSTREAM": UPSTREAM, f"{_PREFIX}MISSING": _MISSING,
                             f"{_PREFIX}op": plan.op, f"{_PREFIX}when": plan.entry.when, f"{_PREFIX}Tensor": torch.Tensor}
    params, required = _parameters(plan, scope)
    body = _checks(plan, scope, required)
    body += _derived_call(plan, scope) if plan.entry.returns is None else _declared_call(plan, scope)
    source = (f"def {_PREFIX}traced({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body))
    code = compile(source, f"<nvfp4-overlay: the traced path of {fn.__name__}>", "exec")
    exec(code, scope)  # noqa: S102 - our own source, written above from the signature and entries.py
    traced: Callable[..., Any] = scope[f"{_PREFIX}traced"]
    traced.__nvfp4_overlay_source__ = source  # type: ignore[attr-defined]
    return traced


def _parameters(plan: Any, scope: Dict[str, Any]) -> Tuple[List[str], List[str]]:
    """The written function's parameters (upstream's, a required one defaulted to a marker, the
    decorators' keywords after them, and catch-alls for a call upstream would refuse), and the required."""
    signature = inspect.signature(plan.fn)
    params, slash, star, required = [], False, False, []
    for p in signature.parameters.values():
        default = plan.defaults.get(p.name, _MISSING)
        if default is _MISSING:
            required.append(p.name)
        scope[f"{_PREFIX}d_{p.name}"] = default
        if p.kind is p.POSITIONAL_ONLY:
            slash = True
        elif slash:
            params.append("/")
            slash = False
        if p.kind is p.KEYWORD_ONLY and not star:
            params.append(f"*{_PREFIX}rest")
            star = True
        params.append(f"{p.name}={_PREFIX}d_{p.name}")
    if slash:
        params.append("/")
    if not star:
        params.append(f"*{_PREFIX}rest")
    for name in plan.names[len(signature.parameters):]:  # the decorators' keywords (entries.py hidden)
        scope[f"{_PREFIX}d_{name}"] = plan.defaults[name]
        params.append(f"{name}={_PREFIX}d_{name}")
    params.append(f"**{_PREFIX}extra")
    return params, required


def _checks(plan: Any, scope: Dict[str, Any], required: Sequence[str]) -> List[str]:
    """The lines that hand a call the op does not take to upstream's path, in entries.py's order."""
    entry, names = plan.entry, plan.names
    refuse = f"return {_PREFIX}UPSTREAM"
    body = [f"if {_PREFIX}rest or {_PREFIX}extra:", f"    {refuse}"]
    body += [line for n in required for line in (f"if {n} is {_PREFIX}MISSING:", f"    {refuse}")]
    for i, (name, values) in enumerate(entry.routes.items()):
        if name in names:
            scope[f"{_PREFIX}routes_{i}"] = values
            body += [f"if {name} not in {_PREFIX}routes_{i}:", f"    {refuse}"]
    for name, ok in plan.accepts.items():
        if ok is is_tensor:
            test = f"isinstance({name}, {_PREFIX}Tensor)"
        elif ok is is_tensor_or_none:
            test = f"{name} is None or isinstance({name}, {_PREFIX}Tensor)"
        else:
            scope[f"{_PREFIX}accepts_{name}"] = ok
            test = f"{_PREFIX}accepts_{name}({name})"
        body += [f"if not ({test}):", f"    {refuse}"]
    if entry.when is not None:
        values = ", ".join(f"{n!r}: {n}" for n in names)
        body += [f"if not {_PREFIX}when({{{values}}}):", f"    {refuse}"]
    return body


def _arguments(plan: Any, scope: Dict[str, Any]) -> List[str]:
    """The op's arguments: each value, encoded where entries.py names a codec."""
    arguments = []
    for name in plan.names:
        if name in plan.encode:
            scope[f"{_PREFIX}encode_{name}"] = plan.encode[name]
            arguments.append(f"{_PREFIX}encode_{name}({name})")
        else:
            arguments.append(name)
    return arguments


def _derived_call(plan: Any, scope: Dict[str, Any]) -> List[str]:
    """The op, then upstream's result in the form its fake read off upstream's own (forms.py)."""
    scope.update({f"{_PREFIX}form_of": forms.form_of, f"{_PREFIX}rebuilders": forms.REBUILDERS,
                  f"{_PREFIX}name": plan.fn.__name__})
    values = [f"{_PREFIX}v{i}" for i in range(len(plan.names))]
    keys = [forms.key_expression(v, t) for v, t in zip(values, plan.types)]
    return [f"{v} = {a}" for v, a in zip(values, _arguments(plan, scope))] + [
        f"{_PREFIX}fresh = {_PREFIX}op({', '.join(values)})",
        f"{_PREFIX}form = {_PREFIX}form_of({_PREFIX}name, ({''.join(k + ', ' for k in keys)}))",
        f"return {_PREFIX}rebuilders[{_PREFIX}form]({_PREFIX}fresh, {', '.join(plan.names)})"]


def _declared_call(plan: Any, scope: Dict[str, Any]) -> List[str]:
    """The op, then upstream's result as entries.py declares it (returns, variants). A parameter a
    mutating op hands back that the call leaves None: a hand-written fake allocates it for the op to
    write into; a derived fake's entry point calls its second op, which returns what upstream allocates."""
    entry, names = plan.entry, plan.names
    body = []
    allocated = entry.result.handed_back(names) if plan.form is not None and plan.fresh_op is None else {}
    if allocated:
        scope[f"{_PREFIX}fake"] = entry.fake
        reads = ", ".join(f"{n}={n}" for n in inspect.signature(entry.fake).parameters if n in names)
        for name, where in allocated.items():
            body += [f"if {name} is None:",
                     f"    {name} = {_PREFIX}fake({reads}){''.join(f'[{i}]' for i in where)}"]
    arguments = ", ".join(_arguments(plan, scope))
    if plan.fresh_op is None:
        body += _fresh(f"{_PREFIX}op({arguments})", plan.form)
    else:
        (handed,) = entry.result.handed_back(names)
        scope[f"{_PREFIX}fresh_op"] = plan.fresh_op
        body += [f"if {handed} is None:", *("    " + line for line in _fresh(f"{_PREFIX}fresh_op({arguments})",
                                                                          plan.fresh_form)),
                 "else:", *("    " + line for line in _fresh(f"{_PREFIX}op({arguments})", plan.form))]
    for i, (name, by_value) in enumerate(entry.variants.items()):  # Entry.result_for, in its order
        if name not in names:
            continue
        for j, (value, returns) in enumerate(by_value.items()):
            scope[f"{_PREFIX}variant_{i}_{j}"] = frozenset([value])
            body += [f"if {name} in {_PREFIX}variant_{i}_{j}:",
                     *("    " + line for line in _assembled(returns, names, allocated))]
    return body + _assembled(entry.returns, names, allocated)


def _fresh(call: str, form: Any) -> List[str]:
    """The op's call, its fresh tensors as a sequence whatever its form (None, one tensor, a tuple, a list)."""
    return [call, f"{_PREFIX}fresh = ()"] if form == 0 else [f"{_PREFIX}fresh = ({call},)"] if form == 1 \
        else [f"{_PREFIX}fresh = {call}"]


def is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def is_tensor_or_none(value: Any) -> bool:
    return value is None or isinstance(value, torch.Tensor)


_MISSING = inspect.Parameter.empty  # a required parameter's default in the traced path


def _assembled(returns: str, names: Sequence[str], allocated: Mapping[str, Any]) -> List[str]:
    """The lines that return upstream's result from the op's fresh tensors (Result.assemble, written out)."""
    tree = _parse(returns)
    if tree == ("tuple", ()):
        return ["return None"]
    expression = _expression(tree, names, allocated)
    return [f"{_PREFIX}tensors = iter({_PREFIX}fresh)", f"return {expression}"]


def _expression(node: Any, names: Sequence[str], allocated: Mapping[str, Any]) -> str:
    if isinstance(node, tuple):
        items = [_expression(child, names, allocated) for child in node[1]]
        return f"({''.join(i + ', ' for i in items)})" if node[0] == "tuple" else f"[{', '.join(items)}]"
    if node == "float":
        return f"next({_PREFIX}tensors).item()"  # upstream's own host read, made after the op
    if node in allocated:  # the caller's, or what the traced path allocated for the op to write into
        return node
    if node != "Tensor" and node in names:  # a parameter handed back when the caller passed one
        return f"({node} if {node} is not None else next({_PREFIX}tensors))"
    return f"next({_PREFIX}tensors)"
