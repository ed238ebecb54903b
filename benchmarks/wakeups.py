"""How soon a call waiting for an approval resumes after another worker answers it.

Usage: `python benchmarks/wakeups.py [--rounds N] [--postgres URL]` (the URL of a server whose
`postgres` database may create scratch databases; default `$TOOLSHELL_TEST_POSTGRES_URL`, as
`scripts/postgres.sh start` exports it). Each round opens a request on worker one, parks
`Approvals.wait_answered` on it, lets it settle, then times worker two's `grant` call start (at a random moment) →
worker one's waiter resumed. Cases: PostgreSQL (two stores: the notification goes through the
server and the waiter's `LISTEN` connection, as between two processes), SQLite across stores on
one file (another process's notification is found by polling, `sqlite.POLL_SECONDS`), and SQLite
on one store (this process's notification wakes at once). Median and 95th percentile, in ms.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from toolshell.policy.approvals import Approvals
from toolshell.registry.entry import ToolEntry
from toolshell.store.engines import open_store
from toolshell.store.protocol import StateStore

ENTRY = ToolEntry("github", "delete_branch")
SETTLE_SECONDS = 0.05  # lets the waiter subscribe and park before the grant is timed
JITTER_SECONDS = 0.2  # and a random extra, so the grant lands anywhere in SQLite's poll interval


async def _round(waiter: Approvals, answerer: Approvals, n: int) -> float:
    request = waiter.request(ENTRY, {"branch": f"b{n}"}, "bench", "destructive")
    resumed: list[float] = []

    async def wait() -> None:
        await waiter.wait_answered(request.id)
        resumed.append(time.perf_counter())

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await anyio.sleep(SETTLE_SECONDS + random.random() * JITTER_SECONDS)
        started = time.perf_counter()
        answerer.grant(request.id)
    return (resumed[0] - started) * 1000


async def _case(one: StateStore, two: StateStore, rounds: int) -> list[float]:
    waiter, answerer = Approvals(one), Approvals(two)
    return [await _round(waiter, answerer, n) for n in range(rounds)]


def _report(name: str, ms: list[float]) -> None:
    p95 = statistics.quantiles(ms, n=20)[-1] if len(ms) >= 20 else max(ms)
    print(f"{name:<44} median {statistics.median(ms):8.2f} ms   p95 {p95:8.2f} ms   ({len(ms)} rounds)")


def _scratch_database(server: str) -> str:
    # lazy: psycopg is the PostgreSQL engine's optional extra
    import psycopg

    name = "bench_" + secrets.token_hex(6)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base, _, query = server.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


async def main(rounds: int, postgres: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state" / "toolshell.db"
        one, two = open_store(path), open_store(path)
        _report("SQLite, another store on the file (polled)", await _case(one, two, rounds))
        _report("SQLite, the same store (in-process)", await _case(one, one, rounds))
        one.close()
        two.close()
    if postgres:
        url = _scratch_database(postgres)
        one, two = open_store(url), open_store(url)
        _report("PostgreSQL, another store (NOTIFY/LISTEN)", await _case(one, two, rounds))
        one.close()
        two.close()
    else:
        print("PostgreSQL: skipped (give --postgres URL or set TOOLSHELL_TEST_POSTGRES_URL)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--postgres", default=os.environ.get("TOOLSHELL_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.postgres)
