"""benchmarks/ is a package whose scripts run from the repository's root as ``python -m benchmarks.NAME``."""

import importlib
import pkgutil
from pathlib import Path

import pytest

import benchmarks

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks"
MODULES = sorted(
    f"benchmarks.{path.relative_to(FOLDER).with_suffix('').as_posix().replace('/', '.')}"
    for path in FOLDER.rglob("*.py")
    if path.name != "__init__.py"
)


def test_benchmarks_is_a_package_not_a_folder_of_scripts() -> None:
    # A namespace package (no __init__.py) has no file: its modules import only where some other
    # entry on sys.path happens to hold the folder.
    assert benchmarks.__file__ == str(FOLDER / "__init__.py")
    found = sorted(m.name for m in pkgutil.walk_packages(benchmarks.__path__, "benchmarks.") if not m.ispkg)
    assert found == MODULES


@pytest.mark.parametrize("name", MODULES)
def test_each_benchmark_imports_as_a_module_of_the_package(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__name__ == name and module.__doc__
