"""nvfp4-overlay: the custom ops a routed entry point becomes while dynamo traces: their bodies and their fakes.

Each op's body is upstream's function, called when the compiled graph runs with every value it got;
its fake is the entry's hand-written fake (fakes.py), or upstream's function itself with the JIT
layer stood in for (faking.py) where entries.py names none. What each returns:

- an op that writes into no parameter returns ``Tensor[]``: for a derived fake, every fresh tensor
  of upstream's result, in the form the fake read off it (forms.py); for a hand-written one, the
  fresh tensors of the result entries.py declares (results.py);
- an op that writes into a parameter returns a fixed form (results.fixed_form: AOT autograd's
  functionalization refuses a mutating op that returns ``Tensor[]``), so its result is declared in
  entries.py. A parameter upstream hands back (``out``) that a call leaves None: with a hand-written
  fake the traced path allocates it with the fake and gives it to the op; with a derived fake the
  call goes to a second op (``flashinfer_<name>_fresh``) that does not take it and returns what
  upstream allocates for it among its fresh tensors, so that upstream allocates it, at trace time
  and at run time alike.
"""

import inspect
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from . import faking, forms
from .entries import Entry
from .results import fixed_form, schema_returns, shaped

NAMESPACE = "nvfp4_overlay"
_ops: Dict[str, Any] = {}  # op name -> the custom op, one per process
Kernel = Callable[..., Any]
Decode = Mapping[str, Callable[[Any], Any]]


def defined(fn: Callable[..., Any], entry: Entry, names: Sequence[str], types: Sequence[str],
            decode: Decode) -> Tuple[Any, Optional[int], Any, Optional[int]]:
    """(the op, its fixed form, the op for a call that leaves the parameter upstream hands back None
    (a derived fake's mutating entry point; else None), its fixed form); each op defined once a process."""
    form = None if entry.returns is None else fixed_form(entry.result, names, entry.mutates, bool(entry.variants))
    op = _op(f"flashinfer_{fn.__name__}", types, names, entry.mutates, form,
             lambda: _kernels(fn, entry, names, types, decode, form))
    if entry.fake is not None or form is None:
        return op, form, None, None
    handed = list(entry.result.handed_back(names))
    if not handed:
        return op, form, None, None
    if len(handed) != 1:
        raise TypeError(f"a derived fake's mutating entry point hands back one parameter, not {handed}")
    given = [n for n in names if n not in handed]  # the fresh op's form: what upstream returns with it None
    fresh_form = fixed_form(entry.result, given, entry.mutates - set(handed), False)
    fresh_types = ["Tensor?" if n in handed else t for n, t in zip(names, types)]
    fresh = _op(f"flashinfer_{fn.__name__}_fresh", fresh_types, names, entry.mutates - set(handed), fresh_form,
                lambda: _kernels(fn, entry, names, types, decode, fresh_form))
    return op, form, fresh, fresh_form


def _op(name: str, types: Sequence[str], names: Sequence[str], mutates: Any, form: Optional[int],
        kernels: Callable[[], Tuple[Kernel, Kernel]]) -> Any:
    if name in _ops:
        return _ops[name]
    real, fake = kernels()
    schema = f"({', '.join(f'{t} {n}' for t, n in zip(types, names))}) -> {schema_returns(form)}"
    op = torch.library.custom_op(f"{NAMESPACE}::{name}", real, mutates_args=tuple(n for n in names if n in mutates),
                                 schema=schema)
    op.register_fake(fake)
    _ops[name] = op
    return op


def _kernels(fn: Callable[..., Any], entry: Entry, names: Sequence[str], types: Sequence[str], decode: Decode,
             form: Optional[int]) -> Tuple[Kernel, Kernel]:
    if entry.returns is None:
        return _derived_kernels(fn, names, types, decode)
    return _declared_kernels(fn, entry, names, decode, form)


def _declared_kernels(fn: Callable[..., Any], entry: Entry, names: Sequence[str], decode: Decode,
                      form: Optional[int]) -> Tuple[Kernel, Kernel]:
    """The op's body and its fake, each returning the fresh tensors of the result entries.py declares."""
    fake_fn = faking.derived(fn) if entry.fake is None else entry.fake
    # Only what a hand-written fake reads is decoded: a codec may read a value (a host scale's
    # .item()) that a fake tensor does not hold. Upstream's own function reads every parameter.
    reads = tuple(names) if entry.fake is None else tuple(inspect.signature(entry.fake).parameters)

    def real(*values: Any) -> Any:
        # Runs when the graph executes, where is_compiling() is False: upstream's own body.
        given = {n: decode[n](v) if n in decode else v for n, v in zip(names, values)}
        return shaped(form, entry.result_for(given).fresh(given, fn(**given)))

    def fake(*values: Any) -> Any:
        given = {n: decode[n](v) if n in decode and n in reads else v for n, v in zip(names, values)}
        return shaped(form, entry.result_for(given).fresh(given, fake_fn(**{n: given[n] for n in reads if n in given})))

    return real, fake


def _derived_kernels(fn: Callable[..., Any], names: Sequence[str], types: Sequence[str],
                     decode: Decode) -> Tuple[Kernel, Kernel]:
    """The op's body and its fake, both upstream's function (the fake with the JIT layer stood in for),
    each returning the fresh tensors of upstream's own result; the fake records the result's form
    for the traced path (forms.py)."""
    upstream, key, name = faking.derived(fn), forms.key_function(types), fn.__name__

    def real(*values: Any) -> List[Any]:
        given = {n: decode[n](v) if n in decode else v for n, v in zip(names, values)}
        return forms.flatten(fn(**given), list(given.values()))[1]

    def fake(*values: Any) -> List[Any]:
        given = {n: decode[n](v) if n in decode else v for n, v in zip(names, values)}
        form_id, fresh = forms.flatten(upstream(**given), list(given.values()))
        forms.record(name, key(*values), form_id)
        return fresh

    return real, fake
