"""nvfp4-overlay: what upstream returns (Result, as entries.py spells it) and which of it the op returns fresh."""

import functools
from dataclasses import dataclass
from typing import Any, List, Mapping


@dataclass(frozen=True)
class Result:
    """What upstream returns, as entries.py spells it, and how the op's fresh tensors map onto it.

    "(Tensor, Tensor)": a tuple of fresh tensors; "[output]": a list holding the parameter
    ``output`` when the caller passed one, else a fresh tensor; "out": the parameter or a fresh
    tensor; "()": None; groups nest ("((Tensor, Tensor), float)"). "float": a host float upstream
    reads off the GPU (``.item()``); the op returns it as a 0-dim float64 CPU tensor and the wrapper
    reads it back, as upstream does, after the op: a custom op's own float output is the fake's
    constant to dynamo, which would bake the fake's value into the graph. The op returns the fresh
    tensors only, in order (an op's output may not alias its input); opaque._traced_path writes,
    as code for dynamo, how upstream's result is put back together around them.
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
