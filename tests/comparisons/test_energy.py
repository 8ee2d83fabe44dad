"""Tokens per joule in a comparison: head / base with its interval where both sides' GPUs reported energy, each
side's pooled value, and why a side has none."""

import math
import statistics
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.factories import claim, complete, energy_result, register_worker, submit, sweep_body

NO_COUNTER = "not reported (NVML: Not Supported)"


def test_the_compare_api_gives_tokens_per_joule_head_over_base_with_its_interval(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=("vllm-test", "vllm-pr"))
    # ngram: base rounds at 2.5, 2.0, 4.0, 2.0, 1.25 tokens/J (1,000 tokens each), head at 4.0 in every round;
    # draft_model: no energy on either side.
    joules = {"vllm-test": [400.0, 500.0, 250.0, 500.0, 800.0], "vllm-pr": [250.0] * 5}
    ids = []
    for name, build in (("base", "vllm-test"), ("head", "vllm-pr")):
        ids.append(submit(client, sweep_body(dataset, name=name, build=build, repeats=1)).json()["id"])
        for _ in range(2):
            job = claim(client, worker)
            ngram = job["spec"]["speculative"]["method"] == "ngram"
            result = energy_result(joules[build]) if ngram else energy_result([None] * 5, reason=NO_COUNTER)
            assert complete(client, job["job_id"], worker, {"result": result}).status_code == 200
    answer = client.get("/api/v1/compare", params={"base_sweep": ids[0], "head_sweep": ids[1]})
    assert answer.status_code == 200, answer.text
    by_method = {c["method"]: c for c in answer.json()["changes"]}
    ngram, draft = by_method["ngram"], by_method["draft_model"]
    # Base: one start, its five rounds' range [1.25, 4.0] at C = 0.9375 read as a log-scale normal interval,
    # se = ln(4.0 / 1.25) / (2 z) with z = Phi^-1(0.96875); head: every round alike, se 0. Ratio 4.0 / 2.0.
    se = math.log(4.0 / 1.25) / (2 * statistics.NormalDist().inv_cdf(0.96875))
    half = 1.959963984540054 * se
    ratio = ngram["tokens_per_joule_ratio"]
    assert (ratio["value"], ratio["low"], ratio["high"]) == pytest.approx((2.0, 2.0 * math.exp(-half), 2.0 * math.exp(half)))
    assert ngram["base"]["tokens_per_joule"]["value"] == 2.0 and ngram["head"]["tokens_per_joule"]["value"] == 4.0
    assert ngram["base"]["energy_repeats"] == ngram["head"]["energy_repeats"] == 1
    assert draft["tokens_per_joule_ratio"] is None
    for side in (draft["base"], draft["head"]):
        assert (side["tokens_per_joule"], side["energy_repeats"], side["energy_reasons"]) == (None, 0, [NO_COUNTER])
