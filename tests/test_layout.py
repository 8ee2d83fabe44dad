"""Every module runs as what it is, from the repository's root (``python -m benchmarks.NAME``,
``python -m runners.offline``): none puts folders on the interpreter's module path for itself; and imports
between the folders of app/ and dashboards/ flow one way."""

import ast
import itertools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Folders of the checkout that are not the project's code: the virtual environment and what runs leave.
OUTSIDE = {".venv", ".git", "var", "build", "__pycache__"}
# Methods that change a list in place, called on sys.path.
MUTATING = {"append", "extend", "insert", "remove", "pop", "clear", "reverse", "sort", "__setitem__",
            "__delitem__", "__iadd__"}


def _path_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names that stand for the ``sys`` module and for ``sys.path`` itself in a module (imports with aliases)."""
    modules, paths = {"sys"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == "sys"}
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            paths |= {alias.asname or alias.name for alias in node.names if alias.name == "path"}
    return modules, paths


def _is_sys_path(node: ast.expr, modules: set[str], paths: set[str]) -> bool:
    """``sys.path``, an alias of it, or a slice or item of it (``sys.path[:0]``)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id in paths
    return isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
        and node.value.id in modules


def sys_path_edits(source: str) -> list[int]:
    """The lines of ``source`` that change ``sys.path``: assigned, extended, deleted from, a mutating method
    called on it, or ``site.addsitedir``."""
    tree = ast.parse(source)
    modules, paths = _path_names(tree)
    lines = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            called = node.func
            if (called.attr in MUTATING and _is_sys_path(called.value, modules, paths)) or (
                called.attr == "addsitedir" and isinstance(called.value, ast.Name) and called.value.id == "site"
            ):
                lines.append(node.lineno)
        if any(_is_sys_path(target, modules, paths) for target in targets):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_file_of_the_project_edits_sys_path() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(ROOT.rglob("*.py"))
        if not OUTSIDE & set(path.relative_to(ROOT).parts)
        for line in sys_path_edits(path.read_text())
    ]
    assert offenders == []


def test_every_way_of_editing_sys_path_is_found() -> None:
    edits = [
        "import sys\nsys.path.insert(0, 'x')",
        "import sys\nsys.path.append('x')",
        "import sys\nsys.path[:0] = ['x']",
        "import sys\nsys.path += ['x']",
        "import sys\nsys.path = ['x']",
        "import sys as s\ns.path.extend(['x'])",
        "from sys import path\npath.insert(0, 'x')",
        "from sys import path as p\ndel p[0]",
        "import site\nsite.addsitedir('x')",
    ]
    assert [sys_path_edits(source) for source in edits] == [[2]] * len(edits)
    # Reading it, or another module's ``path``, is no edit.
    assert sys_path_edits("import os, sys\nprint(sys.path[0])\nos.path.join('a', 'b')\nx = sys.path") == []


def folder(module: str) -> str | None:
    """The node of ``module`` in the folder graph: its sub-package of app/ or dashboards/ (``app.cells``), or
    ``app`` or ``dashboards`` for their root modules; None outside them."""
    parts = module.split(".")
    if parts[0] not in ("app", "dashboards"):
        return None
    return ".".join(parts[:2]) if len(parts) >= 2 and ROOT.joinpath(*parts[:2]).is_dir() else parts[0]


def folder_imports() -> dict[str, dict[str, str]]:
    """Folder -> folder it imports -> one file that does, over every module of app/ and dashboards/."""
    edges: dict[str, dict[str, str]] = {}
    for path in sorted([*ROOT.glob("app/**/*.py"), *ROOT.glob("dashboards/**/*.py")]):
        parts = path.relative_to(ROOT).with_suffix("").parts
        source = folder(".".join(parts[:-1] if path.name == "__init__.py" else parts))
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            for name in names:
                target = folder(name)
                if target is not None and target != source:
                    edges.setdefault(source, {}).setdefault(target, str(path.relative_to(ROOT)))
    return edges


def a_cycle(edges: dict[str, dict[str, str]]) -> list[str]:
    """One cycle of the graph as its nodes, the first repeated last; empty when there is none (depth-first)."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str]:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return []
        path.append(node)
        for target in sorted(edges.get(node, {})):
            if found := visit(target):
                return found
        path.pop()
        done.add(node)
        return []

    for start in sorted(edges):
        if found := visit(start):
            return found
    return []


def test_folders_of_app_and_dashboards_import_each_other_one_way() -> None:
    edges = folder_imports()
    cycle = a_cycle(edges)
    assert cycle == [], "import cycle: " + ", ".join(f"{a} -> {b} ({edges[a][b]})" for a, b in itertools.pairwise(cycle))


def test_a_cycle_is_found_and_named() -> None:
    assert a_cycle({"a": {"b": "x"}, "b": {"c": "y"}, "c": {"a": "z"}}) == ["a", "b", "c", "a"]
    assert a_cycle({"a": {"b": "x", "c": "x"}, "b": {"c": "y"}}) == []
