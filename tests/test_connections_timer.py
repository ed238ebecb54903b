"""The call deadline's arithmetic on a fake clock: idle refreshed by progress, the absolute cap,
and pauses while a person answers. No wall-clock waits: the clock is moved by hand."""

from __future__ import annotations

import pytest

from toolshell.connections import timer as timer_module
from toolshell.connections.timer import CallTimer

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(timer_module.anyio, "current_time", fake)
    return fake


async def test_the_deadline_is_one_idle_timeout_away_and_progress_moves_it(clock: Clock) -> None:
    t = CallTimer(10, cap_factor=20)
    assert (t.scope.deadline, t.expired) == (110.0, "idle")
    clock.now = 108.0
    t.touch()
    assert t.scope.deadline == 118.0


async def test_progress_cannot_outlast_the_cap_of_twenty_idle_timeouts(clock: Clock) -> None:
    t = CallTimer(10, cap_factor=20)
    for _ in range(25):
        clock.now += 9.0
        t.touch()
    assert (t.scope.deadline, t.expired) == (300.0, "cap")


async def test_a_pause_stops_both_clocks_and_resuming_goes_on_from_where_they_stopped(clock: Clock) -> None:
    t = CallTimer(10, cap_factor=20)
    clock.now = 104.0
    t.pause()
    assert t.scope.deadline == float("inf")
    clock.now = 1000.0  # a person took 896 s to answer
    t.resume()
    assert t.scope.deadline == 1006.0
