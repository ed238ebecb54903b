# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""A process with more than 1023 open descriptors (a busy worker: sockets, files, pipes) still gets
its PostgreSQL connections: the pool's check of an idle connection polls its socket, and `select()`
refuses a descriptor past 1023 (`ValueError`), which made every checkout fail as unreachable."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator

import pytest

from _store_support import fresh_database, needs_postgres, postgres_server  # noqa: F401  (fixture)
from toolshell.store.engines import open_store


@pytest.fixture
def many_descriptors() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2048:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(2048, hard), hard))
    opened = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        yield
    finally:
        for fd in opened:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_store_opened_past_descriptor_1023_reads_and_writes(
    postgres_server: str | None, many_descriptors: None
) -> None:
    store = open_store(fresh_database(needs_postgres(postgres_server)))
    try:
        store.execute("CREATE TABLE notes (id TEXT PRIMARY KEY)")
        for n in range(5):  # each statement checks a connection out of the pool, and back
            store.execute("INSERT INTO notes (id) VALUES (?)", (str(n),))
        assert [r["n"] for r in store.query("SELECT COUNT(*) AS n FROM notes")] == [5]
    finally:
        store.close()
