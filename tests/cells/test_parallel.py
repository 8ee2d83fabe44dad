"""``app.cells.parallel``: pooled cells built by hand, each tensor-parallel cell beside its one-GPU twin, the acceptance
test and the tokens/s ratio computed by hand."""

import math
from collections import Counter

import pytest

from app.analysis.fallback import RepeatSpeed, pool_repeats
from app.cells import identity, parallel
from app.cells.pooling import PooledCell
from app.enums import JobState


def _cell(tp: int | None, speed: float, accepted: int, draft_tokens: int, *, draft_tp: int | None = None,
          backend: str = "FLASH_ATTN", build: str = "b", max_tokens: int = 64) -> PooledCell:
    speculative = {"method": "draft_model", "model": "d", "num_speculative_tokens": 3}
    if draft_tp is not None:
        speculative["draft_tensor_parallel_size"] = draft_tp
    engine = {"max_num_seqs": 8} | ({"tensor_parallel_size": tp} if tp is not None else {})
    config = {"model": "m", "speculative": speculative, "engine_args": engine, "workload": {"max_tokens": max_tokens}}
    variant = identity.variant(config)
    cell = PooledCell(build, "H200", backend, "FULL", "draft_model", variant, "", sweep_ids=[1], job_ids=[1],
                      states=Counter({JobState.SUCCEEDED: 2}))
    # Two starts at +-5 %: se_log of the median about 0.05.
    cell.repeats += [RepeatSpeed(speed * 0.95, None, None, 1), RepeatSpeed(speed * 1.05, None, None, 1)]
    cell.speed = pool_repeats(cell.repeats)
    cell.drafts, cell.accepted, cell.draft_tokens = draft_tokens // 3, accepted, draft_tokens
    return cell


def test_each_tensor_parallel_cell_meets_its_one_gpu_twin_and_nothing_else() -> None:
    one, two = _cell(None, 100.0, 300, 1000), _cell(2, 140.0, 310, 1000)
    explicit_one = _cell(1, 100.0, 300, 1000, backend="FLASHINFER")
    two_fi = _cell(2, 150.0, 300, 1000, backend="FLASHINFER")
    # No twin: another build, another workload, or no one-GPU cell of its backend at all.
    lonely = [_cell(2, 90.0, 300, 1000, build="other"), _cell(2, 90.0, 300, 1000, max_tokens=32),
              _cell(2, 90.0, 300, 1000, backend="TRITON_ATTN")]
    found = parallel.twins([one, two, explicit_one, two_fi, *lonely])
    assert [(t.cell, t.one_gpu) for t in found] == [(two, one), (two_fi, explicit_one)]
    assert found[0].sizes == (2, None) and parallel.sizes(explicit_one) == (1, None)


def test_the_acceptance_test_and_the_speed_ratio_by_hand() -> None:
    [twin] = parallel.twins([_cell(None, 100.0, 300, 1000), _cell(2, 140.0, 310, 1000)])
    # 310 / 1000 against 300 / 1000: +1 point; pooled 0.305, z = 0.01 / sqrt(0.305 x 0.695 x 2 / 1000) = 0.486.
    a = twin.acceptance
    assert (a.base_rate, a.head_rate) == (0.3, 0.31) and a.z == pytest.approx(0.01 / math.sqrt(0.305 * 0.695 * 0.002))
    assert not a.flagged and a.low < 0 < a.high
    # 140 / 100 = 1.4, its interval from the two cells' spreads.
    assert twin.speed.value == pytest.approx(1.4) and twin.speed.low < 1.4 < twin.speed.high
    assert parallel.sentence(twin).startswith(
        "tensor_parallel_size=2: acceptance 0.310 against 0.300 on one GPU, +1.0 points [")
    assert parallel.sentence(twin).endswith(": the same; tokens/s 1.40x [" + f"{twin.speed.low:.2f}, {twin.speed.high:.2f}]")


def test_a_draft_that_accepts_less_on_two_gpus_is_flagged_as_the_finding() -> None:
    # 200 of 1000 against 300 of 1000: -10 points, z about -5.1, p far under 0.002: a drafter missing on a rank.
    [twin] = parallel.twins([_cell(None, 100.0, 300, 1000), _cell(2, 100.0, 200, 1000, draft_tp=2)])
    assert twin.sizes == (2, 2) and twin.acceptance.flagged and twin.acceptance.difference == pytest.approx(-0.1)
    assert "tensor_parallel_size=2 draft_tensor_parallel_size=2: acceptance 0.200 against 0.300" in parallel.sentence(twin)
    assert ": differs;" in parallel.sentence(twin)


def test_a_draft_size_alone_above_one_is_parallel_and_a_baseline_has_no_acceptance_test() -> None:
    # draft_tensor_parallel_size 2 with the target on one GPU still spreads the draft: its twin is the plain cell.
    [twin] = parallel.twins([_cell(None, 100.0, 300, 1000), _cell(None, 95.0, 300, 1000, draft_tp=2)])
    assert twin.sizes == (None, 2)
    # A cell without drafts (no counters) keeps its speed ratio and no acceptance test.
    bare = [_cell(None, 100.0, 0, 0), _cell(2, 150.0, 0, 0)]
    [twin] = parallel.twins(bare)
    assert twin.acceptance is None and twin.speed.value == pytest.approx(1.5)
    assert parallel.sentence(twin) == f"tensor_parallel_size=2: tokens/s 1.50x [{twin.speed.low:.2f}, {twin.speed.high:.2f}]"


def test_a_parallel_cell_that_crashed_sits_beside_its_twin_with_nothing_measured() -> None:
    crashed = _cell(3, 100.0, 0, 0)
    crashed.repeats, crashed.speed, crashed.states = [], None, Counter({JobState.CRASHED: 1})
    [twin] = parallel.twins([_cell(None, 100.0, 300, 1000), crashed])
    assert (twin.acceptance, twin.speed) == (None, None)
    assert parallel.sentence(twin) == "tensor_parallel_size=3: nothing measured beside the one-GPU cell (1 crashed)"
