"""Patched builds made from a real interpreter and package: hard links, the patched file alone copied."""

import json
import subprocess
from pathlib import Path

import pytest

from app.builds import patched
from app.builds.diffs import DiffError, sha256
from app.builds.facts import BuildError, read_facts
from app.enums import BuildKind
from tests.builds.conftest import PROPOSER, diff

FASTER = "def propose(tokens):\n    return tokens[-4:]\n"


def _patch(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pr.diff"
    path.write_text(text)
    return path


def _run(python: Path, code: str) -> str:
    return subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def test_the_build_imports_the_patched_vllm_and_the_base_stays_as_it_was(tmp_path: Path, base_python: Path) -> None:
    patch = _patch(tmp_path, diff("vllm/v1/proposer.py", PROPOSER, FASTER))
    facts = patched.create(label="pr-1", base=str(base_python), patch=patch, root=tmp_path / "builds", commit="abc123")
    python = tmp_path / "builds" / "pr-1" / "python"
    assert _run(python, "from vllm.v1.proposer import propose; print(propose(list(range(9))))") == "[5, 6, 7, 8]"
    assert _run(base_python, "from vllm.v1.proposer import propose; print(propose(list(range(9))))") == "[6, 7, 8]"
    assert read_facts(python) == facts
    assert (facts.kind, facts.base, facts.commit, facts.vllm_version) == (BuildKind.PATCH, str(base_python), "abc123", "0.32.0")
    assert facts.patch_sha256 == sha256(patch.read_text()) and facts.patch_files == ["vllm/v1/proposer.py"]
    assert json.loads((python.parent / "build.json").read_text())["patch_sha256"] == facts.patch_sha256


def test_unchanged_files_and_compiled_extensions_are_shared_the_patched_one_is_not(tmp_path: Path, base_python: Path) -> None:
    patched.create(label="pr-1", base=str(base_python), patch=_patch(tmp_path, diff("vllm/v1/proposer.py", PROPOSER, FASTER)),
                   root=tmp_path / "builds")
    base, new = tmp_path / "base" / "site" / "vllm", tmp_path / "builds" / "pr-1" / "site" / "vllm"
    assert (new / "_C.abi3.so").stat().st_ino == (base / "_C.abi3.so").stat().st_ino
    assert (new / "__init__.py").stat().st_ino == (base / "__init__.py").stat().st_ino
    assert (new / "v1" / "proposer.py").stat().st_ino != (base / "v1" / "proposer.py").stat().st_ino


def test_a_patch_on_a_patched_build_named_by_its_label(tmp_path: Path, base_python: Path) -> None:
    root = tmp_path / "builds"
    patched.create(label="pr-1", base=str(base_python), patch=_patch(tmp_path, diff("vllm/v1/proposer.py", PROPOSER, FASTER)), root=root)
    second = diff("vllm/v1/proposer.py", FASTER, "def propose(tokens):\n    return tokens[-5:]\n")
    facts = patched.create(label="pr-2", base="pr-1", patch=_patch(tmp_path, second), root=root)
    # Its interpreter is the real one, never pr-1's wrapper (whose site would come first).
    assert facts.interpreter == _run(base_python, "import sys; print(sys.executable)")
    assert _run(root / "pr-2" / "python", "from vllm.v1.proposer import propose; print(propose(list(range(9))))") == "[4, 5, 6, 7, 8]"


def test_a_patch_to_compiled_sources_is_refused_before_anything_is_made(tmp_path: Path, base_python: Path) -> None:
    patch = _patch(tmp_path, diff("csrc/cpu/attention.cpp", "a\n", "b\n"))
    with pytest.raises(DiffError, match="needs a wheel"):
        patched.create(label="pr-1", base=str(base_python), patch=patch, root=tmp_path / "builds")
    assert not (tmp_path / "builds" / "pr-1").exists()


def test_a_patch_that_does_not_apply_leaves_nothing(tmp_path: Path, base_python: Path) -> None:
    patch = _patch(tmp_path, diff("vllm/v1/proposer.py", "def other():\n    pass\n", FASTER))
    with pytest.raises(BuildError, match="does not apply to the base's vLLM"):
        patched.create(label="pr-1", base=str(base_python), patch=patch, root=tmp_path / "builds")
    assert not (tmp_path / "builds" / "pr-1").exists()


def test_an_existing_label_and_an_unknown_base_are_refused(tmp_path: Path, base_python: Path) -> None:
    root = tmp_path / "builds"
    patch = _patch(tmp_path, diff("vllm/v1/proposer.py", PROPOSER, FASTER))
    patched.create(label="pr-1", base=str(base_python), patch=patch, root=root)
    with pytest.raises(BuildError, match="build 'pr-1' already exists"):
        patched.create(label="pr-1", base=str(base_python), patch=patch, root=root)
    with pytest.raises(BuildError, match=r"--from 'nightly': no build of that label .* builds there: pr-1"):
        patched.create(label="pr-3", base="nightly", patch=patch, root=root)


def _untouched(base_python: Path) -> None:
    """The base's package is as the fixture made it: nothing added, nothing changed."""
    package = base_python.parent / "site" / "vllm"
    assert sorted(p.relative_to(package).as_posix() for p in package.rglob("*") if p.is_file()) == [
        "_C.abi3.so", "__init__.py", "engine/__init__.py", "engine/arg_utils.py", "v1/__init__.py", "v1/proposer.py"]
    assert (package / "v1" / "proposer.py").read_text() == PROPOSER


def _context_hunk(path: str, new: str) -> str:
    """A context-diff hunk (``*** a/PATH`` / ``--- b/PATH``) that makes ``path`` with ``new``'s lines: ``patch`` applies
    it wherever it finds it, inside a git part too."""
    added = "".join(f"+ {line}\n" for line in new.splitlines())
    return f"*** a/{path}\n--- b/{path}\n***************\n*** 0 ****\n--- 1,{len(new.splitlines())} ----\n{added}"


@pytest.mark.parametrize("path", ["sitecustomize.py", "csrc/evil.cu", "vllm/_C.json", "setup.py"])
def test_a_hunk_hidden_in_a_vllm_part_that_makes_another_file_is_refused(tmp_path: Path, base_python: Path, path: str) -> None:
    text = diff("vllm/v1/proposer.py", PROPOSER, FASTER) + _context_hunk(path, "import os\n")
    with pytest.raises(DiffError, match=rf"changes more than vllm/'s Python: {path} \(made\)"):
        patched.create(label="pr-1", base=str(base_python), patch=_patch(tmp_path, text), root=tmp_path / "builds")
    assert not (tmp_path / "builds" / "pr-1").exists()
    _untouched(base_python)


def test_build_json_records_every_file_the_patch_changed(tmp_path: Path, base_python: Path) -> None:
    # The second file is changed by a context hunk that a reading of the git headers does not see.
    hidden = "*** a/vllm/engine/arg_utils.py\n--- b/vllm/engine/arg_utils.py\n***************\n*** 1,2 ****\n  class EngineArgs:\n! " \
             "    pass\n--- 1,2 ----\n  class EngineArgs:\n!     fast = True\n"
    text = diff("vllm/v1/proposer.py", PROPOSER, FASTER) + hidden
    facts = patched.create(label="pr-1", base=str(base_python), patch=_patch(tmp_path, text), root=tmp_path / "builds")
    assert facts.patch_files == ["vllm/engine/arg_utils.py", "vllm/v1/proposer.py"]
    python = tmp_path / "builds" / "pr-1" / "python"
    assert _run(python, "from vllm.engine.arg_utils import EngineArgs; print(EngineArgs.fast)") == "True"
    assert read_facts(python).patch_files == facts.patch_files
    _untouched(base_python)


def test_a_rename_is_refused(tmp_path: Path, base_python: Path) -> None:
    text = ("diff --git a/vllm/__init__.py b/vllm/newname.py\nsimilarity index 90%\nrename from vllm/__init__.py\n"
            "rename to vllm/newname.py\n--- a/vllm/__init__.py\n+++ b/vllm/newname.py\n@@ -1 +1 @@\n"
            '-__version__ = "0.32.0"\n+__version__ = "0.32.1"\n')
    with pytest.raises(DiffError, match="renames or copies a file"):
        patched.create(label="pr-1", base=str(base_python), patch=_patch(tmp_path, text), root=tmp_path / "builds")
    assert not (tmp_path / "builds" / "pr-1").exists()
    _untouched(base_python)


def test_a_symlink_made_by_a_patch_is_refused(tmp_path: Path, base_python: Path) -> None:
    link = ("diff --git a/vllm/v1/evil.py b/vllm/v1/evil.py\nnew file mode 120000\nindex 0000000..1111111\n"
            "--- /dev/null\n+++ b/vllm/v1/evil.py\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n")
    with pytest.raises(DiffError, match="gives a file mode 120000"):
        patched.create(label="pr-1", base=str(base_python), patch=_patch(tmp_path, diff("vllm/v1/proposer.py", PROPOSER, FASTER) + link),
                       root=tmp_path / "builds")
    assert not (tmp_path / "builds" / "pr-1").exists()


def test_a_file_under_vllm_that_is_not_python_is_refused(tmp_path: Path, base_python: Path) -> None:
    text = diff("vllm/v1/proposer.py", PROPOSER, FASTER) + diff("vllm/configs/E=8.json", "{}\n", '{"a": 1}\n')
    with pytest.raises(DiffError, match=r"not Python sources \(vllm/configs/E=8.json\)"):
        patched.create(label="pr-1", base=str(base_python), patch=_patch(tmp_path, text), root=tmp_path / "builds")
