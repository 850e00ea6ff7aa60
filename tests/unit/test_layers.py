"""The house as docs/design.md draws it: each wing, what it may import, and the code held to it.

docs/design.md opens with the tree, one row per wing with the wings it may import; these tests read
that tree and every import of src/nvfp4_overlay/ (module level, inside functions, under TYPE_CHECKING),
so a new import that runs up a floor, closes a circle between wings or between the modules of one
wing, or reaches past a wing's face fails here, and so does a tree that no longer matches the folders.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "src" / "nvfp4_overlay"
ROW = re.compile(r"^  (\w+)(?:/|\.py)?\s{2,}(.+?)\s{2,}may import: (.+)$")
DOOR = "__main__"  # `python -m nvfp4_overlay`: a row of its own, above every wing


def design_tree() -> dict[str, set[str]]:
    """docs/design.md's tree: wing -> the wings it may import ("base": the package's top-level modules)."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("## The house", 1)[1].split("```", 2)[1]
    rows = {}
    for line in section.splitlines():
        if match := ROW.match(line):
            wing, _, allowed = match.groups()
            rows[wing] = set() if allowed.startswith("nothing") else {w.strip() for w in allowed.split(",")}
    return rows


def base_files() -> set[str]:
    """The files docs/design.md's base row names."""
    text = (ROOT / "docs" / "design.md").read_text().split("## The house", 1)[1].split("```", 2)[1]
    (row,) = [line for line in text.splitlines() if line.startswith("  base ")]
    return set(re.findall(r"\w+\.py", row))


def modules() -> dict[str, Path]:
    """Every module of the package, dotted under it (a package as its __init__)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def wing_of(module: str) -> str:
    """A module's wing: its folder under the package; "base" for a top-level module or the package's own __init__."""
    if module == DOOR:
        return DOOR
    return module.split(".")[0] if "." in module or module and (PACKAGE / module).is_dir() else "base"


def imports(module: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, str, int]]:
    """(the module imported, the name taken from it or "", line) for each import of the package in path."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = ".".join([*parts[:len(parts) - (node.level - 1)], *([node.module] if node.module else [])])
            elif node.module and (node.module + ".").startswith("nvfp4_overlay."):
                base = node.module.removeprefix("nvfp4_overlay").removeprefix(".")
            else:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}".lstrip(".")
                yield (sub, "", node.lineno) if sub in known else (base, alias.name, node.lineno)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("nvfp4_overlay."):
                    yield alias.name.removeprefix("nvfp4_overlay."), "", node.lineno


def test_the_tree_is_the_folders() -> None:
    tree = design_tree()
    wings = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    door = {DOOR} if (PACKAGE / f"{DOOR}.py").is_file() else set()
    assert set(tree) == wings | {"base"} | door, "docs/design.md's tree and src/nvfp4_overlay/'s folders differ"
    top = {p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", f"{DOOR}.py")}
    assert base_files() == top, "docs/design.md's base row and the package's top-level modules differ"
    assert all(allowed <= set(tree) for allowed in tree.values()), "a row names a wing that is not in the tree"


def test_the_tree_has_no_circle() -> None:
    tree = design_tree()
    done: set[str] = set()

    def visit(wing: str, path: tuple[str, ...]) -> None:
        assert wing not in path, f"docs/design.md's tree has a circle: {' -> '.join([*path, wing])}"
        if wing not in done:
            for lower in tree[wing]:
                visit(lower, (*path, wing))
            done.add(wing)

    for wing in tree:
        visit(wing, ())


def test_imports_point_down_the_tree() -> None:
    tree, known = design_tree(), modules()
    wrong = []
    for module, path in known.items():
        mine = wing_of(module)
        for target, _, line in imports(module, path, known):
            theirs = wing_of(target)
            if theirs != mine and theirs not in tree[mine]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {mine} imports {target} ({theirs}), "
                             f"which docs/design.md's tree does not let it")
    assert not wrong, "\n".join(wrong)


def test_one_wing_takes_from_another_through_its_face() -> None:
    """A wing whose __init__ has an __all__ is used by the others through that face, and only for what it lists."""
    known = modules()
    faces = {}
    for wing in {wing_of(m) for m in known} - {"base", DOOR}:
        tree = ast.parse((PACKAGE / wing / "__init__.py").read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                faces[wing] = set(ast.literal_eval(node.value))
    wrong = []
    for module, path in known.items():
        for target, name, line in imports(module, path, known):
            wing = wing_of(target)
            if wing in faces and wing != wing_of(module):
                leaf = target.rpartition(".")[2]
                if name == leaf and target.count(".") == 1:
                    continue  # a function named as its module (carry.refresh.refresh): the face cannot hold both
                taken = name or leaf
                if target.split(".")[0] != wing or (target != wing and name) or taken not in faces[wing]:
                    wrong.append(f"{path.relative_to(ROOT)}:{line}: {target}{':' + name if name else ''} "
                                 f"not through {wing}/__init__.py's __all__")
    assert not wrong, "\n".join(wrong)


def test_no_circle_between_modules_of_one_wing() -> None:
    """Inside a wing too, imports run one way: a circle of modules (an import inside a function that dodges it
    included) is one room split in two, or two that lean on each other's privates."""
    known = modules()
    graph: dict[str, dict[str, int]] = {}
    for module, path in known.items():
        for target, _, line in imports(module, path, known):
            if target != module and target in known and wing_of(target) == wing_of(module):
                graph.setdefault(module, {}).setdefault(target, line)
    circles = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            loop = path[path.index(module):] + [module]
            circles.append(" -> ".join(f"{a}:{graph[a][b]}" for a, b in zip(loop, loop[1:])) + f" -> {module}")
            return
        if module not in done:
            for target in sorted(graph.get(module, {})):
                visit(target, [*path, module])
            done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert not circles, "modules of one wing import each other in a circle:\n" + "\n".join(circles)


def test_each_row_names_only_the_wings_its_wing_imports() -> None:
    """The rows say what each wing uses today: a wing that stops importing another leaves its row too, so the
    tree is a map of the house, not a list of permissions nobody takes."""
    tree, known = design_tree(), modules()
    used: dict[str, set[str]] = {wing: set() for wing in tree}
    for module, path in known.items():
        for target, _, _ in imports(module, path, known):
            if wing_of(target) != wing_of(module):
                used[wing_of(module)].add(wing_of(target))
    stale = {wing: sorted(tree[wing] - used[wing]) for wing in tree if tree[wing] - used[wing]}
    assert not stale, f"docs/design.md's rows name wings their wing no longer imports: {stale}"


def test_what_the_probes_take_from_the_base_runs_on_the_standard_library() -> None:
    """A probe runs in a child of the examined interpreter with only this package on its path (doctor's, from
    Python 3.8 on): a base module it imports, and what that imports, may use the standard library alone."""
    known = modules()
    waiting = [t for m, p in known.items() if wing_of(m) == "probes" for t, _, _ in imports(m, p, known)
               if wing_of(t) == "base"]
    seen: set[str] = set()
    wrong = []
    while waiting:
        module = waiting.pop()
        if module in seen or module not in known:
            continue
        seen.add(module)
        source = known[module].read_text()
        ast.parse(source, str(known[module]), feature_version=(3, 8))  # a SyntaxError names what 3.8 lacks
        for node in ast.walk(ast.parse(source)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            wrong += [f"{known[module].relative_to(ROOT)}:{node.lineno}: imports {n}" for n in names
                      if n.split(".")[0] not in sys.stdlib_module_names and n.split(".")[0] != "nvfp4_overlay"]
        waiting += [t for t, _, _ in imports(module, known[module], known)]
    assert seen, "no probe imports a base module: this test holds nothing (drop it, or the rows' probes entry)"
    assert not wrong, "a base module the probes import reaches past the standard library:\n" + "\n".join(wrong)
