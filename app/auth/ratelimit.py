"""A token bucket per key, in this process's memory: per API token, and per client address for failed authentications.

Each key may make ``per_minute`` requests a minute, in bursts of up to that many.
The state is per service process: behind several processes each keeps its own buckets.
"""

import math
import threading
import time
from collections.abc import Callable


class RateLimiter:
    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._rate = per_minute / 60.0
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens left, when counted)
        self._lock = threading.Lock()

    def wait(self, key: str) -> float:
        """The seconds until ``key`` may spend a request (0.0: now), spending nothing."""
        if self.per_minute <= 0:
            return 0.0
        with self._lock:
            return self._wait(self._refilled(key, self._clock()))

    def take(self, key: str) -> float:
        """Spend one request for ``key``: 0.0 if allowed, else the seconds until one is allowed again."""
        if self.per_minute <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            tokens = self._refilled(key, now)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return self._wait(tokens)

    def _refilled(self, key: str, now: float) -> float:
        tokens, then = self._buckets.get(key, (float(self.per_minute), now))
        return min(float(self.per_minute), tokens + (now - then) * self._rate)

    def _wait(self, tokens: float) -> float:
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self._rate


def retry_after(seconds: float) -> str:
    """The Retry-After header's value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))
