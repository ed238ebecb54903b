"""The capacity model of `scale.py`: what the store is asked per shell call, what PostgreSQL commits
a second, and the calls a second N hosts of K cores would serve, projected from those.

    calls/s(N, K) = min(N · K · per_core, commit_rate / commits_per_call)

`per_core` is 1 / (a `serve` worker's CPU seconds per call), one worker process per core (a worker
is one Python process: it uses about one core); `commit_rate` is what the database sustained here;
`commits_per_call` is what a call on a shell kept by handle commits (measured through
`store_count.CountingStore`). The first term is the workers' CPU, the second the database's writes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from store_count import CountingStore

from toolshell.host import Host
from toolshell.shell.handles import ShellHandles
from toolshell.shells import Shells
from toolshell.store.engines import open_store

FORMULA = "calls/s(N hosts, K cores) = min(N*K * per_core, commit_rate / commits_per_call)"
HOSTS, CORES = (1, 2, 4, 8, 16), (1, 2, 4, 8)


async def round_trips(where: str, state: Path, calls: int, keys: list[bytes]) -> dict[str, dict[str, float]]:
    """What the store is asked per shell call on a small shell, counted: the next call on the
    worker holding the shell live (`same_worker`), and calls alternating between two workers, so
    each lands where the shell must be checked out of the store (`other_worker`). Both workers'
    whole store traffic is counted (the shell's save and check-out, and the timeline's rows, the
    batched ones flushed at the end of each phase)."""
    inner = open_store(where)
    store = CountingStore(inner)
    try:
        async with (
            Host.open(state_dir=state / "a", store=store) as one,
            Host.open(state_dir=state / "b", store=store) as two,
        ):
            hosts = (one, two)
            workers = [
                Shells(h, ShellHandles(store, idle_seconds=3600, max_per_caller=8, max_bytes=64 << 20), keys)
                for h in hosts
            ]
            handle = workers[0].new("bench")
            await workers[0].run("bench", handle, "echo kept > state.txt; X=1; greet(){ echo hi; }")
            await workers[1].run("bench", handle, "true")  # both workers have started (tables, statements)
            figures = {}
            for phase, worker_of in (("same_worker", lambda i: 0), ("other_worker", lambda i: (i + 1) % 2)):
                await workers[0].run("bench", handle, "true")  # worker 0 holds the newest version
                store.reset()
                for i in range(calls):
                    await workers[worker_of(i)].run("bench", handle, "true")
                for h in hosts:
                    h.sink.flush()  # type: ignore[attr-defined]  # the timeline's batched rows
                figures[phase] = store.reset().per(calls)
            for w in workers:
                w.close()
    finally:
        inner.close()
    return figures


def commit_rate(url: str, seconds: float = 3.0) -> dict[str, Any]:
    """Small write transactions a second PostgreSQL sustains here: through toolshell's own
    `PostgresStore` (its pool, from Python threads) with 1 and 8 writers, and with `pgbench`
    (the server's client, 8 connections) when it is installed."""
    store = open_store(url)
    figures: dict[str, Any] = {}
    try:
        store.execute(
            "CREATE TABLE IF NOT EXISTS bench_commits (id TEXT PRIMARY KEY, n BIGINT NOT NULL, at DOUBLE PRECISION)"
        )
        for writers in (1, 8):
            figures[f"store_{writers}_writers_per_s"] = _upserts(store, writers, seconds)
        figures["pgbench_8_clients_per_s"] = _pgbench(url, seconds)
        store.execute("DROP TABLE bench_commits")
        settings = store.query("SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit')")
        figures["settings"] = {r["name"]: r["setting"] for r in settings}
        figures["server"] = store.query("SHOW server_version")[0]["server_version"]
    finally:
        store.close()
    return figures


def _upserts(store: Any, writers: int, seconds: float) -> float:
    """Upserts a second, each its own transaction, from `writers` threads for `seconds`."""
    done = [0] * writers
    stop = time.monotonic() + seconds

    def write(w: int) -> None:
        while time.monotonic() < stop:
            store.execute(
                "INSERT INTO bench_commits (id, n, at) VALUES (?, 1, ?) "
                "ON CONFLICT (id) DO UPDATE SET n = bench_commits.n + 1, at = excluded.at",
                (f"w{w}", time.time()),
            )
            done[w] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - started)


def _pgbench(url: str, seconds: float) -> float | None:
    """`pgbench` of the same upsert, 8 clients on 2 threads: the server's rate without Python."""
    exe = shutil.which("pgbench") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/pgbench"))), None)
    if exe is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
        script.write(
            "INSERT INTO bench_commits (id, n, at) VALUES ('pg' || :client_id, 1, 0) "
            "ON CONFLICT (id) DO UPDATE SET n = bench_commits.n + 1;\n"
        )
        script.flush()
        argv = [str(exe), "-n", "-f", script.name, "-c", "8", "-j", "2", "-T", str(int(seconds)), url]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
    for line in done.stdout.splitlines():
        if line.startswith("tps = "):
            return float(line.split()[2])
    return None


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of a live process so far (`/proc/<pid>/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def project(per_core: float, commit_rate: float, commits_per_call: float) -> list[dict[str, float]]:
    """The projected calls a second of N hosts of K cores (one worker a core), and which term bounds it."""
    ceiling = commit_rate / commits_per_call if commits_per_call else float("inf")
    rows = []
    for n in HOSTS:
        for k in CORES:
            cpu = n * k * per_core
            rows.append({"hosts": n, "cores": k, "calls_per_s": min(cpu, ceiling), "bound": cpu >= ceiling})
    return rows


def table(rows: list[dict[str, float]]) -> str:
    """The projection as text: hosts down, cores across; `*` where the database bounds it."""
    lines = ["hosts \\ cores " + "".join(f"{k:>10}" for k in CORES)]
    for n in HOSTS:
        cells = [r for r in rows if r["hosts"] == n]
        lines.append(f"{n:>13} " + "".join(f"{r['calls_per_s']:>9,.0f}{'*' if r['bound'] else ' '}" for r in cells))
    return "\n".join(lines)
