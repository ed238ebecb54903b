"""The shared engine: every piece of state in one PostgreSQL database (`[state] url`).

Many processes, on one host or many, point at the same database and act as one: a migration step
runs once, under an advisory lock; a conditional update decides a race for all of them. Statements
go through a small `psycopg_pool` pool; each runs in its own transaction unless it is inside
`transaction()`. Connections are in autocommit mode with `dict_row` rows: a single statement is
its own transaction in one round trip (no `BEGIN`/`COMMIT` around a read), a `transaction()` is
`BEGIN` … `COMMIT`, and `executemany` is one transaction.

Calls are synchronous and short (a Unix socket or a LAN round trip), the way the SQLite engine's
are; the waits across processes (`LISTEN`) use a connection of their own, in a thread of its own
(`store.pg_listen`), opened on the first subscription.

A server restart or a cut connection is ridden out: before handing out a connection the pool looks
at its socket, without a round trip (`_alive`): one the server wrote to while it sat idle (a
restart's goodbye, a closed socket) is asked with an empty query, and replaced if dead. What can
run twice without harm — a read (`query` of a `SELECT`) and `executemany` (upserts and deletes by
key, the protocol's idempotent writes) — is
run again through the reconnect for up to `RETRY_SECONDS`, outside a caller's `transaction()`. A
statement that may have committed before the connection was lost is not run again: its caller
gets `unavailable`, `retryable`.
"""

from __future__ import annotations

import select
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.store.dialect import numbered_placeholders
from toolshell.store.migrations import apply_steps
from toolshell.store.notify import Hub, Subscription, check_notification
from toolshell.store.pg_listen import PG_CHANNEL, Listener, pg_payload

RETRY_SECONDS = 10.0
"""How long a read or an idempotent write keeps trying through a reconnect (a server restart)."""
_T = TypeVar("_T")

_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS toolshell_migrations (
    component TEXT NOT NULL,
    version BIGINT NOT NULL,
    applied_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (component, version)
)
"""


@dataclass(frozen=True)
class Done:
    """What a statement did."""

    rowcount: int
    rows: list[dict[str, Any]] = field(default_factory=list)


class _Tx:
    """The statements of one open transaction on one connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Iterable[Any] = ()) -> Done:
        with self._conn.cursor() as cur:
            cur.execute(_sql(sql, params), tuple(params))
            rows = list(cur.fetchall()) if cur.description is not None else []
            return Done(cur.rowcount, rows)

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        with self._conn.cursor() as cur:
            cur.execute(_sql(sql, params), tuple(params))
            return list(cur.fetchall())

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        batch = [tuple(r) for r in rows]
        if batch:
            with self._conn.cursor() as cur:
                cur.executemany(numbered_placeholders(sql), batch)


class PostgresStore:
    """`PostgresStore("postgresql://user@host/db")`: the store on a PostgreSQL server.

    Raises:
        ToolshellError: `unavailable` when psycopg is not installed or the server cannot be reached;
            the message names the URL's host (never its password) and the fix.
    """

    engine = "postgresql"
    shared = True
    """Whether other hosts may share it (every worker that points at the database)."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 10.0,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        self._current: ContextVar[Any] = ContextVar(f"toolshell_pg_tx_{id(self)}", default=None)
        try:
            # lazy: only a shared store needs psycopg, an optional extra (`toolshell[postgres]`)
            import psycopg
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise ToolshellError(
                ErrorCode.UNAVAILABLE,
                "a postgresql:// state URL needs psycopg; install it with: pip install 'toolshell[postgres]'",
            ) from None
        self.url = url
        self._errors: tuple[type[BaseException], ...] = (psycopg.Error,)
        # Subclasses count too: AdminShutdown (a cut connection), the pool's PoolTimeout.
        self._lost: tuple[type[BaseException], ...] = (psycopg.OperationalError, psycopg.InterfaceError)
        self._pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs={"row_factory": dict_row, "autocommit": True},
            check=_alive,  # a connection a restart cut is replaced, not handed out
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
        except Exception as exc:  # psycopg_pool.PoolTimeout, psycopg.OperationalError
            self._pool.close()
            raise _unreachable(url, exc) from None
        self._lock = threading.Lock()
        self._migrated: set[tuple[str, int]] = set()
        self._timeout = timeout
        self._retry_seconds = retry_seconds
        self._hub = Hub()
        self._listener = Listener(url, self._hub)

    def migrate(self, component: str, steps: Sequence[str]) -> None:
        """Apply the steps of `component` not applied yet, each in one transaction, under an advisory
        lock taken for that component, so processes starting at once apply each step once."""
        if (component, len(steps)) in self._migrated:
            return
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key("toolshell_migrations"),))
            conn.execute(_MIGRATIONS)
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(component),))
            apply_steps(_Tx(conn), self.engine, component, steps)
        self._migrated.add((component, len(steps)))

    def ensure_column(self, table: str, column: str, declaration: str) -> None:
        """Add a column a newer version of a table has to a table an older version created."""
        with self._transaction() as conn:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {declaration}")

    def execute(self, sql: str, params: Iterable[Any] = ()) -> Done:
        if self._current.get() is not None:  # inside `transaction()`: a savepoint of it
            with self.transaction() as tx:
                return tx.execute(sql, params)
        with self._connection() as conn:  # one statement, its own transaction: one round trip
            return _Tx(conn).execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        batch = [tuple(r) for r in rows]
        if not batch:
            return

        def run() -> None:
            with self._transaction() as conn, conn.cursor() as cur:
                cur.executemany(numbered_placeholders(sql), batch)

        self._again(run)

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        def run() -> list[dict[str, Any]]:
            if self._current.get() is not None:
                with self.transaction() as tx:
                    return tx.query(sql, params)
            with self._connection() as conn:  # a read alone: no BEGIN/COMMIT around it
                return _Tx(conn).query(sql, params)

        return self._again(run) if sql.lstrip()[:6].upper() == "SELECT" else run()

    def _again(self, run: Callable[[], _T]) -> _T:
        """`run`, and again through a reconnect while the server cannot be reached, for up to
        `retry_seconds` (not inside a caller's transaction: that is the caller's to run again)."""
        if self._current.get() is not None:
            return run()
        deadline = time.monotonic() + self._retry_seconds
        pause = 0.25
        while True:
            try:
                return run()
            except ToolshellError as err:
                if not err.retryable or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)  # a bounded backoff while the server restarts (the pool reconnects meanwhile)
            pause = min(pause * 2, 2.0)

    @contextmanager
    def transaction(self) -> Iterator[_Tx]:
        """Run the block's statements (through the `_Tx` it yields, or this store's `execute` and
        `query` from the same thread or task) as one transaction: committed together at its end,
        rolled back if it raises. A conditional `UPDATE` in it decides a race for every process."""
        with self._transaction() as conn:
            token = self._current.set(conn)
            try:
                yield _Tx(conn)
            finally:
                self._current.reset(token)

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        joined = self._current.get()
        if joined is not None:  # inside `transaction()`: its statements are part of it
            with joined.transaction():  # a savepoint: a failing statement undoes only itself
                yield joined
            return
        try:
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except self._errors as exc:
            if isinstance(exc, self._lost):
                raise _unreachable(self.url, exc) from None
            raise

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A connection of the pool for one statement outside any transaction (autocommit)."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except self._errors as exc:
            if isinstance(exc, self._lost):
                raise _unreachable(self.url, exc) from None
            raise

    @contextmanager
    def lock_row(self, table: str, key_column: str, key: str) -> Iterator[_Tx]:
        """`SELECT … FOR UPDATE` in a transaction on a connection of its own (not the caller's
        `transaction()`, which is bound to one task): a holder on another host waits until the block
        commits what it wrote through the `_Tx` it gets. A row that does not exist holds nothing."""
        try:
            with self._pool.connection() as conn, conn.transaction():
                conn.execute(f"SELECT 1 FROM {table} WHERE {key_column} = %s FOR UPDATE", (key,))
                yield _Tx(conn)
        except self._errors as exc:
            if isinstance(exc, self._lost):
                raise _unreachable(self.url, exc) from None
            raise

    def notify(self, channel: str, payload: str = "") -> None:
        """`pg_notify`: in the open transaction, if any, so it is sent when that commits."""
        check_notification(channel, payload)
        self.execute("SELECT pg_notify(?, ?)", (PG_CHANNEL, pg_payload(channel, payload)))

    @contextmanager
    def subscribe(self, channel: str) -> Iterator[Subscription]:
        """Listen to `channel`, through this store's one `LISTEN` connection (started now if it is
        not running). If it cannot listen yet, the subscription reads as `missed` every
        `pg_listen.LOST_POLL_SECONDS` until it can."""
        check_notification(channel)
        self._listener.start(self._timeout)
        sub = Subscription(channel, self._listener.poll, self._listener.poll_seconds)
        with self._hub.subscribed(sub):
            yield sub

    def close(self) -> None:
        self._listener.close()
        self._pool.close()


def _alive(conn: Any) -> None:
    """The pool's check before handing `conn` out, with no round trip while it is quiet: an idle
    connection's socket has nothing to read unless the server wrote (a shutdown's error, the end of
    the stream); then an empty query tells whether it still works (it raises if not)."""
    if conn.closed:
        raise _closed()
    # poll, not select: select() refuses a descriptor past 1023, which a busy process reaches
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):
        conn.execute("")


def _closed() -> BaseException:
    # lazy: psycopg is an optional extra, installed when this engine runs
    import psycopg

    return psycopg.OperationalError("the connection is closed")


def _sql(sql: str, params: Iterable[Any]) -> str:
    return numbered_placeholders(sql)  # parameters are always passed, so `%` is always psycopg's


def _lock_key(name: str) -> int:
    """A stable 32-bit key for `pg_advisory_xact_lock` (the same in every process)."""
    return zlib.crc32(f"toolshell:{name}".encode())


def _unreachable(url: str, exc: BaseException) -> ToolshellError:
    # lazy: conninfo parsing is psycopg's; it is installed when this engine runs
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
        where = f"{info.get('host', 'localhost')}/{info.get('dbname', '')}"
    except Exception:  # an unparsable URL: say so without quoting it (it may hold a password)
        where = "the configured server"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ToolshellError(
        ErrorCode.UNAVAILABLE,
        f"cannot reach the PostgreSQL state store at {where}: {first}; check [state] url or TOOLSHELL_STATE_URL",
        retryable=True,
    )
