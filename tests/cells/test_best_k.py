"""``app.cells.best_k``: pooled cells built by hand folded into lines across k and load, each number traced to the
cells it came from; the API's answer over the same cells stored."""

from collections import Counter

import pytest

from app.analysis.fallback import RepeatSpeed, pool_repeats, ratio
from app.analysis.speedup import Pays, Point
from app.analysis.speedup import best_k as best_of
from app.cells import best_k, identity
from app.cells import service as cell_service
from app.cells.pooling import PooledCell
from app.enums import JobState


def _cell(k: int | None, load: int, speed: float, *, mode: str = "offline", tpot: float = 5.0, accepted: tuple = (),
          drafts: int = 0, resolved: str = "FULL", model: str = "m", rates: tuple = (), ran: bool = True) -> PooledCell:
    speculative = {"method": "eagle3", "model": "d", "num_speculative_tokens": k} if k else None
    if rates:
        speculative |= {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": list(rates)}
    config = {"model": model, "speculative": speculative, "mode": mode}
    if mode == "serve":
        config |= {"concurrency": load, "workload": {"num_prompts": 64}}
    else:
        config |= {"workload": {"num_prompts": load}, "engine_args": {"max_num_seqs": 256}}
    variant = identity.variant(config)
    cell = PooledCell("b", "H200", "FLASHINFER", "FULL", "eagle3" if k else None, variant, "",
                      concurrency=load if mode == "serve" else None, mode=mode, sweep_ids=[1], sweep_names=["s"],
                      job_ids=[load * 10 + (k or 0)], measured_in={load * 10 + (k or 0): 1} if ran else {},
                      states=Counter({JobState.SUCCEEDED if ran else JobState.QUEUED: 1}),
                      resolved_graph_modes={resolved} if ran else set())
    if not ran:
        return cell
    # Two starts at +-5 %: an interval of about +-10 % on the ratio.
    cell.repeats += [RepeatSpeed(speed * 0.95, None, None, 1), RepeatSpeed(speed * 1.05, None, None, 1)]
    cell.speed = pool_repeats(cell.repeats)
    cell.drafts, cell.accepted_per_position, cell.accepted = drafts, list(accepted), sum(accepted)
    if mode == "serve":
        cell.serving.append({"concurrency": load, "ttft_ms": {"p50": 10.0}, "tpot_ms": {"p50": tpot}, "itl_ms": {"p50": 10.0},
                             "output_tokens_per_s": speed, "requests_per_s": 1.0, "completed": 10, "failed": 0})
    return cell


def _pooled(cells: list[PooledCell]) -> list[PooledCell]:
    """The labels and speedups ``app.cells.service.load`` gives them."""
    labels = identity.labels([c.variant for c in cells])
    for cell in cells:
        cell.label = labels[cell.variant.measured]
    paired = cell_service.baselines(cells)
    for cell in cells:
        if (base := paired.get(cell.key)) is not None and cell.speed is not None:
            cell.speedup = ratio(cell.speed, base.speed)
    return cells


def test_one_line_per_method_across_k_and_batch_size_with_its_best_k_and_break_even() -> None:
    # Baseline 100 tok/s at batch 1 and 4, 400 at 16; k=2 1.5x, 1.3x, 0.6x; k=4 1.4x, 1.0x, 0.5x.
    cells = _pooled([
        _cell(None, 1, 100.0), _cell(None, 4, 100.0), _cell(None, 16, 400.0),
        _cell(2, 1, 150.0, accepted=(40, 20), drafts=50), _cell(2, 4, 130.0, accepted=(40, 20), drafts=50),
        _cell(2, 16, 240.0, accepted=(40, 20), drafts=50),
        _cell(4, 1, 140.0, accepted=(40, 20, 10, 5), drafts=50), _cell(4, 4, 100.0, accepted=(40, 20, 10, 5), drafts=50),
        _cell(4, 16, 200.0, accepted=(40, 20, 10, 5), drafts=50),
    ])
    [line] = best_k.lines(cells, "offline")
    assert (line.ks, line.loads, line.name, line.resolved_graph_mode) == ([2, 4], [1, 4, 16], "eagle3", "FULL")
    by = {(m.k, m.load): m for m in line.cells}
    assert by[(2, 16)].speedup.value == pytest.approx(0.6) and by[(2, 16)].baseline.speed.median == 400.0
    # tau = 1 + (40 + 20) / 50 = 2.2 for k=2; 1 + 75 / 50 = 2.5 for k=4.
    assert (by[(2, 1)].tau, by[(4, 1)].tau) == pytest.approx((2.2, 2.5))
    assert line.best[1].k == 2 and line.best[1].within_noise == (4,)  # 1.5 [1.35, 1.67] against 1.4 [1.26, 1.56]
    assert best_k.best_sentence(line.best[1], 1, "offline").startswith("best k: 2 at 1 sequence (1.50x [")
    assert best_k.best_sentence(line.best[1], 1, "offline").endswith("; 4 within noise")
    # k=2 crosses 1 between 4 (1.3) and 16 (0.6): share 0.3 / 0.7 of ln 4 -> ln 16; surely above at 4, surely below at 16.
    found = line.break_even[2]
    assert found.pays is Pays.UP_TO and found.x == pytest.approx(4 * 4 ** (0.3 / 0.7)) and (found.low, found.high) == (4, 16)
    assert best_k.break_even_sentence(line, 2) == f"eagle3 k=2 on FLASHINFER pays up to {found.x:.3g} sequences [4, 16]"
    # k=4: 1.0 at 4 holds 1, 0.5 at 16 is below: crosses between 1 and 4, surely above only at 1.
    assert (line.break_even[4].low, line.break_even[4].high) == (1, 16)
    # Two k: T = B tau / tokens/s fits exactly, so the prediction is the measured speedup and nothing is off.
    assert by[(4, 4)].prediction.predicted == pytest.approx(1.0) and not any(m.prediction.off for m in line.cells)


def test_serving_predictions_come_from_tpot_and_a_cell_off_its_acceptance_stands_out() -> None:
    # Baseline TPOT 10 ms; k=1,2,3 at TPOT 8, 10, 20 ms with tau 1.8, 2.4, 2.7 (drafts 10): T = 14.4, 24, 54.
    # Fit: kbar 2, Tbar 30.8, draft = ((-1)(-16.4) + (1)(23.2)) / 2 = 19.8, verify = 30.8 - 39.6 = -8.8.
    # k=2: predicted 2.4 x 10 / 30.8 = 0.779; measured 1.25x [1.12, 1.39]: off. k=1: 1.8 x 10 / 11 = 1.636.
    cells = _pooled([
        _cell(None, 8, 100.0, mode="serve", tpot=10.0),
        _cell(1, 8, 120.0, mode="serve", tpot=8.0, accepted=(8,), drafts=10),
        _cell(2, 8, 125.0, mode="serve", tpot=10.0, accepted=(8, 6), drafts=10),
        _cell(3, 8, 60.0, mode="serve", tpot=20.0, accepted=(8, 6, 3), drafts=10),
    ])
    [line] = best_k.lines(cells, "serve")
    by = {m.k: m for m in line.cells}
    assert by[2].prediction.predicted == pytest.approx(24 / 30.8) and by[2].prediction.off
    assert by[1].prediction.predicted == pytest.approx(18 / 11)
    assert best_k.best_sentence(line.best[8], 8, "serve").startswith("best k: 2 at 8 clients")
    assert best_k.break_even_sentence(line, 3) == "eagle3 k=3 on FLASHINFER pays at none of the loads measured (8 to 8 clients)"


def test_cells_of_another_resolved_mode_or_model_are_another_line_and_one_k_cannot_predict() -> None:
    cells = _pooled([
        _cell(None, 1, 100.0), _cell(2, 1, 150.0, accepted=(5, 2), drafts=10),
        _cell(3, 1, 150.0, accepted=(5, 2, 1), drafts=10, resolved="PIECEWISE"),
        _cell(None, 1, 100.0, model="n"), _cell(2, 1, 90.0, accepted=(5, 2), drafts=10, model="n"),
    ])
    lines = best_k.lines(cells, "offline")
    assert sorted((line.name, line.resolved_graph_mode, tuple(line.ks)) for line in lines) == [
        ("eagle3", "PIECEWISE", (3,)), ("eagle3 model=m", "FULL", (2,)), ("eagle3 model=n", "FULL", (2,))]
    assert all(line.one_k == (1,) and line.cells[0].prediction.predicted is None for line in lines)
    # 90 / 100 with +-5 % starts a side: 0.90x [0.78, 1.03].
    slower = next(line for line in lines if line.name == "eagle3 model=n")
    assert best_k.break_even_sentence(slower, 2) == ("eagle3 k=2 model=n on FLASHINFER: undecided, below 1 at every load "
                                                     "measured, but the interval at 1 holds 1 (loads in sequences)")
    assert best_k.lines(cells, "serve") == []


def test_a_series_of_synthetic_rates_is_one_line_and_a_cell_that_measured_nothing_sits_on_none() -> None:
    # The sweep gave k=1, 2 and 4 the first k of (0.7, 0.5, 0.35, 0.25), as app.sweeps.matrix does: one line. Another
    # sweep's series (0.9, 0.8) is a line of its own. The k=4 cell at load 4 is still queued: on no line (not on one of
    # its own with no resolved graph mode, as before), and its k's break-even is read from the load that ran.
    cells = _pooled([
        _cell(None, 1, 100.0), _cell(None, 4, 100.0),
        _cell(1, 1, 120.0, rates=(0.7,), accepted=(7,), drafts=10),
        _cell(2, 1, 130.0, rates=(0.7, 0.5), accepted=(7, 5), drafts=10),
        _cell(4, 1, 110.0, rates=(0.7, 0.5, 0.35, 0.25), accepted=(7, 5, 3, 2), drafts=10),
        _cell(4, 4, 0.0, rates=(0.7, 0.5, 0.35, 0.25), ran=False),
        _cell(1, 4, 150.0, rates=(0.9,), accepted=(9,), drafts=10),
        _cell(2, 4, 160.0, rates=(0.9, 0.8), accepted=(9, 8), drafts=10),
    ])
    lines = best_k.lines(cells, "offline")
    assert sorted([(m.k, m.load) for m in line.cells] for line in lines) == [[(1, 1), (2, 1), (4, 1)], [(1, 4), (2, 4)]]
    first = next(line for line in lines if line.loads == [1])
    # tau = 1 + 7/10 = 1.7, 1 + 12/10 = 2.2, 1 + 17/10 = 2.7; best k=2 at 1.3x, and with two k the counters predict.
    assert [m.tau for m in first.cells] == pytest.approx([1.7, 2.2, 2.7])
    assert first.best[1].k == 2 and first.one_k == () and all(m.prediction.predicted for m in first.cells)
    assert all(line.resolved_graph_mode == "FULL" for line in lines)


def test_a_k_alone_in_a_sweep_of_synthetic_rates_is_on_the_line_its_rates_begin() -> None:
    # (0.7) begins both (0.7, 0.5) and (0.7, 0.6): the same k=1 cell, pooled, is the first point of both series.
    cells = _pooled([
        _cell(None, 1, 100.0), _cell(1, 1, 120.0, rates=(0.7,), accepted=(7,), drafts=10),
        _cell(2, 1, 130.0, rates=(0.7, 0.5), accepted=(7, 5), drafts=10),
        _cell(2, 1, 140.0, rates=(0.7, 0.6), accepted=(7, 6), drafts=10),
    ])
    assert sorted([m.cell.speed.median for m in line.cells] for line in best_k.lines(cells, "offline")) == [
        [120.0, 130.0], [120.0, 140.0]]


def test_a_k_measured_alone_at_its_load_is_the_only_one_not_the_best_of_several() -> None:
    alone = best_of({3: Point(1, 1.6, 1.5, 1.7)})
    assert best_k.best_sentence(alone, 1, "serve") == "best k: 3 at 1 client (1.60x [1.50, 1.70]); only k=3 ran here"
    two = best_of({3: Point(1, 1.6, 1.5, 1.7), 1: Point(1, 1.2, 1.1, 1.3)})
    assert best_k.best_sentence(two, 1, "serve").endswith("; no other k within noise")
