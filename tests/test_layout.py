"""Every module runs as what it is, from the repository's root (``python -m benchmarks.NAME``,
``python -m runners.offline``): none puts folders on the interpreter's module path for itself."""

import ast
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
