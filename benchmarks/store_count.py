"""Counting what goes through a state store: a wrapper over any `StateStore`, for the benchmarks.

`CountingStore(open_store(url))` behaves as the store it wraps and counts, at the protocol
boundary (whichever engine is under it):

- statements: every `execute`, `query` and `executemany` (one batch: psycopg pipelines it), a
  `lock_row`'s `SELECT … FOR UPDATE`, a `notify`;
- commits: the transactions that wrote something: a write outside `transaction()`, a
  `transaction()` or `lock_row` block in which a write ran (a read alone commits nothing);
- transactions: what runs on its own (a statement outside `transaction()`, a `transaction()` or
  `lock_row` block), reads included; `commits` are the writing ones among them;
- round trips: statements plus commits (the engine's own extra ones, PostgreSQL's `BEGIN` and its
  pool's liveness check, are not counted);
- bytes written and read: the `str` and `bytes` values of the parameters sent and of the rows
  returned (numbers and the SQL text are not counted).

`close()` leaves the inner store open (several hosts may share one wrapper): close it yourself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any

from toolshell.store.protocol import Executed, Row, StateStore, Transaction


@dataclass
class Counts:
    statements: int = 0
    commits: int = 0
    transactions: int = 0
    written: int = 0
    read: int = 0

    @property
    def round_trips(self) -> int:
        return self.statements + self.commits

    def per(self, calls: int) -> dict[str, float]:
        """These counts divided by `calls`, as a dict (round trips included)."""
        return {k: v / calls for k, v in asdict(self).items()} | {"round_trips": self.round_trips / calls}


def _size(values: Iterable[Any]) -> int:
    return sum(len(v) for v in values if isinstance(v, str | bytes | bytearray | memoryview))


def _is_read(sql: str) -> bool:
    return sql.lstrip()[:6].upper() == "SELECT"


class _Open:
    """The `transaction()` block this task is in: whether a write ran in it."""

    wrote = False


class _CountedTx:
    def __init__(self, store: CountingStore, tx: Transaction) -> None:
        self._store, self._tx = store, tx

    def execute(self, sql: str, params: Iterable[Any] = ()) -> Executed:
        return self._store._execute(self._tx.execute, sql, params)

    def query(self, sql: str, params: Iterable[Any] = ()) -> Sequence[Row]:
        return self._store._query(self._tx.query, sql, params)

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        batch = [tuple(r) for r in rows]
        self._tx.executemany(sql, batch)
        if batch:
            self._store._add(statements=1, written=sum(_size(r) for r in batch))
            self._store._wrote()


class CountingStore:
    """A `StateStore` that counts what goes through `inner` (see the module's docstring)."""

    def __init__(self, inner: StateStore) -> None:
        self.inner = inner
        self.engine = inner.engine
        self.shared = inner.shared
        self.counts = Counts()
        self._lock = threading.Lock()
        self._open: ContextVar[_Open | None] = ContextVar(f"counting_store_{id(self)}", default=None)

    def reset(self) -> Counts:
        """The counts so far; counting starts again from zero."""
        with self._lock:
            counts, self.counts = self.counts, Counts()
        return counts

    def _add(self, *, statements: int = 0, commits: int = 0, written: int = 0, read: int = 0) -> None:
        alone = statements and self._open.get() is None  # a statement outside a block is a transaction
        with self._lock:
            c = self.counts
            c.transactions += 1 if alone else 0
            c.statements += statements
            c.commits += commits
            c.written += written
            c.read += read

    def _wrote(self) -> None:
        """A write ran: it commits now, or with the `transaction()` block it is in."""
        block = self._open.get()
        if block is None:
            self._add(commits=1)
        else:
            block.wrote = True

    def _execute(self, run: Any, sql: str, params: Iterable[Any]) -> Executed:
        params = tuple(params)
        done = run(sql, params)
        rows = getattr(done, "rows", None) or []
        self._add(statements=1, written=_size(params), read=sum(_size(r.values()) for r in rows))
        if not _is_read(sql):
            self._wrote()
        return done  # type: ignore[no-any-return]

    def _query(self, run: Any, sql: str, params: Iterable[Any]) -> Sequence[Row]:
        params = tuple(params)
        rows: Sequence[Row] = run(sql, params)
        self._add(statements=1, written=_size(params), read=sum(_size(r[k] for k in r.keys()) for r in rows))
        if not _is_read(sql):  # `INSERT … RETURNING` through `query`
            self._wrote()
        return rows

    def migrate(self, component: str, steps: Sequence[str]) -> None:
        self.inner.migrate(component, steps)

    def ensure_column(self, table: str, column: str, declaration: str) -> None:
        self.inner.ensure_column(table, column, declaration)

    def execute(self, sql: str, params: Iterable[Any] = ()) -> Executed:
        return self._execute(self.inner.execute, sql, params)

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        batch = [tuple(r) for r in rows]
        self.inner.executemany(sql, batch)
        if batch:
            self._add(statements=1, written=sum(_size(r) for r in batch))
            self._wrote()

    def query(self, sql: str, params: Iterable[Any] = ()) -> Sequence[Row]:
        return self._query(self.inner.query, sql, params)

    @contextmanager
    def _block(self, inner: Any) -> Iterator[Transaction]:
        outer = self._open.get()
        block = outer or _Open()
        if outer is None:
            with self._lock:
                self.counts.transactions += 1
        token = self._open.set(block)
        try:
            with inner as tx:
                yield _CountedTx(self, tx)
        finally:
            self._open.reset(token)
            if outer is None and block.wrote:
                self._add(commits=1)

    def transaction(self) -> Any:
        return self._block(self.inner.transaction())

    @contextmanager
    def lock_row(self, table: str, key_column: str, key: str) -> Iterator[Transaction]:
        with self._block(self.inner.lock_row(table, key_column, key)) as tx:
            self._add(statements=1)
            yield tx

    def notify(self, channel: str, payload: str = "") -> None:
        self.inner.notify(channel, payload)
        self._add(statements=1, written=len(channel) + len(payload))
        self._wrote()

    def subscribe(self, channel: str) -> Any:
        return self.inner.subscribe(channel)

    def close(self) -> None:
        """Nothing: the inner store is its opener's to close."""
