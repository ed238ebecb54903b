"""The timeline rows of one shell call, held to be written in the call's own commit.

A `bash` call through `serve` records its shell call's row (when it starts and when it ends) and
a row per nested call. Written as they come, that is three transactions or more per call; held,
they go into the one transaction that saves the shell (`Shells.run`), so a call writes once.

What a run that dies leaves is unchanged in kind: rows still reach the store at most
`sinks.FLUSH_SECONDS` after they were recorded (a timer writes what is held, off the event loop),
a call stopped for approval or one that changed something is written at once, and what the final
commit could not write is written on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_CURRENT: ContextVar[Held | None] = ContextVar("toolshell_timeline_held", default=None)


class Held:
    """Rows recorded during one call and not written yet: shell-call rows by id (the latest wins),
    nested-call rows in order. Filled on the event loop; taken by a writer on any thread."""

    def __init__(self) -> None:
        self._shells: dict[str, tuple[Any, ...]] = {}
        self._nested: list[tuple[Any, ...]] = []
        self.tried: set[str] = set()
        """Ids of the rows a write has taken (committed, or perhaps: a lost connection cannot tell):
        a row not among them is not in the store, so it is inserted without an upsert's check."""
        self._lock = threading.Lock()  # held for a swap, never across a write
        self.writing = threading.Lock()
        """Held across each write of this call's rows, so they reach the store in the order recorded."""
        self.timer: Any = None
        """The pending timed write (`asyncio.TimerHandle`), if any."""
        self.writer: Any = None
        """Writes what is held now, blocking (`SqliteSink.write_held`), set by the sink holding it."""

    def add_shell(self, key: str, values: tuple[Any, ...]) -> None:
        with self._lock:
            self._shells[key] = values

    def add_nested(self, values: tuple[Any, ...]) -> None:
        with self._lock:
            self._nested.append(values)

    def take(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The rows not written yet (shell calls, nested calls); they are no longer held."""
        with self._lock:
            shells, nested = list(self._shells.values()), self._nested
            self._shells, self._nested = {}, []
        return shells, nested

    def put_back(self, shells: list[tuple[Any, ...]], nested: list[tuple[Any, ...]]) -> None:
        """Rows a write failed to keep: held again, before what was recorded since."""
        with self._lock:
            newer = self._shells
            self._shells = {row[0]: row for row in shells} | newer
            self._nested = nested + self._nested

    @property
    def empty(self) -> bool:
        return not self._shells and not self._nested


def write_now() -> None:
    """Write the rows the running call holds now, before it writes something that refers to its
    shell call (an approval request a person answers from another process): blocking, one
    transaction. Nothing when the call holds nothing."""
    held = _CURRENT.get()
    if held is not None and held.writer is not None and not held.empty:
        held.writer(held)


def current() -> Held | None:
    """The rows the running call holds, if it holds them."""
    return _CURRENT.get()


@contextmanager
def holding(held: Held) -> Iterator[Held]:
    token = _CURRENT.set(held)
    try:
        yield held
    finally:
        _CURRENT.reset(token)
