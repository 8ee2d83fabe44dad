"""The worker's cells keep Python's bytecode in one cache, and its build check fills it (real vLLM, CPU)."""

from pathlib import Path

import pytest

from app.enums import GpuKind
from runners.execute import bytecode_env
from runners.worker import Build, Worker


def test_bytecode_env_allows_writing_and_points_python_at_the_cache(tmp_path: Path) -> None:
    env = bytecode_env({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/elsewhere", "PATH": "/bin"}, tmp_path)
    assert env == {"PYTHONPYCACHEPREFIX": str(tmp_path), "PATH": "/bin"}


def test_a_worker_without_a_cache_leaves_the_bytecode_settings_as_inherited(monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    plain = Worker(client=None, builds=[], gpu_kinds=[GpuKind.CPU], pycache=None)  # type: ignore[arg-type]
    env = plain.cell_env(0)
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and "PYTHONPYCACHEPREFIX" not in env
    cached = Worker(client=None, builds=[], gpu_kinds=[GpuKind.CPU], pycache=tmp_path)  # type: ignore[arg-type]
    env = cached.cell_env(0, {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["PYTHONPYCACHEPREFIX"] == str(tmp_path)
    assert env["VLLM_USE_V2_MODEL_RUNNER"] == "0"


@pytest.mark.vllm
def test_the_build_check_compiles_what_a_cell_imports_into_the_cache(vllm_python: Path, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    # As on the H200 machine: Python may not write bytecode. The check, run in the cells' environment,
    # still leaves vLLM's engine API compiled in the worker's cache, where the cells read it.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    cache = tmp_path / "pycache"
    worker = Worker(client=None, builds=[], gpu_kinds=[GpuKind.CPU], pycache=cache)  # type: ignore[arg-type]
    version = Build("cpu", vllm_python).vllm_version(env=worker.cell_env(0))
    assert version == "0.32.0"
    compiled = {path.name.split(".")[0] for path in cache.rglob("*.pyc") if "vllm" in path.parts}
    assert {"arg_utils", "llm", "__init__"} <= compiled
