"""Claims: which process runs a trigger's slot, so many processes on one store act as one.

A run is claimed before it starts with one `INSERT … ON CONFLICT` on `(trigger, kind, slot)`;
the process whose statement inserted the row runs it, every other one sees no row inserted and
does not. Both engines decide that race inside the database, for every process sharing it.

- A schedule's slot is the instant the schedule names (`2026-12-01T12:05:00Z`, in UTC so every
  process spells it the same), never the moment a process looked.
- A webhook's slot is its `Idempotency-Key`. A key expires `KEY_TTL` after its claim: the next
  request with it claims the row again and runs.

The row keeps who claimed it and when, and the outcome once the run ends: `toolshell triggers
history` lists them. A claim is never run again (a slot runs at most once). A process that claims
as a registered worker (`store.workers`; `toolshell triggers serve` is one) names itself on the
row: once that worker has missed `MISSED_BEATS` heartbeats (or left the registry) with the run
unfinished, the claim is ended as lost (`LOST_EXIT`, `ended_by` "worker_lost"), the first time
anyone reads it. Its Idempotency-Key then answers with that outcome, not "still going". Rows older
than `HISTORY` are deleted as newer ones are claimed.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from toolshell.errors import ErrorCode, ToolshellError, error_line
from toolshell.store.protocol import StateStore, rows_as_dicts
from toolshell.store.workers import Workers

KEY_TTL = timedelta(hours=24)
"""How long an Idempotency-Key stays used."""
HISTORY = timedelta(days=30)
"""How long finished claims stay listed."""

Kind = Literal["schedule", "webhook"]

MIGRATIONS = [
    """
    CREATE TABLE IF NOT EXISTS trigger_claims (
        trigger_name TEXT NOT NULL,
        kind TEXT NOT NULL,
        slot TEXT NOT NULL,
        claimed_by TEXT NOT NULL,
        claimed_at DOUBLE PRECISION NOT NULL,
        request_hash TEXT NOT NULL DEFAULT '',
        finished_at DOUBLE PRECISION,
        exit_code BIGINT,
        outcome TEXT,
        PRIMARY KEY (trigger_name, kind, slot)
    );
    CREATE INDEX IF NOT EXISTS trigger_claims_by_time ON trigger_claims (claimed_at)
    """,
    """
    ALTER TABLE trigger_claims ADD COLUMN worker TEXT;
    ALTER TABLE trigger_claims ADD COLUMN ended_by TEXT
    """,
]
LOST_EXIT = 137
"""The exit code of a run whose process died under it (as a shell reports SIGKILL)."""
LOST_MESSAGE = (
    "the process running this trigger stopped (it missed its heartbeats) before the run ended;"
    " what the script did before that stays done, and it is not run again; send a new Idempotency-Key to run it"
)


@dataclass(frozen=True)
class Claim:
    """A claim another request (or process) made first."""

    claimed_by: str
    claimed_at: float
    request_hash: str
    outcome: dict[str, Any] | None
    """The run's outcome as recorded (`exit_code`, `stdout`, `stderr`, `tools`); None while it runs."""


def slot_text(slot: datetime) -> str:
    """A schedule slot as the same text in every process: the instant in UTC, to the second."""
    return slot.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def request_hash(input: dict[str, Any] | None) -> str:
    """A digest of a webhook's input, to tell a repeat of a request from another one reusing its key."""
    text = json.dumps(input or {}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def lost_outcome() -> dict[str, Any]:
    """The outcome recorded for a run whose process died under it."""
    error = ToolshellError(ErrorCode.UNAVAILABLE, LOST_MESSAGE)
    return {"exit_code": LOST_EXIT, "stdout": "", "stderr": error_line(error), "tools": None, "lost": True}


class TriggerClaims:
    """The claims on one store.

    Args:
        store: the store shared by the processes that claim.
        owner: names this process in the rows it claims (host:pid unless given).
        workers: the worker registry; with it, a claim whose worker stopped beating is ended as lost.
        worker: this process's id in `workers`, written on its claims (None: its claims are never
            judged lost, as nothing beats for them).
    """

    def __init__(
        self, store: StateStore, owner: str | None = None, *, workers: Workers | None = None, worker: str | None = None
    ) -> None:
        store.migrate("trigger_claims", MIGRATIONS)
        self.store = store
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self.workers = workers
        self.worker = worker

    def claim_slot(self, trigger: str, slot: datetime) -> bool:
        """Claim a schedule's slot; True only in the one process whose claim inserted the row."""
        now = time.time()
        done = self.store.execute(
            "INSERT INTO trigger_claims (trigger_name, kind, slot, claimed_by, claimed_at, worker)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (trigger_name, kind, slot) DO NOTHING",
            (trigger, "schedule", slot_text(slot), self.owner, now, self.worker),
        )
        if done.rowcount == 1:
            self._prune(trigger, now)
        return done.rowcount == 1

    def claim_key(self, trigger: str, key: str, digest: str) -> Claim | None:
        """Claim a webhook's Idempotency-Key: None when this request got it (run it), else the
        claim that holds it. A key claimed more than `KEY_TTL` ago is taken over, in the same
        statement, so two requests reusing an expired key still run once. A held claim whose
        worker stopped is ended as lost first, so its outcome is that."""
        now = time.time()
        with self.store.transaction() as tx:
            done = tx.execute(
                "INSERT INTO trigger_claims (trigger_name, kind, slot, claimed_by, claimed_at, request_hash, worker)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (trigger_name, kind, slot) DO UPDATE SET"
                " claimed_by = excluded.claimed_by, claimed_at = excluded.claimed_at,"
                " request_hash = excluded.request_hash, worker = excluded.worker,"
                " finished_at = NULL, exit_code = NULL, outcome = NULL, ended_by = NULL"
                " WHERE trigger_claims.claimed_at < ?",
                (trigger, "webhook", key, self.owner, now, digest, self.worker, now - KEY_TTL.total_seconds()),
            )
            if done.rowcount == 1:
                self._prune(trigger, now)
                return None
        self.end_lost(" AND trigger_name = ? AND kind = ? AND slot = ?", (trigger, "webhook", key))
        (row,) = self.store.query(
            "SELECT claimed_by, claimed_at, request_hash, outcome FROM trigger_claims"
            " WHERE trigger_name = ? AND kind = ? AND slot = ?",
            (trigger, "webhook", key),
        )
        outcome = json.loads(row["outcome"]) if row["outcome"] is not None else None
        return Claim(row["claimed_by"], row["claimed_at"], row["request_hash"], outcome)

    def finish(self, trigger: str, kind: Kind, slot: str, outcome: dict[str, Any]) -> None:
        """Record the outcome of a claimed run (`slot` as claimed: `slot_text(…)` or the key). A claim
        already ended as lost keeps that outcome: it may have been answered already."""
        self.store.execute(
            "UPDATE trigger_claims SET finished_at = ?, exit_code = ?, outcome = ?"
            " WHERE trigger_name = ? AND kind = ? AND slot = ? AND claimed_by = ? AND finished_at IS NULL",
            (time.time(), outcome["exit_code"], json.dumps(outcome, ensure_ascii=False))
            + (trigger, kind, slot, self.owner),
        )

    def end_lost(self, where: str = "", params: tuple[Any, ...] = ()) -> int:
        """End as lost the unfinished claims (those matching `where` too) whose worker missed
        `MISSED_BEATS` beats or left the registry; how many. Without `workers`, none."""
        if self.workers is None:
            return 0
        cutoff = self.workers.cutoff()
        outcome = lost_outcome()
        done = self.store.execute(
            "UPDATE trigger_claims SET finished_at = ?, exit_code = ?, outcome = ?, ended_by = 'worker_lost'"
            " WHERE finished_at IS NULL AND worker IS NOT NULL"
            f" AND worker NOT IN (SELECT id FROM workers WHERE heartbeat_at > ?){where}",
            (time.time(), LOST_EXIT, json.dumps(outcome, ensure_ascii=False), cutoff, *params),
        )
        return done.rowcount

    def history(self, trigger: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The latest claims, newest first: trigger, kind, slot, who claimed it, when, and how it
        ended (`ended_by` "worker_lost" for a run its process died under)."""
        self.end_lost()
        where, params = ("WHERE trigger_name = ?", [trigger]) if trigger else ("", [])
        rows = self.store.query(
            "SELECT trigger_name, kind, slot, claimed_by, claimed_at, finished_at, exit_code, ended_by"
            " FROM trigger_claims "
            f"{where} ORDER BY claimed_at DESC, slot DESC LIMIT ?",
            (*params, limit),
        )
        return list(rows_as_dicts(rows))

    def _prune(self, trigger: str, now: float) -> None:
        self.store.execute(
            "DELETE FROM trigger_claims WHERE trigger_name = ? AND claimed_at < ?",
            (trigger, now - HISTORY.total_seconds()),
        )
