"""The rows of MCP tasks (`io.modelcontextprotocol/tasks`): what any worker answers `tasks/get` from.

A task is one `bash` call that outlives its request (`frontends.serve.tasks`). Its row is written
by the worker that runs it (the owner) and read by every worker:

- `tasks`: the status, what the script asks (`input_requests`, JSON), the final `CallToolResult`
  or JSON-RPC error, whether a cancel was asked for, and the owner's heartbeat. A task id is a
  bearer capability, so only its SHA-256 is kept: reading the store does not hand out task ids.
- `task_answers`: the answers `tasks/update` brings, one row per (task, key): the first answer to
  a key wins, a repeat is ignored, and the owner marks each one taken.

Statuses are the extension's: `working`, `input_required`, `completed`, `failed`, `cancelled`.

A yielded `bash` call (yield-and-wait, for clients without Tasks) has a row of its own
(`store.yields`).

A task whose owner died can be taken over: `resume` holds (sealed) what running it again needs,
`claim` hands it to exactly one worker, and its nested calls' records are `store.replay`'s.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from toolshell.store.protocol import Row, StateStore
from toolshell.store.replay import CallRecords

MIGRATIONS = [
    """
    CREATE TABLE tasks (
        id_hash TEXT PRIMARY KEY,
        caller TEXT,
        worker TEXT NOT NULL,
        status TEXT NOT NULL,
        status_message TEXT,
        input_requests TEXT,
        result TEXT,
        error TEXT,
        cancel_requested BIGINT NOT NULL DEFAULT 0,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        beat DOUBLE PRECISION NOT NULL,
        keep_seconds DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX tasks_worker ON tasks (worker, status);
    CREATE TABLE task_answers (
        id_hash TEXT NOT NULL,
        answer_key TEXT NOT NULL,
        response TEXT NOT NULL,
        taken BIGINT NOT NULL DEFAULT 0,
        added_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (id_hash, answer_key)
    );
    """,
    # What a worker needs to run the task again by replay (sealed: `store.replay`), and how many
    # times it was taken over.
    """
    ALTER TABLE tasks ADD COLUMN resume TEXT;
    ALTER TABLE tasks ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0;
    """,
]

CHANNEL = "tasks"
"""The store channel a task's change is announced on (the payload is its id's hash)."""
TERMINAL = ("completed", "failed", "cancelled")
OPEN = ("working", "input_required")
PARKED = ""
"""The owner of a parked task: no worker runs it; an answer resumes it by replay on the worker that takes it."""


def id_hash(task_id: str) -> str:
    """The key a task's row is kept under: its id's SHA-256 (the id itself is never stored)."""
    return hashlib.sha256(task_id.encode()).hexdigest()


@dataclass(frozen=True)
class TaskRow:
    """One task as the store holds it."""

    id_hash: str
    caller: str | None
    worker: str
    status: str
    status_message: str | None
    input_requests: dict[str, Any] | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    cancel_requested: bool
    created_at: float
    updated_at: float
    finished_at: float | None
    beat: float
    keep_seconds: float
    resume: str | None = None
    """What running it again takes, sealed (`store.replay.seal_resume`); None: it cannot be resumed."""
    attempt: int = 0
    """How many times another worker took it over."""

    @classmethod
    def of(cls, row: Row) -> TaskRow:
        return cls(
            row["id_hash"],
            row["caller"],
            row["worker"],
            row["status"],
            row["status_message"],
            loaded(row["input_requests"]),
            loaded(row["result"]),
            loaded(row["error"]),
            bool(row["cancel_requested"]),
            float(row["created_at"]),
            float(row["updated_at"]),
            None if row["finished_at"] is None else float(row["finished_at"]),
            float(row["beat"]),
            float(row["keep_seconds"]),
            row["resume"],
            int(row["attempt"]),
        )

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    @property
    def parked(self) -> bool:
        return self.worker == PARKED and not self.finished

    def expired(self, now: float) -> bool:
        """Past its keeping: a finished task `keep_seconds` after it finished."""
        return self.finished_at is not None and now > self.finished_at + self.keep_seconds


class TaskRows:
    """The task tables of one `StateStore`."""

    def __init__(self, store: StateStore) -> None:
        store.migrate("tasks", MIGRATIONS)
        self.store = store
        self.calls = CallRecords(store)

    def create(
        self, key: str, caller: str | None, worker: str, keep_seconds: float, resume: str | None = None, **state: Any
    ) -> None:
        """Commit a new task's row (status and its payload in `state`); committed on return."""
        now = time.time()
        with self.store.transaction() as tx:
            tx.execute(
                "INSERT INTO tasks (id_hash, caller, worker, status, status_message, input_requests, result,"
                " error, created_at, updated_at, finished_at, beat, keep_seconds, resume)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    caller,
                    worker,
                    *_state_values(state),
                    now,
                    now,
                    _finished(state, now),
                    now,
                    keep_seconds,
                    resume,
                ),
            )
            self.store.notify(CHANNEL, key)

    def get(self, key: str) -> TaskRow | None:
        rows = self.store.query("SELECT * FROM tasks WHERE id_hash = ?", (key,))
        return TaskRow.of(rows[0]) if rows else None

    def set_state(self, key: str, worker: str | None = None, **state: Any) -> bool:
        """Move an open task to a new status (with its payload); False when it had finished already
        (or, given its owner `worker`, when another worker took it over)."""
        now = time.time()
        owned = "" if worker is None else " AND worker = ?"
        with self.store.transaction() as tx:
            done = tx.execute(
                "UPDATE tasks SET status = ?, status_message = ?, input_requests = ?, result = ?, error = ?,"
                " updated_at = ?, finished_at = ?, beat = ? WHERE id_hash = ? AND status IN (?, ?)" + owned,
                (
                    *_state_values(state),
                    now,
                    _finished(state, now),
                    now,
                    key,
                    *OPEN,
                    *([] if worker is None else [worker]),
                ),
            )
            if done.rowcount:
                self.store.notify(CHANNEL, key)
        return bool(done.rowcount)

    def answer(self, key: str, responses: dict[str, Any]) -> int:
        """Record answers to the task's outstanding questions; a key answered before, or not asked
        now, is ignored. Returns how many were new."""
        row = self.get(key)
        asked = set((row.input_requests or {}) if row is not None and not row.finished else ())
        fresh = [(k, v) for k, v in responses.items() if k in asked]
        added = 0
        with self.store.transaction() as tx:
            for answer_key, response in fresh:
                done = tx.execute(
                    "INSERT INTO task_answers (id_hash, answer_key, response, added_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (id_hash, answer_key) DO NOTHING",
                    (key, answer_key, json.dumps(response), time.time()),
                )
                added += done.rowcount
            if added:
                self.store.notify(CHANNEL, key)
        return added

    def take_answers(self, key: str) -> dict[str, Any]:
        """The answers not handed to the run yet, marked taken."""
        rows = self.store.query("SELECT answer_key, response FROM task_answers WHERE id_hash = ? AND taken = 0", (key,))
        if rows:
            self.store.executemany(
                "UPDATE task_answers SET taken = 1 WHERE id_hash = ? AND answer_key = ?",
                [(key, r["answer_key"]) for r in rows],
            )
        return {r["answer_key"]: json.loads(r["response"]) for r in rows}

    def claim(self, key: str, worker: str, stale_before: float) -> bool:
        """Take over a resumable open task whose owner's beat is older than `stale_before`: True for
        exactly one of the workers that try at once. Its open question goes (the run asks again), and
        so do the answers to the old run's questions."""
        now = time.time()
        with self.store.transaction() as tx:
            done = tx.execute(
                "UPDATE tasks SET worker = ?, beat = ?, updated_at = ?, attempt = attempt + 1, status = 'working',"
                " status_message = NULL, input_requests = NULL WHERE id_hash = ? AND beat < ? AND status IN (?, ?)"
                " AND resume IS NOT NULL AND worker <> ?",
                (worker, now, now, key, stale_before, *OPEN, PARKED),
            )
            if done.rowcount:
                tx.execute("DELETE FROM task_answers WHERE id_hash = ?", (key,))
                self.store.notify(CHANNEL, key)
        return bool(done.rowcount)

    def park(self, key: str, worker: str) -> bool:
        """The owner stops a task waiting for a person and hands it to the store (its question stays);
        not one with an answer or a cancel the owner has not taken yet (they came while it decided:
        the sender saw it running, so only the owner acts on them)."""
        with self.store.transaction() as tx:
            done = tx.execute(
                "UPDATE tasks SET worker = ?, updated_at = ? WHERE id_hash = ? AND worker = ? AND status = ?"
                " AND resume IS NOT NULL AND cancel_requested = 0 AND NOT EXISTS (SELECT 1 FROM task_answers"
                " WHERE task_answers.id_hash = tasks.id_hash AND task_answers.taken = 0)",
                (PARKED, time.time(), key, worker, "input_required"),
            )
        return bool(done.rowcount)

    def hand_over(self, key: str, worker: str, stale_beat: float) -> bool:
        """The owner stops: a task waiting for a person is parked, any other left to be taken over
        at once (its heartbeat set to `stale_beat`, already silent). False when it cannot be resumed
        or is not the owner's."""
        with self.store.transaction() as tx:
            done = tx.execute(
                "UPDATE tasks SET worker = CASE WHEN status = ? THEN ? ELSE worker END,"
                " beat = CASE WHEN status = ? THEN beat ELSE ? END, updated_at = ?"
                " WHERE id_hash = ? AND worker = ? AND status IN (?, ?) AND resume IS NOT NULL",
                ("input_required", PARKED, "input_required", stale_beat, time.time(), key, worker, *OPEN),
            )
        return bool(done.rowcount)

    def claim_parked(self, key: str, worker: str) -> bool:
        """Take a parked task to resume it (its question was answered): True for exactly one worker."""
        now = time.time()
        with self.store.transaction() as tx:
            done = tx.execute(
                "UPDATE tasks SET worker = ?, beat = ?, updated_at = ?, attempt = attempt + 1, status = 'working',"
                " status_message = NULL, input_requests = NULL WHERE id_hash = ? AND worker = ? AND status = ?",
                (worker, now, now, key, PARKED, "input_required"),
            )
            if done.rowcount:
                self.store.notify(CHANNEL, key)
        return bool(done.rowcount)

    def answered(self, key: str) -> bool:
        """Whether the task has answers not handed to a run yet."""
        return bool(self.store.query("SELECT 1 FROM task_answers WHERE id_hash = ? AND taken = 0", (key,)))

    def ask_cancel(self, key: str) -> None:
        with self.store.transaction() as tx:
            done = tx.execute(
                "UPDATE tasks SET cancel_requested = 1 WHERE id_hash = ? AND status IN (?, ?)", (key, *OPEN)
            )
            if done.rowcount:
                self.store.notify(CHANNEL, key)

    def beat(self, worker: str, keys: Collection[str]) -> None:
        """The owner is alive: renew the heartbeat of the open tasks it runs (`keys`), and only
        those: a task claimed here whose run never started goes silent, and is taken over."""
        now = time.time()
        self.store.executemany(
            "UPDATE tasks SET beat = ? WHERE id_hash = ? AND worker = ? AND status IN (?, ?)",
            [(now, key, worker, *OPEN) for key in keys],
        )

    def sweep(self, now: float, stale_after: float, yields_keep: float | None = None) -> None:
        """Remove finished tasks past their keeping, and open ones whose owner went silent that long;
        given `yields_keep` (the `yielded_runs` table exists), yielded calls whose owner went silent
        that long too (collected or not), with their records."""
        with self.store.transaction() as tx:
            if yields_keep is not None:
                tx.execute("DELETE FROM yielded_runs WHERE beat + ? + ? < ?", (yields_keep, stale_after, now))
                tx.execute(
                    "DELETE FROM run_calls WHERE run_key LIKE 'yield:%' AND run_key NOT IN"
                    " (SELECT run_key FROM yielded_runs WHERE run_key IS NOT NULL)"
                )
            tx.execute("DELETE FROM tasks WHERE finished_at IS NOT NULL AND finished_at + keep_seconds < ?", (now,))
            tx.execute(
                "DELETE FROM tasks WHERE finished_at IS NULL AND beat + keep_seconds + ? < ?", (stale_after, now)
            )
            tx.execute("DELETE FROM task_answers WHERE id_hash NOT IN (SELECT id_hash FROM tasks)")
            tx.execute(  # a yielded call's records go with its row (`store.yields`)
                "DELETE FROM run_calls WHERE run_key NOT LIKE 'yield:%' AND run_key NOT IN (SELECT id_hash FROM tasks)"
            )

    def forget(self, key: str) -> None:
        """The task cannot be resumed any more (its records passed their bound): its resume data
        and records go, so a worker that takes it over fails it instead."""
        with self.store.transaction() as tx:
            tx.execute("UPDATE tasks SET resume = NULL WHERE id_hash = ?", (key,))
            tx.execute("DELETE FROM run_calls WHERE run_key = ?", (key,))

    def delete(self, key: str) -> None:
        with self.store.transaction() as tx:
            tx.execute("DELETE FROM tasks WHERE id_hash = ?", (key,))
            tx.execute("DELETE FROM task_answers WHERE id_hash = ?", (key,))
            tx.execute("DELETE FROM run_calls WHERE run_key = ?", (key,))


def _state_values(state: dict[str, Any]) -> tuple[Any, ...]:
    return (
        state["status"],
        state.get("status_message"),
        dumped(state.get("input_requests")),
        dumped(state.get("result")),
        dumped(state.get("error")),
    )


def _finished(state: dict[str, Any], now: float) -> float | None:
    return now if state["status"] in TERMINAL else None


def dumped(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def loaded(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:  # a row another version wrote: nothing rather than a crash
        return None


__all__ = [
    "CHANNEL",
    "MIGRATIONS",
    "OPEN",
    "PARKED",
    "TERMINAL",
    "TaskRow",
    "TaskRows",
    "dumped",
    "id_hash",
    "loaded",
]
