"""Which public functions of a release reach a kernel loader: a fixed point over api_scan's call graph.

From the loaders back: a module is read when its text names a function known to reach a loader (or
a loader itself); in a module read, a def is parsed when its text names something that can resolve
to one (the ``hot`` names: every function known to reach, and every alias, in any module, that
resolves to one). A def whose text names nothing hot cannot name a function that reaches, however
its names resolve, so it is left unparsed until a name it holds turns hot. The result is the one a
parse of every module would give (tests/api_scan_reference.py, the reference, in the tests).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

from .api_body import Names, Reading, has_word, occurrences
from .api_scan import CUBIN_LOADER, JIT_LOADER, Imports, Key, Memo, PublicFunction, Ref, Release, is_public_module


def reaching(files: Mapping[str, str], memo: Memo | None = None) -> list[PublicFunction]:
    """Every public function or class of the release (files: wheel path -> text) that reaches a loader.

    memo: what the scan of the release before learnt (releases scanned in a row share most files)."""
    release = Release(files, memo)
    graph = _Graph(release)
    graph.run()
    out = []
    for key in sorted(_public(release), key=lambda k: f"{k[0]}.{k[1]}"):
        if key in graph.kinds:
            out.append(PublicFunction(key[0], key[1], tuple(sorted(graph.kinds[key])), graph.chain(key)))
    return out


class _Graph:
    """The call graph as far as it is read: each parsed def's references, who calls whom, who reaches."""

    def __init__(self, release: Release) -> None:
        self.release = release
        self.refs: dict[Key, dict[Ref, None]] = {}
        self.callers: dict[Key, set[Key]] = {}
        self.kinds: dict[Key, set[str]] = {}  # the defs that reach a loader, and which loaders
        # (module, name): a binding that resolves to a def that reaches, or into the cubin loader, in
        # the order found; ("", name): its name, which a body may reach it by as an attribute
        self.heated: list[Key] = []
        self._heated: set[Key] = set()
        self._bound_to: dict[Key, list[Key]] = {}  # (module, name) -> the bindings that resolve to it in one step
        self._depth: dict[Key, int] | None = None
        self._spans: dict[str, list[tuple[int, int, str]]] = {}  # module -> its defs' spans, in order
        # what a dotted module path can end in before the attribute: each module's last component
        self._module_names = frozenset(m.rsplit(".", 1)[-1] for m in release.texts)

    def run(self) -> None:
        release = self.release
        modules = [m for m in release.texts if release.module(m) is not None]
        for m in modules:
            self._index_bindings(m)
        cubin = release.module(CUBIN_LOADER)
        self._heat(("", JIT_LOADER))  # the loader, an attribute: `spec.build_and_load()`
        for name in cubin.defs if cubin else ():
            self._heat((CUBIN_LOADER, name))
        pending: dict[str, dict[str, Reading | None]] = {}  # module read -> its defs not read through
        triggers, checked = {JIT_LOADER, *(cubin.defs if cubin else ())}, 0
        while True:
            newly = [m for m in modules if m not in pending and triggers & release.words(m)]
            for m in newly:
                pending[m] = dict.fromkeys(release.module(m).defs)  # type: ignore[union-attr]
            fresh, checked = _Batch(self.heated[checked:]), len(self.heated)
            every = _Batch(self.heated) if newly else fresh
            work = [key for m, left in pending.items() if left
                    for key in self._read_hot(m, left, every if m in newly else fresh)]
            if not newly and not work:
                return
            grown = _propagate(work, self.refs, self.callers, self.kinds)
            triggers = {name for _, name in grown}
            for key in grown:
                self._heat(key)

    def _read_hot(self, module: str, left: dict[str, Reading | None], heated: _Batch) -> list[Key]:
        """Read the parts of the module's defs that may name a binding turned hot; the defs whose
        references grew."""
        info = self.release.module(module)
        assert info is not None
        words = self.release.words(module)
        own = words & {JIT_LOADER, *heated.by_module.get(module, ())}  # the loader: an attribute of any value
        anywhere = words & heated.names  # a binding turned hot somewhere: by its name, as an attribute
        if not own and not anywhere:
            return []
        names = Names(own, anywhere, frozenset(info.imports) | self._module_names, self._heated)
        grew = []
        for name in sorted(self._holding(module, own | anywhere) & left.keys()):
            found = info.defs[name]
            reading = left[name]
            if reading is None:
                # a first look at the whole def, its lazy imports unread unless it has none
                unread: Imports | None = None if has_word(info.text, "import", found.keyword, found.end) else {}
                if not names.hot(info.text, found.keyword, found.end, None, unread):
                    continue
                reading = left[name] = Reading(self.release, info, found)
            key = (module, name)
            new = [r for r in reading.read(names) if r not in self.refs.setdefault(key, {})]
            for ref in new:
                self.refs[key][ref] = None
                if not isinstance(ref, str) and ref != key:
                    self.callers.setdefault(ref, set()).add(key)
            if new:
                grew.append(key)
            if reading.done:
                del left[name]
        return grew

    def _holding(self, module: str, words: frozenset[str]) -> set[str]:
        """The defs of the module whose text (decorators aside) holds one of `words`."""
        if module not in self._spans:
            info = self.release.module(module)
            assert info is not None
            self._spans[module] = sorted((d.keyword, d.end, n) for n, d in info.defs.items())
        spans, text = self._spans[module], self.release.texts[module]
        starts = [s for s, _, _ in spans]
        out = set()
        for word in words:
            for at in occurrences(text, word):
                i = bisect.bisect_right(starts, at) - 1
                while i >= 0 and spans[i][0] <= at < spans[i][1]:  # defs bound in one block share its span
                    out.add(spans[i][2])
                    i -= 1
        return out

    def _index_bindings(self, module: str) -> None:
        """Each alias and import of the module under what it resolves to in one step (resolve's order:
        a def of the name first, then an alias, then an import)."""
        info = self.release.module(module)
        assert info is not None
        for alias, name in info.aliases.items():
            if alias not in info.defs:
                self._bound_to.setdefault((module, name), []).append((module, alias))
        for alias, (target, attr) in info.imports.items():
            if attr is not None and alias not in info.defs and alias not in info.aliases:
                self._bound_to.setdefault((target, attr), []).append((module, alias))

    def _heat(self, key: Key) -> None:
        """The binding hot, and every binding that resolves to it, in any module, through any chain."""
        todo = [key, ("", key[1])]
        while todo:
            current = todo.pop()
            if current in self._heated:
                continue
            self._heated.add(current)
            self.heated.append(current)
            todo.append(("", current[1]))
            todo.extend(self._bound_to.get(current, ()))

    def chain(self, key: Key) -> tuple[str, ...]:
        """A shortest chain of references from key to a loader (ties broken by name)."""
        depth = self._depths()
        out = [f"{key[0]}.{key[1]}"]
        while True:
            loaders = sorted(r for r in self.refs[key] if isinstance(r, str))
            if loaders:
                return (*out, loaders[0])
            key = min((r for r in self.refs[key] if not isinstance(r, str) and r in depth),
                      key=lambda r: (depth[r], r))
            out.append(f"{key[0]}.{key[1]}")

    def _depths(self) -> dict[Key, int]:
        """How many calls from each def that reaches to a loader, by layers from the loaders back."""
        if self._depth is None:
            depth = {k: 1 for k, refs in self.refs.items() if any(isinstance(r, str) for r in refs)}
            layer = sorted(depth)
            while layer:
                below = []
                for key in layer:
                    for caller in sorted(self.callers.get(key, ())):
                        if caller not in depth and caller in self.kinds:
                            depth[caller] = depth[key] + 1
                            below.append(caller)
                layer = below
            self._depth = depth
        return self._depth


def _propagate(work: list[Key], refs: Mapping[Key, Mapping[Ref, None]], callers: Mapping[Key, set[Key]],
               kinds: dict[Key, set[str]]) -> set[Key]:
    """Grow `kinds` over the known graph until nothing changes; the defs whose kinds grew."""
    grown: set[Key] = set()
    while work:
        key = work.pop()
        known = kinds.get(key, set())
        found = set(known)
        for ref in refs.get(key, ()):
            if isinstance(ref, str):
                found.add(ref)
            elif ref in kinds and ref != key:
                found |= kinds[ref]
        if found and found != known:
            kinds[key] = found
            grown.add(key)
            work.extend(callers.get(key, ()))
    return grown


class _Batch:
    """Bindings turned hot, by module, and their names."""

    def __init__(self, keys: Iterable[Key]) -> None:
        self.by_module: dict[str, set[str]] = {}
        for module, name in keys:
            self.by_module.setdefault(module, set()).add(name)
        self.names = {name for names in self.by_module.values() for name in names}


def _public(release: Release) -> set[Key]:
    """Top-level functions and classes with public names in public modules, and what public packages
    re-export from private ones."""
    out: set[Key] = set()
    for module in release.texts:
        if not is_public_module(module):
            continue
        info = release.module(module)
        if info is None:
            continue
        out |= {(module, n) for n in info.defs if not n.startswith("_")}
        if info.is_package:
            for alias in info.imports:
                found = release.resolve(module, alias) if not alias.startswith("_") else None
                if found is not None:
                    out.add(found)
    return out
