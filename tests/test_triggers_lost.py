"""A trigger server killed mid-run: its run is ended as lost, not left `running` for good.

Real `toolshell triggers serve` processes on each store engine: one takes a webhook whose script
blocks and is killed with SIGKILL; a second one, and a `triggers history` reader, then see the
run lost (its worker missed three heartbeats), and the Idempotency-Key answers with that outcome
instead of 409. Then trigger servers without webhooks: several on one host, and the probes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from _cli_support import SRC, toolshell
from _net_support import free_port
from _serve_auth_support import toolshell_exe, wait_for_port
from _store_support import ENGINES, postgres_server, store_url
from _triggers_support import TOKEN, claims_rows
from toolshell.scripts.claims import LOST_EXIT
from toolshell.store.engines import open_store
from toolshell.timeline.sinks import LOST, query

__all__ = ["postgres_server", "store_url"]  # fixtures, imported for pytest
AUTH = {"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": "deploy-lost-1"}
CONFIG = """
[tools_in_shell]
manage_scripts = true

[serve]
heartbeat_seconds = 1.0

[[triggers]]
name = "deploy"
script = "block"
webhook = true
secret_env = "HOOK_TOKEN"
"""
SCHEDULED = """
[[triggers]]
name = "nightly"
script = "report"
schedule = "0 3 * * *"
"""


def _until(what: str, check: Callable[[], Any], seconds: float = 90) -> Any:
    """Poll `check` until it returns something truthy (generous bound: a busy machine is slow)."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)  # a poll with a bound above, not a timing assumption
    return found


@contextmanager
def _trigger_server(config: Path, env: dict[str, str], *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    argv = [toolshell_exe(), "triggers", "serve", "--config", str(config), *args]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": SRC, **env})
    try:
        assert proc.stderr is not None
        yield proc, proc.stderr.readline()
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(30)


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_a_trigger_server_killed_mid_webhook_leaves_its_run_lost_and_its_key_answers_that(
    store_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "triggers.toml"
    config.write_text(CONFIG)
    env = {"TOOLSHELL_STATE_URL": store_url, "HOOK_TOKEN": TOKEN}
    saved = toolshell("run", "--config", str(config), "-c", "echo 'sleep 25' | tools scripts save block", env=env)
    assert saved.returncode == 0, saved.stderr
    one_port, two_port = free_port(), free_port()
    with (
        _trigger_server(config, env, "--port", str(one_port)) as (one, one_line),
        _trigger_server(config, env, "--port", str(two_port)) as (two, two_line),
    ):
        assert "webhooks at" in one_line and "webhooks at" in two_line, (one_line, two_line)
        wait_for_port(one_port)
        wait_for_port(two_port)
        first = threading.Thread(target=_post_ignoring_loss, args=(one_port,), daemon=True)
        first.start()
        _until("the run's claim", lambda: claims_rows(store_url))
        _until("server one beating past three heartbeats", lambda: _beaten(store_url, one.pid) > 3.0)
        while_alive = _post(two_port)
        one.send_signal(signal.SIGKILL)
        one.wait(30)
        answer = _until("a terminal answer for the key", lambda: (r := _post(two_port)).status_code != 409 and r)
        history = toolshell("triggers", "history", "--config", str(config), env=env)
        as_json = toolshell("triggers", "history", "--json", "--config", str(config), env=env)
        lost_calls = _until("the run's shell call marked lost", lambda: _lost_trigger_calls(store_url))
        probe = httpx2.get(f"http://127.0.0.1:{two_port}/healthz", timeout=30)
    assert while_alive.status_code == 409, "a live owner's run is still going"
    body = answer.json()
    assert answer.status_code == 200 and answer.headers["idempotent-replayed"] == "true"
    assert (body["exit_code"], body["success"], body["lost"], body["stdout"]) == (LOST_EXIT, False, True, "")
    error = json.loads(body["stderr"])["error"]
    assert error["code"] == "unavailable" and "missed its heartbeats" in error["message"]
    (row,) = json.loads(as_json.stdout)
    assert (row["slot"], row["exit_code"], row["ended_by"]) == ("deploy-lost-1", LOST_EXIT, "worker_lost")
    assert row["claimed_by"].endswith(f":{one.pid}")
    assert " lost " in history.stdout and "running" not in history.stdout, history.stdout
    assert lost_calls == 1
    assert (probe.status_code, probe.text) == (200, "ok\n"), "the webhook port answers the probes too"


def _post(port: int) -> httpx2.Response:
    return httpx2.post(f"http://127.0.0.1:{port}/hooks/deploy", json={}, headers=AUTH, timeout=60)


def _post_ignoring_loss(port: int) -> None:
    try:
        _post(port)
    except httpx2.TransportError:  # the server is killed under it: that is the point
        pass


def _beaten(url: str, pid: int) -> float:
    """How long the worker of process `pid` has been beating (its last beat less its start)."""
    store = open_store(url)
    try:
        rows = store.query("SELECT started_at, heartbeat_at FROM workers WHERE pid = ?", (pid,))
        return float(rows[0]["heartbeat_at"] - rows[0]["started_at"]) if rows else 0.0
    finally:
        store.close()


def _lost_trigger_calls(url: str) -> int:
    store = open_store(url)
    try:
        return sum(1 for row in query(store, outcome=LOST) if row["source"] == "trigger")
    finally:
        store.close()


def test_trigger_servers_without_webhooks_open_no_port_and_several_run_on_one_host(tmp_path: Path) -> None:
    config = tmp_path / "scheduled.toml"
    config.write_text(SCHEDULED)
    env = {"TOOLSHELL_STATE_DIR": str(tmp_path / "state")}
    port = free_port()
    with (
        _trigger_server(config, env) as (first, first_line),
        _trigger_server(config, env) as (second, second_line),
        _trigger_server(config, env, "--port", str(port)) as (probed, probed_line),
    ):
        wait_for_port(port)
        live = httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=30)
        ready = httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=30)
        hook = httpx2.post(f"http://127.0.0.1:{port}/hooks/nightly", json={}, timeout=30)
        running = [first.poll(), second.poll()]
        probed.send_signal(signal.SIGTERM)
        probed_exit = probed.wait(30)
    assert first_line == second_line == "toolshell triggers: 1 scheduled, no webhooks, no port open\n"
    assert running == [None, None], "both stayed up: neither took a port"
    assert probed_line == f"toolshell triggers: 1 scheduled, no webhooks; health at http://127.0.0.1:{port}/healthz\n"
    assert (live.status_code, live.text) == (200, "ok\n")
    assert (ready.status_code, ready.text) == (200, "ready\n"), "no token asked, nothing of the config told"
    assert hook.status_code == 404, "without webhooks the port serves the probes alone"
    assert probed_exit == 0
