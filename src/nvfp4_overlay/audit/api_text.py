"""Python source cut into statements without parsing it: the lexical half of the serving-API scan.

A full parse of 0.7.4's 113 MB of Python takes minutes; finding where each statement starts takes a
regular expression. String literals and comments are skipped (a line that starts inside a
triple-quoted string starts nothing, so a ``def`` in a template is not one), as are lines that go
on a bracket (a closing bracket at the start of a line) and the clauses of a compound statement
(``else``, ``except``...). Where the layout is not one statement a line (a body on its header's
line, a continuation at the body's own indentation), the cut says so and the caller parses the
whole. Everything here is held to ``ast`` by the scan's tests.
"""

from __future__ import annotations

import bisect
import re
from typing import NamedTuple

# String literals and comments: what the cut must not look into.
_STRINGS = re.compile(r'''"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""|\'\'\'[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*\'\'\''''
                      r'''|"[^"\\\n]*(?:\\.[^"\\\n]*)*"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'|\#[^\n]*''', re.S)
_HEADER = re.compile(_STRINGS.pattern + r"|[()\[\]{}:]", re.S)
# A line's indentation, when the line is neither blank, a comment, nor a bracket's continuation.
_LINES = re.compile(r"\n([ \t]*)(?=[^\s#)\]}])")
_HEAD = re.compile(r"(@)|(?:async[ \t]+)?def[ \t]+(\w+)|class[ \t]+(\w+)|((?:import|from)\b)|((?:if|try)\b)"
                   r"|((?:else|elif|except|finally)\b)")
# An import statement at the start of a line (a lazy import inside a def).
_IMPORT = re.compile(r"^[ \t]*((?:from[ \t]+\.*[\w.]*[ \t]+import[ \t]+(?:\([^)]*\)|[^\n]*))|import[ \t][^\n]*)", re.M)
_IMPORT_WORD = re.compile(r"(?<![\w.])import\b")


class Chunk(NamedTuple):
    """One top-level statement of a module's text: its kind, the name it defines, its span."""

    kind: str  # "def" (def or class, decorators included), "import", "block" (if/try), "other"
    name: str
    start: int
    end: int
    body: int = 0  # a def's: where its decorators end and its keyword begins


class Source:
    """A module's text with its multi-line string literals found, once."""

    def __init__(self, text: str) -> None:
        self.text = text
        spans = [m.span() for m in _STRINGS.finditer(text) if text.find("\n", *m.span()) >= 0]
        self._starts = [s for s, _ in spans]
        self._ends = [e for _, e in spans]

    def in_string(self, pos: int) -> bool:
        """Whether pos lies inside a string literal that spans lines."""
        i = bisect.bisect_left(self._starts, pos) - 1
        return i >= 0 and pos < self._ends[i]

    def chunks(self) -> list[Chunk]:
        """The module's top-level statements, in order, covering the whole text."""
        text = self.text
        starts = [m.end() for m in _LINES.finditer(text) if not m.group(1) and not self.in_string(m.end())]
        starts.insert(0, 0)
        out: list[Chunk] = []
        decorated: int | None = None  # where the decorators of the next def begin
        for i, start in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else len(text)
            head = _HEAD.match(text, start)
            if head and head.group(6) and out:  # else/elif/except/finally: the statement goes on
                out[-1] = out[-1]._replace(end=end)
            elif head and head.group(1):
                decorated = start if decorated is None else decorated
            elif head and (head.group(2) or head.group(3)):
                name = head.group(2) or head.group(3)
                out.append(Chunk("def", name, start if decorated is None else decorated, end, start))
                decorated = None
            else:
                if decorated is not None:  # decorators over no def: not Python; kept as text
                    out.append(Chunk("other", "", decorated, start))
                    decorated = None
                kind = "import" if head and head.group(4) else "block" if head and head.group(5) else "other"
                out.append(Chunk(kind, "", start, end))
        if decorated is not None:
            out.append(Chunk("other", "", decorated, len(text)))
        return out

    def units(self, keyword: int, end: int) -> list[tuple[int, int]] | None:
        """A def's or class's header (from its keyword to its colon) and then each statement of its
        body (from the start of its line), as spans; None where the body is not one statement a
        line at one indentation."""
        text = self.text
        colon = self._header_end(keyword, end)
        if colon is None:
            return None
        rest = text[colon:text.find("\n", colon, end) if "\n" in text[colon:end] else end].strip()
        if rest and not rest.startswith("#"):
            return None  # the body on the header's line
        lines = [(m.start() + 1, len(m.group(1)), m.end()) for m in _LINES.finditer(text, colon, end)
                 if not self.in_string(m.end())]
        if not lines or lines[0][1] == 0 or any(indent < lines[0][1] for _, indent, _ in lines):
            return None
        starts: list[int] = []
        decorated: int | None = None
        for line, indent, first in lines:
            if indent != lines[0][1]:
                continue  # inside a statement of the body
            head = _HEAD.match(text, first)
            if head and head.group(6) and starts:
                continue  # a clause of the statement before
            if head and head.group(1):
                decorated = line if decorated is None else decorated
                continue
            starts.append(line if decorated is None else decorated)
            decorated = None
        if decorated is not None or not starts:
            return None
        return [(keyword, colon), *zip(starts, [*starts[1:], end])]

    def _header_end(self, keyword: int, end: int) -> int | None:
        """Just past the colon that ends the header starting at `keyword` (brackets and strings skipped)."""
        depth = 0
        for m in _HEADER.finditer(self.text, keyword, end):
            token = m.group()
            if token in "([{":
                depth += 1
            elif token in ")]}":
                depth -= 1
            elif token == ":" and depth == 0:
                return m.end()
        return None

    def imports(self, start: int, end: int) -> list[str] | None:
        """The import statements of text[start:end] at the start of a line (a def's lazy imports),
        as texts; None where `import` appears elsewhere in code (after a semicolon, on a clause's
        line), which only a parse reads right."""
        found = [m for m in _IMPORT.finditer(self.text, start, end) if not self.in_string(m.start(1))]
        words = [m for m in _IMPORT_WORD.finditer(self.text, start, end) if not self.in_string(m.start())
                 and not self._in_comment(m.start())]
        if len(words) != len(found):
            return None
        return [m.group(1) for m in found]

    def _in_comment(self, pos: int) -> bool:
        line = self.text.rfind("\n", 0, pos) + 1
        hash_at = self.text.find("#", line, pos)
        return hash_at >= 0 and not any(q in self.text[line:hash_at] for q in "\"'")
