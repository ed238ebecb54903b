"""What a shell that outlives a process costs: saving and restoring it by handle, per call.

    python benchmarks/scale.py [--calls N] [--postgres URL]

For a small shell, and for one holding 1 MB and 10 MB of files (random text, so compression does
not hide the size), three ways in the same run, on each engine (SQLite in a temp dir, and
PostgreSQL when `--postgres` or `TOOLSHELL_TEST_POSTGRES_URL` names one):

- bare: `Session.run("true")` in a session kept in memory (the floor: no handle at all);
- same worker: `Shells.run` on one worker, call after call (each call saves an incremental commit);
- alternating: two workers on one store taking turns (each call checks the shell out, then saves).

Reported: the median per call, and the cost added over bare.

Then, with PostgreSQL, the throughput of 1, 2 and 3 `toolshell serve --http` workers on one
database: 8 concurrent 2026-07-28 clients, each making 25 `bash` calls in its own shell, sent
round-robin across the workers call by call (each call restores the shell where it lands).
Then the capacity model (`capacity.py`): the store's round trips, commits and bytes per call on a
small shell (same worker, and other worker: the call lands where the shell must be checked out),
counted at the store protocol (`store_count.py`); with PostgreSQL, the small commits a second it
sustains, the `serve` workers' CPU per call from the throughput runs, and the calls a second N
hosts of K cores would serve, projected from those. Results go to `scale_results.json`.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from capacity import FORMULA, commit_rate, cpu_seconds, project, round_trips, table

from toolshell.host import Host
from toolshell.shell.handles import ShellHandles
from toolshell.shells import Shells
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.protocol import StateStore

HERE = Path(__file__).resolve().parent
SIZES = {"small": 0, "1 MB": 1 << 20, "10 MB": 10 << 20}


CHUNK = 2 << 20
"""Bytes a fill script writes (bashkit takes scripts of up to 10 MB)."""


def _fill(size: int) -> list[str]:
    """Scripts that write `size` bytes of random base64 text into the shell, a file per 2 MB."""
    scripts = ["echo kept > state.txt; X=1; greet(){ echo hi; }"]
    for n, start in enumerate(range(0, size, CHUNK)):
        text = base64.b64encode(os.urandom(min(CHUNK, size - start) * 3 // 4)).decode()
        scripts.append(f"cat > data{n}.txt <<'EOF'\n{text}\nEOF")
    return scripts


async def _median_ms(calls: int, step: Any) -> float:
    times = []
    for i in range(calls):
        started = time.perf_counter()
        await step(i)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def _measure(store_for: Any, state: Path, size: int, calls: int) -> dict[str, float]:
    keys = [new_key().encode()]
    async with Host.open(state_dir=state / "a") as one, Host.open(state_dir=state / "b") as two:
        bare = one.session()
        for script in _fill(size):
            await bare.run(script)
        stores: list[StateStore] = [store_for(), store_for()]
        workers = [
            Shells(h, ShellHandles(s, idle_seconds=3600, max_per_caller=8, max_bytes=64 << 20), keys)
            for h, s in zip((one, two), stores, strict=True)
        ]
        handle = workers[0].new("bench")
        for script in _fill(size):
            await workers[0].run("bench", handle, script)
        figures = {
            "bare_ms": await _median_ms(calls, lambda i: bare.run("true")),
            "same_worker_ms": await _median_ms(calls, lambda i: workers[0].run("bench", handle, "true")),
            "alternating_ms": await _median_ms(calls, lambda i: workers[i % 2].run("bench", handle, "true")),
        }
        _, objects = bare.commit()
        figures["commit_bytes"] = sum(len(d) for d in objects.values())
        figures["files_bytes"] = int((await bare.run("cat *.txt | wc -c")).stdout.strip() or 0)
        for w in workers:
            w.close()
        for s in stores:
            s.close()
    figures["added_same_worker_ms"] = figures["same_worker_ms"] - figures["bare_ms"]
    figures["added_alternating_ms"] = figures["alternating_ms"] - figures["bare_ms"]
    return figures


CLIENTS, CALLS_EACH = 8, 25
TOKEN = "scale-benchmark-token-0123456789abcdef"


def _start_workers(postgres: str, workers: int, tmp: str) -> tuple[list[Any], list[str]]:
    """`workers` serve processes on one database, each listening once this returns."""
    # lazy: only the throughput part starts processes
    import shutil
    import socket
    import subprocess

    env = {**os.environ, "TOOLSHELL_SERVE_TOKEN": TOKEN, "TOOLSHELL_STATE_URL": postgres}
    env["TOOLSHELL_STATE_KEYS"] = new_key()
    exe = shutil.which("toolshell") or str(Path(sys.executable).parent / "toolshell")
    procs, ports = [], []
    for i in range(workers):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        argv = [exe, "serve", "--http", "--port", str(ports[-1]), "--state-dir", f"{tmp}/w{i}"]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for port in ports:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    return procs, [f"http://127.0.0.1:{p}/mcp" for p in ports]


async def _throughput(postgres: str, workers: int) -> dict[str, float]:
    """Calls a second through `workers` serve processes on one PostgreSQL database."""
    # lazy: only this part needs the HTTP client
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {TOKEN}"}

    async def one_client(n: int, urls: list[str]) -> None:
        handle: str | None = None
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=60))
            clients = [
                await stack.enter_async_context(Client(streamable_http_client(u, http_client=http))) for u in urls
            ]
            for i in range(CALLS_EACH):
                args = {"script": f"echo {i} >> log; wc -l < log"} | ({"shell": handle} if handle else {})
                result = await clients[(n + i) % len(clients)].call_tool("bash", args)
                handle = json.loads(result.content[0].text)["shell"]

    with tempfile.TemporaryDirectory() as tmp:
        procs, urls = _start_workers(postgres, workers, tmp)
        try:
            idle = sum(cpu_seconds(p.pid) for p in procs)  # their start (imports, migrations) is not a call's
            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for n in range(CLIENTS):
                    tg.start_soon(one_client, n, urls)
            seconds = time.perf_counter() - started
            cpu = sum(cpu_seconds(p.pid) for p in procs) - idle
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(10)
    calls = CLIENTS * CALLS_EACH
    return {
        "workers": workers,
        "calls": calls,
        "seconds": seconds,
        "calls_per_s": calls / seconds,
        "worker_cpu_ms_per_call": cpu * 1000 / calls,
    }


def _capacity(postgres: str, results: dict[str, Any]) -> dict[str, Any]:
    """The commit rate measured here, and the calls a second projected from it and the CPU per call."""
    rate = commit_rate(postgres)
    print(
        f"PostgreSQL {rate['server']} (fsync={rate['settings'].get('fsync')}): small commits/s through the store,"
        f" 1 writer {rate['store_1_writers_per_s']:,.0f}, 8 writers {rate['store_8_writers_per_s']:,.0f};"
        f" pgbench, 8 clients: {rate['pgbench_8_clients_per_s'] or 'not installed'}",
        flush=True,
    )
    one = results["throughput"][0]  # one worker: its CPU per call with the least contention
    per_core = 1000 / one["worker_cpu_ms_per_call"]
    commits = results["engines"]["postgresql"]["round_trips_small"]["other_worker"]["commits"]
    best = max(rate["store_8_writers_per_s"], rate["pgbench_8_clients_per_s"] or 0)
    rows = project(per_core, best, commits)
    print(
        f"{FORMULA}\n  per_core = 1000 / {one['worker_cpu_ms_per_call']:.2f} ms = {per_core:.0f} calls/s,"
        f" commit_rate = {best:,.0f}/s, commits_per_call = {commits:.2f} (other worker, small shell)"
    )
    print(table(rows) + "\n  (* bounded by the database's commits)", flush=True)
    return {
        "formula": FORMULA,
        "commit_rate": rate,
        "per_core_calls_per_s": per_core,
        "commit_rate_used": best,
        "commits_per_call": commits,
        "projection": rows,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--postgres", default=os.environ.get("TOOLSHELL_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "calls": args.calls,
        "engines": {},
    }
    engines: dict[str, Any] = {"sqlite": None}
    if args.postgres:
        engines["postgresql"] = args.postgres
    for engine, url in engines.items():
        results["engines"][engine] = {}
        for label, size in SIZES.items():
            with tempfile.TemporaryDirectory() as tmp:
                state = Path(tmp)
                where = url or str(state / "shared" / "state.db")
                figures = await _measure(lambda where=where: open_store(where), state, size, args.calls)
            results["engines"][engine][label] = figures
            print(
                f"{engine:10} {label:6}  bare {figures['bare_ms']:6.2f} ms"
                f"  same worker {figures['same_worker_ms']:6.2f} ms (+{figures['added_same_worker_ms']:.2f})"
                f"  alternating {figures['alternating_ms']:6.2f} ms (+{figures['added_alternating_ms']:.2f})"
                f"  files {figures['files_bytes']} B, full commit {figures['commit_bytes']} B",
                flush=True,
            )
        with tempfile.TemporaryDirectory() as tmp:
            where = url or str(Path(tmp) / "shared" / "state.db")
            trips = await round_trips(where, Path(tmp), args.calls, [new_key().encode()])
        results["engines"][engine]["round_trips_small"] = trips
        for phase, c in trips.items():
            print(
                f"{engine:10} small, {phase.replace('_', ' ')}: {c['round_trips']:.1f} round trips"
                f" ({c['statements']:.1f} statements, {c['commits']:.2f} commits),"
                f" {c['written']:,.0f} B written, {c['read']:,.0f} B read a call",
                flush=True,
            )
    if args.postgres:
        results["throughput"] = []
        for n in (1, 2, 3):
            figures = await _throughput(args.postgres, n)
            results["throughput"].append(figures)
            print(
                f"{n} worker(s): {figures['calls_per_s']:.1f} bash calls/s ({figures['calls']} calls),"
                f" workers' CPU {figures['worker_cpu_ms_per_call']:.2f} ms a call",
                flush=True,
            )
        results["capacity"] = _capacity(args.postgres, results)
    (HERE / "scale_results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(anyio.run(main))
