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


def cell_result(tokens_per_s: float = 100.0, accepted: int = 30, fingerprints=("a", "b")) -> dict[str, Any]:  # noqa: ANN001
    """A valid cell result body, as runners/cell.py writes it: 60 draft tokens, ``accepted`` accepted."""
    return {
        "engine_start_s": 10.0, "warmup_s": 1.0, "generation_s": 2.0, "num_requests": len(fingerprints),
        "prompt_tokens": 40, "output_tokens": 200, "tokens_per_s": tokens_per_s, "requests_per_s": 1.0,
        "spec": {"num_drafts": 20, "num_draft_tokens": 60, "num_accepted_tokens": accepted, "accepted_per_position": [15, 10, 5]},
        "requests": [{"num_output_tokens": 100, "fingerprint": f} for f in fingerprints],
        "output_fingerprint": "f" * 16, "versions": {"vllm": "0.32.0"},
    }


def claim(client: TestClient, worker: int) -> dict[str, Any]:
    response = client.post(f"/api/v1/workers/{worker}/claim", headers=AUTH)
    assert response.status_code == 200, response.text
    return response.json()


def complete(client: TestClient, job_id: int, worker: int, outcome: dict[str, Any]) -> Any:
    return client.post(f"/api/v1/jobs/{job_id}/complete", json={"worker_id": worker, "outcome": outcome}, headers=AUTH)
