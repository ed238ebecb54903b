"""The store interface every piece of state is kept through, whatever engine holds it.

Two engines implement it: `store.sqlite.Store` (a file in the state directory, the embedded
default) and `store.postgres.PostgresStore` (shared by every process and host pointed at it). A
feature creates its tables with numbered `migrate` steps and reads and writes with the portable SQL
of `store.dialect`; `transaction()` makes several statements one atomic step (a conditional
`UPDATE … WHERE state = 'pending'` plus the rows it implies). `notify` and `subscribe` wake a
caller waiting in another worker when something it waits for was written (`store.notify`). Callers
never ask which engine it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from toolshell.store.notify import Wake


class Row(Protocol):
    """One result row: columns by name."""

    def __getitem__(self, key: str) -> Any: ...

    def keys(self) -> Iterable[str]: ...


class Executed(Protocol):
    """What a statement did: the rows it touched, and `RETURNING` rows if it asked for them."""

    @property
    def rowcount(self) -> int: ...


class Transaction(Protocol):
    """Statements that commit together, or not at all."""

    def execute(self, sql: str, params: Iterable[Any] = ()) -> Executed: ...

    def query(self, sql: str, params: Iterable[Any] = ()) -> Sequence[Row]: ...

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        """One statement for many rows, in this transaction (PostgreSQL pipelines them: one round trip)."""
        ...


class StateStore(Protocol):
    """Where toolshell keeps what outlives a process."""

    engine: str
    """"sqlite" or "postgresql": for diagnostics and `store.dialect`, never for a caller's branch."""
    shared: bool
    """Whether processes on other hosts share it: then what seals state for them (the key ring)
    must be configured, never made by one process."""

    def migrate(self, component: str, steps: Sequence[str]) -> None:
        """Apply the steps of `component` not applied yet, in order, each once across every process."""
        ...

    def ensure_column(self, table: str, column: str, declaration: str) -> None:
        """Add a column to a table an older version created without it (a no-op once it is there)."""
        ...

    def execute(self, sql: str, params: Iterable[Any] = ()) -> Executed: ...

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None: ...

    def query(self, sql: str, params: Iterable[Any] = ()) -> Sequence[Row]: ...

    def transaction(self) -> AbstractContextManager[Transaction]: ...

    def lock_row(self, table: str, key_column: str, key: str) -> AbstractContextManager[Transaction]:
        """Hold the row of `table` whose `key_column` is `key` against every other holder on this
        store, in any process or host, until the block ends; what the block writes through the
        `Transaction` it gets commits at its end. Blocking while another holds it: enter it off
        the event loop. `table` and `key_column` are the caller's constants, never input."""
        ...

    def notify(self, channel: str, payload: str = "") -> None:
        """Wake the subscriptions to `channel` in every process on this store. Inside
        `transaction()` it is sent when the transaction commits, and not at all if it rolls back.

        PostgreSQL: `pg_notify`, pushed to every listening process at once. SQLite: a row the other
        processes poll for every `store.sqlite.POLL_SECONDS`; this process's subscriptions are woken
        at once.
        """
        ...

    def subscribe(self, channel: str) -> AbstractContextManager[Subscription]:
        """Listen to `channel` for the block (in an event loop: the subscription is awaited there).
        Subscribe first, then read what you wait for, then `wait`: nothing sent after subscribing
        is missed (or the wake says `missed`)."""
        ...

    def close(self) -> None: ...


class Subscription(Protocol):
    """The notifications on one channel since subscribing."""

    channel: str

    async def wait(self) -> Wake:
        """The notifications that came since the last wait, as soon as there is one (or `missed`:
        read the store again). The caller bounds it (`anyio.move_on_after`)."""
        ...


def rows_as_dicts(rows: Iterable[Row]) -> Iterator[dict[str, Any]]:
    """Rows as plain dicts (for JSON), whichever engine returned them."""
    for row in rows:
        yield {k: row[k] for k in row.keys()}
