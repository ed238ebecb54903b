"""What one `bash` call through `toolshell serve --http` asks of its store (issue 31, "Lean calls").

    python benchmarks/lean_calls.py [--calls N] [--clients K] [--engine postgresql|sqlite|both]
                                    [--postgres URL] [--json FILE]

Real `serve --http` workers in their own processes; K clients (threads speaking raw JSON-RPC over
one keep-alive HTTP connection each, legacy sessions, each keeping its shell by handle) make N
calls in all of `echo $i >> log; tools text-metrics text-length text=x$i; wc -l < log`. Two runs
per engine: `same worker` (one worker) and `other worker` (two workers on one store, each call sent
to the other one, so every call lands where its shell was last saved elsewhere).

Counted per call:

- at the store protocol, inside each worker (`store_count.CountingStore` wrapped around the
  store it opens): transactions (reads included), writing transactions, statements, bytes;
- with PostgreSQL, by the server itself: transactions (`pg_stat_database`: `xact_commit`, which
  counts the pool's liveness checks too), statements (`pg_stat_statements`, listed by text) and
  WAL bytes (`pg_current_wal_lsn()`), the idle workers' background (heartbeats) subtracted;
- each worker's CPU (`/proc/PID/stat`), startup excluded.

Without `--postgres` a private PostgreSQL cluster is made in a temp dir (`initdb`; as the
`postgres` user when run as root), with `pg_stat_statements` loaded and fsync on, so its WAL and
statistics are this run's alone. The statistics collector publishes another process's counts when
it idles (at most 10 s later), so each window is closed by an idle wait.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOKEN = "lean-calls-benchmark-token-0123456789abcdef"
SCRIPT = "echo {i} >> log; tools text-metrics text-length text=x{i}; wc -l < log"
STATS_IDLE = 11.0
"""Seconds a PostgreSQL backend may keep its counts before publishing them (PGSTAT_IDLE_INTERVAL, 10 s)."""


# --- the worker side: `serve` with its store counted -------------------------------------------


def _counted_worker(counts_file: str, argv: list[str]) -> None:
    """Run `toolshell serve …` with `CountingStore` around the store it opens; SIGUSR1 writes the
    counts so far to `counts_file` and starts counting again."""
    sys.path.insert(0, str(HERE))
    from store_count import CountingStore

    import toolshell.host as host_mod

    opened: list[Any] = []
    real = host_mod.open_store

    def counted(where: Any) -> Any:
        store = CountingStore(real(where))
        opened.append(store)
        return store

    host_mod.open_store = counted  # type: ignore[assignment]

    def dump(signum: int, frame: Any) -> None:
        counts = [vars(s.reset()) for s in opened]
        total = {k: sum(c[k] for c in counts) for k in counts[0]} if counts else {}
        tmp = counts_file + ".tmp"
        Path(tmp).write_text(json.dumps(total))
        os.replace(tmp, counts_file)

    signal.signal(signal.SIGUSR1, dump)
    from toolshell.frontends.entry import main

    main(argv)


# --- PostgreSQL --------------------------------------------------------------------------------


@contextmanager
def private_cluster() -> Iterator[str]:
    """A PostgreSQL cluster of this run's own: its URL (the `postgres` database)."""
    initdb = shutil.which("initdb")
    if initdb is None:
        raise SystemExit("no initdb on PATH: pass --postgres URL")
    root = tempfile.mkdtemp(prefix="lean-calls-pg.")
    data = f"{root}/data"
    as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_pg:
        shutil.chown(root, "postgres")
    subprocess.run([*as_pg, initdb, "-D", data, "-U", "postgres", "--auth=trust"], check=True, capture_output=True)
    opts = f"-k {root} -c listen_addresses='' -c shared_preload_libraries=pg_stat_statements -c fsync=on"
    pg_ctl = str(Path(initdb).with_name("pg_ctl"))
    subprocess.run([*as_pg, pg_ctl, "-D", data, "-o", opts, "-l", f"{root}/log", "-w", "start"], check=True)
    try:
        yield f"postgresql://postgres@/postgres?host={root}"
    finally:
        subprocess.run([*as_pg, pg_ctl, "-D", data, "-m", "fast", "-w", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def _with_db(url: str, db: str) -> str:
    base, _, query = url.partition("?")
    return base.rsplit("/", 1)[0] + "/" + db + ("?" + query if query else "")


class Pg:
    """This run's database and the server's counts of it."""

    def __init__(self, url: str, db: str) -> None:
        import psycopg

        self.admin = psycopg.connect(url, autocommit=True)
        self.admin.execute(f"DROP DATABASE IF EXISTS {db}")
        self.admin.execute(f"CREATE DATABASE {db}")
        self.db, self.url = db, _with_db(url, db)
        self.conn = psycopg.connect(self.url, autocommit=True)
        try:
            self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            self.conn.execute("SELECT pg_stat_statements_reset()")
            self.statements = True
        except psycopg.Error:
            self.statements = False

    def snapshot(self) -> dict[str, Any]:
        row = self.conn.execute(
            "SELECT xact_commit + xact_rollback, pg_current_wal_lsn() - '0/0'::pg_lsn FROM pg_stat_database "
            "WHERE datname = %s",
            (self.db,),
        ).fetchone()
        assert row is not None
        return {"xacts": int(row[0]), "wal": int(row[1]), "at": time.monotonic()}

    def statements_since_reset(self) -> list[tuple[str, int, int, int]]:
        """Each statement's text, how many times it ran, its WAL bytes and full-page images."""
        if not self.statements:
            return []
        rows = self.conn.execute(
            "SELECT query, calls, wal_bytes, wal_fpi FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
            "WHERE d.datname = %s ORDER BY calls DESC",
            (self.db,),
        ).fetchall()
        return [(str(q), int(c), int(w), int(f)) for q, c, w, f in rows if "pg_stat_statements" not in q]

    def reset_statements(self) -> None:
        if self.statements:
            self.conn.execute("SELECT pg_stat_statements_reset()")

    def close(self) -> None:
        self.conn.close()
        self.admin.execute(f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")
        self.admin.close()


# --- the clients ---------------------------------------------------------------------------------


class Client:
    """One MCP session over one keep-alive connection, raw JSON-RPC (legacy protocol)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.session: str | None = None
        self.ids = 0
        self.handle: str | None = None
        self.initialize()

    def post(self, body: dict[str, Any]) -> Any:
        headers = {
            "Authorization": f"Bearer {TOKEN}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if self.session:
            headers |= {"Mcp-Session-Id": self.session, "Mcp-Protocol-Version": "2025-11-25"}
        try:
            self.conn.request("POST", "/mcp", json.dumps(body), headers)
            response = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            self.conn.close()  # the server closed an idle keep-alive connection: open another
            self.conn.request("POST", "/mcp", json.dumps(body), headers)
            response = self.conn.getresponse()
        text = response.read().decode()
        self.session = response.getheader("mcp-session-id") or self.session
        if response.status >= 400:
            raise RuntimeError(f"HTTP {response.status}: {text[:300]}")
        if "id" not in body:
            return None
        if text.lstrip().startswith("{"):
            return json.loads(text)
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        answers = [json.loads(d) for d in data if d]
        return next(a for a in answers if a.get("id") == body["id"])

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.ids += 1
        return self.post({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})

    def initialize(self) -> None:
        info = {"name": "lean-calls", "version": "1"}
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def bash(self, script: str) -> dict[str, Any]:
        args = {"script": script} | ({"shell": self.handle} if self.handle else {})
        answer = self.request("tools/call", {"name": "bash", "arguments": args})
        result = answer["result"]
        out = result.get("structuredContent") or json.loads(result["content"][0]["text"])
        self.handle = out["shell"]
        return dict(out)


class Clients:
    """K clients, each with one session on each worker and one shell, calling round-robin."""

    def __init__(self, ports: list[int], k: int) -> None:
        self.ports = ports
        self.rows = [[Client(p) for p in ports] for _ in range(k)]
        self.turn = [0] * k
        self.lines = [0] * k

    def call(self, n: int, i: int) -> None:
        sessions = self.rows[n]
        me = sessions[self.turn[n] % len(sessions)]
        self.turn[n] += 1
        me.handle = next((s.handle for s in sessions if s.handle), None) if me.handle is None else me.handle
        out = me.bash(SCRIPT.format(i=i))
        for s in sessions:
            s.handle = out["shell"]
        self.lines[n] += 1
        if out.get("exit_code") != 0 or out["stdout"].split()[-1] != str(self.lines[n]):
            raise RuntimeError(f"a call lost its shell's file or failed: {out}")

    def run(self, calls: int) -> None:
        each = calls // len(self.rows)

        errors: list[BaseException] = []

        def one(n: int) -> None:
            try:
                for i in range(each):
                    self.call(n, i)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(n,)) for n in range(len(self.rows))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]


# --- one run -------------------------------------------------------------------------------------


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Workers:
    def __init__(self, n: int, tmp: Path, state_url: str | None) -> None:
        env = {**os.environ, "TOOLSHELL_SERVE_TOKEN": TOKEN, "TOOLSHELL_STATE_KEYS": _key()}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ports: list[int] = []
        self.counts: list[Path] = []
        state = tmp / "state"  # SQLite: the workers share one state dir (one file)
        for i in range(n):
            self.ports.append(_port())
            self.counts.append(tmp / f"counts{i}.json")
            if state_url:
                env["TOOLSHELL_STATE_URL"] = state_url
                state = tmp / f"w{i}"
            argv = ["serve", "--http", "--port", str(self.ports[-1]), "--state-dir", str(state)]
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(self.counts[-1]), "--", *argv]
            log = open(tmp / f"log{i}", "wb")  # noqa: SIM115  # the worker's, closed with the temp dir
            self.procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log))
        for port in self.ports:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

    def cpu(self) -> float:
        return sum(_cpu(p.pid) for p in self.procs)

    def store_counts(self) -> dict[str, int]:
        """The counts since the last call (each worker's, summed)."""
        for path in self.counts:
            path.unlink(missing_ok=True)
        for p in self.procs:
            p.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not all(path.exists() for path in self.counts):
            if time.monotonic() > deadline:
                raise RuntimeError("a worker did not write its counts")
            time.sleep(0.05)
        totals: dict[str, int] = {}
        for path in self.counts:
            for k, v in json.loads(path.read_text()).items():
                totals[k] = totals.get(k, 0) + v
        return totals

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(30)


def _key() -> str:
    from toolshell.store.keys import new_key

    return new_key()


def measure(engine: str, workers: int, calls: int, clients: int, pg: Pg | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        w = Workers(workers, Path(tmp), pg.url if pg else None)
        try:
            load = Clients(w.ports, clients)
            load.run(clients * 4)  # warm: each shell made, each worker has seen each statement
            if pg is not None:
                time.sleep(STATS_IDLE)
                idle0 = pg.snapshot()
                time.sleep(STATS_IDLE)  # an idle window: the workers' background
                before = pg.snapshot()
                pg.reset_statements()
            w.store_counts()
            cpu0, t0 = w.cpu(), time.perf_counter()
            load.run(calls)
            seconds, cpu = time.perf_counter() - t0, w.cpu() - cpu0
            counted = w.store_counts()
            done = (calls // clients) * clients
            figures: dict[str, Any] = {
                "engine": engine,
                "workers": workers,
                "calls": done,
                "calls_per_s": done / seconds,
                "worker_cpu_ms_per_call": cpu * 1000 / done,
                "store": {k: v / done for k, v in counted.items()},
            }
            if pg is not None:
                statements = pg.statements_since_reset()
                time.sleep(STATS_IDLE)
                after = pg.snapshot()
                span = after["at"] - before["at"]
                idle_span = before["at"] - idle0["at"]
                bg = {k: (before[k] - idle0[k]) * span / idle_span for k in ("xacts", "wal")}
                figures["postgresql"] = {
                    "xacts_per_call": (after["xacts"] - before["xacts"] - bg["xacts"]) / done,
                    "wal_kb_per_call": (after["wal"] - before["wal"] - bg["wal"]) / done / 1024,
                    "background_xacts_per_s": (before["xacts"] - idle0["xacts"]) / idle_span,
                    "statements_per_call": {
                        q[:90]: [round(c / done, 2), round(wb / done), round(f / done, 2)]
                        for q, c, wb, f in statements
                        if c >= done / 4
                    },
                    "statement_wal_kb_per_call": sum(s[2] for s in statements) / done / 1024,
                }
            return figures
        finally:
            w.stop()


def _print(f: dict[str, Any]) -> None:
    where = "same worker" if f["workers"] == 1 else f"other worker ({f['workers']} workers)"
    s = f["store"]
    print(
        f"{f['engine']:>10} {where:>24}: {f['calls']} calls, {f['calls_per_s']:.0f}/s, worker CPU "
        f"{f['worker_cpu_ms_per_call']:.1f} ms/call; store protocol: {s.get('transactions', 0):.2f} transactions "
        f"({s['commits']:.2f} writing), {s['statements']:.2f} statements, {s['written'] / 1024:.2f} KB written"
    )
    pg = f.get("postgresql")
    if pg:
        print(
            f"{'':>36}PostgreSQL: {pg['xacts_per_call']:.2f} transactions/call, "
            f"WAL {pg['wal_kb_per_call']:.2f} KB/call (statements' WAL {pg['statement_wal_kb_per_call']:.2f}); "
            f"background {pg['background_xacts_per_s']:.1f} xacts/s"
        )
        print(f"{'':>40}{'calls':>6} {'WAL B':>6} {'FPI':>5}  (per call)")
        for q, (n, wb, fpi) in pg["statements_per_call"].items():
            print(f"{'':>40}{n:6.2f} {wb:6.0f} {fpi:5.2f}  {' '.join(q.split())}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        _counted_worker(sys.argv[2], sys.argv[4:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--engine", choices=["postgresql", "sqlite", "both"], default="both")
    ap.add_argument("--postgres", help="a server to use (default: a private cluster of this run's own)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    results = []
    if args.engine in ("sqlite", "both"):
        for n in (1, 2):
            results.append(measure("sqlite", n, args.calls, args.clients, None))
            _print(results[-1])
    if args.engine in ("postgresql", "both"):
        with private_cluster() if args.postgres is None else _given(args.postgres) as url:
            for n in (1, 2):
                pg = Pg(url, f"lean_calls_{os.getpid()}_{n}")
                try:
                    results.append(measure("postgresql", n, args.calls, args.clients, pg))
                finally:
                    pg.close()
                _print(results[-1])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


if __name__ == "__main__":
    main()
