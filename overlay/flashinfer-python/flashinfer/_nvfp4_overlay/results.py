"""nvfp4-overlay: what upstream returns (Result, as entries.py spells it) and which of it the op returns fresh."""

import functools
from dataclasses import dataclass
from typing import AbstractSet, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple


@dataclass(frozen=True)
class Result:
    """What upstream returns, as entries.py spells it, and how the op's fresh tensors map onto it.

    "(Tensor, Tensor)": a tuple of fresh tensors; "[output]": a list holding the parameter
    ``output`` when the caller passed one, else a fresh tensor; "out": the parameter or a fresh
    tensor; "()": None; groups nest ("((Tensor, Tensor), float)"). "float": a host float upstream
    reads off the GPU (``.item()``); the op returns it as a 0-dim float64 CPU tensor and the wrapper
    reads it back, as upstream does, after the op: a custom op's own float output is the fake's
    constant to dynamo, which would bake the fake's value into the graph. The op returns the fresh
    tensors only, in order (an op's output may not alias its input): as a list (``Tensor[]``), or for
    an op that writes into a parameter in a fixed form (fixed_form); opaque._traced_path writes, as
    code for dynamo, how upstream's result is put back together around them.
    """

    text: str

    @property
    def tree(self) -> Any:
        return _parse(self.text)

    def fresh(self, values: Mapping[str, Any], result: Any) -> List[Any]:
        """The tensors of upstream's result that are not a parameter handed back, and its floats as
        0-dim float64 tensors (a fake gives those as tensors already)."""
        out: List[Any] = []
        _fresh(self.tree, result, values, out, self.text)
        return out

    def handed_back(self, names: Sequence[str]) -> Dict[str, Tuple[int, ...]]:
        """The parameters (of names) upstream hands back, each with where it is in the result (its
        indices from the top: () when the result is the parameter itself)."""
        return {node: where for node, where in _leaves(self.tree, ()) if node in names}

    def fresh_count(self, names: Sequence[str]) -> int:
        """How many tensors the op returns fresh when every parameter handed back is given."""
        return sum(1 for node, _ in _leaves(self.tree, ()) if node not in names)


def _leaves(node: Any, where: Tuple[int, ...]) -> Iterator[Tuple[str, Tuple[int, ...]]]:
    """Each leaf of a parsed result ("Tensor", "float" or a parameter's name) with its indices."""
    if isinstance(node, tuple):
        for i, child in enumerate(node[1]):
            yield from _leaves(child, (*where, i))
    else:
        yield node, where


def fixed_form(result: Result, names: Sequence[str], mutates: AbstractSet[str], variants: bool) -> Optional[int]:
    """How many tensors a mutating op returns (None for one that mutates nothing: ``Tensor[]``).

    AOT functionalization (inductor, aot_eager) refuses a custom op that mutates a parameter and
    returns ``Tensor[]`` (an empty list too), so such an op's count is fixed: every parameter upstream
    hands back is given to the op (the traced path allocates one the call leaves None), and must be
    one the op declares it writes into.
    """
    if not mutates:
        return None
    if variants:
        raise TypeError("a mutating entry point's result must have one form: no variants")
    handed = set(result.handed_back(names)) - set(mutates)
    if handed:
        raise TypeError(f"parameter(s) {sorted(handed)} handed back but not declared mutated in entries.py")
    return result.fresh_count(names)


def schema_returns(form: Optional[int]) -> str:
    """The schema's returns for a form: ``Tensor[]``, ``()``, ``Tensor`` or ``(Tensor, Tensor, ...)``."""
    return "Tensor[]" if form is None else "Tensor" if form == 1 else f"({', '.join(['Tensor'] * form)})"


def shaped(form: Optional[int], fresh: List[Any]) -> Any:
    """The op's fresh tensors in the form its schema returns: the list, or a mutating op's fixed form."""
    if form is None:
        return fresh
    if len(fresh) != form:
        raise RuntimeError(f"nvfp4-overlay: {len(fresh)} fresh tensors where the op returns {form}: "
                           "a parameter upstream hands back was None (the traced path allocates it)")
    return None if form == 0 else fresh[0] if form == 1 else tuple(fresh)


@functools.lru_cache(maxsize=None)
def _parse(text: str) -> Any:
    """ "out" -> "out"; "(a, [b])" -> ("tuple", ("a", ("list", ("b",)))). """
    text = text.strip()
    if text[:1] not in ("(", "["):
        return text
    kind, depth, parts, start = ("tuple" if text[0] == "(" else "list"), 0, [], 1
    for i, ch in enumerate(text[1:-1], 1):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:-1])
    return kind, tuple(_parse(p) for p in parts if p.strip())


def _fresh(node: Any, item: Any, values: Mapping[str, Any], out: List[Any], text: str) -> None:
    if isinstance(node, tuple):
        items = list(item or ())
        if len(items) != len(node[1]):
            raise RuntimeError(f"nvfp4-overlay: upstream returned {len(items)} values, entries.py says {text}")
        for child, value in zip(node[1], items):
            _fresh(child, value, values, out, text)
    elif node == "float":
        import torch

        out.append(item if isinstance(item, torch.Tensor) else torch.tensor(float(item), dtype=torch.float64))
    elif node != "Tensor" and values.get(node) is not None:
        if item is not values[node]:
            raise RuntimeError(f"nvfp4-overlay: upstream did not hand back {node} as entries.py says")
    else:
        out.append(item)
