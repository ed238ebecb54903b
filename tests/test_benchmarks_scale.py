"""benchmarks/scale.py's capacity model: the store traffic it counts per shell call, and the projection."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import capacity  # noqa: E402 - benchmarks/ is a folder of scripts, put on the path just above
from store_count import CountingStore, Counts  # noqa: E402

from toolshell.store.engines import open_store  # noqa: E402
from toolshell.store.keys import new_key  # noqa: E402


def test_a_call_on_another_worker_asks_the_store_more_than_one_on_the_worker_holding_the_shell(
    tmp_path: Path,
) -> None:
    where = str(tmp_path / "shared" / "state.db")
    figures = anyio.run(capacity.round_trips, where, tmp_path, 4, [new_key().encode()])
    same, other = figures["same_worker"], figures["other_worker"]
    for counts in (same, other):
        assert counts["commits"] >= 1  # the shell's save, at least
        assert counts["round_trips"] == counts["statements"] + counts["commits"]
        assert counts["written"] > 0
    assert other["round_trips"] >= same["round_trips"]
    assert other["read"] > same["read"]  # the check-out reads the shell's objects


def test_statements_commits_and_bytes_are_counted_at_the_store_protocol(tmp_path: Path) -> None:
    inner = open_store(str(tmp_path / "state.db"))
    store = CountingStore(inner)
    try:
        store.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB)")
        store.reset()
        with store.transaction() as tx:  # two writes, one commit
            tx.execute("INSERT INTO t (k, v) VALUES (?, ?)", ("a", b"12345"))
            store.execute("INSERT INTO t (k, v) VALUES (?, ?)", ("b", b"678"))
        assert store.reset() == Counts(statements=2, commits=1, transactions=1, written=1 + 5 + 1 + 3)
        rows = store.query("SELECT k, v FROM t ORDER BY k")  # a read commits nothing
        assert [r["k"] for r in rows] == ["a", "b"]
        with store.transaction() as tx:
            tx.query("SELECT v FROM t WHERE k = ?", ("a",))
        store.executemany("UPDATE t SET v = ? WHERE k = ?", [(b"x", "a"), (b"yy", "b")])
        counts = store.reset()
        assert counts == Counts(
            statements=3, commits=1, transactions=3, written=1 + (1 + 1) + (2 + 1), read=(1 + 5) + (1 + 3) + 5
        )  # a read alone, a read-only block, an executemany: three transactions, one writing
        assert counts.round_trips == 4
        store.close()  # the wrapper leaves its inner store open
        assert inner.query("SELECT COUNT(*) AS n FROM t")[0]["n"] == 2
    finally:
        inner.close()


@pytest.mark.parametrize(
    ("per_core", "rate", "commits", "bound_from"), [(100.0, 9000.0, 3.0, 32), (100.0, 1e9, 3.0, None)]
)
def test_the_projection_is_the_lesser_of_the_cores_and_the_database(
    per_core: float, rate: float, commits: float, bound_from: int | None
) -> None:
    rows = capacity.project(per_core, rate, commits)
    for row in rows:
        cores = row["hosts"] * row["cores"]
        assert row["calls_per_s"] == min(cores * per_core, rate / commits)
        assert row["bound"] == (bound_from is not None and cores >= bound_from)
    assert "*" in capacity.table(rows) if bound_from else "*" not in capacity.table(rows)
