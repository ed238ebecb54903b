"""The SSE events of `toolshell serve --http` in the state database (`EventLog`, see
`toolshell.frontends.serve.event_store`), for processes that share one state directory.

Bounded like the in-memory log: past `max_events` rows or `max_bytes` of message JSON the oldest
rows go. Event ids are the table's row ids, unique across the processes that share the file.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server.streamable_http import EventId

from toolshell.store.protocol import StateStore

MAX_EVENTS = 10_000
"""Events kept by default; the oldest are dropped past this (a resume from them replays nothing)."""
MAX_BYTES = 32 * 1024 * 1024
"""Bytes of message JSON kept by default, the other bound."""


@dataclass(frozen=True)
class StoredEvent:
    event_id: EventId
    stream: str
    body: str | None
    """The message as JSON, or None for the transport's priming event (an id with no data)."""


SCHEMA = """
CREATE TABLE IF NOT EXISTS serve_events (
    seq {serial},
    stream TEXT NOT NULL,
    body TEXT,
    size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS serve_events_stream ON serve_events (stream, seq);
"""


class StateEventStore:
    """An `EventLog` in a `StateStore` (SQLite or PostgreSQL: every worker reads the same events)."""

    def __init__(self, store: StateStore, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        if max_events < 1 or max_bytes < 1:
            raise ValueError("an event store needs room for at least one event and one byte")
        self.store = store
        self.max_events = max_events
        self.max_bytes = max_bytes
        store.migrate("serve_events", [SCHEMA])

    def append(self, stream: str, body: str | None) -> EventId:
        size = len(body.encode()) if body else 0
        seq = int(
            self.store.query(
                "INSERT INTO serve_events (stream, body, size) VALUES (?, ?, ?) RETURNING seq", (stream, body, size)
            )[0]["seq"]
        )
        self._trim(seq)
        return str(seq)

    def _trim(self, newest: int) -> None:
        """Keep the newest rows that fit both bounds (always at least the one just added)."""
        self.store.execute("DELETE FROM serve_events WHERE seq <= ?", (newest - self.max_events,))
        rows = self.store.query(
            "SELECT seq FROM (SELECT seq, SUM(size) OVER (ORDER BY seq DESC) AS total FROM serve_events) AS running "
            "WHERE total > ? AND seq < ? ORDER BY seq DESC LIMIT 1",
            (self.max_bytes, newest),
        )
        if rows:
            self.store.execute("DELETE FROM serve_events WHERE seq <= ?", (rows[0]["seq"],))

    def stream_of(self, event_id: EventId) -> str | None:
        rows = self.store.query("SELECT stream FROM serve_events WHERE seq = ?", (_seq(event_id),))
        return str(rows[0]["stream"]) if rows else None

    def after(self, event_id: EventId, stream: str) -> list[StoredEvent]:
        rows = self.store.query(
            "SELECT seq, body FROM serve_events WHERE stream = ? AND seq > ? ORDER BY seq", (stream, _seq(event_id))
        )
        return [StoredEvent(str(r["seq"]), stream, r["body"]) for r in rows]

    def __len__(self) -> int:
        return int(self.store.query("SELECT COUNT(*) AS n FROM serve_events")[0]["n"])

    @property
    def bytes(self) -> int:
        return int(self.store.query("SELECT COALESCE(SUM(size), 0) AS n FROM serve_events")[0]["n"])


def _seq(event_id: EventId) -> int:
    """A client's `Last-Event-ID` as a row id; anything else matches no row."""
    return int(event_id) if event_id.isdecimal() and len(event_id) < 19 else -1
