"""Routing over HTTP: tensor-parallel cells need a worker with that many GPUs."""

from tests.factories import register_worker, submit, sweep_body


def _register(client, *, gpu_kinds: list[str], gpu_count: int | None = None):
    return register_worker(client, gpu_kinds=gpu_kinds, **({} if gpu_count is None else {"gpu_count": gpu_count}))


def _tp2_sweep(dataset) -> dict:
    return sweep_body(dataset, gpu_kinds=["H200"], backends=["FLASH_ATTN"], repeats=1,
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}],
                      engine_args={"tensor_parallel_size": 2})


def test_a_tp2_cell_waits_for_a_two_gpu_worker(client, dataset) -> None:
    single = _register(client, gpu_kinds=["H200"])
    assert single.info["gpu_count"] == 1  # a GPU kind brings at least one GPU
    sweep = submit(client, _tp2_sweep(dataset))
    assert sweep.status_code == 201, sweep.text
    [job] = client.get("/api/v1/jobs", params={"sweep_id": sweep.json()["id"]}).json()
    assert job["gpus_needed"] == 2
    assert client.post(f"/api/v1/workers/{single.id}/claim", headers=single.headers).status_code == 204
    double = _register(client, gpu_kinds=["H200"], gpu_count=2)
    claimed = client.post(f"/api/v1/workers/{double.id}/claim", headers=double.headers).json()
    assert claimed["job_id"] == job["id"] and claimed["gpus_needed"] == 2


def test_cpu_cells_need_no_gpu(client, dataset) -> None:
    cpu = _register(client, gpu_kinds=["cpu"])
    assert cpu.info["gpu_count"] == 0
    sweep = submit(client, sweep_body(dataset, repeats=1)).json()
    assert {j["gpus_needed"] for j in client.get("/api/v1/jobs", params={"sweep_id": sweep["id"]}).json()} == {0}
    assert client.post(f"/api/v1/workers/{cpu.id}/claim", headers=cpu.headers).json()["gpus_needed"] == 0


def test_a_bad_parallel_size_is_a_422_on_engine_args(client, dataset) -> None:
    _register(client, gpu_kinds=["H200"])
    body = _tp2_sweep(dataset) | {"engine_args": {"tensor_parallel_size": "two"}}
    response = submit(client, body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:2] == ["body", "engine_args"]
