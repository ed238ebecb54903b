"""When a failed or crashed server may be started again: 1 s, 2 s, 4 s … capped at 30 s."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]


class Backoff:
    """Consecutive failures and the earliest time of the next attempt, on an injectable clock."""

    def __init__(self, clock: Clock = time.monotonic, first: float = 1.0, cap: float = 30.0) -> None:
        self._clock = clock
        self._first = first
        self._cap = cap
        self.failures = 0
        self._next_at = 0.0

    def failed(self) -> float:
        """Record a failure; returns the delay before the next attempt."""
        self.failures += 1
        delay = min(self._first * 2.0 ** (self.failures - 1), self._cap)
        self._next_at = self._clock() + delay
        return delay

    def wait_left(self) -> float:
        """Seconds until the next attempt is allowed (0 when it is)."""
        return max(0.0, self._next_at - self._clock()) if self.failures else 0.0

    def reset(self) -> None:
        """The server answered: the next failure starts the sequence over."""
        self.failures = 0
        self._next_at = 0.0
