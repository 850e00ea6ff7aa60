"""inert.py: a def a patch decorates with the overlay that its module re-binds below it."""

from __future__ import annotations

import pytest

from nvfp4_overlay.audit import inert

DECORATED = '''from .._nvfp4_overlay import cuda as _nvfp4_cuda


@_nvfp4_cuda.replaces
@functools.cache
def get_cuda_version():
    return 1


@__import__("flashinfer._nvfp4_overlay.opaque", fromlist=["route"]).route
def fp4_quantize(x):
    return x
'''

REBINDINGS = {  # id -> (the text added below, the name re-bound, the line reported)
    "assignment": ("get_cuda_version = _v2\n", "get_cuda_version", "get_cuda_version = _v2"),
    "annotated": ("get_cuda_version: Any = _v2\n", "get_cuda_version", "get_cuda_version: Any = _v2"),
    "second def": ("def fp4_quantize(x, y):\n    return y\n", "fp4_quantize", "def fp4_quantize(x, y):"),
    "import": ("from .fp4_api import fp4_quantize\n", "fp4_quantize", "from .fp4_api import fp4_quantize"),
    "import as": ("from .v2 import lookup as get_cuda_version\n", "get_cuda_version",
                  "from .v2 import lookup as get_cuda_version"),
    "inside try": ("try:\n    from .fast import fp4_quantize\nexcept ImportError:\n    pass\n", "fp4_quantize",
                   "from .fast import fp4_quantize"),
    "tuple target": ("get_cuda_version, other = _v2, 1\n", "get_cuda_version", "get_cuda_version, other = _v2, 1"),
}


@pytest.mark.parametrize("added", sorted(REBINDINGS))
def test_a_rebinding_below_the_decorated_def_is_named(added: str) -> None:
    text, name, line = REBINDINGS[added]
    (found,) = inert.rebound("flashinfer/m.py", DECORATED + "\n\n" + text)
    assert (found.name, found.rebound_by) == (name, line)
    said = found.describe("0.7.5")
    assert said.startswith(f"0.7.5: flashinfer.m.{name} resolves to `{line}`") and "move the decorator line" in said


@pytest.mark.parametrize("text", [
    "x = get_cuda_version()\n",  # a use, not a binding
    "class C:\n    get_cuda_version = staticmethod(len)\n",  # a class attribute
    "def other():\n    fp4_quantize = 1\n    return fp4_quantize\n",  # a local
    "get_cuda_version.cache_clear()\n",
], ids=["use", "class attribute", "local", "attribute call"])
def test_what_binds_no_module_name_is_not_inert(text: str) -> None:
    assert inert.rebound("flashinfer/m.py", DECORATED + "\n\n" + text) == ()


def test_a_binding_above_the_def_and_an_undecorated_def_are_not_inert() -> None:
    above = "get_cuda_version = None\n\n" + DECORATED
    assert inert.rebound("flashinfer/m.py", above) == ()
    plain = DECORATED.replace("@_nvfp4_cuda.replaces\n", "") + "\nget_cuda_version = _v2\n"
    assert inert.rebound("flashinfer/m.py", plain) == ()
