"""A dead worker's judgement at the exact cutoff, on both store engines (`store.workers`): a worker
whose last beat is just under three beats old is alive and its claims stand; at three beats, and
after, it is dead: listed so, among `dead()`, and its unfinished trigger claim is ended as lost
(`scripts.claims`). The clock is fixed, so the instant is exact."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from _store_support import ENGINES, postgres_server, store_url
from toolshell.scripts.claims import TriggerClaims
from toolshell.store.engines import open_store
from toolshell.store.workers import MISSED_BEATS, Workers

__all__ = ["postgres_server", "store_url"]  # fixtures, imported for pytest
BEAT = 0.5
LAST_BEAT = 1_000_000.0
CUTOFF = LAST_BEAT + MISSED_BEATS * BEAT
"""Exact in binary floating point: the instant the worker has missed its third beat."""


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_a_worker_is_alive_just_before_three_missed_beats_and_dead_at_them_and_after(store_url: str) -> None:
    store = open_store(store_url)
    clock = Clock(LAST_BEAT)
    try:
        workers = Workers(store, BEAT, clock=clock)
        workers.register("worker-a")
        workers.register("judge")
        claims = TriggerClaims(store, "host-a:1", workers=workers, worker="worker-a")
        assert claims.claim_slot("nightly", datetime(2026, 12, 1, 3, tzinfo=UTC))
        seen = {}
        for label, now in (("before", CUTOFF - 0.001), ("at", CUTOFF), ("after", CUTOFF + BEAT)):
            clock.now = now
            workers.beat("judge")  # the judge beats; worker-a stays silent since LAST_BEAT
            listed = {w["id"]: w["alive"] for w in workers.listed()}
            seen[label] = (workers.alive("worker-a"), "worker-a" in workers.dead(), listed["worker-a"])
            seen[label + " lost"] = claims.end_lost()
    finally:
        store.close()
    assert seen["before"] == (True, False, True) and seen["before lost"] == 0
    assert seen["at"] == (False, True, False) and seen["at lost"] == 1, "at the cutoff: dead, its claim ended"
    assert seen["after"] == (False, True, False) and seen["after lost"] == 0, "ended once"
