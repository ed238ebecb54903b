"""What recording nested calls for resume by replay costs a call.

Usage: `python benchmarks/replay_cost.py [--calls 50] [--rounds 5] [--postgres URL]` (a server
whose `postgres` database may create a scratch database; default `$TOOLSHELL_TEST_POSTGRES_URL`).
One shell call of `--calls` in-process `tools echo echo` calls, run with no feed, then with a
`CallFeed` whose every record is sealed and written to the store before the script reads the
result (as a task's or a yielded call's are), on SQLite and on PostgreSQL. Median of the rounds,
per nested call, in ms; the modes alternate.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from toolshell.calls.replay import CallFeed
from toolshell.host import Host
from toolshell.store.engines import open_store
from toolshell.store.replay import CallRecords

sys.path.insert(0, str(Path(__file__).resolve().parent))
from echo_server import server as echo  # noqa: E402  (the benchmark's echo server, in this process)

RING = [secrets.token_bytes(32)]


async def _per_call(host: Host, calls: int, records: CallRecords | None) -> float:
    session = host.session()
    script = f"for i in $(seq 1 {calls}); do tools echo echo text=hi >/dev/null; done"
    feed = None if records is None else CallFeed(write=records.writer(RING, "bench-" + secrets.token_hex(8)))
    started = time.perf_counter()
    result = await session.run(script, feed=feed)
    took = time.perf_counter() - started
    assert result.exit_code == 0, result.stderr
    session.close()
    return took * 1000 / calls


async def _engine(where: str, state_dir: Path, calls: int, rounds: int) -> tuple[float, float]:
    store = open_store(where)
    async with Host.open(None, store=store, state_dir=state_dir, servers={"echo": echo}) as host:
        records = CallRecords(host.store)
        await _per_call(host, calls, None)  # warm: the catalog, the shell pool
        plain, recorded = [], []
        for n in range(rounds):
            for mode in ("plain", "recorded") if n % 2 == 0 else ("recorded", "plain"):
                (plain if mode == "plain" else recorded).append(
                    await _per_call(host, calls, records if mode == "recorded" else None)
                )
    return statistics.median(plain), statistics.median(recorded)


def _scratch_database(server: str) -> str:
    import psycopg  # lazy: only with PostgreSQL

    name = "bench_" + secrets.token_hex(6)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base, _, query = server.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get("TOOLSHELL_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="toolshell-replay-cost-"))
    engines = [("sqlite", str(root / "state.db"))]
    if args.postgres:
        engines.append(("postgresql", _scratch_database(args.postgres)))
    print(f"{'engine':<12} {'plain ms/call':>14} {'recorded ms/call':>17} {'added ms/call':>14}")
    for name, where in engines:
        plain, recorded = anyio.run(_engine, where, root / name, args.calls, args.rounds)
        print(f"{name:<12} {plain:>14.3f} {recorded:>17.3f} {recorded - plain:>14.3f}")


if __name__ == "__main__":
    main()
