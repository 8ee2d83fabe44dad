"""Small builders for test inputs: real objects, plain data."""

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import AUTH


def sweep_body(dataset: Path, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "t",
        "build": "vllm-test",
        "model": "/models/tiny",
        "workload": {"dataset": str(dataset), "num_prompts": 4, "max_tokens": 8},
        "speculative": [
            {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
            {"method": "draft_model", "model": "/models/tiny", "num_speculative_tokens": 3},
        ],
        "attention_backends": ["CPU_ATTN"],
        "cudagraph_modes": ["NONE"],
        "gpus": ["cpu"],
        "repeats": 2,
    }
    body.update(overrides)
    return body


def register_worker(client: TestClient, *, gpu_kinds=("cpu",), builds=("vllm-test",)) -> int:  # noqa: ANN001
    response = client.post(
        "/api/v1/workers",
        json={"name": "w", "host": "h", "gpu_kinds": list(gpu_kinds), "builds": [{"label": b} for b in builds]},
        headers=AUTH,
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


def submit(client: TestClient, body: dict[str, Any], **headers: str) -> Any:
    return client.post("/api/v1/sweeps", json=body, headers=AUTH | headers)
