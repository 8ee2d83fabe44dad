"""Which cells are one: what a cell measured counts, how long it was measured does not; a label tells each from the
others read with it."""

import random

from app.cells import identity
from app.cells.pooling import PooledCell

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
    labels = identity.labels([speculative, baseline])
    assert (labels[speculative.measured], labels[baseline.measured]) == ("ngram k=3", "baseline")

def test_serving_cells_of_other_clients_are_one_series_and_each_has_the_baseline_of_its_own_clients() -> None:
    served = {c: identity.variant(_with(mode="serve", concurrency=c)) for c in (1, 16)}
    bases = {c: identity.variant(_with(mode="serve", concurrency=c, speculative=None)) for c in (1, 16)}
    assert served[1].measured != served[16].measured and served[1].series == served[16].series
    assert (identity.labels([served[16]])[served[16].measured], served[16].series_label) == ("ngram k=3 c=16", "ngram k=3")
    assert [served[c].baseline for c in (1, 16)] == [bases[c].measured for c in (1, 16)]
    assert bases[1].series == bases[16].series != served[1].series and bases[1].series_label == "baseline"


def _labels(*configs: dict) -> list[str]:
    variants = [identity.variant(c) for c in configs]
    labels = identity.labels(variants)
    return [labels[v.measured] for v in variants]


def test_two_drafts_of_one_sweep_are_labelled_by_their_draft_models() -> None:
    # examples/demo-sweep.yaml: the target as its own draft and a perturbed copy, beside ngram and the baseline.
    target = {"method": "draft_model", "model": "/var/demo/model", "num_speculative_tokens": 3}
    perturbed = {**target, "model": "/var/demo/draft-noise-0.03"}
    assert _labels(_with(speculative=target), _with(speculative=perturbed), CONFIG, _with(speculative=None)) == [
        "draft_model k=3 draft=model", "draft_model k=3 draft=draft-noise-0.03", "ngram k=3", "baseline"]


def test_a_field_most_variants_share_is_left_unsaid() -> None:
    # batch4's calibration: two synthetic acceptance configs beside a draft that accepts as it does.
    plain = {"method": "draft_model", "model": "/m/target", "num_speculative_tokens": 3}
    rates = [{**plain, "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": r} for r in ([0.8, 0.5], [0.9, 0.6])]
    assert _labels(*(_with(speculative=s, max_tokens=64) for s in (plain, plain | {"seed": 1}, *rates))) == [
        "draft_model k=3 seed=none", "draft_model k=3 seed=1",
        "draft_model k=3 synthetic_acceptance_rates=[0.8, 0.5]", "draft_model k=3 synthetic_acceptance_rates=[0.9, 0.6]"]


def test_the_fewest_fields_tell_variants_apart() -> None:
    # max_tokens {128, 256, 256} and temperature {0, 0, 1} each leave 1 + 4 = 5 pairs alike; max_tokens comes first
    # by name and splits off the 128 (the one value most share is 256); temperature then splits the other two,
    # 1 to 1 (no value most shared, so both say theirs). The model is the same for all and never said.
    a, b, c = _with(max_tokens=128, temperature=0.0), _with(max_tokens=256, temperature=0.0), _with(max_tokens=256, temperature=1.0)
    assert _labels(a, b, c) == ["ngram k=3 max_tokens=128", "ngram k=3 temperature=0.0", "ngram k=3 temperature=1.0"]


def test_a_path_is_written_whole_where_its_last_part_tells_nothing() -> None:
    drafts = [{"method": "draft_model", "model": m, "num_speculative_tokens": 3} for m in ("/a/draft", "/b/draft")]
    assert _labels(*(_with(speculative=d) for d in drafts)) == ["draft_model k=3 draft=/a/draft", "draft_model k=3 draft=/b/draft"]


def test_labels_that_still_agree_get_the_digest() -> None:
    one, other = identity.variant(_with(seed="1")), identity.variant(_with(seed=1))
    labels = identity.labels([one, other])
    assert labels == {one.measured: f"ngram k=3 seed=1 [{one.measured[:8]}]", other.measured: f"ngram k=3 seed=1 [{other.measured[:8]}]"}


def test_every_distinct_variant_gets_its_own_label() -> None:
    rng = random.Random(0)
    choices = {"max_tokens": [64, 128], "temperature": [0.0, 1.0], "model": ["/m/a", "/n/a", "/m/b"], "seed": [0, None],
               "engine_args": [{}, {"max_num_seqs": 8}], "env": [{}, {"X": "1"}]}
    for _ in range(200):
        configs = [_with(**{k: rng.choice(v) for k, v in choices.items()}) for _ in range(rng.randint(2, 12))]
        variants = {v.measured: v for v in map(identity.variant, configs)}
        assert len(set(identity.labels(variants.values()).values())) == len(variants)


def _cells(*places: tuple[str, int]) -> list[PooledCell]:
    """ngram cells of one build and GPU at (backend, max_tokens)."""
    return [PooledCell("b0", "H200", backend, "FULL", "ngram", identity.variant(_with(max_tokens=n)), "") for backend, n in places]


def test_two_sides_apart_in_one_field_name_it() -> None:
    found = identity.apart(_cells(("FLASH_ATTN", 128), ("FLASHINFER", 128)), _cells(("FLASH_ATTN", 256)))
    assert found is not None and found.sentence == "Every base cell differs from every head cell in workload.max_tokens: 128 vs 256."
    assert found.differences == (identity.Difference("workload.max_tokens", ("128",), ("256",), every_cell=True),)


def test_sides_no_one_field_parts_name_the_values_each_holds() -> None:
    # FLASH_ATTN is on both sides and 256 too, but FLASH_ATTN at 256 on the base only.
    found = identity.apart(_cells(("FLASH_ATTN", 128), ("FLASHINFER", 256)), _cells(("FLASH_ATTN", 256)))
    assert found is not None and found.sentence == ("No one field parts every pair of cells; the sides hold other values of "
                                                    "backend: FLASHINFER, FLASH_ATTN vs FLASH_ATTN; workload.max_tokens: 128, 256 vs 256.")
    assert not any(d.every_cell for d in found.differences)


def test_sides_of_the_same_values_combined_otherwise_say_so() -> None:
    found = identity.apart(_cells(("FLASH_ATTN", 128), ("FLASHINFER", 256)), _cells(("FLASH_ATTN", 256), ("FLASHINFER", 128)))
    assert found is not None and found.sentence == (
        "The sides hold the same values of each field, combined otherwise, in "
        "backend: FLASHINFER, FLASH_ATTN vs FLASHINFER, FLASH_ATTN; workload.max_tokens: 128, 256 vs 128, 256.")


def test_sides_that_share_a_cell_or_have_none_are_not_apart() -> None:
    assert identity.apart(_cells(("FLASH_ATTN", 128), ("FLASHINFER", 256)), _cells(("FLASHINFER", 256))) is None
    assert identity.apart([], _cells(("FLASHINFER", 256))) is None


def test_starts_counted_as_the_runner_before_cell_schema_5_did_are_a_cell_line_and_baseline_of_their_own() -> None:
    served, base = identity.variant(_with(mode="serve", concurrency=1)), identity.variant(
        _with(mode="serve", concurrency=1, speculative=None))
    assert identity.counted(served, False) is served
    old_served, old_base = identity.counted(served, True), identity.counted(base, True)
    assert old_served.measured not in (served.measured, base.measured) and old_served.series != served.series
    # An old start's baseline is the baseline counted alike, never today's.
    assert old_served.baseline == old_base.measured != base.measured
    assert identity.counted(identity.variant(_with(mode="serve", concurrency=16)), True).series == old_served.series
    labels = identity.labels([served, old_served])
    assert labels[served.measured] != labels[old_served.measured] and "empty streams failed" in labels[old_served.measured]
    assert "counting=empty streams completed" in labels[served.measured]
