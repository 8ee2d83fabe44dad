"""The per-process store of finished sweeps' matrices."""

from dashboards.cache import FinishedSweeps, is_over


def test_a_sweep_is_over_when_no_job_is_queued_or_running() -> None:
    assert is_over({"succeeded": 3, "crashed": 1, "cancelled": 2})
    assert not is_over({"succeeded": 3, "queued": 1})
    assert not is_over({"succeeded": 3, "running": 1})


def test_the_least_recently_used_sweep_goes_first() -> None:
    kept = FinishedSweeps(size=2)
    kept.put(1, "one")
    kept.put(2, "two")
    assert kept.get(1) == "one"  # 2 is now the least recently used
    kept.put(3, "three")
    assert (kept.get(1), kept.get(2), kept.get(3)) == ("one", None, "three")
