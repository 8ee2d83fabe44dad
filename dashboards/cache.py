"""What a finished sweep's page shows, kept per service process: such a sweep never changes again."""

import threading
from collections import OrderedDict
from typing import Any

from app.enums import JobState


def is_over(counts: dict[str, int]) -> bool:
    """No job queued or running: every job is final, and final jobs and their results never change.

    (Cancelling an over sweep changes no job; the page's state badge is read fresh every time.)
    """
    return not (counts.get(JobState.QUEUED, 0) or counts.get(JobState.RUNNING, 0))


class FinishedSweeps:
    """A bounded map from sweep id to its rendered matrix, least recently used dropped first."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._items: OrderedDict[int, Any] = OrderedDict()
        self._lock = threading.Lock()  # pages render on several threads

    def get(self, sweep_id: int) -> Any | None:
        with self._lock:
            if sweep_id not in self._items:
                return None
            self._items.move_to_end(sweep_id)
            return self._items[sweep_id]

    def put(self, sweep_id: int, value: Any) -> None:
        with self._lock:
            self._items[sweep_id] = value
            self._items.move_to_end(sweep_id)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
