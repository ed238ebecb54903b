# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""A `bash` call writes at most 2 KB of WAL on PostgreSQL (issue 31, DESIGN §11 "A call has a
budget"): the shell's commit (the handle's update and one pack row) and the call's timeline rows,
in one transaction, each row with only the indexes a query reads. Counted by PostgreSQL itself
(`pg_walinspect`): the records of this test's database, and the commit records of their
transactions; full-page images left out (one per page after each checkpoint, whoever writes)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from _store_support import fresh_database, needs_postgres, postgres_server  # noqa: F401  # fixture
from toolshell.host import Host
from toolshell.shell.handles import ShellHandles
from toolshell.shells import Shells
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.timeline import query

pytestmark = pytest.mark.anyio
SCRIPT = "echo {i} >> log; tools text-metrics text-length text=x{i}; wc -l < log"
CALLS = 20
BUDGET = 2048


def _wal_of(conn: Any, database: int, start: str, end: str) -> tuple[int, int]:
    """The WAL bytes of `database`'s records between two positions, with their transactions'
    commit records, full-page images left out; and how many transactions committed."""
    rows = conn.execute(
        "SELECT xid, resource_manager, record_length, fpi_length, block_ref FROM pg_get_wal_records_info(%s, %s)",
        (start, end),
    ).fetchall()
    ours = [r for r in rows if re.search(rf"rel \d+/{database}/", r[4] or "")]
    xids = {r[0] for r in ours if r[0]}
    commits = [r for r in rows if r[1] == "Transaction" and r[0] in xids]
    return sum(r[2] - r[3] for r in ours + commits), len(commits)


async def test_a_call_on_a_kept_shell_writes_at_most_2_kb_of_wal(postgres_server: str | None, tmp_path: Path) -> None:
    import psycopg  # lazy: needed only where PostgreSQL runs

    url = fresh_database(needs_postgres(postgres_server))
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        except psycopg.Error as exc:
            pytest.skip(f"this PostgreSQL has no pg_walinspect (PostgreSQL 15 or later, contrib): {exc}")
        database = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]
        store = open_store(url)
        try:
            async with Host.open(state_dir=tmp_path / "w", store=store) as host:
                handles = ShellHandles(store, idle_seconds=3600, max_per_caller=8, max_bytes=1 << 24)
                shells = Shells(host, handles, [new_key().encode()])
                handle = None
                for i in range(3):  # the shell made, every statement seen once
                    handle = (await shells.run("alice", handle, SCRIPT.format(i=i))).shell
                start = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
                for i in range(3, 3 + CALLS):
                    result = await shells.run("alice", handle, SCRIPT.format(i=i))
                    assert result.stdout.split()[-1] == str(i + 1), "the shell kept its file"
                end = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
                rows = query(store, limit=100)
                shells.close()
        finally:
            store.close()
        wal, commits = _wal_of(conn, database, start, end)
    print(f"\nWAL per call: {wal / CALLS:.0f} B, writing transactions per call: {commits / CALLS:.2f}")
    assert len(rows) == 3 + CALLS and all(r["exit_code"] == 0 and len(r["calls"]) == 1 for r in rows), "all recorded"
    assert commits == CALLS, "one writing transaction a call"
    assert wal / CALLS <= BUDGET
