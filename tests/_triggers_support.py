"""Trigger processes for the exactly-once tests: `toolshell triggers serve`, and a scheduler worker.

`python tests/_triggers_support.py URL OWNER SEED` is one scheduler process on the store at URL:
it builds the real `TriggerRunner` with the real claims, says `ready`, waits for a line on stdin
(the go signal the test sends every worker at once), then ticks the 50 slots of `SCHEDULE`,
each at a moment of its own inside the slot, and prints `ran <slot>` for each run it made.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from _net_support import free_port
from _serve_auth_support import toolshell_exe, wait_for_port

SRC = str(Path(__file__).resolve().parents[1] / "src")
SCHEDULE = "*/5 * * * *"
FIRST = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SLOTS = [FIRST + timedelta(minutes=5 * i) for i in range(50)]
TOKEN = "the-hook-token"
CONFIG = """
[tools_in_shell]
manage_scripts = true

[[triggers]]
name = "deploy"
script = "count"
webhook = true
secret_env = "HOOK_TOKEN"
"""
SAVE = "echo 'tools text-metrics text-length text=\"$(jq -r .text)\"' | tools scripts save count"


async def _tick(url: str, owner: str, seed: int) -> None:
    # lazy: this module is imported by the tests too, which need none of this
    from toolshell.scripts import ManualClock, RunOutcome, Trigger, TriggerRunner
    from toolshell.scripts.claims import TriggerClaims, slot_text
    from toolshell.store.engines import open_store

    calls = 0

    async def run(script: str, input: dict[str, Any], source: str) -> RunOutcome:
        nonlocal calls
        calls += 1
        return RunOutcome(0, stdout=f"{owner}\n")

    claims = TriggerClaims(open_store(url), owner=owner)
    trigger = Trigger("every5", "report", SCHEDULE)
    runner = TriggerRunner([trigger], run, ManualClock(FIRST - timedelta(minutes=1)), claims)
    print("ready", flush=True)
    sys.stdin.readline()
    rng = random.Random(seed)
    for slot in SLOTS:
        # Each process looks at its own moment inside the slot: the claim is for the slot's instant.
        ran = await runner.run_due(slot + timedelta(seconds=rng.uniform(0, 299)))
        if ran:
            print("ran", slot_text(slot), flush=True)
    print("calls", calls, flush=True)
    claims.store.close()


@dataclass
class Worker:
    proc: subprocess.Popen[str]
    owner: str

    def result(self) -> tuple[list[str], int]:
        """The slots this worker ran, and how many times its run function was called."""
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, err
        lines = out.splitlines()
        ran = [line.split(" ", 1)[1] for line in lines if line.startswith("ran ")]
        (calls,) = [int(line.split()[1]) for line in lines if line.startswith("calls ")]
        return ran, calls


def start_workers(url: str, count: int) -> list[Worker]:
    """`count` scheduler processes on one store, each ready (migrated, runner built) and waiting."""
    workers = []
    for i in range(count):
        owner = f"worker-{i}"
        proc = subprocess.Popen(
            [sys.executable, __file__, url, owner, str(i)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": SRC},
        )
        workers.append(Worker(proc, owner))
    for w in workers:
        assert w.proc.stdout is not None
        line = w.proc.stdout.readline()
        assert line == "ready\n", (line, w.proc.stderr.read() if w.proc.stderr else "")
    return workers


def go(workers: list[Worker]) -> None:
    """Let every worker start ticking, as near to together as the test can."""
    for w in workers:
        assert w.proc.stdin is not None
        w.proc.stdin.write("go\n")
        w.proc.stdin.flush()


def save_script(directory: Path, url: str) -> Path:
    """Write the config and save the `count` script in the store; the config's path."""
    config = directory / "triggers.toml"
    config.write_text(CONFIG)
    saved = subprocess.run(
        [toolshell_exe(), "run", "--config", str(config), "-c", SAVE],
        env={**os.environ, "PYTHONPATH": SRC, "TOOLSHELL_STATE_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert saved.returncode == 0, saved.stderr
    return config


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/deploy"


@contextmanager
def trigger_servers(config: Path, url: str, count: int) -> Iterator[list[Server]]:
    """`count` `toolshell triggers serve` processes on the store at `url`, each past its start line."""
    env = {**os.environ, "PYTHONPATH": SRC, "TOOLSHELL_STATE_URL": url, "HOOK_TOKEN": TOKEN}
    servers = []
    try:
        for _ in range(count):
            port = free_port()
            argv = [toolshell_exe(), "triggers", "serve", "--config", str(config), "--port", str(port)]
            proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env)
            servers.append(Server(proc, port))
        for s in servers:
            assert s.proc.stderr is not None
            line = s.proc.stderr.readline()
            assert "webhooks at" in line, line
            wait_for_port(s.port)
        yield servers
    finally:
        for s in servers:
            s.proc.terminate()
            s.proc.wait(10)


def trigger_runs(url: str) -> int:
    """How many trigger runs the store's timeline holds."""
    # lazy: the worker processes never need the timeline
    from toolshell.store.engines import open_store
    from toolshell.timeline.sinks import query

    store = open_store(url)
    try:
        return sum(1 for row in query(store, limit=10_000) if row["source"] == "trigger")
    finally:
        store.close()


def claims_rows(url: str) -> list[dict[str, Any]]:
    """Every claim on the store."""
    # lazy: as above
    from toolshell.scripts.claims import TriggerClaims
    from toolshell.store.engines import open_store

    claims = TriggerClaims(open_store(url))
    try:
        return claims.history(limit=10_000)
    finally:
        claims.store.close()


def raw_post(port: int, headers: list[bytes], body: bytes = b"") -> tuple[int, dict[str, Any]]:
    """A POST written byte for byte (header values no client library would send); status and JSON."""
    head = [b"POST /hooks/deploy HTTP/1.1", b"Host: 127.0.0.1", f"Authorization: Bearer {TOKEN}".encode()]
    if body:
        head.append(b"Content-Type: application/json")
    head += [*headers, f"Content-Length: {len(body)}".encode(), b"Connection: close"]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
        answer = bytearray()
        while chunk := s.recv(65536):
            answer += chunk
    status_line, _, rest = bytes(answer).partition(b"\r\n")
    payload = rest.partition(b"\r\n\r\n")[2]
    return int(status_line.split()[1]), json.loads(payload) if payload else {}


if __name__ == "__main__":
    anyio.run(_tick, sys.argv[1], sys.argv[2], int(sys.argv[3]))
