"""A real interpreter with a small real ``vllm`` package: what a build is made from, without vLLM's 500 MB."""

import sys
from pathlib import Path

import pytest

from app.builds.facts import write_wrapper

PROPOSER = "def propose(tokens):\n    return tokens[-3:]\n"


@pytest.fixture
def base_python(tmp_path: Path) -> Path:
    """``tmp_path/base/python``: this test's Python with a ``vllm`` 0.32.0 package (one module, the names a cell
    imports before its engine, and a fake compiled extension) first on its path, as a hand-installed build looks
    to the worker."""
    package = tmp_path / "base" / "site" / "vllm"
    (package / "v1").mkdir(parents=True)
    (package / "engine").mkdir()
    (package / "__init__.py").write_text('__version__ = "0.32.0"\n\n\nclass LLM:\n    pass\n')
    (package / "engine" / "__init__.py").write_text("")
    (package / "engine" / "arg_utils.py").write_text("class EngineArgs:\n    pass\n")
    (package / "v1" / "__init__.py").write_text("")
    (package / "v1" / "proposer.py").write_text(PROPOSER)
    (package / "_C.abi3.so").write_bytes(b"\x7fELF not really")
    return write_wrapper(tmp_path / "base", Path(sys.executable), pythonpath=package.parent)


def diff(path: str, old: str, new: str) -> str:
    """A git-style diff of one file (a/ and b/ prefixes), one hunk replacing ``old``'s lines by ``new``'s."""
    minus = "".join(f"-{line}\n" for line in old.splitlines())
    plus = "".join(f"+{line}\n" for line in new.splitlines())
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -1,{len(old.splitlines())} +1,{len(new.splitlines())} @@\n{minus}{plus}"
    )
