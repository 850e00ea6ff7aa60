"""A def's body read a part at a time: which parts may name a hot binding, and their references.

The scan (api_graph) parses a def only where it may name a function that reaches a loader. A def
longer than a few KB is cut (api_text) into its header and the statements of its body, and a long
method or nested function in turn into its own; each part is parsed when its text names a hot name
in a way that can resolve to the binding (Names). Together the parts' references are those of the
whole def (its decorators aside; a nested def's decorators, arguments and annotations included, as a
walk of the whole def sees them), and its lazy imports, read once for the whole def, bind for every
part, as they do in a walk of the whole def. Where a cut is not Python, the whole def is parsed.
"""

from __future__ import annotations

import ast
import bisect
import functools
import re
from collections.abc import Iterator
from typing import NamedTuple

from .api_scan import _WORDS, Def, Imports, Key, Module, Ref, Release, Symbol, bound_by, resolved, roots, symbols

# A def shorter than this is parsed whole: cutting it costs more than parsing it.
SPLIT = 4000
_KEYWORD = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]", re.M)


class Names:
    """The names that make a part of a body worth parsing, in one module, for one batch.

    A body names a function by a name its module binds to one (``own``: any occurrence), or
    (``anywhere``: a name some module binds to one) as an attribute of a module (after a name the
    module or the def imports, or a module's last component, and a dot), as the constant of a part
    that calls getattr, or through a lazy import of the def that binds it."""

    def __init__(self, own: frozenset[str], anywhere: frozenset[str], heads: frozenset[str], heated: set[Key]) -> None:
        self.own, self.anywhere, self.heads, self.heated = own, anywhere, heads, heated

    def hot(self, text: str, start: int, end: int, words: frozenset[str] | None, local: Imports | None) -> bool:
        """Whether text[start:end], a part of a def whose own imports bind `local` (None: unknown) and
        which holds `words` (None: not counted), may name a binding turned hot."""
        own, anywhere = (self.own, self.anywhere) if words is None else (self.own & words, self.anywhere & words)
        if any(has_word(text, w, start, end) for w in own):
            return True
        if local is None:
            return any(has_word(text, w, start, end) for w in anywhere)
        if any(a in self.anywhere and (t, a) in self.heated and has_word(text, alias, start, end)
               for alias, (t, a) in local.items() if a and (words is None or alias in words)):
            return True
        if not anywhere:
            return False
        heads, quoted = self.heads | frozenset(local), has_word(text, "getattr", start, end)
        return any(has_word(text, w, start, end, heads, quoted) for w in anywhere)


class Part(NamedTuple):
    """A span of a def's text, and how its parse is read: the def's own header (its bases or default
    values), a nested def's header (all of it: decorators, arguments, annotations), or statements."""

    start: int
    end: int
    kind: str  # "header", "inner", "statements"


class Reading:
    """A def read a part at a time; or whole, where its layout is not one statement a line, or its
    lazy imports cannot be read without a parse. What each part names (symbols) is kept in the
    release's memo by the part's text: the next release's unchanged defs are not parsed again."""

    def __init__(self, release: Release, info: Module, found: Def) -> None:
        self.release, self.info, self.found = release, info, found
        if found.node is not None:
            self.local, self.parts = None, {Part(found.keyword, found.end, "whole"): frozenset(release.words(info.name))}
            return
        base = found.keyword
        imported, parts = release.memo.get(("layout", info.text[base:found.end]), self._layout)
        self.local = None if imported is None else bound_by(info, imported)
        self.parts = {Part(base + s, base + e, kind): words for s, e, kind, words in parts}

    def _layout(self) -> tuple[tuple[Symbol, ...] | None, list[tuple[int, int, str, frozenset[str]]]]:
        """What the def's lazy imports name (None: unread) and its parts, relative to its keyword."""
        found, source = self.found, self.info.source
        imported, units = None, None
        if found.end - found.keyword > SPLIT:
            units, texts = source.units(found.keyword, found.end), source.imports(found.keyword, found.end)
            try:
                imported = None if texts is None or units is None else self._symbols("imports", "\n".join(texts))
            except (SyntaxError, ValueError):
                imported = None
        if imported is None or units is None:
            spans = [Part(found.keyword, found.end, "whole")]
        else:
            spans = [Part(*units[0], "header"), *(Part(s, e, "statements") for s, e in units[1:])]
        return imported, [(p.start - found.keyword, p.end - found.keyword, p.kind, self._words(p)) for p in spans]

    def _words(self, part: Part) -> frozenset[str]:
        return frozenset(_WORDS.findall(self.info.text, part.start, part.end))

    @property
    def done(self) -> bool:
        return not self.parts

    def read(self, names: Names) -> list[Ref]:
        """The references of every part not read yet that may name a hot binding."""
        hot = self._hot(names)
        if not hot:
            return []
        text = self.info.text
        try:
            found = [] if self.local is None else [x for p in hot for x in self._symbols(p.kind, text[p.start:p.end])]
        except (SyntaxError, ValueError):  # the cut was not Python
            self.local = None
        if self.local is None:  # the whole def
            self.parts = {}
            return list(resolved(self.release, self.info, self._whole()))
        for p in hot:
            del self.parts[p]
        return list(resolved(self.release, self.info, found, self.local))

    def _whole(self) -> tuple[Symbol, ...]:
        if self.found.node is not None:
            return symbols(roots(self.found.node))
        text = self.info.text[self.found.start:self.found.end]
        return self._symbols("whole", text)

    def _symbols(self, kind: str, text: str) -> tuple[Symbol, ...]:
        return self.release.memo.get(("symbols", kind, text), lambda: symbols(_parse(kind, text)))

    def _hot(self, names: Names) -> list[Part]:
        """The parts that may name a hot binding; a long nested def among them cut into its own."""
        text, out = self.info.text, []
        todo = [p for p, words in self.parts.items() if names.hot(text, p.start, p.end, words, self.local)]
        while todo:
            part = todo.pop()
            inner = self._cut(part) if self.local is not None else None
            if inner is None:
                out.append(part)
                continue
            del self.parts[part]
            for p in inner:
                self.parts[p] = self._words(p)
                if names.hot(text, p.start, p.end, self.parts[p], self.local):
                    todo.append(p)
        return out

    def _cut(self, part: Part) -> list[Part] | None:
        """A long def statement (a method, a nested function) as its header and body statements."""
        if part.kind != "statements" or part.end - part.start <= SPLIT:
            return None
        keyword = _KEYWORD.search(self.info.text, part.start, part.end)
        if keyword is None or self.info.text[part.start:keyword.start()].strip(" \t\r\n")[:1] not in ("", "@"):
            return None
        start = keyword.end() - len(keyword.group().lstrip(" \t"))
        units = self.info.source.units(start, part.end)
        if units is None:
            return None
        return [Part(part.start, units[0][1], "inner"), *(Part(s, e, "statements") for s, e in units[1:])]


def _parse(kind: str, text: str) -> list[ast.AST]:
    """The nodes whose walk a part of a def contributes (SyntaxError: the part is not Python)."""
    if kind == "whole":  # the def, decorators included: its roots
        return roots(ast.parse(text).body[0])
    if kind == "imports":
        return list(ast.parse(text).body)
    if kind == "header":  # `def f(x=default):` / `class C(Base):`: its bases, its default values
        (header,) = ast.parse(text + " pass").body
        return [*getattr(header, "bases", []), *getattr(getattr(header, "args", None), "defaults", [])]
    (block,) = ast.parse("if 1:\n" + text + (" pass" if kind == "inner" else "")).body  # at its indentation
    statements = list(getattr(block, "body", []))
    if kind == "inner":  # a nested def: everything but its body, which its other parts hold
        (nested,) = statements
        nested.body = []
    return statements


def has_word(text: str, word: str, start: int, end: int, heads: frozenset[str] | None = None,
              quoted: bool = False) -> bool:
    """Whether text[start:end] holds `word` as a whole identifier; with `heads`, only as an attribute
    of one of them (``core.gen_x``, ``core.\n    gen_x``), or as a quoted constant where `quoted`."""
    positions = _positions(text, word)
    for i in range(bisect.bisect_left(positions, start), len(positions)):
        at = positions[i]
        if at + len(word) > end:
            return False
        if heads is None:
            return True
        before = _back(text, at)
        if before >= 0 and text[before] == "." and _word_before(text, before) in heads:
            return True
        if quoted and before >= 0 and text[before] in "\"'":
            return True
    return False


def occurrences(text: str, word: str) -> Iterator[int]:
    """Where `word` occurs in text as a whole identifier."""
    return iter(_positions(text, word))


@functools.lru_cache(maxsize=1 << 16)
def _positions(text: str, word: str) -> tuple[int, ...]:
    """Where `word` occurs in text as a whole identifier, in order: the fixed point asks a module for
    one word in one part of it after another (0.7.4: some 250,000 searches), so each word is found
    in a text once (a text's hash is computed once) and each search after is a bisection."""
    out = []
    at = text.find(word)
    while at >= 0:
        if not _identifier(text, at - 1) and not _identifier(text, at + len(word)):
            out.append(at)
        at = text.find(word, at + 1)
    return tuple(out)


def _identifier(text: str, at: int) -> bool:
    return 0 <= at < len(text) and (text[at].isalnum() or text[at] == "_")


def _back(text: str, at: int) -> int:
    """The position of the character before `at`, past spaces and line breaks."""
    at -= 1
    while at >= 0 and text[at] in " \t\r\n\\":
        at -= 1
    return at


def _word_before(text: str, dot: int) -> str:
    end = _back(text, dot) + 1
    start = end
    while _identifier(text, start - 1):
        start -= 1
    return text[start:end]


