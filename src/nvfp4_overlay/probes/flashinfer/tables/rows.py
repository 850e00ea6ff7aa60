"""What a case table is made of: Row, and the input makers its rows share (a function of torch that
makes fresh inputs), written once for cases.py, quant_cases.py and moe_cases.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class Row(NamedTuple):
    """One call: its id, keyword arguments (a callable value is made with torch), positional inputs."""

    id: str
    kwargs: dict[str, Any]
    inputs: Callable[[Any], tuple[Any, ...]]
    since: str = "0.6.1"  # the first release whose signature takes the row's keywords
    until: str | None = None  # the first release that no longer does (a renamed parameter)


def bf16(*shape: int, device: str = "cpu") -> Callable[[Any], Any]:
    """A bfloat16 tensor of normal values."""
    return lambda torch: torch.randn(*shape, dtype=torch.bfloat16, device=device)


def u8(*shape: int) -> Callable[[Any], Any]:
    """A uint8 tensor of random bytes (packed FP4 values, FP8 scales viewed as bytes)."""
    return lambda torch: torch.randint(0, 255, shape, dtype=torch.uint8)


def with_scale(*shape: int, scale: float = 2.0) -> Callable[[Any], tuple[Any, ...]]:
    """A bfloat16 input and its (1,) float32 global scale."""
    return lambda torch: (bf16(*shape)(torch), torch.tensor([scale]))
