"""The statistics against real H200 data (tests/data/h200-proof-2026-11-30, docs/h200-report.md): what the
service stored is what the pure functions give from the cells' own rounds and counters."""

import itertools
import json
import sqlite3
import statistics
from pathlib import Path

import pytest

from app.analysis.acceptance import calibration_misses, derive, per_position
from app.analysis.fallback import RepeatSpeed, pool_repeats, ratio
from app.analysis.rounds import median_interval
from app.analysis.verdicts import Change, cell_verdict
from app.schemas.cell import CellResult
from benchmarks.stats.acceptance import per_pass_counts
from benchmarks.stats.rounds import aa_check
from tests.samples import pooled

PROOF = Path(__file__).resolve().parents[1] / "data" / "h200-proof-2026-11-30"
ROWS = """
SELECT s.name, j.backend, j.graph_mode, j.method, j.concurrency, j.config_hash, r.raw,
       r.tokens_per_s, r.tokens_per_s_low, r.tokens_per_s_high,
       r.acceptance_rate, r.mean_acceptance_length, r.mean_acceptance_length_low, r.mean_acceptance_length_high,
       r.expected_per_position, r.calibration_miss
FROM results r JOIN jobs j ON j.id = r.job_id JOIN sweeps s ON s.id = j.sweep_id
"""


def _rows(name: str) -> list[sqlite3.Row]:
    # Read-only: a missing file is an error, not a new empty database.
    connection = sqlite3.connect(f"file:{PROOF / name}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    return connection.execute(ROWS).fetchall()


@pytest.mark.parametrize("row", [row for name in ("proof", "batch2", "batch3", "batch4", "alone") for row in _rows(f"{name}.sqlite")],
                         ids=lambda r: f"{r['name']}-{r['backend']}-{r['graph_mode']}-{r['method']}-{r['concurrency']}")
def test_stored_throughput_and_intervals_are_what_the_rounds_give(row: sqlite3.Row) -> None:
    result = CellResult.model_validate(json.loads(row["raw"]))
    found = median_interval([r.output_tokens / r.seconds for r in result.rounds])
    assert (row["tokens_per_s"], row["tokens_per_s_low"], row["tokens_per_s_high"]) == (found.median, found.low, found.high)
    if row["method"] is None:
        assert result.spec_decode is None and row["mean_acceptance_length"] is None
        return
    metrics = derive(result.spec_decode, result.requests, [r.spec_decode for r in result.rounds])
    assert row["mean_acceptance_length_low"] <= row["mean_acceptance_length"] <= row["mean_acceptance_length_high"]
    assert (row["mean_acceptance_length_low"], row["mean_acceptance_length_high"]) == pytest.approx(
        (metrics.mean_acceptance_length_low, metrics.mean_acceptance_length_high)
    )


def _calibration(name: str) -> dict[str, list[tuple[CellResult, tuple[bool, ...]]]]:
    """Each calibration cell of a database, by sweep: its result and which positions' intervals miss."""
    found: dict[str, list[tuple[CellResult, tuple[bool, ...]]]] = {}
    for row in _rows(name):
        if row["expected_per_position"] in (None, "null"):
            continue
        result = CellResult.model_validate(json.loads(row["raw"]))
        counters = result.spec_decode
        misses = calibration_misses(json.loads(row["expected_per_position"]),
                                    per_position(counters.accepted_per_position, counters.num_drafts))
        assert bool(row["calibration_miss"]) == any(misses)
        found.setdefault(row["name"], []).append((result, misses))
    return found


def _per_pass(result: CellResult) -> set[tuple[int, ...]]:
    return set(per_pass_counts([(r.num_requests, r.spec_decode) for r in result.rounds], result.num_requests))


def test_calibration_at_temperature_one_missed_while_every_pass_replayed_the_first_ones_draws() -> None:
    """Session 1 (proof.sqlite): the cells seeded pass after pass with the same request seeds, so at
    temperature 1 every round's counts were whole multiples of one pass's, and an interval over all of
    them claimed trials that were copies; at temperature 0 (vLLM's global generator) passes differed."""
    found = _calibration("proof.sqlite")
    assert [misses for _, misses in found["h200-calibration-t0"]] == [(False, False, False)] * 4
    assert [misses for _, misses in found["h200-calibration-t1"]] == [(True, True, True)] * 4
    assert all(len(_per_pass(result)) == 1 for result, _ in found["h200-calibration-t1"])
    assert all(len(_per_pass(result)) > 1 for result, _ in found["h200-calibration-t0"])


def test_calibration_at_temperature_one_holds_once_every_pass_draws_anew() -> None:
    """Session 4 (batch4.sqlite), the cell seeding the k-th measured request with seed + k: the same four
    cells at temperature 1, every position inside its interval, and no two rounds alike."""
    found = _calibration("batch4.sqlite")
    assert [misses for _, misses in found["h200-calibration-t1"]] == [(False, False, False)] * 4
    assert all(len(_per_pass(result)) == len(result.rounds) for result, _ in found["h200-calibration-t1"])


def _peer(folder: str, batch: str) -> list[tuple[str, float, float, float]]:
    """Each throughput check of a peer folder: backend, the peer's median over the kept runs, and the
    interval of the batch's peer cell on that backend."""
    found = []
    cells = {row["backend"]: CellResult.model_validate(json.loads(row["raw"]))
             for row in _rows(f"{batch}.sqlite") if row["name"].startswith("h200-peer")}
    for check in sorted((PROOF / folder).glob("throughput-*")):
        backend = json.loads((check / "cell.json").read_text())["backend"]
        runs = [json.loads(p.read_text()) for p in sorted(check.glob("throughput-*.json"))]
        kept = [r["num_requests"] * r["draftbench"]["output_len"] / r["elapsed_time"] for r in runs if not r["draftbench"]["discarded"]]
        assert len(kept) == 5 and runs[0]["draftbench"]["discarded"]
        interval = median_interval([r.output_tokens / r.seconds for r in cells[backend].rounds])
        found.append((backend, statistics.median(kept), interval.low, interval.high))
    return found


def test_the_peer_median_lies_inside_the_cell_interval_on_a_host_running_nothing_else() -> None:
    """alone.sqlite: the FLASH_ATTN peer cell and then `vllm bench throughput` on a one-GPU machine."""
    [(backend, peer, low, high)] = _peer("peer-alone", "alone")
    assert backend == "FLASH_ATTN" and low <= peer <= high


def test_with_both_gpus_busy_the_peer_check_holds_on_flashinfer_and_misses_on_flash_attn() -> None:
    """batch4.sqlite: the cells and the tool ran one per GPU at once; FLASH_ATTN's peer median lies just
    above the cell's interval (the runs of both spread over 2206-4214 tok/s)."""
    found = {backend: low <= peer <= high for backend, peer, low, high in _peer("peer-batch4", "batch4")}
    assert found == {"FLASHINFER": True, "FLASH_ATTN": False}


def test_the_build_that_claims_full_graphs_accepts_less_than_its_eager_cell() -> None:
    acceptance = {row["graph_mode"]: row["acceptance_rate"] for row in _rows("capture-bug.sqlite")
                  if row["name"] == "h200-capture-bug"}
    assert acceptance["NONE"] == 1.0
    assert acceptance["FULL_DECODE_ONLY"] < 0.95 and acceptance["FULL_AND_PIECEWISE"] < 0.95


def test_vllm_bench_serve_counts_what_the_serving_cell_counts_per_request() -> None:
    """The peer check's server answered vllm bench serve's 32 requests; the serving cell of the same config
    (batch2.sqlite) measured 96: per request, drafts, draft tokens and accepted tokens agree exactly."""
    check = PROOF / "peer" / "serve-flash-attn-c1"
    saved = json.loads((check / "serve.json").read_text())
    scraped = json.loads((check / "serve-metrics.json").read_text())["delta"]
    tool = (saved["spec_decode_num_drafts"], saved["spec_decode_draft_tokens"], saved["spec_decode_accepted_tokens"])
    assert tool == (scraped["num_drafts"], scraped["num_draft_tokens"], scraped["num_accepted_tokens"])
    connection = sqlite3.connect(f"file:{PROOF / 'batch2.sqlite'}?mode=ro", uri=True)
    requests, *counts = connection.execute(
        "SELECT json_extract(r.serving, '$.completed'), r.num_drafts, r.num_draft_tokens, r.num_accepted_tokens "
        "FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.mode = 'serve' AND j.backend = 'FLASH_ATTN' AND j.concurrency = 1"
    ).fetchone()
    assert [c / requests for c in counts] == [t / saved["completed"] for t in tool]


def _by_config(name: str, sweep: str) -> dict[str, list[CellResult]]:
    found: dict[str, list[CellResult]] = {}
    for row in _rows(name):
        if row["name"] == sweep:
            found.setdefault(row["config_hash"], []).append(CellResult.model_validate(json.loads(row["raw"])))
    return found


def test_three_engine_starts_of_each_fallback_cell_never_flag_a_change_against_each_other() -> None:
    """The A/A check on the H200 (batch3.sqlite): 4 cells x 3 engine starts. No pair of starts, and no start
    against the other two, is called better or worse (some are undecided: too few starts to call)."""
    cells = _by_config("batch3.sqlite", "h200-fallback-repeats")
    assert sorted(len(starts) for starts in cells.values()) == [3, 3, 3, 3]
    changes = []
    for starts in cells.values():
        for a, b in itertools.permutations(range(3), 2):
            changes.append(cell_verdict(pooled([starts[a]]), pooled([starts[b]])).change)
        changes += [cell_verdict(pooled([starts[i]]), pooled([s for j, s in enumerate(starts) if j != i])).change
                    for i in range(3)]
    assert Change.BETTER not in changes and Change.WORSE not in changes
    assert Change.UNCHANGED in changes


def _rounds(result: CellResult) -> list[float]:
    return [r.output_tokens / r.seconds for r in result.rounds]


def test_on_the_h200_a_starts_interval_holds_the_other_starts_medians_as_often_as_exchangeable_rounds_would() -> None:
    """batch3.sqlite's 4 cells x 3 starts: 17 of 24 medians inside another start's interval against 20.0 if starts
    did not differ; shuffled, as few come often (p well above 0.05). tests/data/aa-cpu's 6 starts of one CPU cell
    fail the same check: there starts differ beyond their rounds."""
    h200 = aa_check([[_rounds(r) for r in starts] for starts in _by_config("batch3.sqlite", "h200-fallback-repeats").values()])
    assert (h200.hits, h200.pairs, h200.expected) == (17, 24, pytest.approx(20.0))
    assert h200.p_value > 0.1
    cpu = [CellResult.model_validate_json(path.read_text()) for path in sorted((PROOF.parent / "aa-cpu").glob("run-*.json"))]
    found = aa_check([[_rounds(r) for r in cpu]])
    assert (found.hits, found.pairs, found.expected) == (8, 30, pytest.approx(18.0))
    assert found.p_value < 0.05


def test_speculation_on_the_8b_shape_server_pays_off_at_1_16_and_64_clients() -> None:
    """batch3.sqlite: the Qwen3-8B shape served with a small draft (synthetic acceptance 0.8/0.6/0.4) and
    without: at every client count the lower end of the ratio's interval is above 1."""
    speeds: dict[tuple[int, bool], CellResult] = {}
    for row in _rows("batch3.sqlite"):
        if row["name"] == "h200-serving-8b-shape":
            speeds[(row["concurrency"], row["method"] is not None)] = CellResult.model_validate(json.loads(row["raw"]))
            assert not row["calibration_miss"]
    assert sorted(speeds) == [(c, s) for c in (1, 16, 64) for s in (False, True)]
    def speed(result: CellResult):
        found = median_interval([r.output_tokens / r.seconds for r in result.rounds])
        return pool_repeats([RepeatSpeed(found.median, found.low, found.high, found.n)])

    for clients in (1, 16, 64):
        found = ratio(speed(speeds[(clients, True)]), speed(speeds[(clients, False)]))
        assert found.low > 1.0, (clients, found)
