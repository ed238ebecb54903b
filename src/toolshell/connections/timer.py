"""The deadline of one tool call: an idle timeout refreshed by progress, and an absolute cap.

The SDK's read timeout is not reset by progress notifications, so we keep our own. Both budgets
are spent only while the clock runs: an open elicitation (a person answering) pauses them.
"""

from __future__ import annotations

import math

import anyio

CAP_FACTOR = 20
"""The absolute cap is this many idle timeouts (seed 001, "Timeouts and Cancellation")."""


class CallTimer:
    """Drives `scope.deadline` from two budgets. Enter `scope` around the call in the call's own task.

    `touch()` (progress), `pause()` and `resume()` may come from any task: they only move the
    deadline of the scope.
    """

    def __init__(self, idle_seconds: float, cap_factor: float = CAP_FACTOR) -> None:
        self.idle = idle_seconds
        self.cap = idle_seconds * cap_factor
        self.scope = anyio.CancelScope()
        self.expired: str | None = None
        """"idle" or "cap" once the deadline that fired is known (read after the scope exits)."""
        self._pauses = 0
        self._segment_start = anyio.current_time()
        self._spent = 0.0  # running time before the current segment, for the cap
        self._quiet = 0.0  # running time since the last progress, before the current segment
        self._arm()

    @property
    def paused(self) -> bool:
        return self._pauses > 0

    def touch(self) -> None:
        """The server showed progress: the idle budget starts over."""
        self._fold()
        self._quiet = 0.0
        self._arm()

    def pause(self) -> None:
        """A person is being asked something for this call: stop both clocks."""
        self._fold()
        self._pauses += 1
        self._arm()

    def resume(self) -> None:
        """The question is closed: the clocks run again from where they stopped."""
        self._fold()
        self._pauses = max(0, self._pauses - 1)
        self._arm()

    def _fold(self) -> None:
        now = anyio.current_time()
        if not self._pauses:
            ran = now - self._segment_start
            self._spent += ran
            self._quiet += ran
        self._segment_start = now

    def _arm(self) -> None:
        if self._pauses:
            self.scope.deadline = math.inf
            return
        idle_left = self.idle - self._quiet
        cap_left = self.cap - self._spent
        self.expired = "idle" if idle_left <= cap_left else "cap"
        self.scope.deadline = self._segment_start + min(idle_left, cap_left)
