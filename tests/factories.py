"""Small builders for test inputs: real objects, plain data."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import AUTH

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Registered:
    """A registered worker: its id, the headers carrying its own credential, and the service's answer."""

    id: int
    headers: dict[str, str]
    info: dict[str, Any]


def sweep_body(dataset: Path | str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "t",
        "build": "vllm-test",
        "model": "/models/tiny",
        "workload": {"dataset": str(dataset), "num_prompts": 4, "max_tokens": 8},
        "speculative": [
            {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
            {"method": "draft_model", "model": "/models/tiny", "num_speculative_tokens": 3},
        ],
        "backends": ["CPU_ATTN"],
        "graph_modes": ["NONE"],
        "gpu_kinds": ["cpu"],
        "repeats": 2,
    }
    body.update(overrides)
    return body


def register_worker(
    client: TestClient, *, gpu_kinds=("cpu",), builds=("vllm-test",), headers: dict[str, str] = AUTH, **extra: Any
) -> Registered:
    response = client.post(
        "/api/v1/workers",
        json={"name": "w", "host": "h", "gpu_kinds": list(gpu_kinds), "builds": [{"label": b} for b in builds], **extra},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    return Registered(id=body["id"], headers={"Authorization": f"Bearer {body['credential']}"}, info=body)


def submit(client: TestClient, body: dict[str, Any], **headers: str) -> Any:
    return client.post("/api/v1/sweeps", json=body, headers=AUTH | headers)


def cell_result(tokens_per_s: float = 100.0, accepted: int = 30, fingerprints=("a", "b")) -> dict[str, Any]:
    """A valid cell result body, as runners/cell.py writes it: 60 draft tokens, ``accepted`` accepted."""
    return {
        "engine_start_s": 10.0, "warmup_s": 1.0, "generation_s": 2.0, "num_requests": len(fingerprints),
        "prompt_tokens": 40, "output_tokens": 200, "tokens_per_s": tokens_per_s, "requests_per_s": 1.0,
        "spec_decode": {"num_drafts": 20, "num_draft_tokens": 60, "num_accepted_tokens": accepted,
                        "accepted_per_position": [15, 10, 5]},
        "requests": [{"num_output_tokens": 100, "fingerprint": f} for f in fingerprints],
        "output_fingerprint": "f" * 16, "versions": {"vllm": "0.32.0"},
    }


def energy_result(joules: list[float | None], reason: str | None = None) -> dict[str, Any]:
    """``cell_result()`` of cell schema 7 with one round of 1 s and 1,000 tokens per entry of ``joules`` (its energy,
    None: unread) and the energy the cell reports of them (``reason`` where a round is unread)."""
    rounds = [{"seconds": 1.0, "output_tokens": 1000, "num_requests": 10,
               **({"energy_j": j} if j is not None else {})} for j in joules]
    measured = all(j is not None for j in joules)
    return {**cell_result(), "schema_version": 7, "rounds": rounds,
            "energy": {"joules": sum(joules) if measured else None, "gpus": ["GPU-a"], "reason": None if measured else reason}}


def claim(client: TestClient, worker: Registered) -> dict[str, Any]:
    response = client.post(f"/api/v1/workers/{worker.id}/claim", headers=worker.headers)
    assert response.status_code == 200, response.text
    return response.json()


def complete(client: TestClient, job_id: int, worker: Registered, outcome: dict[str, Any]) -> Any:
    return client.post(f"/api/v1/jobs/{job_id}/complete", json={"outcome": outcome}, headers=worker.headers)


def upload_log(client: TestClient, job_id: int, worker: Registered, text: str) -> Any:
    return client.put(f"/api/v1/jobs/{job_id}/log", content=text, headers=worker.headers)


def report_crash(client: TestClient, worker: Registered, log: str, **body: Any) -> None:
    """A one-repeat ngram sweep named cpu-crash whose cell died with ``log`` (exit code 1), through the worker protocol."""
    body = sweep_body(ROOT / "runners" / "prompts" / "draftbench.jsonl", name="cpu-crash", repeats=1,
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}], **body)
    assert submit(client, body).status_code == 201
    crashed = claim(client, worker)
    assert upload_log(client, crashed["job_id"], worker, log).status_code == 204
    assert complete(client, crashed["job_id"], worker, {"exit_code": 1, "duration_s": 3}).status_code == 200


def heartbeat(client: TestClient, worker: Registered, job_ids: list[int]) -> Any:
    return client.post(f"/api/v1/workers/{worker.id}/heartbeat", json={"job_ids": job_ids}, headers=worker.headers)


def run_cell(client: TestClient, worker: Registered, dataset: Path, build: str, speeds: list[float], accepted: int = 30) -> int:
    """A sweep of one n-gram cell of ``build``, one repeat per speed, each reported at that tokens/s; its id."""
    body = sweep_body(dataset, build=build, repeats=len(speeds), speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep = submit(client, body).json()
    for speed in speeds:
        job = claim(client, worker)
        assert complete(client, job["job_id"], worker, {"result": cell_result(tokens_per_s=speed, accepted=accepted)}).status_code == 200
    return sweep["id"]


HISTORY_BUILDS = [f"b{i}" for i in range(6)]


def run_history(client: TestClient, dataset: Path, levels: list[float], accepted: list[int] | None = None) -> None:
    """One n-gram cell on builds b0, b1, ... (``HISTORY_BUILDS``), two repeats each around that build's level of
    tokens/s, with ``accepted`` of 60 draft tokens on each build (default 30)."""
    worker = register_worker(client, builds=HISTORY_BUILDS[: len(levels)])
    for i, level in enumerate(levels):
        run_cell(client, worker, dataset, HISTORY_BUILDS[i], [level - 0.5, level + 0.5], accepted=(accepted or [30] * 6)[i])
