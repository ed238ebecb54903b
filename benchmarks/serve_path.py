"""Worker CPU per `bash` call through `toolshell serve --http`, on a warm shell kept by handle.

    python benchmarks/serve_path.py [--calls N] [--store-url URL] [--processes N | --other-worker]
                                    [--py-spy FILE]

Starts `toolshell serve --http --no-auth` on a free loopback port (its own state dir; the SQLite
store by default, or `--store-url`, e.g. a fresh PostgreSQL database), makes one shell, warms it,
then sends N sequential 2026-07-28 `tools/call`s of `bash` with the shell's handle on one
keep-alive connection (a raw JSON-RPC client: the SDK's client costs more than the server it
measures). The script is issue 31's: `echo $i >> log; tools text-metrics text-length text=x$i;
wc -l < log`. It reports the serving processes' CPU per call (user + system, from /proc, the
whole process tree with `--processes`; user and system apart, and the threads' context switches),
p50 and p99 latency, and calls/s; `--script` runs another script (`true`: the path without the
nested call or a file). `--other-worker` starts two `serve` processes on one store (the SQLite
file in one state dir, or the PostgreSQL database) and sends each call to the one that did not make
the last: every call finds its shell saved by the other worker (issue 31's "≤ 5 ms when the shell
comes from another worker"); CPU is both workers' per call. `--py-spy FILE` records the (first)
worker with py-spy (on-CPU samples, a speedscope file) during the measured calls.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

from toolshell.store.keys import new_key

SCRIPT = "echo {i} >> log; tools text-metrics text-length text=x{i}; wc -l < log"
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "bash",
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "serve-path-bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
ENTRY = "from toolshell.frontends.entry import main; main()"
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_cpu(pid: int) -> tuple[float, float, int, dict[str, float]]:
    """User and system CPU seconds of `pid` and its live descendants, their threads' context
    switches (each hop of a call between the event loop and a thread, or a wait on a socket), and
    CPU seconds by thread: the event loop (a process's main thread), the Python worker threads
    (the store's round trips, the shell's commit), bashkit's runtime threads by name."""
    user, system, switches, todo, named = 0.0, 0.0, 0, [pid], {}
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            user, system = user + int(fields[11]) / TICKS, system + int(fields[12]) / TICKS
            for task in Path(f"/proc/{p}/task").iterdir():
                children = (task / "children").read_text().split()
                todo += [int(c) for c in children]
                stat = (task / "stat").read_text()
                name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rsplit(")", 1)[1].split()
                if name == "python":  # Python names no OS thread: the main one runs the event loop
                    name = "event loop" if task.name == str(p) else "python threads"
                named[name] = named.get(name, 0.0) + (int(rest[11]) + int(rest[12])) / TICKS
                for line in (task / "status").read_text().splitlines():
                    if "ctxt_switches:" in line:
                        switches += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return user, system, switches, named


def call(http: httpx2.Client, url: str, script: str, shell: str | None) -> dict[str, Any]:
    arguments = {"script": script, **({"shell": shell} if shell else {})}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "bash", "arguments": arguments, "_meta": META},
    }
    text = http.post(url, content=json.dumps(body), headers=HEADERS).text
    if "data:" in text:
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:") and '"result"' in line)
    result: dict[str, Any] = json.loads(text)["result"]["structuredContent"]
    return result


def wait_ready(base: str, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"serve exited with {proc.returncode}")
        try:
            if httpx2.get(base + "/readyz", timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)  # a poll while it starts, bounded above
    raise SystemExit("serve did not get ready")


def measure(
    calls: int,
    warmup: int,
    store_url: str | None,
    processes: int,
    spy: str | None,
    script: str = SCRIPT,
    other_worker: bool = False,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TOOLSHELL_STATE_KEYS": new_key()}
        if store_url:
            env["TOOLSHELL_STATE_URL"] = store_url
        config = Path(tmp) / "toolshell.toml"
        config.write_text("[tools_in_shell]\ncall_limit = 100000\n")
        ports, procs, spying = [], [], None
        for n in range(2 if other_worker else 1):
            ports.append(free_port())
            state = Path(tmp) / ("state" if store_url is None else f"state{n}")  # SQLite: one file for both
            argv = [sys.executable, "-c", ENTRY, "serve", "--http", "--no-auth", "--port", str(ports[-1])]
            argv += ["--config", str(config), "--state-dir", str(state)]
            if processes != 1:
                argv += ["--processes", str(processes)]
            procs.append(subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL))
        urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]
        proc = procs[0]
        try:
            for port, served in zip(ports, procs, strict=True):
                wait_ready(f"http://127.0.0.1:{port}", served)
            with contextlib.ExitStack() as stack:
                https = [stack.enter_context(httpx2.Client(timeout=60)) for _ in urls]
                shell = call(https[0], urls[0], "echo start > log", None)["shell"]
                for i in range(warmup):
                    call(https[(i + 1) % len(urls)], urls[(i + 1) % len(urls)], script.format(i=i), shell)
                if spy:
                    spy_argv = [
                        str(Path(sys.executable).parent / "py-spy"),
                        "record",
                        "--nonblocking",
                        "-o",
                        spy,
                        "-f",
                        "speedscope",
                    ]
                    spying = subprocess.Popen([*spy_argv, "-p", str(proc.pid), "-r", "500"], stderr=subprocess.DEVNULL)
                    time.sleep(1)  # py-spy attaches
                cpu, started, took, yielded = _cpu(procs), time.perf_counter(), [], 0
                for i in range(calls):
                    t, at = time.perf_counter(), (warmup + i + 1) % len(urls)
                    result = call(https[at], urls[at], script.format(i=warmup + i), shell)
                    stalled = False
                    while result.get("running") or (result.get("earlier") or {}).get("running"):
                        stalled = True  # it yielded (a stalled machine): collect the rest
                        time.sleep(0.05)
                        result = call(https[at], urls[at], "true", shell)
                    yielded += stalled
                    took.append(time.perf_counter() - t)
                    assert result["shell"] == shell and (stalled or result["exit_code"] == 0), result
                wall, after = time.perf_counter() - started, _cpu(procs)
        finally:
            if spying is not None:
                spying.send_signal(2)
                spying.wait(60)
            for served in procs:
                served.terminate()
                served.wait(60)
    took.sort()
    return {
        "store": "postgresql" if store_url else "sqlite",
        "processes": processes,
        "shell_from": "the other worker" if other_worker else "the same worker",
        "calls": calls,
        "worker_cpu_ms_per_call": round(1000 * (after[0] + after[1] - cpu[0] - cpu[1]) / calls, 2),
        "user_ms": round(1000 * (after[0] - cpu[0]) / calls, 2),
        "system_ms": round(1000 * (after[1] - cpu[1]) / calls, 2),
        "switches_per_call": round((after[2] - cpu[2]) / calls, 1),
        "threads_ms": {
            name: round(1000 * (spent - cpu[3].get(name, 0.0)) / calls, 2)
            for name, spent in sorted(after[3].items(), key=lambda kv: kv[1] - cpu[3].get(kv[0], 0.0), reverse=True)
            if spent - cpu[3].get(name, 0.0) > 0
        },
        "p50_ms": round(1000 * statistics.median(took), 2),
        "p99_ms": round(1000 * took[int(0.99 * (len(took) - 1))], 2),
        "calls_per_s": round(calls / wall, 1),
        "yielded": yielded,
    }


def _cpu(procs: list[subprocess.Popen[bytes]]) -> tuple[float, float, int, dict[str, float]]:
    """`tree_cpu` summed over the workers."""
    user, system, switches, named = 0.0, 0.0, 0, dict[str, float]()
    for proc in procs:
        u, s, n, threads = tree_cpu(proc.pid)
        user, system, switches = user + u, system + s, switches + n
        for name, spent in threads.items():
            named[name] = named.get(name, 0.0) + spent
    return user, system, switches, named


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--store-url", default=None, help="a PostgreSQL URL (default: the SQLite store)")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument(
        "--other-worker", action="store_true", help="two workers on one store, each call sent to the other one"
    )
    parser.add_argument("--py-spy", dest="spy", default=None, help="record the worker with py-spy into this file")
    parser.add_argument("--script", default=SCRIPT, help="the script each call runs ({i}: the call's number)")
    args = parser.parse_args()
    if args.other_worker and args.processes != 1:
        parser.error("--other-worker starts two single-process workers: leave out --processes")
    figures = measure(args.calls, args.warmup, args.store_url, args.processes, args.spy, args.script, args.other_worker)
    print(json.dumps(figures))


if __name__ == "__main__":
    cli()
