"""Engine arguments and speculative keys held to the ranges vLLM gives them meaning in: a sweep that can only fail is
refused, naming the field and the range, on both databases."""

import pytest

from app.sweeps import engine_args
from tests.factories import register_worker, submit, sweep_body

RANGES = [
    ({"max_num_seqs": 0}, ["max_num_seqs"], "an integer from 1 to 2147483647, not 0"),
    ({"max_num_seqs": -1}, ["max_num_seqs"], "an integer from 1 to 2147483647, not -1"),
    ({"max_model_len": -5}, ["max_model_len"], "an integer from 1 to 2147483647, or -1, not -5"),
    ({"max_model_len": 2**70}, ["max_model_len"], "an integer from 1 to 2147483647, or -1"),
    ({"max_num_batched_tokens": 0}, ["max_num_batched_tokens"], "an integer from 1 to"),
    ({"gpu_memory_utilization": 5.0}, ["gpu_memory_utilization"], "a number above 0 and at most 1, not 5.0"),
    ({"gpu_memory_utilization": -1}, ["gpu_memory_utilization"], "a number above 0 and at most 1"),
    ({"gpu_memory_utilization": 0}, ["gpu_memory_utilization"], "a number above 0 and at most 1"),
    ({"compilation_config": {"cudagraph_capture_sizes": [-1, 2**64]}}, ["compilation_config", "cudagraph_capture_sizes"],
     "each item an integer from 1 to 2147483647"),
    ({"compilation_config": {"cudagraph_capture_sizes": [1, 0]}}, ["compilation_config", "cudagraph_capture_sizes"],
     "each item an integer from 1"),
    ({"compilation_config": {"mode": 7}}, ["compilation_config", "mode"], "an integer from 0 to 3"),
    ({"tensor_parallel_size": 2**31}, ["tensor_parallel_size"], "an integer from 1 to 1024, not 2147483648"),
    ({"tensor_parallel_size": 2**40}, ["tensor_parallel_size"], "an integer from 1 to 1024"),
    ({"tensor_parallel_size": [1, 2**33]}, ["tensor_parallel_size"], "an integer from 1 to 1024, or a list of them"),
    ({"pipeline_parallel_size": 0}, ["pipeline_parallel_size"], "an integer from 1 to 1024"),
    ({"tensor_parallel_size": 64, "pipeline_parallel_size": [1, 32]}, ["tensor_parallel_size"],
     "asks for 2048 GPUs of one worker; a worker has at most 1024"),
]


@pytest.mark.parametrize(("args", "loc", "fragment"), RANGES, ids=[str(args)[:60] for args, _, _ in RANGES])
def test_an_engine_argument_outside_its_range_is_422_naming_it_and_the_range(client, dataset, args, loc, fragment) -> None:
    # Before: 201 (a cell that could only crash, or, for 2**31 GPUs, wait forever) on SQLite, and on PostgreSQL a 422
    # naming the internal column jobs.gpus_needed.
    register_worker(client)
    response = submit(client, sweep_body(dataset, engine_args=args))
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "engine_args", *loc] and fragment in error["msg"], error
    assert client.get("/api/v1/sweeps").json() == []


@pytest.mark.parametrize(
    ("draft", "key", "fragment"),
    [({"prompt_lookup_max": 2**64}, "prompt_lookup_max", "an integer from 1 to 2147483647"),
     ({"prompt_lookup_min": 0}, "prompt_lookup_min", "an integer from 1"),
     ({"draft_tensor_parallel_size": 4096}, "draft_tensor_parallel_size", "an integer from 1 to 1024"),
     ({"suffix_decoding_min_token_prob": 1.5}, "suffix_decoding_min_token_prob", "a number from 0 to 1")],
)
def test_a_speculative_key_outside_its_range_is_422_naming_it(client, dataset, draft, key, fragment) -> None:
    register_worker(client)
    body = sweep_body(dataset, speculative=[{"method": "ngram", "num_speculative_tokens": 3, **draft}])
    response = submit(client, body)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "speculative", 0, key] and fragment in error["msg"], error


def test_the_values_vllm_gives_meaning_pass() -> None:
    """The edges of each range, and vLLM's own special value (max_model_len -1: the longest that fits)."""
    accepted = {"max_num_seqs": 1, "max_model_len": -1, "gpu_memory_utilization": 1, "max_logprobs": -1,
                "long_prefill_token_threshold": 0, "tensor_parallel_size": [1, 1024], "cpu_offload_gb": 0,
                "compilation_config": {"mode": 0, "cudagraph_capture_sizes": [1, 2, 4, 2**31 - 1]}}
    assert engine_args.problems(accepted) == []
    assert engine_args.problems({"tensor_parallel_size": 32, "pipeline_parallel_size": 32}) == []
    assert engine_args.speculative_problems({"synthetic_acceptance_length": 65.0, "prompt_lookup_min": 1}) == []
