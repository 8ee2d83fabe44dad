"""runners/cellkit.py: what the cell's two modes share."""

import json
from pathlib import Path

from app.enums import BuiltinDataset
from app.schemas.cell import CELL_SCHEMA_VERSION
from runners import cellkit

DRAFTS, DRAFT_TOKENS, ACCEPTED = cellkit.SPEC_DECODE_COUNTERS.values()


def test_the_shared_dataset_names_and_schema_version_are_the_services() -> None:
    assert cellkit.SCHEMA_VERSION == CELL_SCHEMA_VERSION
    assert {cellkit.BUILTIN_PROMPTS, cellkit.RANDOM_DATASET} == {d.value for d in BuiltinDataset}


def test_the_shipped_prompts_load_by_name_and_filter_by_category() -> None:
    workload = {"dataset": "draftbench", "categories": ["coding"], "num_prompts": 20}
    prompts = cellkit.load_prompts(workload)
    records = [json.loads(line) for line in open(cellkit.PROMPTS_FILE, encoding="utf-8")]
    coding = [r["turns"][0] for r in records if r["category"] == "coding"]
    assert prompts[: len(coding)] == coding and len(prompts) == 20


def test_sharegpt_json_loads_the_first_human_turn(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    conversations = [
        {"id": "a", "conversations": [{"from": "human", "value": "first question"}, {"from": "gpt", "value": "answer"}]},
        {"id": "b", "conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "second"}]},
        {"id": "c", "conversations": [{"from": "gpt", "value": "no human turn"}]},
    ]
    path.write_text(json.dumps(conversations))
    assert cellkit.load_prompts({"dataset": str(path), "num_prompts": 3}) == ["first question", "second", "first question"]


class _Tokenizer:
    all_special_ids = [0, 1]

    def __len__(self) -> int:
        return 10


def test_random_prompts_are_vllm_bench_style_token_runs_of_the_asked_lengths() -> None:
    workload = {"dataset": "random", "num_prompts": 50, "input_len": 8, "range_ratio": 0.5, "seed": 3}
    prompts = cellkit.random_prompts(workload, _Tokenizer())
    lengths = [len(p["prompt_token_ids"]) for p in prompts]
    assert min(lengths) >= 4 and max(lengths) <= 12 and len(set(lengths)) > 1
    assert all(token not in (0, 1) for p in prompts for token in p["prompt_token_ids"])
    assert cellkit.random_prompts(workload, _Tokenizer()) == prompts  # seeded
    assert cellkit.random_prompts(workload | {"seed": 4}, _Tokenizer()) != prompts


def test_counters_sum_over_engines_position_by_position_and_leave_other_metrics_out() -> None:
    samples = [
        (DRAFTS, None, 10), (DRAFT_TOKENS, None, 30), (ACCEPTED, None, 12),
        (cellkit.PER_POSITION, 0, 7), (cellkit.PER_POSITION, 1, 3), (cellkit.PER_POSITION, 2, 0),
        # A second engine, its positions in another order.
        (DRAFTS, None, 1), (cellkit.PER_POSITION, 1, 1), (cellkit.PER_POSITION, 0, 2),
        ("vllm:num_requests_running", None, 99), (cellkit.PER_POSITION, None, 5), (DRAFTS, 0, 5),
    ]
    assert cellkit.counters_of(samples) == {
        "num_drafts": 11, "num_draft_tokens": 30, "num_accepted_tokens": 12, "accepted_per_position": [9, 4, 0],
    }
    assert list(cellkit.counters_of([])) == [*cellkit.SPEC_DECODE_COUNTERS, "accepted_per_position"]


def test_a_position_with_no_count_before_it_keeps_its_place() -> None:
    assert cellkit.counters_of([(cellkit.PER_POSITION, 2, 4)])["accepted_per_position"] == [0, 0, 4]


def test_rounds_report_what_each_added_to_the_cumulative_counters() -> None:
    readings = iter([
        {"num_drafts": 5, "num_draft_tokens": 15, "num_accepted_tokens": 6, "accepted_per_position": [4, 2]},
        {"num_drafts": 9, "num_draft_tokens": 27, "num_accepted_tokens": 11, "accepted_per_position": [7, 3, 1]},
        {"num_drafts": 9, "num_draft_tokens": 27, "num_accepted_tokens": 11, "accepted_per_position": [7, 3, 1]},
        {"num_drafts": 12, "num_draft_tokens": 36, "num_accepted_tokens": 15, "accepted_per_position": [9, 4, 2]},
    ])
    windows = iter([(2.0, 40, 4), (1.0, 30, 3)])
    rounds = cellkit.timed_rounds(lambda: next(windows), read=lambda: next(readings), count=2)
    assert rounds == [
        {"seconds": 2.0, "output_tokens": 40, "num_requests": 4,
         "spec_decode": {"num_drafts": 4, "num_draft_tokens": 12, "num_accepted_tokens": 5, "accepted_per_position": [3, 1, 1]}},
        {"seconds": 1.0, "output_tokens": 30, "num_requests": 3,
         "spec_decode": {"num_drafts": 3, "num_draft_tokens": 9, "num_accepted_tokens": 4, "accepted_per_position": [2, 1, 1]}},
    ]
    total = cellkit.totals(rounds, speculative=True)
    assert total.seconds == 3.0 and total.requests_per_s == 7 / 3.0
    assert total.spec_decode == {"num_drafts": 7, "num_draft_tokens": 21, "num_accepted_tokens": 9,
                                 "accepted_per_position": [5, 2, 2]}


def test_tokens_per_s_is_the_median_round_and_a_round_of_no_time_is_left_out() -> None:
    rounds = [{"seconds": s, "output_tokens": t, "num_requests": 1, "spec_decode": None}
              for s, t in [(1.0, 10), (1.0, 30), (0.0, 5), (1.0, 20), (2.0, 100)]]
    total = cellkit.totals(rounds, speculative=False)
    # 10, 20, 30, 50 tokens/s: the upper median of an even count.
    assert total.tokens_per_s == 30.0 and total.spec_decode is None and total.seconds == 5.0
    assert cellkit.totals([], speculative=False) == (0, 0.0, 0.0, None)
