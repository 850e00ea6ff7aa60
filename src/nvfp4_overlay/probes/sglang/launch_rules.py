"""Which SGLang line decided a launch line's graph settings: every line of SGLang traced while it runs.

The settings read (``state``): the piecewise runner's switches of 0.5.8-0.5.13
(``enable_piecewise_cuda_graph``, ``disable_piecewise_cuda_graph``, ``enforce_piecewise_cuda_graph``,
``enable_breakable_cuda_graph``), ``disable_cuda_graph``, ``enable_torch_compile``, and from 0.5.14 the
resolved ``cuda_graph_config``'s prefill and decode backends, read as the release reads them (0.5.20
on: the fields overlaid with the declarations SGLang's resolvers stash in ``_resolved_overrides``).
Before each line of SGLang's argument handling runs (TRACED), and as each of its functions returns, the settings are read again;
where they changed, the line that ran last made the change. The rule named for it is that line's own frame, or the nearest caller
outside SGLang's plumbing (its setters, views and closures), with the line's text.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
from collections.abc import Iterator
from typing import Any

SWITCHES = ("enable_piecewise_cuda_graph", "disable_piecewise_cuda_graph", "enforce_piecewise_cuda_graph",
            "enable_breakable_cuda_graph", "disable_cuda_graph", "enable_torch_compile")
# Where SGLang changes the graph settings: only these files' lines are traced (the rest of SGLang, the
# model config and the utilities, runs untraced: a change they made is seen at the next traced line).
TRACED = ("srt/server_args.py", "srt/arg_groups/", "srt/model_executor/")
PLUMBING = ("arg_groups/overrides.py", "arg_groups/model_override_base.py", "arg_groups/arg_utils.py",
            "model_executor/cuda_graph_config.py", "arg_groups/resolution_hooks.py")
_MISSING = object()


def state(server_args: Any) -> dict[str, Any]:
    """The graph settings of a ServerArgs being built, as the release would read them now."""
    try:
        fields = object.__getattribute__(server_args, "__dict__")
    except AttributeError:
        return {}
    overlay: dict[str, Any] = {}
    for entry in fields.get("_resolved_overrides") or ():
        if isinstance(entry, (tuple, list)) and len(entry) == 2 and isinstance(entry[1], dict):
            overlay.update(entry[1])

    def get(name: str) -> Any:
        return overlay.get(name, fields.get(name, _MISSING))

    out = {name: get(name) for name in SWITCHES if get(name) is not _MISSING}
    config = get("cuda_graph_config")
    for phase in ("prefill", "decode"):
        value = getattr(getattr(config, phase, None), "backend", _MISSING)
        if value is not _MISSING:
            out[phase] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    value = getattr(value, "value", value)
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


class Recorder:
    """The changes of the graph settings while SGLang runs, each with the line that made it."""

    def __init__(self, sglang_dir: str, server_args_module: Any) -> None:
        self.root = sglang_dir + os.sep
        self.traced = tuple(os.path.join(sglang_dir, *t.split("/")) for t in TRACED)
        self.top = os.path.dirname(sglang_dir) + os.sep
        self.cls = server_args_module.ServerArgs
        self.subject: Any = None
        self.last: dict[str, Any] = {}
        self.previous: Any = None  # the frame of the SGLang line that ran last, and its line
        self.changes: list[dict[str, Any]] = []
        self.initial: dict[str, Any] = {}

    @contextlib.contextmanager
    def tracing(self) -> Iterator[None]:
        """Trace SGLang's lines while ServerArgs.__post_init__ (and what it calls) runs."""
        original = self.cls.__post_init__
        recorder = self

        def post_init(this: Any, *args: Any, **kwargs: Any) -> Any:
            if recorder.subject is None:
                recorder.subject = this
                recorder.initial = recorder.last = state(this)
                sys.settrace(recorder._global)
                try:
                    return original(this, *args, **kwargs)
                finally:
                    sys.settrace(None)
                    recorder._check(None)
            return original(this, *args, **kwargs)

        self.cls.__post_init__ = post_init
        try:
            yield
        finally:
            self.cls.__post_init__ = original
            sys.settrace(None)

    @contextlib.contextmanager
    def watching(self, subject: Any) -> Iterator[None]:
        """Trace SGLang's lines while a gate runs over an already built ServerArgs."""
        self.subject, self.last, self.previous = subject, state(subject), None
        sys.settrace(self._global)
        try:
            yield
        finally:
            sys.settrace(None)

    def _global(self, frame: Any, event: str, arg: Any) -> Any:
        return self._local if frame.f_code.co_filename.startswith(self.traced) else None

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        if event in ("line", "return"):  # a change is seen before the caller's next line: callers still at the call
            self._check(frame)
        if event == "line":
            self.previous = (frame, frame.f_lineno)
        return self._local

    def _check(self, frame: Any) -> None:
        now = state(self.subject)
        if now != self.last and self.previous is not None:
            changed = {k: [self.last.get(k), v] for k, v in now.items() if self.last.get(k) != v}
            self.changes.append({"changed": changed, **self.where(*self.previous)})
        self.last = now

    def where(self, frame: Any, line: int) -> dict[str, Any]:
        """The line as a rule: file (relative to the tree), line, function, text; its callers in SGLang."""
        stack: list[dict[str, Any]] = []
        while frame is not None and len(stack) < 6:
            if frame.f_code.co_filename.startswith(self.root):
                stack.append(self.site(frame.f_code, line if not stack else frame.f_lineno))
            frame = frame.f_back
        rule = next((s for s in stack if not _plumbing(s)), stack[0] if stack else {})
        return {**rule, "stack": [f"{s['file']}:{s['line']} {s['function']}" for s in stack]}

    def site(self, code: Any, line: int) -> dict[str, Any]:
        file = code.co_filename
        return {"file": file[len(self.top):].replace(os.sep, "/"), "line": line,
                "function": getattr(code, "co_qualname", code.co_name),
                "text": linecache.getline(file, line).strip()[:200]}

    def resolution(self, made: Any) -> dict[str, Any]:
        """The resolved settings, every change with its rule, and the rule that decided each setting."""
        final = state(made)
        decided = {}
        for key in final:
            last = [c for c in self.changes if key in c["changed"]]
            decided[key] = _rule(last[-1]) if last else {"initial": True}
        return {"settings": final, "initial": self.initial, "changes": self.changes, "decided_by": decided}


def _rule(change: dict[str, Any]) -> dict[str, Any]:
    return {k: change[k] for k in ("file", "line", "function", "text") if k in change}


def _plumbing(site: dict[str, Any]) -> bool:
    function = site["function"]
    return ("<locals>" in function or "<lambda>" in function or site["file"].endswith(PLUMBING)
            or function.rsplit(".", 1)[-1] in ("__setattr__", "declare_resolution", "with_phase"))


def raised_at(exc: BaseException, sglang_dir: str) -> dict[str, Any] | None:
    """The innermost SGLang line of an exception's traceback."""
    root, top = sglang_dir + os.sep, os.path.dirname(sglang_dir) + os.sep
    found = None
    tb = exc.__traceback__
    while tb is not None:
        file = tb.tb_frame.f_code.co_filename
        if file.startswith(root):
            found = {"file": file[len(top):].replace(os.sep, "/"), "line": tb.tb_lineno,
                     "function": tb.tb_frame.f_code.co_name, "text": linecache.getline(file, tb.tb_lineno).strip()[:200]}
        tb = tb.tb_next
    return found
