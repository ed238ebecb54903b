"""Where timeline events go: a list for tests and embedding, SQLite for `toolshell timeline`.

Both sinks give the same grouped rows (a shell call with its nested calls in order), so
`timeline.render` shows either.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from operator import attrgetter
from typing import Any, Protocol, TypeVar

from toolshell.store.protocol import StateStore, Transaction
from toolshell.timeline.events import Event, NestedCall, ShellCall
from toolshell.timeline.held import Held, current

SCHEMA = """
CREATE TABLE IF NOT EXISTS shell_calls (
    seq {serial},
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    script_preview TEXT NOT NULL,
    exit_code INTEGER,
    started_at DOUBLE PRECISION NOT NULL,
    duration_ms DOUBLE PRECISION,
    source TEXT NOT NULL,
    caller TEXT,
    address TEXT,
    worker TEXT,
    ended_by TEXT
);
CREATE INDEX IF NOT EXISTS shell_calls_session ON shell_calls (session_id, started_at);
CREATE TABLE IF NOT EXISTS nested_calls (
    seq {serial},
    id TEXT NOT NULL UNIQUE,
    shell_call_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    command TEXT NOT NULL,
    input_preview TEXT NOT NULL,
    outcome TEXT NOT NULL,
    error_code TEXT,
    duration_ms DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS nested_calls_shell ON nested_calls (shell_call_id, started_at);
"""
STEPS = [
    SCHEMA,
    # No query reads by `seq` (it breaks ties in the order): the id is the key, and each row
    # writes one index entry fewer (PostgreSQL; SQLite's `seq` is its rowid, which costs none).
    """
    {key_on shell_calls id};
    {key_on nested_calls id};
    """,
]
"""The timeline's migration steps (`StateStore.migrate("timeline", STEPS)`)."""

_SHELL_COLUMNS = (
    "id", "session_id", "script_preview", "exit_code", "started_at", "duration_ms", "source", "caller", "address",
    "worker", "ended_by",
)  # fmt: skip
_NESTED_COLUMNS = (
    "id", "shell_call_id", "session_id", "command", "input_preview", "outcome", "error_code", "duration_ms",
    "started_at",
)  # fmt: skip

logger = logging.getLogger(__name__)
_E = TypeVar("_E", ShellCall, NestedCall)


class EventSink(Protocol):
    """Receives timeline events. `emit` must be cheap and must not raise for a well-formed event."""

    def emit(self, event: Event) -> None: ...


class ObservedSink:
    """Passes each event on to `sink`, and shows it to `observe` (one shell call's progress)."""

    def __init__(self, sink: EventSink, observe: Callable[[Event], None]) -> None:
        self.sink, self.observe = sink, observe

    def emit(self, event: Event) -> None:
        self.sink.emit(event)
        self.observe(event)

    def flush(self) -> None:
        flush = getattr(self.sink, "flush", None)
        if flush is not None:
            flush()


class MemorySink:
    """Keeps every event in `events`, in the order they were emitted."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def timeline(self, session_id: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The same grouped rows `query` returns, built from the events held here."""
        shells = _latest(e for e in self.events if isinstance(e, ShellCall))
        nested = _latest(e for e in self.events if isinstance(e, NestedCall))
        picked = [s for s in shells if session_id is None or s.session_id == session_id]
        # Newest first; among equal start times the one recorded later first, as `query` does.
        picked = [s for _, s in sorted(enumerate(picked), key=lambda p: (p[1].started_at, p[0]), reverse=True)]
        ordered = [n for _, n in sorted(enumerate(nested), key=lambda p: (p[1].started_at, p[0]))]
        return [
            _row(s.to_dict(), [n.to_dict() for n in ordered if n.shell_call_id == s.id])
            for s in picked[: max(limit, 0)]
        ]


def _latest(events: Iterable[_E]) -> list[_E]:
    """The latest copy of each event id, in the order the ids first appeared (like an upsert)."""
    by_id: dict[str, _E] = {}
    for event in events:
        by_id[event.id] = event
    return list(by_id.values())


FLUSH_SECONDS = 0.5
"""A finished nested call is in the store at most this long after it ended (one commit per batch,
so a worker killed mid-script leaves every call it had finished recorded)."""


class SqliteSink:
    """Writes events to the `shell_calls` and `nested_calls` tables of a `Store`.

    A commit per tool call would cost more than many tool calls themselves, so nested calls are
    written in batches: `FLUSH_SECONDS` after the first one of a batch ended (a timer on the running
    event loop, so the write happens on the loop's thread like every other; none outside a loop),
    when their shell call starts or ends, every `batch` events, and on `flush()`. A call that stopped for approval is
    written at once (the request on the page must have its row). A shell call's own row is written
    at once, so a run that dies still shows up.

    Inside a call that holds its rows (`timeline.held`: a `bash` call through `serve`) they wait
    for that call's commit instead, written with its shell's state; a timer writes what waited
    `flush_seconds` (off the event loop), and approval stops and `flush()` write at once.
    """

    def __init__(self, store: StateStore, batch: int = 64, flush_seconds: float = FLUSH_SECONDS) -> None:
        _ensure(store)
        self._store = store
        self._batch = batch
        self._flush_seconds = flush_seconds
        self._pending: list[tuple[Any, ...]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._unwritten = Held()
        """Rows of calls whose commit and own write both failed: tried again with the next."""
        self.timed: Callable[[float, str], None] | None = None
        """Told how long each batch's write took (seconds, "timeline.write"): the host's metrics."""

    def emit(self, event: Event) -> None:
        held = current()
        if held is not None:
            self._hold(held, event)
            return
        if isinstance(event, ShellCall):
            self.flush()
            self._store.executemany(_SHELL_UPSERT, [_shell_values(event)])
            return
        self._pending.append(_nested_values(event))
        if len(self._pending) >= self._batch or event.outcome == "stopped_for_approval":
            self.flush()
        elif self._timer is None:
            self._schedule()

    def _schedule(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # emitted outside an event loop (a test, a sync embedder): batches only
            return
        self._timer = loop.call_later(self._flush_seconds, self._timed_flush)

    def _timed_flush(self) -> None:
        self._timer = None
        rows = self._pending
        try:
            self.flush()
        except Exception:  # a timer has no caller: the rows stay pending for the next flush
            self._pending = rows + self._pending
            logger.warning("the timeline could not be written yet; it is tried again", exc_info=True)

    def _hold(self, held: Held, event: Event) -> None:
        held.writer = self.write_held
        if isinstance(event, ShellCall):
            held.add_shell(event.id, _shell_values(event))
        else:
            held.add_nested(_nested_values(event))
            if event.outcome == "stopped_for_approval":  # the request on the page must have its row
                self._write_soon(held)
                return
        if held.timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # outside a loop: written with the call's commit
                return
            held.timer = loop.call_later(self._flush_seconds, self._write_soon, held)

    def _write_soon(self, held: Held) -> None:
        """Write what `held` holds now, in a thread (the event loop never waits on the store)."""
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write_logged(held)
            return
        loop.run_in_executor(None, self._write_logged, held)

    def _write_logged(self, held: Held) -> None:
        try:
            self.write_held(held)
        except Exception:  # no caller to tell: the rows stay held for the call's commit
            logger.warning("the timeline could not be written yet; it is tried again", exc_info=True)

    @contextmanager
    def committing(self, held: Held) -> Iterator[Callable[[Transaction], None] | None]:
        """The rows `held` holds as a writer for a transaction (None: none); held again if the block
        fails. Blocking: call it off the event loop."""
        with held.writing:
            late_shells, late_nested = self._unwritten.take()  # a call's before it, if its write failed
            shells, nested = held.take()
            if not (shells or nested or late_shells or late_nested):
                yield None
                return
            started = time.perf_counter()
            new_shells, again_shells = _split(shells, held.tried)
            new_nested, again_nested = _split(nested, held.tried)
            held.tried.update(row[0] for row in shells + nested)

            def write(tx: Transaction) -> None:
                # A row no write has taken yet is not in the store: a plain insert, which writes
                # less than an upsert (PostgreSQL's speculative insertion logs a confirmation too).
                for sql, rows in (
                    (_SHELL_INSERT, new_shells),
                    (_SHELL_UPSERT, late_shells + again_shells),
                    (_NESTED_INSERT, new_nested),
                    (_NESTED_UPSERT, late_nested + again_nested),
                ):
                    if rows:
                        tx.executemany(sql, rows)

            try:
                yield write
            except BaseException:
                held.put_back(shells, nested)
                self._unwritten.put_back(late_shells, late_nested)
                raise
            if self.timed is not None:
                self.timed(time.perf_counter() - started, "timeline.write")

    @property
    def store(self) -> StateStore:  # a call's commit takes its rows only on this store
        return self._store

    def keep(self, held: Held) -> None:
        """Rows a call could not write (the store is down): they go with the next commit or `flush()`."""
        shells, nested = held.take()
        self._unwritten.put_back(shells, nested)

    def release(self, held: Held) -> None:
        """The call ends: no timed write of its rows any more (on the event loop)."""
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None

    def write_held(self, held: Held) -> None:
        """Write what `held` still holds in a transaction of its own (blocking: off the loop)."""
        with self.committing(held) as write:
            if write is not None:
                with self._store.transaction() as tx:
                    write(tx)

    def flush(self) -> None:
        """Write the nested calls not written yet in one transaction (a call's held rows: in a thread)."""
        held = current()
        if held is not None:
            self._write_soon(held)
        if not self._unwritten.empty:
            self.write_held(self._unwritten)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        started = time.perf_counter()
        self._store.executemany(_NESTED_UPSERT, rows)
        if self.timed is not None:
            self.timed(time.perf_counter() - started, "timeline.write")


def _ensure(store: StateStore) -> None:
    store.migrate("timeline", STEPS)
    for column in ("caller", "address", "worker", "ended_by"):  # a state made before these were recorded
        store.ensure_column("shell_calls", column, "TEXT")


def _insert_sql(table: str, columns: Sequence[str]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def _upsert_sql(table: str, columns: Sequence[str]) -> str:
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != "id")
    return f"{_insert_sql(table, columns)} ON CONFLICT (id) DO UPDATE SET {updates}"


def _split(rows: list[tuple[Any, ...]], tried: set[str]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows to insert (no write has taken their id: not in the store) and those to upsert."""
    ids = Counter(row[0] for row in rows)
    new = [row for row in rows if row[0] not in tried and ids[row[0]] == 1]
    if len(new) == len(rows):
        return new, []
    return new, [row for row in rows if row[0] in tried or ids[row[0]] > 1]


# A row per call, its columns read in one C call: no dict of the event on the way.
_shell_values: Callable[[Any], tuple[Any, ...]] = attrgetter(*_SHELL_COLUMNS)
_nested_values: Callable[[Any], tuple[Any, ...]] = attrgetter(*_NESTED_COLUMNS)


_SHELL_UPSERT = _upsert_sql("shell_calls", _SHELL_COLUMNS)
_NESTED_UPSERT = _upsert_sql("nested_calls", _NESTED_COLUMNS)
_SHELL_INSERT = _insert_sql("shell_calls", _SHELL_COLUMNS)
_NESTED_INSERT = _insert_sql("nested_calls", _NESTED_COLUMNS)


LOST_EXIT = 137
"""The exit code of a shell call whose worker died mid-call (as a shell reports SIGKILL)."""


def mark_lost(store: StateStore, workers: Sequence[str]) -> int:
    """End the shell calls the dead `workers` left running: exit 137, `ended_by` "worker_lost"."""
    if not workers:
        return 0
    _ensure(store)
    marks = ", ".join("?" * len(workers))
    done = store.execute(
        "UPDATE shell_calls SET exit_code = ?, ended_by = 'worker_lost' "
        f"WHERE exit_code IS NULL AND worker IN ({marks})",
        (LOST_EXIT, *workers),
    )
    return done.rowcount


LOST = "lost"
"""The `outcome` filter for shell calls whose worker died under them."""


def query(
    store: StateStore,
    session_id: str | None = None,
    limit: int = 50,
    *,
    outcome: str | None = None,
    server: str | None = None,
) -> list[dict[str, Any]]:
    """The latest shell calls, newest first, each with its nested calls in the order they ran.

    Args:
        store: The store a `SqliteSink` wrote to.
        session_id: Only this session's shell calls; all sessions when None.
        limit: At most this many shell calls.
        outcome: Only shell calls with a nested call of this outcome (`completed`, `failed`,
            `refused`, `stopped_for_approval`), or `lost` for those whose worker died.
        server: Only shell calls with a nested call of this server's tools.
    """
    _ensure(store)
    where, params = _filters(session_id, outcome, server)
    shells = store.query(
        f"SELECT {', '.join(_SHELL_COLUMNS)} FROM shell_calls {where} ORDER BY started_at DESC, seq DESC LIMIT ?",
        [*params, max(limit, 0)],
    )
    if not shells:
        return []
    ids = [s["id"] for s in shells]
    nested = store.query(
        f"SELECT {', '.join(_NESTED_COLUMNS)} FROM nested_calls WHERE shell_call_id IN ({', '.join('?' * len(ids))}) "
        "ORDER BY started_at, seq",
        ids,
    )
    by_shell: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
    for n in nested:
        by_shell[n["shell_call_id"]].append({**dict(n), "type": "tool.nested_call"})
    return [_row({**dict(s), "type": "shell.call"}, by_shell[s["id"]]) for s in shells]


def session_workers(store: StateStore, session_ids: Sequence[str]) -> dict[str, str | None]:
    """The worker that ran each session's newest shell call (what a pending request's card names)."""
    if not session_ids:
        return {}
    _ensure(store)
    marks = ", ".join("?" * len(session_ids))
    rows = store.query(
        f"SELECT session_id, worker FROM shell_calls WHERE session_id IN ({marks}) ORDER BY started_at, seq",
        list(session_ids),
    )
    return {str(r["session_id"]): r["worker"] for r in rows}  # the newest comes last and wins


def _filters(session_id: str | None, outcome: str | None, server: str | None) -> tuple[str, list[Any]]:
    """The WHERE clause of `query` and its parameters (values are always parameters, never SQL)."""
    clauses: list[str] = []
    params: list[Any] = []
    if session_id is not None:
        clauses.append("session_id = ?")
        params.append(session_id)
    if outcome == LOST:
        clauses.append("ended_by = 'worker_lost'")
    nested: list[str] = []
    if outcome is not None and outcome != LOST:
        nested.append("n.outcome = ?")
        params.append(outcome)
    if server is not None:
        nested.append("n.command LIKE ? ESCAPE '\\'")
        params.append("tools " + server.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + " %")
    if nested:
        clauses.append(
            "EXISTS (SELECT 1 FROM nested_calls n WHERE n.shell_call_id = shell_calls.id AND "
            + " AND ".join(nested)
            + ")"
        )
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


def _row(shell: dict[str, Any], calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {**shell, "calls": calls}
