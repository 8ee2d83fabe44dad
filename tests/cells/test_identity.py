"""Which cells are one: what a cell measured counts, how long it was measured does not."""

from app.cells import identity

CONFIG = {
    "build": "b0", "gpu_kind": "H200", "backend": "FLASH_ATTN", "graph_mode": "FULL", "timeout_s": 900.0,
    "model": "/models/m", "speculative": {"method": "ngram", "num_speculative_tokens": 3},
    "workload": {"dataset": "draftbench", "num_prompts": 32, "max_tokens": 128, "rounds": 5, "min_window_s": 5.0,
                 "warmup_prompts": 32},
    "engine_args": {}, "mode": "offline", "concurrency": None, "env": {},
}


def _with(**changes: object) -> dict:
    config = {**CONFIG, "workload": dict(CONFIG["workload"])}
    for key, value in changes.items():
        if key in config["workload"]:
            config["workload"][key] = value
        else:
            config[key] = value
    return config


def test_rounds_window_warmup_timeout_and_build_leave_the_variant_as_it_is() -> None:
    same = [_with(rounds=3), _with(min_window_s=1.0), _with(warmup_prompts=0), _with(timeout_s=60.0), _with(build="b9")]
    assert {identity.variant(config) for config in same} == {identity.variant(CONFIG)}


def test_what_was_measured_makes_another_variant() -> None:
    other = [_with(max_tokens=64), _with(model="/models/n"), _with(engine_args={"max_num_seqs": 8}),
             _with(env={"VLLM_USE_V2_MODEL_RUNNER": "1"}), _with(speculative={"method": "ngram", "num_speculative_tokens": 5})]
    assert len({identity.variant(config).measured for config in [CONFIG, *other]}) == len(other) + 1


def test_a_baseline_is_the_same_measurement_without_the_speculative_config() -> None:
    speculative, baseline = identity.variant(CONFIG), identity.variant(_with(speculative=None, rounds=3))
    assert speculative.baseline == baseline.measured == baseline.baseline
    assert (speculative.label, baseline.label) == ("ngram k=3", "baseline")


def test_serving_cells_of_other_clients_are_one_series_and_each_has_the_baseline_of_its_own_clients() -> None:
    served = {c: identity.variant(_with(mode="serve", concurrency=c)) for c in (1, 16)}
    bases = {c: identity.variant(_with(mode="serve", concurrency=c, speculative=None)) for c in (1, 16)}
    assert served[1].measured != served[16].measured and served[1].series == served[16].series
    assert (served[16].label, served[16].series_label) == ("ngram k=3 c=16", "ngram k=3")
    assert [served[c].baseline for c in (1, 16)] == [bases[c].measured for c in (1, 16)]
    assert bases[1].series == bases[16].series != served[1].series and bases[1].series_label == "baseline"
