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
    with pytest.raises(BuildError, match="--from 'nightly': no build of that label .* builds there: pr-1"):
        patched.create(label="pr-3", base="nightly", patch=patch, root=root)
