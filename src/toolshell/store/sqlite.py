"""A small SQLite store. Each feature creates its own tables with `ensure(schema)`.

SQLite calls are short and local, so they run inline; the file is opened once per `Store` and
writes are committed at once so a crash loses nothing that was acknowledged. A change made of
several statements (answer a request and record its grant) runs in `transaction()`: it holds the
database's write lock from its first statement, so two processes never both make it.

The state holds approvals, saved scripts and the timeline of tool calls (arguments included), so
it is private to its owner: a directory it creates is 0700 and the database file 0600 (SQLite
gives the -wal and -shm files the database file's mode). An existing directory or file that
another user owns, or that group or others may write, is refused: whoever can write it can plant
an `always` grant.

Notifications (`notify`) are rows of `toolshell_notifications`, written in the caller's
transaction; a subscription in this process is woken at once (after the commit), one in another
process finds the row at its next poll, every `POLL_SECONDS`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.store.dialect import split_statements
from toolshell.store.migrations import apply_steps
from toolshell.store.notify import Hub, Subscription, Wake, check_notification

POLL_SECONDS = 0.2
"""How often a subscription looks for notifications another process wrote to the file."""
KEEP_NOTIFICATIONS_SECONDS = 600.0
"""How long a notification row is kept for the subscriptions polling for it."""

_CHOOSE_DIR = "choose a writable state directory with --state-dir or TOOLSHELL_STATE_DIR"


_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS toolshell_migrations (
    component TEXT NOT NULL,
    version BIGINT NOT NULL,
    applied_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (component, version)
)
"""

# Made on first use with IF NOT EXISTS (not a `migrate` step): the first use may be inside a
# caller's transaction, where a migration's own transaction cannot start.
_NOTIFICATIONS = """
CREATE TABLE IF NOT EXISTS toolshell_notifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused, so a poller's last id stays meaningful
    channel TEXT NOT NULL,
    payload TEXT NOT NULL,
    sent_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS toolshell_notifications_channel ON toolshell_notifications (channel, id)
"""


class _Tx:
    """The statements of one open transaction (the store's lock is held)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        return self._db.execute(sql, tuple(params))

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        return self._db.execute(sql, tuple(params)).fetchall()

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        self._db.executemany(sql, [tuple(r) for r in rows])


class Store:
    """`Store(path)` for a file, `Store(":memory:")` for tests."""

    engine = "sqlite"
    shared = False
    """Whether other hosts may share it (one host's file)."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        """Open (creating if needed) the database at `path`.

        Raises:
            ToolshellError: `unavailable` when the directory or file cannot be made or opened, or
                the file is not a SQLite database; the message names the path and the fix.
        """
        self.path = str(path)
        if self.path != ":memory:":
            _create_private(Path(path))
            _check_private(Path(path))
        self._db = _connect(self.path)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA busy_timeout=5000")
        if self.path == ":memory:":
            self._db.execute("PRAGMA journal_mode=MEMORY")
        else:
            _use_wal(self._db)
        # In WAL mode NORMAL loses nothing when the process crashes (only on power loss), and saves a
        # disk sync per commit: the timeline writes one row per tool call.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._lock = threading.RLock()  # re-entered by the statements of a `transaction()`
        self._ensured: set[str] = set()
        self._migrated: set[tuple[str, int]] = set()
        self._row_locks: dict[str, threading.Lock] = {}
        self._hub = Hub()
        self._notified: list[str] | None = None  # inside `transaction()`: the channels to wake at commit

    def ensure(self, schema: str) -> None:
        """Run `CREATE TABLE IF NOT EXISTS ...` statements once per store."""
        if schema in self._ensured:
            return
        with self._lock:
            self._db.executescript(schema)
            self._ensured.add(schema)

    def ensure_column(self, table: str, column: str, declaration: str) -> None:
        """Add a column a newer version of a table has to a table an older version created."""
        key = f"{table}.{column}"
        if key in self._ensured:
            return
        with self._lock:
            names = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in names:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
            self._ensured.add(key)

    def migrate(self, component: str, steps: Sequence[str]) -> None:
        """Apply the steps of `component` not applied yet, in order; `BEGIN IMMEDIATE` takes the
        file's write lock, so processes opening one file at once apply each step once."""
        if (component, len(steps)) in self._migrated:
            return
        with self.transaction() as tx:
            tx.execute(_MIGRATIONS)
            apply_steps(tx, self.engine, component, steps)
        self._migrated.add((component, len(steps)))

    @contextmanager
    def transaction(self) -> Iterator[_Tx]:
        """Run the block's statements (through the `_Tx` it yields, or this store's `execute` and
        `query`) as one transaction: committed together at its end, rolled back if it raises.

        It takes the write lock at once (`BEGIN IMMEDIATE`, waiting up to the busy timeout for
        another writer), so what the block reads stays true until it commits: two stores on one
        file cannot both see a request pending and both answer it. Keep the block short and
        without awaits: it holds this store, and the file's writers wait.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._notified = []
            try:
                yield _Tx(self._db)
                self._db.execute("COMMIT")
                notified = self._notified
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            finally:
                self._notified = None
        for channel in notified:
            self._hub.poke(channel)

    def notify(self, channel: str, payload: str = "") -> None:
        """Write a notification row (part of the open transaction, if any) and wake this process's
        subscriptions to `channel` once it is committed."""
        check_notification(channel, payload)
        now = time.time()
        with self._lock:
            self._ensure_notifications()
            self._db.execute(
                "INSERT INTO toolshell_notifications (channel, payload, sent_at) VALUES (?, ?, ?)",
                (channel, payload, now),
            )
            cutoff = now - KEEP_NOTIFICATIONS_SECONDS
            self._db.execute("DELETE FROM toolshell_notifications WHERE sent_at < ?", (cutoff,))
            if self._notified is not None:
                self._notified.append(channel)
                return
        self._hub.poke(channel)

    @contextmanager
    def subscribe(self, channel: str) -> Iterator[Subscription]:
        """Listen to `channel`: woken at once by this process's `notify`, and finding another
        process's within `POLL_SECONDS`."""
        check_notification(channel)
        with self._lock:
            self._ensure_notifications()
            seen = self._db.execute("SELECT coalesce(max(id), 0) FROM toolshell_notifications").fetchone()[0]

        def poll() -> Wake | None:
            nonlocal seen
            with self._lock:
                rows = self._db.execute(
                    "SELECT id, payload FROM toolshell_notifications WHERE channel = ? AND id > ? ORDER BY id",
                    (channel, seen),
                ).fetchall()
            if not rows:
                return None
            seen = rows[-1]["id"]
            return Wake(tuple(r["payload"] for r in rows))

        with self._hub.subscribed(Subscription(channel, poll, lambda: POLL_SECONDS)) as sub:
            yield sub

    def _ensure_notifications(self) -> None:
        for statement in split_statements(_NOTIFICATIONS):
            self._db.execute(statement)

    def execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, tuple(params))

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        """Run one statement for many rows in one transaction (one commit)."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany(sql, [tuple(r) for r in rows])
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # a failed COMMIT too: never leave the file in a transaction
                    self._db.execute("ROLLBACK")
                raise

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, tuple(params)).fetchall()

    @contextmanager
    def lock_row(self, table: str, key_column: str, key: str) -> Iterator[Store]:
        """Hold a row across the processes on this file: a `flock` on a lock file of the row's own
        beside the database (a held write lock would stop every other writer, timeline included).
        The block's statements are this store's, each committed at once."""
        name = hashlib.sha256(f"{table}\0{key_column}\0{key}".encode()).hexdigest()[:32]
        if self.path == ":memory:":
            with self._row_locks.setdefault(name, threading.Lock()):
                yield self
            return
        directory = Path(self.path + "-locks")
        directory.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(directory / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield self
        finally:
            os.close(fd)  # closing releases the flock

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _create_private(path: Path) -> None:
    directory = path.parent
    try:
        if not directory.is_dir():
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            directory.chmod(0o700)  # mkdir's mode is masked by the umask; make the intent exact
        # O_EXCL: only a file this call creates gets the mode; an existing one is left as it is.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        if not directory.is_dir():
            raise _unavailable(
                f"cannot create the state directory {directory}: a file is in the way; {_CHOOSE_DIR}"
            ) from None
    except OSError as e:
        where = f"the state directory {directory}" if not directory.is_dir() else f"the state database {path}"
        raise _unavailable(f"cannot create {where}: {e.strerror or e}; {_CHOOSE_DIR}") from None


def _check_private(path: Path) -> None:
    """Refuse state that someone else could have written."""
    suffixed = [path.with_name(path.name + s) for s in ("-wal", "-shm")]
    for item in [path.parent, path, *(p for p in suffixed if p.exists())]:
        try:
            info = item.stat()
        except OSError:
            continue
        kind = "state directory" if item == path.parent else "state file"
        if info.st_uid != os.getuid():
            raise _unavailable(
                f"the {kind} {item} belongs to another user (uid {info.st_uid}), who could have planted approvals "
                f"in it; {_CHOOSE_DIR}, or take it over: chown {os.getuid()} {item}"
            )
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise _unavailable(
                f"the {kind} {item} can be written by other users, who could have planted approvals in it; "
                f"check its contents, then run: chmod go-w {item}"
            )


def _connect(path: str) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as e:
        raise _unavailable(f"cannot open the state database {path}: {e}; {_CHOOSE_DIR}") from None
    try:
        # Reading the schema table is cheap and fails at once on a file that is not a database.
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as e:
        db.close()
        raise _unavailable(f"cannot open the state database {path}: {e}; {_CHOOSE_DIR}") from None
    except sqlite3.DatabaseError as e:
        db.close()
        raise _unavailable(
            f"the state database {path} is damaged ({e}); move it aside to start with empty state,"
            " or choose another state directory with --state-dir or TOOLSHELL_STATE_DIR"
        ) from None
    return db


def _use_wal(db: sqlite3.Connection) -> None:
    """Put the file in WAL mode (it stays so). Switching takes the file's lock without waiting on the
    busy handler, and another process opening a new file at the same moment may hold it: try again."""
    for attempt in range(50):
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or attempt == 49:
                raise
            time.sleep(0.1)  # a bounded wait for the other opener (5 s in all)


def _unavailable(message: str) -> ToolshellError:
    return ToolshellError(ErrorCode.UNAVAILABLE, message)
