"""When a sweep's matrix may be kept: once the sweep is over."""

from dashboards.cache import is_over


def test_a_sweep_is_over_when_no_job_is_queued_or_running() -> None:
    assert is_over({"succeeded": 3, "crashed": 1, "cancelled": 2})
    assert not is_over({"succeeded": 3, "queued": 1})
    assert not is_over({"succeeded": 3, "running": 1})

