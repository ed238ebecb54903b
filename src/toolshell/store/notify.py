"""Wake-ups through the store: `notify(channel, payload)` in one worker wakes `wait` in another.

A caller that waits for something another process writes (an approval answered on the web page,
in `toolshell approvals grant`, by another worker) subscribes first, then reads the store, then
waits for a notification, and reads again when it comes: the store's rows stay the truth, a
notification only says when to look. Subscribing before the first read means an answer written
between the read and the wait is not missed.

This module is the part both engines share: the subscriptions of one store, by channel, woken from
any thread (PostgreSQL's listener runs in a thread of its own) into the event loop each one waits
in. How a notification travels between processes is the engine's: `pg_notify` and one `LISTEN`
connection (`store.pg_listen`), or a table polled at a short interval (`store.sqlite`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio
import anyio.lowlevel

MAX_CHANNEL = 63
"""Channel names are short words (`approvals`), at most this long."""
MAX_PAYLOAD = 4000
"""A payload names what changed (a request id), in at most this many bytes (PostgreSQL's limit is 8000)."""


@dataclass(frozen=True)
class Wake:
    """Why `Subscription.wait` returned before its timeout."""

    payloads: tuple[str, ...]
    """The payloads of the notifications that came, in the order they were sent."""
    missed: bool = False
    """Notifications may have been lost (the listening connection dropped, or is down): read the
    store again whatever the payloads say."""

    def concerns(self, payload: str) -> bool:
        """Whether the caller waiting for `payload` should read the store again."""
        return self.missed or payload in self.payloads


Poll = Callable[[], Wake | None]
"""Looks for notifications another process sent (SQLite's table; PostgreSQL while not listening)."""


class Subscription:
    """The notifications on one channel since subscribing; awaited in the loop it was made in.

    Args:
        channel: the channel it listens to.
        poll: called every `poll_seconds()` while waiting, for what could not be pushed.
        poll_seconds: how long to wait before polling; None: no polling (everything is pushed).
    """

    def __init__(self, channel: str, poll: Poll, poll_seconds: Callable[[], float | None]) -> None:
        self.channel = channel
        self._poll = poll
        self._poll_seconds = poll_seconds
        self._lock = threading.Lock()
        self._payloads: list[str] = []
        self._missed = False
        self._token = anyio.lowlevel.current_token()  # raises outside an event loop: waiting needs one
        self._event = anyio.Event()

    def deliver(self, payload: str | None) -> None:
        """Hand this subscription a notification (None: some may have been missed), from any thread."""
        with self._lock:
            if payload is None:
                self._missed = True
            else:
                self._payloads.append(payload)
        self.poke()

    def poke(self) -> None:
        """Make the waiter poll now (from any thread)."""
        try:
            self._token.backend_class.run_sync_soon(self._set, (), self._token.native_token)
        except RuntimeError:  # the loop has finished: nobody waits any more
            pass

    def _set(self) -> None:
        self._event.set()

    async def wait(self) -> Wake:
        """The notifications that came since the last `wait` (or the subscription), as soon as
        there is one. Bound it with `anyio.move_on_after` (the caller's deadline)."""
        while True:
            with anyio.move_on_after(self._poll_seconds() or float("inf")):
                await self._event.wait()
            self._event = anyio.Event()  # only this loop swaps it, so a later `_set` is not lost
            with anyio.CancelScope(shield=True):  # a poll reads the store: in a thread, its finds kept
                polled = await anyio.to_thread.run_sync(self._poll)
            if polled is not None:
                self._take(polled)
            with self._lock:
                if self._payloads or self._missed:
                    wake = Wake(tuple(self._payloads), self._missed)
                    self._payloads, self._missed = [], False
                    return wake

    def _take(self, polled: Wake) -> None:
        with self._lock:
            self._payloads.extend(polled.payloads)
            self._missed = self._missed or polled.missed


class Hub:
    """The subscriptions of one store, by channel."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_channel: dict[str, set[Subscription]] = {}

    @contextmanager
    def subscribed(self, subscription: Subscription) -> Iterator[Subscription]:
        with self._lock:
            self._by_channel.setdefault(subscription.channel, set()).add(subscription)
        try:
            yield subscription
        finally:
            with self._lock:
                subs = self._by_channel.get(subscription.channel, set())
                subs.discard(subscription)
                if not subs:
                    self._by_channel.pop(subscription.channel, None)

    def deliver(self, channel: str, payload: str) -> None:
        """A notification on `channel` reached this process."""
        for sub in self._subscriptions(channel):
            sub.deliver(payload)

    def poke(self, channel: str) -> None:
        """Something was sent on `channel` that the subscriptions poll for: look now."""
        for sub in self._subscriptions(channel):
            sub.poke()

    def missed(self) -> None:
        """Notifications may have been lost on every channel: every waiter reads the store again."""
        for sub in self._subscriptions(None):
            sub.deliver(None)

    def _subscriptions(self, channel: str | None) -> list[Subscription]:
        with self._lock:
            if channel is not None:
                return list(self._by_channel.get(channel, ()))
            return [s for subs in self._by_channel.values() for s in subs]


def check_notification(channel: str, payload: str = "") -> None:
    """Refuse what an engine could not carry: a channel is a short word of letters, digits, `_`,
    `.`, `-`; a payload is short text (it names what changed; the store holds the rest)."""
    word = all(c.isascii() and (c.isalnum() or c in "_.-") for c in channel)
    if not channel or len(channel) > MAX_CHANNEL or not word:
        raise ValueError(f"a notification channel is a word of up to {MAX_CHANNEL} letters, digits, _ . -: {channel!r}")
    if len(payload.encode("utf-8", "surrogatepass")) > MAX_PAYLOAD:
        raise ValueError(f"a notification payload is at most {MAX_PAYLOAD} bytes: name what changed, keep the rest")
