"""nvfp4-overlay: which call a frame is making, named as the CUDA-version audit names it.

cuda.py answers get_cuda_version() and is_cuda_version_at_least() by call: the calling function and
the call itself, by its source text and how many calls of that text come before it in the function
(nvfp4_overlay's audit/cuda_scan.py names them so from the wheel's text). This module finds that name from
a frame: the instruction's position (Python 3.11+: where the call ends; 3.10: its line), the
function's own lines parsed once a process (the whole file for module and class bodies, lambdas and
comprehensions, which count as the function they sit in).
"""

import ast
import inspect
import io
import linecache
import tokenize
from inspect import CO_OPTIMIZED
from types import CodeType, FrameType
from typing import Dict, List, Optional, Tuple

Call = Tuple[str, int]  # (the call's source text, how many calls of that text come before it in the scope)

# The scopes Python makes that have no name of their own (3.11 runs a comprehension in a frame of its
# own, 3.12 inlines list, set and dict comprehensions): the call site is the named scope around them.
ANONYMOUS = frozenset({"<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
_ANONYMOUS = ANONYMOUS
_files: Dict[Tuple[str, int], "_FileCalls"] = {}  # (co_filename, a def's first line or 0) -> its calls


def calls_at(frame: FrameType) -> Tuple[Call, ...]:
    """The call at the frame's instruction, named as the audit names it (audit/cuda_scan.py): its source
    text and how many calls of that text come before it in its named scope. Python 3.11+ gives the
    instruction's columns, so the call is the one that ends there (every call ends at a ')' of its
    own); 3.10 gives the line, so every call on it. None found (no source): no call the audit lists."""
    code = frame.f_code
    # A function's own calls are found in its own lines (a 13,000-line module is not parsed for one
    # of its functions); module and class bodies, lambdas and comprehensions in the whole file.
    own = bool(code.co_flags & CO_OPTIMIZED) and code.co_name not in _ANONYMOUS
    key = (code.co_filename, code.co_firstlineno if own else 0)
    calls = _files.get(key)
    if calls is None:
        calls = _files[key] = _calls_in(code.co_filename, code.co_firstlineno if own else 0)
    end = _call_end(frame)
    if end is not None:
        found = calls.ending_at(end)
        return () if found is None else (found,)
    return calls.on_line(frame.f_lineno)


def call_end_from_code(frame: FrameType) -> Optional[Tuple[int, int]]:
    """Where the frame's current call ends (line, column), from the code's positions (Python 3.11)."""
    index = frame.f_lasti // 2  # one position per 2-byte code unit, caches included
    for i, (_, end_line, _, end_col) in enumerate(frame.f_code.co_positions()):  # type: ignore[attr-defined]
        if i == index:
            return None if end_line is None or end_col is None else (end_line, end_col)
    return None


def call_end_unknown(frame: FrameType) -> Optional[Tuple[int, int]]:
    return None  # Python 3.10: lines only


_call_end = call_end_from_code if hasattr(CodeType, "co_positions") else call_end_unknown


def _calls_in(filename: str, first_line: int) -> "_FileCalls":
    """The calls of a file, or of the def that starts at first_line (its lines as they are, under an
    ``if True:`` when indented, so that columns stay the file's); the whole file when they do not
    parse on their own."""
    lines = linecache.getlines(filename)
    if first_line:
        try:
            block = inspect.getblock(lines[first_line - 1:])
        except (IndentationError, SyntaxError, tokenize.TokenError):
            block = []
        if block:
            head = "if True:\n" if block[0][:1] in (" ", "\t") else ""
            found = _FileCalls(head + "".join(block), first_line - 1 - len(head.splitlines()))
            if found.parsed:
                return found
    return _FileCalls("".join(lines), 0)


class _FileCalls:
    """Every call of some source (a file, or one def of it), by where it ends in the file, with the
    named scope it sits in (a lambda's or a comprehension's calls are its enclosing function's;
    decorators, defaults and bases run in the scope around the def), as audit/cuda_scan.py walks them."""

    def __init__(self, text: str, line_offset: int) -> None:
        self.lines = io.StringIO(text, newline="").readlines()
        self.offset = line_offset  # the file's line of the text's line 0
        self.by_end: Dict[Tuple[int, int], Tuple[str, ast.Call]] = {}
        self.by_scope: Dict[str, List[ast.Call]] = {}
        self.named: Dict[Tuple[int, int], Call] = {}
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            self.parsed = False
            return
        self.parsed = True
        self._walk(tree.body, [])

    def ending_at(self, end: Tuple[int, int]) -> Optional[Call]:
        if end not in self.named and end in self.by_end:
            scope, node = self.by_end[end]
            text = self._text(node)
            before = [n for n in self.by_scope[scope] if (n.lineno, n.col_offset) < (node.lineno, node.col_offset)]
            self.named[end] = (text, sum(1 for n in before if self._text(n) == text))
        return self.named.get(end)

    def on_line(self, line: int) -> Tuple[Call, ...]:
        ends = [end for end, (_, node) in self.by_end.items() if node.lineno + self.offset <= line <= end[0]]
        return tuple(c for c in (self.ending_at(end) for end in sorted(ends)) if c is not None)

    def _walk(self, nodes: List[ast.AST], scope: List[str]) -> None:
        name = ".".join(scope[:-1] if scope[-1:] == ["<locals>"] else scope) or "<module>"
        todo = list(reversed(nodes))
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                outer: List[ast.AST] = [*node.decorator_list]
                if isinstance(node, ast.ClassDef):
                    outer += [*node.bases, *node.keywords]
                else:
                    outer += [node.args, *([node.returns] if node.returns else [])]
                self._walk(outer, scope)
                inner = [*scope, node.name] + ([] if isinstance(node, ast.ClassDef) else ["<locals>"])
                self._walk(list(node.body), inner)
                continue
            if isinstance(node, ast.Call) and node.end_lineno is not None and node.end_col_offset is not None:
                self.by_end[(node.end_lineno + self.offset, node.end_col_offset)] = (name, node)
                self.by_scope.setdefault(name, []).append(node)
            todo.extend(reversed(list(ast.iter_child_nodes(node))))

    def _text(self, node: ast.Call) -> str:
        """ast.get_source_segment over lines split once (columns are UTF-8 byte offsets)."""
        first, last = node.lineno - 1, int(node.end_lineno or node.lineno) - 1
        start, end = node.col_offset, int(node.end_col_offset or 0)
        if first == last:
            return self.lines[first].encode()[start:end].decode()
        head = self.lines[first].encode()[start:].decode()
        return "".join([head, *self.lines[first + 1:last], self.lines[last].encode()[:end].decode()])
