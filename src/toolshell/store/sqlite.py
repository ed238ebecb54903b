"""A small SQLite store. Each feature creates its own tables with `ensure(schema)`.

SQLite calls are short and local, so they run inline; the file is opened once per `Store` and
writes are committed at once so a crash loses nothing that was acknowledged.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any


class Store:
    """`Store(path)` for a file, `Store(":memory:")` for tests."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = str(path)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA journal_mode=MEMORY")
        self._db.execute("PRAGMA busy_timeout=5000")
        # In WAL mode NORMAL loses nothing when the process crashes (only on power loss), and saves a
        # disk sync per commit: the timeline writes one row per tool call.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._lock = threading.Lock()
        self._ensured: set[str] = set()

    def ensure(self, schema: str) -> None:
        """Run `CREATE TABLE IF NOT EXISTS ...` statements once per store."""
        if schema in self._ensured:
            return
        with self._lock:
            self._db.executescript(schema)
            self._ensured.add(schema)

    def execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, tuple(params))

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, tuple(params)).fetchall()

    def close(self) -> None:
        with self._lock:
            self._db.close()
