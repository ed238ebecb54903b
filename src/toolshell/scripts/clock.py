"""Clocks for the trigger runner: the real one, and a manual one that tests move by hand."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

import anyio

# Sleep in bounded steps so a suspended laptop or a changed system clock is noticed soon after.
_MAX_SLEEP_SECONDS = 60.0


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...

    async def sleep_until(self, moment: datetime) -> None:
        """Wait until `moment`, or less: callers look at `now()` again and sleep more if needed."""
        ...


class SystemClock:
    """Local wall-clock time: schedules fire in the machine's time zone, as cron's do."""

    def now(self) -> datetime:
        return datetime.now().astimezone()

    async def sleep_until(self, moment: datetime) -> None:
        left = (moment - self.now()).total_seconds()
        await anyio.sleep(min(max(left, 0.0), _MAX_SLEEP_SECONDS))


class ManualClock:
    """A clock that moves only when `set` is called; sleepers wake when their time has come."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._waiting: list[datetime] = []
        self._changed: anyio.Event | None = None  # created on first use: an Event needs a running loop

    def now(self) -> datetime:
        return self._now

    def set(self, moment: datetime) -> None:
        """Move the clock (forwards or back) and wake every sleeper to look again."""
        self._now = moment
        self._pulse()

    async def sleep_until(self, moment: datetime) -> None:
        while self._now < moment:
            self._waiting.append(moment)
            self._pulse()
            try:
                await self._event().wait()
            finally:
                self._waiting.remove(moment)

    async def next_sleeper(self) -> datetime:
        """Wait until something sleeps on this clock for a later time; return the earliest such time."""
        while not (ahead := [m for m in self._waiting if m > self._now]):  # woken sleepers leave soon
            await self._event().wait()
        return min(ahead)

    def _event(self) -> anyio.Event:
        if self._changed is None:
            self._changed = anyio.Event()
        return self._changed

    def _pulse(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None
