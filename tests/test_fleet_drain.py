# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""Health and drain (issue 23, §2): `/healthz` and `/readyz` answer probes without a token and
without saying anything about the configuration; SIGTERM makes `/readyz` 503 at once, refuses new
requests with a retryable error, lets the call in flight finish and parked runs be answered through
another worker, and the process exits 0."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import psycopg
import pytest

from _fleet_support import FLEET_CONFIG, TOKEN, fleet, fleet_env, raw_call
from _serve_auth_support import Served, serving
from _store_support import fresh_database, postgres_server, store_url  # noqa: F401  (fixtures)
from test_serve_relay import ONE, _retry, _start
from test_serve_relay import TOKEN as RELAY_TOKEN
from toolshell.config.loading import STATE_FILE
from toolshell.policy.approvals import Approvals
from toolshell.store.engines import open_store
from toolshell.store.keys import KEY_FILE

pytestmark = pytest.mark.anyio
ENV = {"TOOLSHELL_SERVE_TOKEN": TOKEN}
SLOW = "sleep 4; echo finished"


def _base(worker: Served) -> str:
    return worker.url.removesuffix("/mcp")


async def _ready(worker: Served, host: str | None = None) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.get(_base(worker) + "/readyz", headers={"Host": host} if host else {})


def _relay_env(store_url: str) -> dict[str, str]:
    """The fleet's environment with the token the relay tests' clients send."""
    return fleet_env(store_url) | {"TOOLSHELL_SERVE_TOKEN": RELAY_TOKEN}


async def _until(check: object, seconds: float = 30) -> None:
    with anyio.fail_after(seconds):
        while not check():  # type: ignore[operator]  # noqa: ASYNC110  (another process writes it)
            await anyio.sleep(0.2)  # a poll, bounded above


async def test_the_probes_answer_without_a_token_whatever_host_the_probe_sends(tmp_path: Path) -> None:
    with serving(tmp_path / "state", env=ENV) as worker:
        async with httpx2.AsyncClient() as http:
            live = await http.get(_base(worker) + "/healthz", headers={"Host": "10.244.1.7:8765"})
            head = await http.head(_base(worker) + "/readyz", headers={"Host": "10.244.1.7:8765"})
        ready = await _ready(worker, "10.244.1.7:8765")
        call = await raw_call(worker.url, "echo x", {"Host": "10.244.1.7:8765"})
    assert (live.status_code, live.text) == (200, "ok\n")
    assert (ready.status_code, ready.text) == (200, "ready\n")
    assert head.status_code == 200
    assert call.status_code == 421, "only the probes skip the Host check"


async def test_readyz_says_in_one_line_when_the_key_ring_is_missing(tmp_path: Path) -> None:
    with serving(tmp_path / "state", env=ENV) as worker:
        (tmp_path / "state" / KEY_FILE).unlink()
        missing = await _ready(worker)
    assert (missing.status_code, missing.text) == (503, "not ready: the state key ring is missing\n")


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_readyz_is_503_when_the_store_is_unmigrated_or_unreachable_and_names_no_part_of_it(
    store_url: str, postgres_server: str, tmp_path: Path
) -> None:
    with fleet(tmp_path, fleet_env(store_url), 1) as [worker]:
        before = await _ready(worker)
        with psycopg.connect(store_url, autocommit=True) as db:
            db.execute("DELETE FROM toolshell_migrations WHERE component = 'workers'")
        unmigrated = await _ready(worker)
        name = store_url.partition("?")[0].rsplit("/", 1)[1]
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
        gone = await _ready(worker)
        alive = (await httpx2.AsyncClient().get(_base(worker) + "/healthz")).status_code
        worker.proc.kill()  # its store is gone: a clean stop would wait for the pool's timeout
    assert (before.status_code, before.text) == (200, "ready\n")
    assert unmigrated.status_code == 503 and unmigrated.text.startswith("not ready: the state store is not migrated")
    # a dropped database: the pool keeps trying to connect, and `/readyz` gives up on it after
    # STORE_SECONDS (it did so only once the heartbeat's store calls left the event loop's thread)
    assert (gone.status_code, gone.text) == (503, "not ready: the state store does not answer\n")
    assert name not in gone.text + unmigrated.text
    assert alive == 200, "the process still answers: liveness is not readiness"


async def test_sigterm_turns_readyz_503_at_once_refuses_new_calls_and_lets_the_run_in_flight_finish(
    tmp_path: Path,
) -> None:
    with serving(tmp_path / "state", env=ENV) as worker:
        store = open_store(str(tmp_path / "state" / STATE_FILE))
        running = "SELECT id FROM shell_calls WHERE script_preview = ? AND exit_code IS NULL"
        async with anyio.create_task_group() as tg:
            answers: list[httpx2.Response] = []

            async def in_flight() -> None:
                answers.append(await raw_call(worker.url, SLOW))

            tg.start_soon(in_flight)
            await _until(lambda: store.query(running, (SLOW,)))
            worker.proc.send_signal(signal.SIGTERM)
            draining = await _ready(worker)
            refused = await raw_call(worker.url, "echo too late")
        status = await anyio.to_thread.run_sync(worker.proc.wait, 60)
        ended = store.query("SELECT exit_code FROM shell_calls WHERE script_preview = ?", (SLOW,))
        store.close()
    assert (draining.status_code, draining.text) == (503, "not ready: draining: this worker is shutting down\n")
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["retryable"] is True
    # Its client can take a yield: answered at once with its shell (tests/test_fleet_drain_answers.py).
    assert '"running":true' in answers[0].text.replace(" ", "")
    assert [r["exit_code"] for r in ended] == [0], "the run in flight finished"
    assert status == 0


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_run_parked_on_a_draining_worker_is_answered_through_another_and_then_the_worker_exits(
    store_url: str, tmp_path: Path
) -> None:
    with fleet(tmp_path, _relay_env(store_url), 2) as [one, two]:
        first = await _start(one, ONE)
        one.proc.send_signal(signal.SIGTERM)
        draining = await _ready(one)
        done = await _retry(two, ONE, first, "once")
        status = await anyio.to_thread.run_sync(one.proc.wait, 60)
    assert draining.status_code == 503
    assert isinstance(done, types.CallToolResult) and not done.is_error, done
    assert done.structured_content["stdout"] == "start\ndeleted x\nafter\n"
    assert status == 0


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_run_still_parked_when_the_drain_time_is_up_is_stopped_and_its_approval_stays_pending(
    store_url: str, tmp_path: Path
) -> None:
    config = FLEET_CONFIG + "drain_seconds = 1\n"
    with fleet(tmp_path, _relay_env(store_url), 2, config=config) as [one, two]:
        first = await _start(one, ONE)
        one.proc.send_signal(signal.SIGTERM)
        status = await anyio.to_thread.run_sync(one.proc.wait, 60)
        stopped = await _retry(two, ONE, first, "once")
    look = open_store(store_url)
    pending = Approvals(look).list_pending()
    look.close()
    assert status == 0
    assert isinstance(stopped, types.CallToolResult) and stopped.is_error
    error = json.loads(stopped.content[0].text)["error"]
    assert (error["code"], error["retryable"]) == ("stopped", True)
    assert [p.input for p in pending] == [{"branch": "x"}], "the approval it waited for stays pending"
