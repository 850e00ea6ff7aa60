"""What the probes' recording stand-ins share: describe() of a value (a tensor's shape, strides, dtype and
device; anything else by repr), a kernel that records its call and answers (Answer), and the placeholder
a stood-in library (cudnn_stub, cute_dsl_stub) answers a name with."""

from __future__ import annotations

from typing import Any

import torch


def describe(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ["tensor", list(value.shape), list(value.stride()), str(value.dtype), str(value.device.type)]
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    return ["value", repr(value)]


class Answer:
    """What a stubbed kernel function returns: callable, indexable, an int where Python asks for one."""

    def __init__(self, box: Any, name: str) -> None:
        self._box, self._name = box, name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _kernel(self._box, f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _kernel(self._box, self._name)(*args, **kwargs)

    def __int__(self) -> int:
        return 1

    __index__ = __int__

    def __gt__(self, other: Any) -> bool:  # fp8_blockscale_gemm_sm90: `workspace_size > 0`
        return bool(int(self) > other)

    def __iter__(self) -> Any:
        return iter(())

    def __bool__(self) -> bool:
        return True


class Placeholder:
    """A name of a stood-in library, or the value of a call of one: any further name is another of its kind.

    Each stub says what a call of one gives (cudnn_stub.CudnnPlaceholder, cute_dsl_stub.DslPlaceholder)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._placeholder(f"{self._name}.{name}")

    def _placeholder(self, name: str) -> Any:
        """Another placeholder of the same library."""
        return type(self)(name)


def kernel_of(box: Any, name: str) -> Any:
    """A kernel function that records its call into box.launches and answers (Answer)."""
    return _kernel(box, name)


def _kernel(box: Any, name: str) -> Any:
    def launch(*args: Any, **kwargs: Any) -> Any:
        box.launches.append([name, *[describe(a) for a in args],
                             *[[k, describe(v)] for k, v in sorted(kwargs.items())]])
        return Answer(box, f"{name}()")

    return launch
