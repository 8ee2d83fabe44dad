"""The bounded map that keeps finished sweeps' matrices."""

from app.lru import LRU


def test_the_least_recently_used_entry_goes_first() -> None:
    kept: LRU[int, str] = LRU(size=2)
    kept.put(1, "one")
    kept.put(2, "two")
    assert kept.get(1) == "one"  # 2 is now the least recently used
    kept.put(3, "three")
    assert (kept.get(1), kept.get(2), kept.get(3)) == ("one", None, "three")
