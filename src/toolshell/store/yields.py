"""The rows of yielded `bash` calls (yield-and-wait, for clients without Tasks), by shell handle.

A call still running after `[serve] yield_seconds` has a row in `yielded_runs`: the output it
wrote so far, how much of it was delivered, its final result once it ended, its owner's
heartbeat, and (sealed) what running it again by replay takes, with the key of its nested calls'
records (`store.replay`). One at a time per shell.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from toolshell.store.protocol import StateStore
from toolshell.store.replay import CallRecords
from toolshell.store.tasks import dumped, loaded

MIGRATIONS = [
    """
    CREATE TABLE yielded_runs (
        handle TEXT PRIMARY KEY,
        caller TEXT,
        worker TEXT NOT NULL,
        stdout TEXT NOT NULL,
        stderr TEXT NOT NULL,
        sent_out BIGINT NOT NULL,
        sent_err BIGINT NOT NULL,
        result TEXT,
        beat DOUBLE PRECISION NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    );
    """,
    # The run's key among the nested-call records (`store.replay`) and, sealed, what running it
    # again by replay takes.
    """
    ALTER TABLE yielded_runs ADD COLUMN run_key TEXT;
    ALTER TABLE yielded_runs ADD COLUMN resume TEXT;
    """,
]

YIELD_CHANNEL = "yields"
"""The store channel a yielded run's change is announced on (the payload is its shell handle)."""


@dataclass(frozen=True)
class YieldedRow:
    """A yielded `bash` call as the store holds it."""

    handle: str
    caller: str | None
    stdout: str
    stderr: str
    sent_out: int
    sent_err: int
    result: dict[str, Any] | None
    beat: float
    worker: str = ""
    run_key: str | None = None
    resume: str | None = None
    """What running it again takes, sealed; None: it cannot be resumed."""


class YieldRows:
    """The yielded runs of one `StateStore`, by shell handle (one at a time per shell)."""

    def __init__(self, store: StateStore) -> None:
        store.migrate("yielded_runs", MIGRATIONS)
        self.store = store
        self.calls = CallRecords(store)

    def create(
        self,
        handle: str,
        caller: str | None,
        worker: str,
        stdout: str,
        stderr: str,
        run_key: str | None = None,
        resume: str | None = None,
    ) -> None:
        """A call yields: what it wrote so far is delivered (the offsets say so)."""
        now = time.time()
        self.store.execute(
            "INSERT INTO yielded_runs (handle, caller, worker, stdout, stderr, sent_out, sent_err, beat, created_at,"
            " run_key, resume) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (handle, caller, worker, stdout, stderr, len(stdout), len(stderr), now, now, run_key, resume),
        )

    def claim(self, row: YieldedRow, worker: str) -> bool:
        """Take over a run whose owner went silent (as `row` showed it): True for exactly one worker."""
        done = self.store.execute(
            "UPDATE yielded_runs SET worker = ?, beat = ? WHERE handle = ? AND worker = ? AND beat = ?"
            " AND result IS NULL AND resume IS NOT NULL",
            (worker, time.time(), row.handle, row.worker, row.beat),
        )
        return bool(done.rowcount)

    def write(self, handle: str, worker: str, stdout: str, stderr: str, result: dict[str, Any] | None) -> bool:
        """The owner records the output so far (and the result, once the call ended); False when
        it owns the run no more (taken over by another worker, or collected as stopped)."""
        with self.store.transaction() as tx:
            done = tx.execute(
                "UPDATE yielded_runs SET stdout = ?, stderr = ?, result = ?, beat = ? WHERE handle = ? AND worker = ?",
                (stdout, stderr, dumped(result), time.time(), handle, worker),
            )
            self.store.notify(YIELD_CHANNEL, handle)
        return bool(done.rowcount)

    def hand_over(self, handle: str, worker: str, beat: float) -> bool:
        """The owner stops before the run ended: its heartbeat is set to `beat` (already stale), so
        the next collector takes it over at once; False when it owns the run no more."""
        with self.store.transaction() as tx:
            done = tx.execute(
                "UPDATE yielded_runs SET beat = ? WHERE handle = ? AND worker = ? AND result IS NULL",
                (beat, handle, worker),
            )
            self.store.notify(YIELD_CHANNEL, handle)
        return bool(done.rowcount)

    def forget(self, handle: str, run_key: str) -> None:
        """The run cannot be resumed any more (its records passed their bound): its resume data and
        records go, so a collector finds it stopped instead of running it again."""
        with self.store.transaction() as tx:
            tx.execute("UPDATE yielded_runs SET resume = NULL WHERE handle = ? AND run_key = ?", (handle, run_key))
            tx.execute("DELETE FROM run_calls WHERE run_key = ?", (run_key,))

    def get(self, handle: str) -> YieldedRow | None:
        rows = self.store.query("SELECT * FROM yielded_runs WHERE handle = ?", (handle,))
        if not rows:
            return None
        r = rows[0]
        return YieldedRow(
            r["handle"], r["caller"], r["stdout"], r["stderr"], int(r["sent_out"]), int(r["sent_err"]),
            loaded(r["result"]), float(r["beat"]), r["worker"], r["run_key"], r["resume"],
        )  # fmt: skip

    def delivered(self, row: YieldedRow, stdout: int, stderr: int) -> bool:
        """Move the delivered offsets on from what `row` showed; False when another call did first."""
        done = self.store.execute(
            "UPDATE yielded_runs SET sent_out = ?, sent_err = ? WHERE handle = ? AND sent_out = ? AND sent_err = ?",
            (stdout, stderr, row.handle, row.sent_out, row.sent_err),
        )
        return bool(done.rowcount)

    def finish(self, row: YieldedRow) -> bool:
        """Take the ended run's rest: the row goes; False when another call took it first."""
        with self.store.transaction() as tx:
            done = tx.execute(
                "DELETE FROM yielded_runs WHERE handle = ? AND sent_out = ? AND sent_err = ?",
                (row.handle, row.sent_out, row.sent_err),
            )
            if done.rowcount and row.run_key is not None:
                tx.execute("DELETE FROM run_calls WHERE run_key = ?", (row.run_key,))
        return bool(done.rowcount)


__all__ = ["MIGRATIONS", "YIELD_CHANNEL", "YieldRows", "YieldedRow"]
