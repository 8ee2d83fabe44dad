"""The compare table over stored runs: each head cell judged against its own history on other builds."""

from pathlib import Path

from fastapi.testclient import TestClient

from app.results import compare_runs
from app.results.cells import CellScope
from tests.factories import register_worker, run_cell

BUILDS = [f"b{i}" for i in range(7)]


def test_a_cell_with_a_quiet_history_is_called_on_one_repeat_a_side(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=BUILDS)
    # Five earlier builds at 100, 101, 99, 100, 101 (two repeats each): mean 100.2, sd sqrt(2.8 / 4) = 0.837,
    # a learned threshold of 5 x 0.837 / 100.2 = 4.2 %.
    for build, level in zip(BUILDS[:5], (100.0, 101.0, 99.0, 100.0, 101.0), strict=True):
        run_cell(client, worker, dataset, build, [level - 0.5, level + 0.5])
    base = run_cell(client, worker, dataset, "b5", [100.0])
    head = run_cell(client, worker, dataset, "b6", [80.0])
    with client.app.state.sessionmaker() as session:
        *_, [change] = compare_runs.between(session=session, base=CellScope(sweep_id=base), head=CellScope(sweep_id=head))
        history = compare_runs.histories(session=session, head=[change.head], exclude={"b5", "b6"})
    assert list(history.values()) == [[100.0, 101.0, 99.0, 100.0, 101.0]]  # oldest build first, mean of repeats
    assert change.verdict.value == "worse" and change.numbers.throughput.threshold.source == "history"
    assert change.reasons[0].startswith("tokens/s 0.80x (too few repeats for a test; history threshold 4.2%)")


def test_without_history_one_repeat_a_side_is_not_enough_to_call(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=BUILDS[:2])
    base = run_cell(client, worker, dataset, "b0", [100.0])
    head = run_cell(client, worker, dataset, "b1", [80.0])
    with client.app.state.sessionmaker() as session:
        *_, [change] = compare_runs.between(session=session, base=CellScope(sweep_id=base), head=CellScope(sweep_id=head))
    assert change.verdict.value == "undecided" and "not enough repeats to call" in change.reasons[0]
