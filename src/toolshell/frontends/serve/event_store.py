"""Resumable streams for `toolshell serve --http`: the SDK's `EventStore`, bounded, one view per session.

With an event store the SDK's Streamable HTTP transport gives every SSE event an id and keeps it,
so a client whose POST stream drops reconnects with `Last-Event-ID` and gets the rest of its `bash`
result. The transport files events under the JSON-RPC request id (or `_GET_stream`), which is not
unique across sessions: every client numbers its requests from 0 or 1. One store shared by all
sessions would replay one client's result to another, so each session's transport gets a
`SessionEvents` view that names its streams `<session id>/<stream>` and replays only its own.

`MemoryEventStore` is the default; `toolshell.store.event_log.StateEventStore` keeps the events in
the state database instead. Both implement `EventLog`.
"""

from __future__ import annotations

import itertools
import secrets
from collections import OrderedDict
from typing import Any, Protocol

from mcp.server.streamable_http import (
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamableHTTPServerTransport,
    StreamId,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import JSONRPCMessage, jsonrpc_message_adapter

from toolshell.store.event_log import MAX_BYTES, MAX_EVENTS, StateEventStore, StoredEvent
from toolshell.store.protocol import StateStore


class EventLog(Protocol):
    """Where events are kept: append, and read one stream after an event. Streams are opaque names."""

    def append(self, stream: str, body: str | None) -> EventId: ...

    def stream_of(self, event_id: EventId) -> str | None:
        """The stream `event_id` belongs to, or None when it is unknown (never stored, or dropped)."""
        ...

    def after(self, event_id: EventId, stream: str) -> list[StoredEvent]:
        """The events of `stream` stored after `event_id`, oldest first."""
        ...


class MemoryEventStore:
    """An `EventLog` in this process, bounded by event count and by bytes of message JSON."""

    def __init__(self, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        if max_events < 1 or max_bytes < 1:
            raise ValueError("an event store needs room for at least one event and one byte")
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._events: OrderedDict[EventId, StoredEvent] = OrderedDict()
        self._bytes = 0
        # Ids differ between runs, so an id from before a restart matches nothing here.
        self._prefix = secrets.token_hex(4)
        self._counter = itertools.count(1)

    def append(self, stream: str, body: str | None) -> EventId:
        event_id = f"{self._prefix}-{next(self._counter)}"
        self._events[event_id] = StoredEvent(event_id, stream, body)
        self._bytes += _size(body)
        while len(self._events) > self.max_events or (self._bytes > self.max_bytes and len(self._events) > 1):
            _, dropped = self._events.popitem(last=False)
            self._bytes -= _size(dropped.body)
        return event_id

    def stream_of(self, event_id: EventId) -> str | None:
        event = self._events.get(event_id)
        return event.stream if event else None

    def after(self, event_id: EventId, stream: str) -> list[StoredEvent]:
        found: list[StoredEvent] = []
        seen = False
        for event in self._events.values():
            if seen and event.stream == stream:
                found.append(event)
            seen = seen or event.event_id == event_id
        return found

    def __len__(self) -> int:
        return len(self._events)

    @property
    def bytes(self) -> int:
        return self._bytes


def _size(body: str | None) -> int:
    return len(body.encode()) if body else 0


EVENT_STORES = ("memory", "state")


def open_event_log(kind: str, store: StateStore) -> EventLog:
    """`memory` (the default: this process only) or `state` (the state database `store`)."""
    if kind == "memory":
        return MemoryEventStore()
    if kind == "state":
        return StateEventStore(store)
    raise ValueError(f"event_store = {kind!r} is not one of {', '.join(EVENT_STORES)}")


class SessionEvents(EventStore):
    """One session's view of a shared `EventLog`: its streams are `<session>/<stream>`, and a
    `Last-Event-ID` of another session replays nothing, exactly like an unknown one."""

    def __init__(self, log: EventLog, session_id: str) -> None:
        self.log = log
        self._prefix = f"{session_id}/"

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        body = None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        return self.log.append(self._prefix + stream_id, body)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        stream = self.log.stream_of(last_event_id)
        if stream is None or not stream.startswith(self._prefix):
            return None
        for event in self.log.after(last_event_id, stream):
            if event.body is not None:  # priming events carry no message
                message = jsonrpc_message_adapter.validate_json(event.body)
                await send_callback(EventMessage(message, event.event_id))
        return stream.removeprefix(self._prefix)


class ResumableSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, giving each new session a `SessionEvents` view of one `EventLog`.

    The SDK hands every session's transport the same store; this swaps in the session's own view as
    the session is admitted, before it has stored anything.
    """

    def __init__(self, app: Any, log: EventLog, *, security_settings: TransportSecuritySettings) -> None:
        super().__init__(app=app, event_store=SessionEvents(log, ""), security_settings=security_settings)
        self.log = log

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None:
            if not hasattr(transport, "_event_store") or transport.mcp_session_id is None:
                # Fail closed: serving unscoped would let sessions read each other's results.
                raise RuntimeError("this mcp SDK keeps a transport's event store elsewhere; update toolshell")
            transport._event_store = SessionEvents(self.log, transport.mcp_session_id)
        return transport
