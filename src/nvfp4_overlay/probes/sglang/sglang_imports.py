"""How the SGLang region probe imports a release's SGLang: its own files, stand-ins only for what is absent.

- ``sglang/__init__.py`` is not run (it imports the frontend language and the HTTP stack): a bare
  package whose path is the tree's ``sglang/`` stands in for it;
- a third-party module this interpreter lacks, imported from an SGLang file outside a ``try`` that
  catches ImportError, is a permissive stand-in (``Stub``): any attribute, call, subscript or base
  class works; the region probe records it when dynamo traces into one (SGLang's code did not run
  there). Inside such a ``try`` the import fails as on a server without the module, except for the
  kernel packages every SGLang server has (``SERVER_MODULES``), stand-ins there too;
- an SGLang module whose import raises with those stand-ins (a transformers config, a tokenizer
  helper) becomes a stand-in itself, keeping what it defined before it raised, with the reason
  recorded; the modules a region runs (its ``needs``) must import for real;
- msgspec (compiled, absent here; SGLang's ServerArgs is a msgspec struct from 0.5.20): a stand-in
  whose Struct, defstruct, field and structs work over dataclasses (``msgspec_stand_in``);
- ``include/`` and ``csrc/`` of SGLang's JIT kernel package (C++ sources, not unpacked) exist, empty.

``STUBBED`` names every stand-in made, with why; the probe reports it.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence
from typing import Any

# Kernel packages an SGLang server always has installed; absent here, stand-ins even where SGLang
# guards their import.
SERVER_MODULES = frozenset({"sgl_kernel", "triton", "triton_kernels", "cuda", "cutlass"})
STUBBED: dict[str, str] = {}  # module -> why it is a stand-in


class _StubMeta(type):
    """A stand-in class: attribute, call, subscript, iteration, use as a base class or a decorator."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], types.FunctionType):
            return args[0]  # a decorator of a function
        return type.__call__(cls)

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __setitem__(cls, key: Any, value: Any) -> None:
        pass

    def __contains__(cls, item: Any) -> bool:
        return False

    def __len__(cls) -> int:
        return 0

    def __iter__(cls) -> Any:
        return iter(())

    def __bool__(cls) -> bool:
        return False

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls


class Stub(metaclass=_StubMeta):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub(f"{type(self).__qualname__}().{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], types.FunctionType):
            return args[0]
        return self

    def __getitem__(self, item: Any) -> Any:
        return self

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _stub(name: str) -> Any:
    return _StubMeta(name.rsplit(".", 1)[-1], (Stub,), {"__qualname__": name, "__module__": "stand-in"})


class StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _stub(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class AbsentModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stand-ins for the third-party modules this interpreter lacks, imported from SGLang's files."""

    def __init__(self, sglang_dir: str) -> None:
        self.sglang_dir = sglang_dir + os.sep

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top in ("sglang", "flashinfer", "torch") or not (top in STUBBED or self._absent(top)):
            return None
        where = _importer()
        if top not in STUBBED:
            if where is None or not where[0].startswith(self.sglang_dir):
                return None
            if top not in SERVER_MODULES and _guarded(*where):
                return None  # SGLang expects it may be missing: as on a server without it
            STUBBED[top] = f"absent here, imported by {where[0][len(self.sglang_dir) - 7:]}:{where[1]}"
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def _absent(self, top: str) -> bool:
        if top in sys.modules:
            return False
        finders = [f for f in sys.meta_path if f is not self and hasattr(f, "find_spec")]
        return not any(f.find_spec(top, None) for f in finders)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name == "msgspec":
            STUBBED["msgspec"] += "; Struct, defstruct, field and structs work, over dataclasses"
            return msgspec_stand_in()
        module = StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def msgspec_stand_in() -> types.ModuleType:
    """msgspec (compiled, absent here), as far as SGLang's configuration needs it to work: Struct
    subclasses and defstruct become dataclasses, frozen, keyword-only and compared by value as msgspec's
    own options ask (a Struct's __init__ takes its fields in order unless kw_only; it compares by value
    unless eq=False), field is
    dataclasses.field, structs.fields/asdict/replace/force_setattr; the rest is permissive."""
    import dataclasses

    nodefault: Any = _stub("msgspec.NODEFAULT")

    def dataclass_of(cls: type, options: dict[str, Any]) -> None:
        for name in cls.__dict__.get("__annotations__", {}):
            value = cls.__dict__.get(name, dataclasses.MISSING)
            if isinstance(value, (list, dict, set)):
                setattr(cls, name, dataclasses.field(default_factory=functools.partial(copy.copy, value)))
        dataclasses.dataclass(cls, frozen=bool(options.get("frozen")), kw_only=bool(options.get("kw_only")),
                              eq=bool(options.get("eq", True)))
        cls.__struct_fields__ = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[attr-defined]

    class Struct:
        __setattr__ = object.__setattr__

        def __init_subclass__(cls, **options: Any) -> None:
            dataclass_of(cls, options)

    def field(*, default: Any = nodefault, default_factory: Any = nodefault, name: Any = None) -> Any:
        if default_factory is not nodefault:
            return dataclasses.field(default_factory=default_factory)
        return dataclasses.field() if default is nodefault else dataclasses.field(default=default)

    def defstruct(name: str, fields: Any, *, bases: Any = None, module: Any = None, namespace: Any = None,
                  **options: Any) -> type:
        body = dict(namespace or {})
        annotations: dict[str, Any] = {}
        for item in fields:
            item = (item, Any) if isinstance(item, str) else tuple(item)
            annotations[item[0]] = item[1]
            if len(item) > 2:
                body[item[0]] = item[2]
        body["__annotations__"] = annotations
        body.setdefault("__module__", module or "msgspec")
        return types.new_class(name, tuple(bases or (Struct,)), options, lambda ns: ns.update(body))

    structs = StubModule("msgspec.structs")
    def fields(obj: Any) -> tuple[Any, ...]:  # msgspec's FieldInfo: NODEFAULT where a dataclass has MISSING
        return tuple(types.SimpleNamespace(
            name=f.name, encode_name=f.name, type=f.type,
            default=nodefault if f.default is dataclasses.MISSING else f.default,
            default_factory=nodefault if f.default_factory is dataclasses.MISSING else f.default_factory,
            required=f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
            for f in dataclasses.fields(obj))

    structs.fields = fields  # type: ignore[attr-defined]
    structs.asdict = lambda obj: {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}  # type: ignore[attr-defined]
    structs.replace = dataclasses.replace  # type: ignore[attr-defined]
    structs.force_setattr = object.__setattr__  # type: ignore[attr-defined]
    module = StubModule("msgspec")
    module.__path__ = []
    for key, value in {"Struct": Struct, "field": field, "defstruct": defstruct, "structs": structs,
                       "NODEFAULT": nodefault}.items():
        setattr(module, key, value)
    sys.modules["msgspec.structs"] = structs
    return module


def _importer() -> tuple[str, int] | None:
    """The file and line of the import statement being executed (past importlib's frames)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<frozen") and not name.endswith(os.sep + "sglang_imports.py"):
            return name, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None


# The digest of a file's bytes -> its guarded lines: found here, or handed down from the child that
# probed the tree before (sglang_regions.run). A release's children import the same files, and its
# upstream and patched SGLang trees differ in a few of them; finding the lines parses each file with
# an absent import (about a third of SGLang's import in the probe).
GUARDED: dict[str, frozenset[int]] = {}
_BY_PATH: dict[str, frozenset[int]] = {}  # this child's files, read once


def _guarded_lines(path: str) -> frozenset[int]:
    if path not in _BY_PATH:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            data = b""
        key = hashlib.sha256(data).hexdigest()
        if key not in GUARDED:
            GUARDED[key] = _find_guarded_lines(data)
        _BY_PATH[path] = GUARDED[key]
    return _BY_PATH[path]


def _find_guarded_lines(source: bytes) -> frozenset[int]:
    """Lines inside a try body whose handlers catch ImportError (or anything broader)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            for statement in node.body:
                lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return frozenset(lines)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = [n.id if isinstance(n, ast.Name) else getattr(n, "attr", "") for n in ast.walk(handler.type)]
    return bool({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"} & set(names))


def _guarded(path: str, line: int) -> bool:
    return line in _guarded_lines(path)


class FallibleSglang(importlib.abc.MetaPathFinder):
    """An SGLang module that raises on import becomes a stand-in, unless a region needs it."""

    def __init__(self, needs: Sequence[str]) -> None:
        self.needs = set(needs)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("sglang.") or fullname in self.needs:
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, AbsentModules) or not hasattr(finder, "find_spec"):
                continue
            spec: importlib.machinery.ModuleSpec | None = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and (spec.origin or "").endswith(".py"):
                    spec.loader = _Fallible(spec.loader, fullname)
                return spec
        return None


class _Fallible(importlib.abc.Loader):
    def __init__(self, inner: Any, name: str) -> None:
        self.inner, self.name = inner, name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        module: types.ModuleType | None = self.inner.create_module(spec)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        try:
            self.inner.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - recorded; the module becomes a stand-in
            stand_in = StubModule(self.name)
            stand_in.__path__ = getattr(module, "__path__", [])
            for key, value in vars(module).items():
                if not key.startswith("__"):
                    setattr(stand_in, key, value)  # what ran before the failure stays real
            sys.modules[self.name] = stand_in
            STUBBED[self.name] = f"its import raised {type(exc).__name__}: {str(exc)[:160]}"


def install_imports(sglang_tree: str, needs: Sequence[str]) -> None:
    """SGLang importable from its tree, with the stand-ins above."""
    sglang_dir = os.path.join(sglang_tree, "sglang")
    for jit in (("jit_kernel",), ("kernels", "jit")):  # SGLang's JIT kernels up to 0.5.1x, and after
        if os.path.isdir(os.path.join(sglang_dir, *jit)):
            for folder in ("include", "csrc"):
                os.makedirs(os.path.join(sglang_dir, *jit, folder), exist_ok=True)
    package = types.ModuleType("sglang")
    package.__path__ = [sglang_dir]
    sys.modules["sglang"] = package
    sys.meta_path.insert(0, FallibleSglang(needs))
    sys.meta_path.append(AbsentModules(sglang_dir))
