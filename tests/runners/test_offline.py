"""runners/offline.py gives its cells the same environment as the worker does: vLLM's variables, the bytecode cache."""

from pathlib import Path

from runners import offline


def test_offline_cells_get_their_vllm_variables_and_the_bytecode_cache(monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = offline.cell_env({"VLLM_USE_V2_MODEL_RUNNER": "1"}, tmp_path)
    assert env["VLLM_USE_V2_MODEL_RUNNER"] == "1" and env["PYTHONUNBUFFERED"] == "1"
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path) and "PYTHONDONTWRITEBYTECODE" not in env
    assert offline.cell_env({}, None)["PYTHONDONTWRITEBYTECODE"] == "1"
