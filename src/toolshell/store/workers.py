"""The workers on one store: who is alive, by heartbeat, so a worker that died is noticed.

Each serving host registers under its own id and beats every `[serve] heartbeat_seconds`; one
silent for three beats is taken as dead (its last beat `MISSED_BEATS` beats old or older: at the
cutoff it counts as dead, just before it as alive). Beats are written and judged by the store's clock (the
database server's, or the host's for a SQLite file), so a process whose clock is ahead cannot
take a live worker for dead. Another worker then ends what the dead one left open (its
shell calls are marked as lost in the timeline) and forgets it. A worker killed with SIGKILL loses
nothing it recorded: its approval requests stay answerable, its shells stay in the store.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

from toolshell.store.dialect import now_query
from toolshell.store.protocol import StateStore

MIGRATIONS = [
    """
    CREATE TABLE workers (
        id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        pid BIGINT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        heartbeat_at DOUBLE PRECISION NOT NULL
    );
    """
]
MISSED_BEATS = 3
"""Beats a worker may miss before it counts as dead."""


class Workers:
    """The worker registry in a `StateStore`.

    Args:
        store: the store the workers share.
        heartbeat_seconds: how often a live worker beats.
        clock: the time beats are written and judged by (default: the store's clock; a test gives
            a fixed one to judge at an exact instant).
    """

    def __init__(self, store: StateStore, heartbeat_seconds: float, clock: Callable[[], float] | None = None) -> None:
        store.migrate("workers", MIGRATIONS)
        self.store = store
        self.heartbeat_seconds = heartbeat_seconds
        self._clock = clock

    def now(self) -> float:
        """The store's clock, in Unix seconds: the one every worker's beats are written and judged by."""
        if self._clock is not None:
            return self._clock()
        return float(self.store.query(now_query(self.store.engine))[0]["now"])

    def cutoff(self) -> float:
        """The store time a beat must be newer than for its worker to count as alive (a beat at the
        cutoff is `MISSED_BEATS` beats old: its worker missed them, and is dead)."""
        return self.now() - MISSED_BEATS * self.heartbeat_seconds

    def register(self, worker: str) -> None:
        now = self.now()
        self.store.execute(
            "INSERT INTO workers (id, host, pid, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
            (worker, socket.gethostname(), os.getpid(), now, now),
        )

    def beat(self, worker: str) -> None:
        done = self.store.execute("UPDATE workers SET heartbeat_at = ? WHERE id = ?", (self.now(), worker))
        if done.rowcount == 0:  # taken for dead and forgotten (a long pause): register again
            self.register(worker)

    def dead(self) -> list[str]:
        """The workers silent for `MISSED_BEATS` beats."""
        cutoff = self.cutoff()
        return [str(r["id"]) for r in self.store.query("SELECT id FROM workers WHERE heartbeat_at <= ?", (cutoff,))]

    def alive(self, worker: str) -> bool:
        rows = self.store.query("SELECT heartbeat_at FROM workers WHERE id = ?", (worker,))
        return bool(rows) and rows[0]["heartbeat_at"] > self.cutoff()

    def listed(self) -> list[dict[str, object]]:
        """Every registered worker: id, host, pid, started_at, heartbeat_at and whether it is alive."""
        cutoff = self.cutoff()
        rows = self.store.query("SELECT id, host, pid, started_at, heartbeat_at FROM workers ORDER BY started_at")
        return [{**dict(r), "alive": r["heartbeat_at"] > cutoff} for r in rows]

    def forget(self, worker: str) -> None:
        self.store.execute("DELETE FROM workers WHERE id = ?", (worker,))
