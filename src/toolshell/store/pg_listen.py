"""PostgreSQL's side of the wake-ups: one `LISTEN` connection per store, in a thread of its own.

Every notification of a store goes on one PostgreSQL channel, `toolshell_store`, its payload
carrying the store's channel and payload as a JSON pair; the listener hands each to the
subscriptions of that channel in this process. One fixed `LISTEN`, made when the connection opens,
means subscribing costs no round trip and cannot race the `LISTEN` it needs.

The thread waits on the connection's socket (and a socket pair that `close` writes to, so closing
is immediate) and checks the connection with a `SELECT 1` after a quiet `HEARTBEAT_SECONDS`, so a
silently dead link is found too. When the connection is lost it reconnects with a growing pause;
notifications sent meanwhile are lost, so on each loss and each reconnection every subscription is
told it may have missed some (`Wake.missed`), and while it is away waiters read the store every
`LOST_POLL_SECONDS`.
"""

from __future__ import annotations

import json
import selectors
import socket
import threading
from typing import Any

from toolshell.store.notify import Hub, Wake

PG_CHANNEL = "toolshell_store"
APPLICATION_NAME = "toolshell-listen"
"""The listening connection's `application_name`, as `pg_stat_activity` shows it."""
HEARTBEAT_SECONDS = 30.0
LOST_POLL_SECONDS = 1.0
_RECONNECT_PAUSES = (0.05, 0.2, 0.5, 1.0, 2.0, 5.0)


def pg_payload(channel: str, payload: str) -> str:
    """What `pg_notify` sends for a notification on a store channel."""
    return json.dumps([channel, payload], ensure_ascii=False, separators=(",", ":"))


class Listener:
    """The `LISTEN` connection of one store, started on the first subscription.

    Args:
        url: the store's URL.
        hub: the store's subscriptions, which it delivers to.
    """

    def __init__(self, url: str, hub: Hub) -> None:
        self._url = url
        self._hub = hub
        self._listening = threading.Event()
        self._stopping = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.connections = 0
        """How many times the listener has connected (a reconnection makes it 2 or more)."""

    @property
    def listening(self) -> bool:
        return self._listening.is_set()

    def start(self, timeout: float) -> bool:
        """Start the thread if it is not running; wait up to `timeout` for it to listen."""
        with self._start_lock:
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(target=self._run, name="toolshell-listen", daemon=True)
                self._thread.start()
        return self._listening.wait(timeout)

    def poll(self) -> Wake | None:
        """While the connection is away, every wait ends in a read of the store."""
        return None if self.listening else Wake((), missed=True)

    def poll_seconds(self) -> float | None:
        return None if self.listening else LOST_POLL_SECONDS

    def close(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._wake_r.close()
        self._wake_w.close()

    def _run(self) -> None:
        # lazy: the PostgreSQL engine imports psycopg only when it is used
        import psycopg

        failures = 0  # connection attempts in a row that did not get to listen: the pause grows
        while not self._stopping.is_set():
            connected = self.connections
            try:
                self._listen(psycopg.connect)
            except Exception:  # psycopg.Error, OSError, …: any failure is a loss; the thread must go on
                pass
            self._listening.clear()
            self._hub.missed()
            failures = 0 if self.connections > connected else failures + 1
            if self._stopping.wait(_RECONNECT_PAUSES[min(failures, len(_RECONNECT_PAUSES) - 1)]):
                return

    def _listen(self, connect: Any) -> None:
        with connect(
            self._url,
            autocommit=True,
            connect_timeout=10,
            application_name=APPLICATION_NAME,
            keepalives=1,  # a TCP link (not a Unix socket) that dies silently is found by the OS too
            keepalives_idle=30,
        ) as conn:
            conn.execute(f"LISTEN {PG_CHANNEL}")
            self.connections += 1
            # What was sent while it was away is lost: the waiters there read the store again. Before
            # `listening` is set, so a subscription made after `start` returns is not told so.
            self._hub.missed()
            self._listening.set()
            # A selector, not `select.select`: a process with many files open (past 1024) still listens.
            with selectors.DefaultSelector() as selector:
                selector.register(conn.fileno(), selectors.EVENT_READ, "db")
                selector.register(self._wake_r, selectors.EVENT_READ, "wake")
                while not self._stopping.is_set():
                    ready = {key.data for key, _ in selector.select(HEARTBEAT_SECONDS)}
                    if "wake" in ready:
                        continue  # `close` wrote: the loop's test ends it
                    if not ready:
                        conn.execute("SELECT 1")  # quiet for a while: is the link still there?
                    for note in conn.notifies(timeout=0):
                        self._deliver(note.payload)
                    if conn.closed:
                        return

    def _deliver(self, raw: str) -> None:
        try:
            channel, payload = json.loads(raw)
        except (ValueError, TypeError):
            return  # someone else's NOTIFY on the channel: not ours to read
        if isinstance(channel, str) and isinstance(payload, str):
            self._hub.deliver(channel, payload)
