"""nvfp4-overlay: public FlashInfer entry points as opaque custom ops while dynamo traces.

Patch 0002 puts ``@route`` on each routed entry point (one line above its ``def``). Eager callers
get upstream's function unchanged, behind one ``torch.compiler.is_compiling()`` check. While dynamo
traces, the call becomes one ``torch.ops.nvfp4_overlay.flashinfer_<name>`` node: dynamo asks the
op's fake (fakes.py) for the outputs and never enters the JIT loader (nvcc, file locks, dlopen) or
the kernel wrapper; when the compiled graph runs, the op calls upstream's function with every
argument it was given.

The op is built from what the release itself says: its schema from the upstream signature (every
parameter, in order, keyword-only ones too), so a parameter upstream adds reaches the op with no
change here. entries.py holds the little that a signature cannot say: the outputs, which values
route, how to carry a value no schema type can (an enum, a sentinel), the types of parameters
upstream leaves unannotated, and keywords a decorator of upstream's takes beyond the signature
(``backend_requirement``'s ``skip_check``). A call whose values the op cannot carry as upstream
would receive them (a float where the schema holds a Tensor, an int where upstream compares
against its own enum) takes upstream's path.

What upstream returns is declared in entries.py (``returns``): fresh tensors, or a parameter
upstream hands back when the caller passed one (``out=``, ``output=``). The op returns the fresh
tensors only (an op's output may not alias its input) and writes in place into the parameters
entries.py says it mutates (``mutates``: ``out``, a residual), declared in its schema; the wrapper
puts upstream's result back together. An op that mutates nothing returns ``Tensor[]`` (a variant
may add a tensor). An op that mutates a parameter returns a fixed form (``()``, ``Tensor``, a tuple):
AOT autograd's functionalization (inductor, aot_eager) refuses a mutating custom op that returns
``Tensor[]``. So that its count is fixed, the op always receives the parameter upstream hands back:
for a call that leaves it None, the traced path allocates it with the entry's fake, which allocates
as upstream's wrapper does (tests/releases/test_trace_flashinfer.py holds it to that), and upstream's
function, when the graph runs, writes into it (upstream's own check of a given ``out`` passes).
The fake reads only the parameters it names; every other parameter of the signature must be
declared in entries.py as not shaping the outputs (``inert``), or the entry point is not routed (a
parameter a new release adds is a refusal, never passed by silently).

What dynamo traces of a routed call is a function written for the entry point when it is routed
(_traced_path): it binds the call by upstream's signature and checks, encodes and reassembles with
no Python call of its own, so that tracing a call costs what the op costs (dynamo inlines every
call a traced function makes, at milliseconds each: a generic binder cost about 170 ms a call).
"""

import functools
import inspect
import typing
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from packaging.version import Version

from .entries import ENTRIES, Entry
from .results import _parse, fixed_form, schema_returns, shaped
from .fakes import RELEASE

NAMESPACE = "nvfp4_overlay"
_ops: Dict[str, Any] = {}  # entry point name -> its custom op, one per process

_SCHEMA_TYPES = {torch.Tensor: "Tensor", int: "int", float: "float", bool: "bool", str: "str",
                 torch.dtype: "ScalarType", torch.device: "Device"}


def route(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Patch 0002's decorator: fn for eager callers, one opaque op while dynamo traces.

    An entry point this module cannot route (a parameter of a type it does not know) stays
    exactly upstream's, with a warning: the overlay never makes an import fail.
    """
    try:
        plan = _plan(fn, ENTRIES[fn.__name__])
    except Exception as exc:  # noqa: BLE001 - any failure leaves upstream's function in place
        warnings.warn(f"nvfp4-overlay: {fn.__module__}.{fn.__name__} is not routed ({exc})", stacklevel=2)
        return fn
    return plan.wrapper()


@dataclass(frozen=True)
class _Plan:
    fn: Callable[..., Any]
    entry: Entry
    names: Tuple[str, ...]  # every parameter, in signature order, then the decorators' keywords
    positional: Tuple[str, ...]  # those a caller may pass by position
    defaults: Mapping[str, Any]
    encode: Mapping[str, Callable[[Any], Any]]
    accepts: Mapping[str, Callable[[Any], bool]]  # per parameter: can the op carry this value?
    op: Any
    form: Optional[int] = None  # a mutating op: how many tensors it returns (None: Tensor[], any number)

    def wrapper(self) -> Callable[..., Any]:
        fn, traced = self.fn, _traced_path(self)
        is_compiling = torch.compiler.is_compiling  # bound once: an eager call pays one call for it
        upstream_path = _UPSTREAM

        @functools.wraps(fn)
        def routed(*args: Any, **kwargs: Any) -> Any:
            if is_compiling():
                result = traced(*args, **kwargs)
                if result is not upstream_path:
                    return result
            return fn(*args, **kwargs)  # eager, or a call the op does not take: upstream's path

        routed.__nvfp4_overlay_op__ = self.op  # type: ignore[attr-defined]
        # The path a call takes while compiling, for a check to run under FakeTensorMode without dynamo.
        routed.__nvfp4_overlay_traced__ = traced  # type: ignore[attr-defined]
        return _Live(routed, fn) if self.entry.live_attributes else routed


class _Upstream:
    """What the traced path returns for a call the op does not take (upstream's path)."""

    def __repr__(self) -> str:
        return "<upstream's path>"


_UPSTREAM = _Upstream()
_PREFIX = "_nvfp4_"  # the generated function's own names; no parameter of upstream's may start so


def _traced_path(plan: _Plan) -> Callable[..., Any]:
    """The path a call takes while dynamo traces, written out for this entry point's signature.

    Dynamo inlines every Python call the traced path makes, each at a cost of milliseconds (a
    generic binder, its generator expressions and the result's parser cost about 170 ms of tracing
    a call): this function binds the call by its own signature (upstream's, every required
    parameter defaulted to a marker), checks the routed values, the types the op takes and
    entries.py's condition in the order the entry gives them, allocates with the fake a parameter a
    mutating op hands back that the call left None, calls the op with each value encoded, and puts
    upstream's result back together, with no call but the codecs', the condition's, the fake's (that
    allocation) and the op's. It returns _UPSTREAM for a call the op does not take: a value it
    cannot carry, a parameter missing, one too many, or a keyword upstream does not know. Written
    as source and compiled once when the entry point is routed, as dataclasses writes __init__: no
    library writes a function for a signature.
    """
    fn, entry, names = plan.fn, plan.entry, plan.names
    if any(n.startswith(_PREFIX) for n in names):
        raise TypeError(f"a parameter named {_PREFIX}*: the traced path's own names")
    scope: Dict[str, Any] = {f"{_PREFIX}UPSTREAM": _UPSTREAM, f"{_PREFIX}MISSING": _MISSING,
                             f"{_PREFIX}op": plan.op, f"{_PREFIX}when": entry.when}
    signature = inspect.signature(fn)
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
    for name in names[len(signature.parameters):]:  # the decorators' keywords (entries.py hidden)
        scope[f"{_PREFIX}d_{name}"] = plan.defaults[name]
        params.append(f"{name}={_PREFIX}d_{name}")
    params.append(f"**{_PREFIX}extra")
    refuse = f"return {_PREFIX}UPSTREAM"
    body = [f"if {_PREFIX}rest or {_PREFIX}extra:", f"    {refuse}"]
    body += [line for n in required for line in (f"if {n} is {_PREFIX}MISSING:", f"    {refuse}")]
    for i, (name, values) in enumerate(entry.routes.items()):
        if name in names:
            scope[f"{_PREFIX}routes_{i}"] = values
            body += [f"if {name} not in {_PREFIX}routes_{i}:", f"    {refuse}"]
    for name, ok in plan.accepts.items():
        if ok is _is_tensor:
            test = f"isinstance({name}, {_PREFIX}Tensor)"
        elif ok is _is_tensor_or_none:
            test = f"{name} is None or isinstance({name}, {_PREFIX}Tensor)"
        else:
            scope[f"{_PREFIX}accepts_{name}"] = ok
            test = f"{_PREFIX}accepts_{name}({name})"
        body += [f"if not ({test}):", f"    {refuse}"]
    scope[f"{_PREFIX}Tensor"] = torch.Tensor
    if entry.when is not None:
        values = ", ".join(f"{n!r}: {n}" for n in names)
        body += [f"if not {_PREFIX}when({{{values}}}):", f"    {refuse}"]
    allocated = plan.entry.result.handed_back(names) if plan.form is not None else {}
    if allocated:
        scope[f"{_PREFIX}fake"] = entry.fake
        reads = ", ".join(f"{n}={n}" for n in inspect.signature(entry.fake).parameters if n in names)
        for name, where in allocated.items():
            body += [f"if {name} is None:",
                     f"    {name} = {_PREFIX}fake({reads}){''.join(f'[{i}]' for i in where)}"]
    arguments = []
    for name in names:
        if name in plan.encode:
            scope[f"{_PREFIX}encode_{name}"] = plan.encode[name]
            arguments.append(f"{_PREFIX}encode_{name}({name})")
        else:
            arguments.append(name)
    call = f"{_PREFIX}op({', '.join(arguments)})"
    body += ([call, f"{_PREFIX}fresh = ()"] if plan.form == 0 else [f"{_PREFIX}fresh = ({call},)"] if plan.form == 1
             else [f"{_PREFIX}fresh = {call}"])
    for i, (name, by_value) in enumerate(entry.variants.items()):  # Entry.result_for, in its order
        if name not in names:
            continue
        for j, (value, returns) in enumerate(by_value.items()):
            scope[f"{_PREFIX}variant_{i}_{j}"] = frozenset([value])
            body += [f"if {name} in {_PREFIX}variant_{i}_{j}:",
                     *("    " + line for line in _assembled(returns, names, allocated))]
    body += _assembled(entry.returns, names, allocated)
    source = (f"def {_PREFIX}traced({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body))
    code = compile(source, f"<nvfp4-overlay: the traced path of {fn.__name__}>", "exec")
    exec(code, scope)  # noqa: S102 - our own source, written above from the signature and entries.py
    traced: Callable[..., Any] = scope[f"{_PREFIX}traced"]
    traced.__nvfp4_overlay_source__ = source  # type: ignore[attr-defined]
    return traced


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


class _Live(functools.partial):  # type: ignore[type-arg]
    """The routed function as an object whose attributes are upstream's wrapper's, live.

    backend_requirement sets ``suitable_auto_backends`` on its wrapper at each call, and mm_fp4's
    body reads it back through the module global, which is now this object: a copy made at import
    (functools.wraps) would be stale. A partial of the routed function with nothing bound, so that
    a call costs no Python frame of its own (a class with ``__call__`` costs an eager caller about
    1 us more); dynamo traces a partial as the function it holds.
    """

    def __new__(cls, routed: Callable[..., Any], upstream: Callable[..., Any]) -> "_Live":
        self = super().__new__(cls, routed)
        # Nothing of the wrapper's own attributes is copied: they are read from it when asked for.
        self.__dict__.update(__wrapped__=upstream, __name__=routed.__name__, __qualname__=routed.__qualname__,
                             __doc__=routed.__doc__, __module__=routed.__module__,
                             __nvfp4_overlay_op__=routed.__nvfp4_overlay_op__,  # type: ignore[attr-defined]
                             __nvfp4_overlay_traced__=routed.__nvfp4_overlay_traced__)  # type: ignore[attr-defined]
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["__wrapped__"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.__dict__["__wrapped__"], name, value)


def _plan(fn: Callable[..., Any], entry: Entry) -> _Plan:
    signature = inspect.signature(fn)
    inner = inspect.unwrap(fn)  # past @flashinfer_api: its annotations name the defining module's globals
    hints = typing.get_type_hints(inner)
    names, positional, defaults, types = [], [], {}, []
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is p.empty and p.kind is p.KEYWORD_ONLY:
            raise TypeError(f"parameter {p.name} ({p.kind.description}) has no place in a schema")
        names.append(p.name)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(p.name)
        if p.default is not p.empty:
            defaults[p.name] = p.default
        codec = entry.codecs.get(p.name)
        if codec:
            types.append(codec.schema)
        elif p.name in hints:
            types.append(_schema_type(hints[p.name], p.name))
        elif p.name in entry.types:  # upstream left it unannotated
            types.append(entry.types[p.name])
        else:
            raise TypeError(f"parameter {p.name} has no annotation; give it a type in entries.py")
    for name, (schema_type, default) in entry.hidden.items():
        if takes_keyword(fn, name):  # only while upstream's decorator still takes it
            names.append(name)
            types.append(schema_type)
            defaults[name] = default
    problems = disagreements(entry, names, RELEASE)
    if problems:
        raise TypeError("; ".join(problems))
    types = [_mutable(t, i) if n in entry.mutates else t for i, (n, t) in enumerate(zip(names, types))]
    codecs = {n: (c, c.scope(inner.__globals__)) for n, c in entry.codecs.items() if n in names}
    encode = {n: functools.partial(c.encode, scope) for n, (c, scope) in codecs.items()}
    decode = {n: functools.partial(c.decode, scope) for n, (c, scope) in codecs.items()}
    accepts = {n: functools.partial(c.accepts, scope) for n, (c, scope) in codecs.items()}
    for n, t in zip(names, types):  # a tensor parameter takes a tensor; a codec's own check stands
        if n not in codecs and t.startswith("Tensor") and not t.rstrip("?").endswith("[]"):
            accepts[n] = _is_tensor_or_none if t.endswith("?") else _is_tensor
    form = fixed_form(entry.result, names, entry.mutates, bool(entry.variants))
    schema = f"({', '.join(f'{t} {n}' for t, n in zip(types, names))}) -> {schema_returns(form)}"
    op = _ops.get(fn.__name__) or _define(fn, entry, tuple(names), schema, decode, form)
    return _Plan(fn, entry, tuple(names), tuple(positional), defaults, encode, accepts, op, form)


def _is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def _is_tensor_or_none(value: Any) -> bool:
    return value is None or isinstance(value, torch.Tensor)


def _mutable(schema_type: str, index: int) -> str:
    """Tensor -> Tensor(a3!): the op writes into it (each mutated parameter its own alias set)."""
    return f"Tensor(a{index}!){schema_type[len('Tensor'):]}"


def disagreements(entry: Entry, names: Sequence[str], release: Version) -> List[str]:
    """Where the fake and the release's signature (names: its parameters and hidden keywords) disagree.

    Every parameter the fake reads is in the signature, unless entries.py says the release is older
    than the one that added it (``since``); every parameter of the signature is read by the fake,
    routed on (``routes``) or declared as not shaping the outputs (``inert``).
    """
    reads = [p for p in inspect.signature(entry.fake).parameters]
    problems = [f"the fake reads {p!r}, which this release's signature lacks" for p in reads
                if p not in names and not (p in entry.since and release < Version(entry.since[p]))]
    problems += [f"parameter {n!r} is neither read by the fake nor declared in entries.py as not shaping "
                 f"the outputs" for n in names if n not in reads and n not in entry.inert and n not in entry.routes]
    return problems


def takes_keyword(fn: Callable[..., Any], name: str) -> bool:
    """Whether a wrapper on fn's __wrapped__ chain takes keyword `name` beyond the signature.

    ``backend_requirement``'s wrapper pops ``skip_check`` from its kwargs: the name is one of its
    code's constants. The function itself (the innermost) does not count: its parameters are the
    signature.
    """
    while hasattr(fn, "__wrapped__"):
        if name in getattr(getattr(fn, "__code__", None), "co_consts", ()):
            return True
        fn = fn.__wrapped__
    return False


def _define(fn: Callable[..., Any], entry: Entry, names: Tuple[str, ...], schema: str,
            decode: Mapping[str, Callable[[Any], Any]], form: Optional[int]) -> Any:
    reads = tuple(inspect.signature(entry.fake).parameters)

    def real(*values: Any) -> Any:
        # Runs when the graph executes, where is_compiling() is False: upstream's own body.
        given = {n: decode[n](v) if n in decode else v for n, v in zip(names, values)}
        return shaped(form, entry.result_for(given).fresh(given, fn(**given)))

    def fake(*values: Any) -> Any:
        # Only what the fake reads is decoded: a codec may read a value (a host scale's .item())
        # that a fake tensor does not hold.
        given = {n: decode[n](v) if n in decode and n in reads else v for n, v in zip(names, values)}
        return shaped(form, entry.result_for(given).fresh(given, entry.fake(**{n: given[n] for n in reads if n in given})))

    op = torch.library.custom_op(f"{NAMESPACE}::flashinfer_{fn.__name__}", real,
                                 mutates_args=tuple(n for n in names if n in entry.mutates), schema=schema)
    op.register_fake(fake)
    _ops[fn.__name__] = op
    return op


def _schema_type(hint: Any, name: str) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union and set(args) == {float, torch.Tensor}:
        return "Tensor"  # rmsnorm_quant's scale: routed as a tensor; a float takes upstream's path
    if origin is typing.Union and len(args) == 2 and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        return _schema_type(inner, name) + "?"
    if origin in (list, List) and len(args) == 1:
        return _schema_type(args[0], name) + "[]"
    if origin is typing.Literal and args and all(isinstance(a, str) for a in args):
        return "str"  # backend: Literal["cuda", "cute-dsl"]; entries.py routes the values it takes
    if hint in _SCHEMA_TYPES:
        return _SCHEMA_TYPES[hint]
    raise TypeError(f"parameter {name}: no schema type for {hint!r}; give it a codec in entries.py")


def op_of(fn: Callable[..., Any]) -> Optional[Any]:
    """The custom op a routed entry point calls while tracing; None when it is not routed."""
    return getattr(fn, "__nvfp4_overlay_op__", None)
