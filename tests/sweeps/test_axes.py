"""The serving, environment and k axes: how they expand, and what a sweep may set."""

import pytest

from app.cells import identity
from app.schemas.sweep import SweepSpec
from app.sweeps import matrix
from app.sweeps import service as sweeps
from tests.conftest import AUTH
from tests.factories import register_worker, submit, sweep_body


def _spec(**overrides) -> SweepSpec:
    return SweepSpec.model_validate(sweep_body("draftbench", **({"repeats": 1} | overrides)))


def test_env_values_and_client_counts_multiply_the_cells() -> None:
    cells = matrix.expand(_spec(mode="serve", concurrency=[1, 4, 16], env={"VLLM_USE_V2_MODEL_RUNNER": ["0", "1"]}))
    assert len(cells) == 2 * 2 * 3  # two drafts x two runners x three client counts
    seen = {(c.method, c.spec.env["VLLM_USE_V2_MODEL_RUNNER"], c.spec.concurrency) for c in cells}
    assert len(seen) == 12 and all(c.spec.mode == "serve" for c in cells)


def test_serving_without_client_counts_runs_one_client_and_offline_runs_none() -> None:
    assert {c.spec.concurrency for c in matrix.expand(_spec(mode="serve"))} == {1}
    assert {c.spec.concurrency for c in matrix.expand(_spec())} == {None}
    assert matrix.env_combinations({"B": ["x"], "A": ["0", "1"]}) == [{"A": "0", "B": "x"}, {"A": "1", "B": "x"}]
    assert matrix.env_combinations({}) == [{}]


@pytest.mark.parametrize(
    ("change", "loc", "fragment"),
    [({"concurrency": [4]}, ["body"], "axis of mode 'serve'"),
     ({"mode": "serve", "concurrency": [0]}, ["body", "concurrency", 0], "greater than or equal to 1"),
     ({"env": {"LD_PRELOAD": ["/tmp/evil.so"]}}, ["body", "env", "LD_PRELOAD"], "VLLM_USE_V2_MODEL_RUNNER"),
     ({"env": {"VLLM_USE_V2_MODEL_RUNNER": ["1; reboot"]}}, ["body", "env", "VLLM_USE_V2_MODEL_RUNNER", 0], "may contain only"),
     ({"env": {"VLLM_USE_V2_MODEL_RUNNER": []}}, ["body", "env", "VLLM_USE_V2_MODEL_RUNNER"], "at least 1"),
     ({"mode": "online"}, ["body", "mode"], "'offline' or 'serve'")],
)
def test_bad_axes_are_422_naming_the_field(client, dataset, change, loc, fragment) -> None:
    register_worker(client)
    response = submit(client, sweep_body(dataset, **change))
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert error["loc"] == loc and fragment in error["msg"], error


def test_jobs_carry_their_mode_clients_and_env(client, dataset) -> None:
    register_worker(client)
    body = sweep_body(dataset, repeats=1, mode="serve", concurrency=[1, 16], env={"VLLM_BATCH_INVARIANT": ["1"]},
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep = submit(client, body).json()
    jobs = client.get("/api/v1/jobs", params={"sweep_id": sweep["id"]}, headers=AUTH).json()
    assert sorted((j["spec"]["concurrency"], j["spec"]["env"]["VLLM_BATCH_INVARIANT"]) for j in jobs) == [(1, "1"), (16, "1")]
    statuses = sweep["jobs"]
    assert sorted(j["concurrency"] for j in statuses) == [1, 16] and {j["mode"] for j in statuses} == {"serve"}


# Engine arguments as axes: a list where vLLM takes one value.

def test_a_list_of_parallel_sizes_is_one_cell_per_size_counted_as_expand_does() -> None:
    spec = _spec(engine_args={"tensor_parallel_size": [1, 2], "pipeline_parallel_size": [1, 2], "max_num_seqs": 8},
                 gpu_kinds=["H200"], backends=["FLASH_ATTN"], graph_modes=["FULL"], baseline=True)
    cells = matrix.expand(spec)
    # (2 drafts + the baseline) x 2 x 2 sizes; each cell holds one integer of each, and the other arguments as given.
    assert len(cells) == 12 and sweeps.job_count(spec, max_jobs=100) == 12
    sizes = [(c.spec.engine_args["tensor_parallel_size"], c.spec.engine_args["pipeline_parallel_size"]) for c in cells]
    assert sizes[:4] == [(1, 1), (2, 1), (1, 2), (2, 2)] and {c.spec.engine_args["max_num_seqs"] for c in cells} == {8}
    assert sorted(matrix.gpus_needed(c.spec) for c in cells) == [1] * 3 + [2] * 6 + [4] * 3
    # The size tells the cells apart on every page: the label names what differs.
    labels = identity.labels([identity.variant(matrix.canonical(c.spec)) for c in cells[:2]])
    assert sorted(labels.values()) == ["baseline tensor_parallel_size=1", "baseline tensor_parallel_size=2"]


def test_a_sweep_without_an_engine_axis_keeps_its_cells_and_hashes() -> None:
    spec = _spec(engine_args={"max_num_seqs": 8})
    assert matrix.engine_args_combinations({"max_num_seqs": 8}) == [{"max_num_seqs": 8}]
    assert [c.spec.engine_args for c in matrix.expand(spec)] == [{"max_num_seqs": 8}] * len(matrix.expand(spec))
    # A list argument (a mapping's list, or one vLLM takes as a list) is no axis.
    assert matrix.engine_args_combinations({"compilation_config": {"cudagraph_capture_sizes": [1, 2]}}) == [
        {"compilation_config": {"cudagraph_capture_sizes": [1, 2]}}]


@pytest.mark.parametrize(
    ("engine_args", "loc", "fragment"),
    [({"tensor_parallel_size": [1, "2"]}, ["body", "engine_args", "tensor_parallel_size"], "an integer from 1 to 1024, or a list of them"),
     ({"tensor_parallel_size": [1, 1]}, ["body", "engine_args", "tensor_parallel_size"], "lists a value twice"),
     ({"tensor_parallel_size": []}, ["body", "engine_args", "tensor_parallel_size"], "takes 1 to 16 values"),
     ({"tensor_parallel_size": list(range(1, 18))}, ["body", "engine_args", "tensor_parallel_size"], "not 17"),
     ({"dtype": ["bfloat16", "x;y"]}, ["body", "engine_args", "dtype"], "may contain only"),
     ({"tensor_parallel_size": [1, 0]}, ["body", "engine_args", "tensor_parallel_size"], "not 0 in [1, 0]")],
)
def test_a_bad_engine_axis_is_422_naming_the_field(client, dataset, engine_args, loc, fragment) -> None:
    register_worker(client)
    response = submit(client, sweep_body(dataset, engine_args=engine_args))
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert error["loc"] == loc and fragment in error["msg"], error


# The k axis: num_speculative_tokens as a list inside one speculative config.

DRAFT = {"method": "draft_model", "model": "/models/tiny", "num_speculative_tokens": [4, 1, 2]}


def _k_cells(**overrides) -> list[matrix.Cell]:
    return matrix.expand(_spec(**({"speculative": [DRAFT], "gpu_kinds": ["H200"], "backends": ["FLASH_ATTN", "FLASHINFER"]}
                                  | overrides)))


def test_a_list_of_k_is_one_cell_per_k_ascending_within_each_backend() -> None:
    cells = _k_cells()
    # 1 GPU kind x 2 backends x 1 graph mode x 3 k = 6 cells, k ascending whatever the order written.
    assert [(c.index, c.spec.backend, c.spec.speculative["num_speculative_tokens"]) for c in cells] == [
        (0, "FLASH_ATTN", 1), (1, "FLASH_ATTN", 2), (2, "FLASH_ATTN", 4),
        (3, "FLASHINFER", 1), (4, "FLASHINFER", 2), (5, "FLASHINFER", 4),
    ]
    variants = [identity.variant(matrix.canonical(c.spec)) for c in cells[:3]]
    assert [identity.labels(variants)[v.measured] for v in variants] == ["draft_model k=1", "draft_model k=2", "draft_model k=4"]


def test_each_k_of_a_list_is_the_cell_of_that_plain_k_to_the_hash() -> None:
    [listed] = [c for c in _k_cells(backends=["FLASH_ATTN"]) if c.spec.speculative["num_speculative_tokens"] == 2]
    [plain] = _k_cells(backends=["FLASH_ATTN"], speculative=[DRAFT | {"num_speculative_tokens": 2}])
    assert matrix.canonical(listed.spec) == matrix.canonical(plain.spec)
    assert matrix.config_hash(listed.spec) == matrix.config_hash(plain.spec)
    assert matrix.canonical(plain.spec)["speculative"] == {"method": "draft_model", "model": "/models/tiny", "num_speculative_tokens": 2}


def test_a_list_of_k_expands_in_its_place_among_the_configs_and_after_the_baseline() -> None:
    ngram = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    cells = _k_cells(backends=["FLASH_ATTN"], baseline=True, speculative=[DRAFT | {"num_speculative_tokens": [2, 1]}, ngram])
    assert [(c.method, c.spec.speculative and c.spec.speculative["num_speculative_tokens"]) for c in cells] == [
        (None, None), ("draft_model", 1), ("draft_model", 2), ("ngram", 3)
    ]


def test_the_job_count_counts_each_k_as_expand_does() -> None:
    spec = _spec(speculative=[DRAFT, {"method": "ngram", "num_speculative_tokens": 3}], gpu_kinds=["H200"],
                 backends=["FLASH_ATTN", "FLASHINFER"], graph_modes=["NONE", "FULL"], baseline=True, repeats=2)
    # 2 backends x 2 graph modes x (3 k + 1 ngram + 1 baseline) = 20 cells, x 2 repeats.
    assert len(matrix.expand(spec)) == 20 and matrix.speculative_count(spec) == 5
    assert sweeps.job_count(spec, max_jobs=2000) == 40


def test_a_plain_k_dumps_as_an_integer_and_a_list_stays_sorted() -> None:
    assert _spec().model_dump(mode="json")["speculative"][0]["num_speculative_tokens"] == 3
    assert _spec(speculative=[DRAFT]).model_dump(mode="json")["speculative"][0]["num_speculative_tokens"] == [1, 2, 4]


@pytest.mark.parametrize(
    ("k", "fragment"),
    [([], "got a list of 0 values"),
     ([1, 0], "[1]: Input should be greater than or equal to 1"),
     ([2, 65], "[1]: Input should be less than or equal to 64"),
     ([1, 2, 2, 4, 4], "2, 4 given twice"),
     ([1, "x"], "[1]: Input should be a valid integer"),
     (list(range(1, 66)), "got a list of 65 values"),
     (0, "Input should be greater than or equal to 1"),
     ({"k": 1}, "Input should be a valid integer")],
)
def test_a_bad_k_is_422_naming_the_field_and_the_allowed_values(client, dataset, k, fragment) -> None:
    register_worker(client)
    response = submit(client, sweep_body(dataset, speculative=[DRAFT | {"num_speculative_tokens": k}]))
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "speculative", 0, "num_speculative_tokens"], error
    assert "must be an integer from 1 to 64, or a non-empty list of distinct integers from 1 to 64" in error["msg"], error
    assert fragment in error["msg"], error


def test_a_sweep_with_a_list_of_k_reports_and_queues_each_k(client, dataset) -> None:
    register_worker(client)
    body = sweep_body(dataset, repeats=2, speculative=[{"method": "ngram", "num_speculative_tokens": [2, 1]}])
    sweep = submit(client, body).json()
    assert sweep["total"] == 4 and sweep["spec"]["speculative"][0]["num_speculative_tokens"] == [1, 2]
    jobs = client.get("/api/v1/jobs", params={"sweep_id": sweep["id"]}, headers=AUTH).json()
    assert sorted((j["cell_index"], j["repeat"], j["spec"]["speculative"]["num_speculative_tokens"]) for j in jobs) == [
        (0, 0, 1), (0, 1, 1), (1, 0, 2), (1, 1, 2)
    ]


SYNTHETIC = DRAFT | {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.8, 0.6, 0.5, 0.3]}


def test_on_a_k_axis_each_cell_takes_the_first_k_synthetic_rates() -> None:
    # vLLM takes one rate per drafted position, and position i's rate is the same whatever k is.
    cells = _k_cells(backends=["FLASH_ATTN"], speculative=[SYNTHETIC])
    assert [(c.spec.speculative["num_speculative_tokens"], c.spec.speculative["synthetic_acceptance_rates"]) for c in cells] == [
        (1, [0.8]), (2, [0.8, 0.6]), (4, [0.8, 0.6, 0.5, 0.3])]
    [plain] = _k_cells(backends=["FLASH_ATTN"], speculative=[SYNTHETIC | {"num_speculative_tokens": 2,
                                                                          "synthetic_acceptance_rates": [0.8, 0.6]}])
    assert matrix.config_hash(plain.spec) == matrix.config_hash(cells[1].spec)


@pytest.mark.parametrize(("k", "rates"), [([1, 2, 4], [0.8, 0.6, 0.5]), ([1, 2], [0.8, 0.6, 0.5]), (3, [0.8, 0.6])])
def test_synthetic_rates_that_do_not_cover_the_largest_k_are_422(client, dataset, k, rates) -> None:
    register_worker(client)
    body = sweep_body(dataset, speculative=[SYNTHETIC | {"num_speculative_tokens": k, "synthetic_acceptance_rates": rates}])
    response = submit(client, body)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"][:3] == ["body", "speculative", 0], error
    largest = k if isinstance(k, int) else max(k)
    assert f"synthetic_acceptance_rates: must give one rate per position up to num_speculative_tokens ({largest}" in error["msg"]
    assert f"got {len(rates)}" in error["msg"], error
