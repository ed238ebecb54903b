"""A rolling restart under load: three workers on one PostgreSQL behind the HAProxy of
docs/scale-out.md, eight 2026-07-28 clients calling `bash` (each call a few `tools` calls of a
server that logs every call it runs), and each worker sent SIGTERM in turn and started again.
Every call completes, or gets an error that says to call again (and then nothing of it ran);
every completed call's tool calls are in the timeline and in the server's log, once; a call that
waited for an approval across the restart keeps it: the request is still answerable, and the
grant given afterwards is what the script runs with.

Retryable here (`_rolling_support.Caller`): a connection refused or reset, a 502/503/504 from the
proxy, and a result whose error says `"retryable": true`. No timing is asserted: the figures are
printed (`-s` shows them)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from _fleet_support import MCP_HEADERS, META, TOKEN, fleet_env
from _net_support import free_port
from _proxy_support import proxy
from _rolling_support import LEDGER_CONFIG, LOG_ENV, Caller, Worker, logged_calls, whole, with_retries
from _store_support import fresh_database, postgres_server  # noqa: F401  (fixture)
from toolshell.policy.approvals import ApprovalRequest, Approvals
from toolshell.store.engines import open_store

pytestmark = pytest.mark.anyio
CLIENTS = 8
CALLS = 3
"""`tools` calls in each `bash` call."""
PAUSE = 4
"""Seconds each `bash` call sleeps after its first `tools` call: longer than uvicorn's own 2 s of
grace at shutdown, so only the drain (`[serve] drain_seconds`, above it) lets such a call finish."""
MIN_ROUNDS = 2
"""`bash` calls each client makes at least (it goes on until the last worker is back)."""
CONFIG = LEDGER_CONFIG + (
    "[serve]\nheartbeat_seconds = 1\ndrain_seconds = 6\n"
    'allowed_hosts = ["mcp.example.com"]\ntrusted_proxies = ["127.0.0.1"]\n'
)
PUBLIC = {"Authorization": f"Bearer {TOKEN}", "Host": "mcp.example.com"}
ASKS = "tools ledger remove id={id}; echo after"


@pytest.fixture
def database(postgres_server: str | None) -> str:  # noqa: F811  (the fixture imported above)
    if postgres_server is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL could not start for the rolling restart")
        pytest.skip("PostgreSQL is not installed here: scripts/postgres.sh installs and starts it")
    return fresh_database(postgres_server)


@contextmanager
def _fleet(database: str, tmp_path: Path, count: int, config: str = CONFIG) -> Iterator[list[Worker]]:
    """`count` workers on `database`, started side by side (each start imports the SDK, ~1 s of CPU)."""
    (tmp_path / "toolshell.toml").write_text(config)
    env = fleet_env(database) | {LOG_ENV: str(tmp_path / "ledger.log")}
    started = [
        Worker(free_port(), tmp_path / f"w{n}" / "state", tmp_path / "toolshell.toml", env) for n in range(count)
    ]
    for worker in started:
        worker.state.parent.mkdir(parents=True)
    try:
        with ThreadPoolExecutor(count) as pool:
            list(pool.map(Worker.start, started))
        yield started
    finally:
        for worker in started:
            worker.stop()


@pytest.fixture
def workers(database: str, tmp_path: Path) -> Iterator[list[Worker]]:
    with _fleet(database, tmp_path, 3) as started:
        yield started


def _query(url: str, sql: str, params: tuple[object, ...] = ()) -> list[dict[str, object]]:
    store = open_store(url)
    try:
        return [dict(r) for r in store.query(sql, params)]
    finally:
        store.close()


def _pending(url: str) -> list[ApprovalRequest]:
    store = open_store(url)
    try:
        return Approvals(store).list_pending()
    finally:
        store.close()


def _served_by(url: str, pid: int) -> int:
    """How many shell calls the worker of process `pid` has run (by its id on the store)."""
    rows = _query(
        url,
        "SELECT COUNT(*) AS n FROM shell_calls s JOIN workers w ON s.worker = w.id WHERE w.pid = ?",
        (pid,),
    )
    return int(str(rows[0]["n"]))


def _just_started(url: str, pid: int) -> int:
    """How many calls the worker of process `pid` started in the last second and runs still (each
    has `PAUSE` seconds to go: more than the 2 s uvicorn would give it without the drain)."""
    rows = _query(
        url,
        "SELECT COUNT(*) AS n FROM shell_calls s JOIN workers w ON s.worker = w.id "
        "WHERE w.pid = ? AND s.exit_code IS NULL AND s.started_at > ?",
        (pid, time.time() - 1),
    )
    return int(str(rows[0]["n"]))


async def _until(check: object, seconds: float = 60) -> None:
    with anyio.fail_after(seconds):
        while not await anyio.to_thread.run_sync(check):  # type: ignore[arg-type]  # noqa: ASYNC110  (another process writes it)
            await anyio.sleep(0.5)  # a poll of another process's rows, bounded above


async def _never(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("the SDK client was asked: the test drives the rounds itself")


@asynccontextmanager
async def _answering(url: str) -> AsyncIterator[Client]:
    """A 2026-07-28 client that declares it can answer, through the proxy (the public Host)."""
    async with httpx2.AsyncClient(headers=PUBLIC, verify=False, timeout=httpx2.Timeout(30, read=60)) as http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(url, http_client=http), elicitation_callback=_never) as c:
                yield c


async def _park(url: str, script: str) -> types.InputRequiredResult:
    """A call that waits for an approval: parked on whichever worker got it, its round returned."""
    async with _answering(url) as c:
        first = await c.session.call_tool("bash", {"script": script}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult) and first.request_state, first
    return first


async def _retry_parked(url: str, script: str, round_: types.InputRequiredResult) -> types.CallToolResult:
    """The parked call's retry of its round (no answer in it), sent after its worker restarted."""
    async with _answering(url) as c:
        done = await c.session.call_tool(
            "bash", {"script": script}, request_state=round_.request_state, allow_input_required=True
        )
    assert isinstance(done, types.CallToolResult), done
    return done


async def test_a_rolling_restart_under_load_loses_no_call_no_record_and_no_approval(
    workers: list[Worker], database: str, tmp_path: Path
) -> None:
    began = time.monotonic()
    log = tmp_path / "ledger.log"
    with proxy("haproxy", [w.port for w in workers], tmp_path / "haproxy") as front:
        marker = secrets.token_hex(3)
        asked_id = f"ask-{marker}"
        parked = await _park(front.url, ASKS.format(id=asked_id))
        [pending] = _pending(database)
        assert pending.input == {"id": asked_id}

        completed: list[tuple[str, list[str]]] = []
        retried: list[str] = []
        restarted = anyio.Event()
        callers: list[Caller] = []

        async def load(n: int) -> None:
            caller = Caller(front.url, PUBLIC)
            callers.append(caller)
            round_ = 0
            while round_ < MIN_ROUNDS or not restarted.is_set():
                ids = [f"{marker}-c{n}-r{round_}-{k}" for k in range(CALLS)]
                # The pause makes calls be in flight when a SIGTERM comes: the drain must let them end.
                script = f"tools ledger record id={ids[0]}; sleep {PAUSE}; " + "; ".join(
                    f"tools ledger record id={i}" for i in ids[1:]
                )
                out = await whole(caller, script, retried)
                assert (out["exit_code"], out["stdout"]) == (0, "".join(f"record {i}\n" for i in ids)), out
                completed.append((script, ids))
                round_ += 1

        exits: list[int] = []
        with anyio.fail_after(240):
            async with anyio.create_task_group() as tg:
                for n in range(CLIENTS):
                    tg.start_soon(load, n)
                for worker in workers:  # one at a time: drained, started again, serving again
                    assert worker.proc is not None
                    busy = worker.proc.pid
                    await _until(lambda p=busy: _just_started(database, p) > 0)  # SIGTERM mid-call
                    exits.append(await anyio.to_thread.run_sync(worker.terminated))
                    await anyio.to_thread.run_sync(worker.start)
                    assert worker.proc is not None
                    pid = worker.proc.pid
                    await _until(lambda p=pid: _served_by(database, p) > 0)
                restarted.set()

        # The approval outlived the worker its call was parked on: still pending, answerable on
        # the page of any worker; the retry of the parked round says to run the script again, and
        # the run again goes ahead on the grant.
        still = _pending(database)
        stopped = await _retry_parked(front.url, ASKS.format(id=asked_id), parked)
        page = (workers[0].state / "web-token").read_text().strip()
        async with httpx2.AsyncClient(verify=False, timeout=30) as http:
            answered = await http.post(
                front.url.removesuffix("/mcp") + f"/ui/api/approvals/{pending.id}",
                json={"answer": "once"},
                headers={"Authorization": f"Bearer {page}", "Host": "mcp.example.com"},
            )
        again = await with_retries(lambda: Caller(front.url, PUBLIC).bash(ASKS.format(id=asked_id)), retried)
    took = time.monotonic() - began

    print(
        f"\nrolling restart: {len(completed)} bash calls completed by {CLIENTS} clients, {len(retried)} retried, "
        f"in {took:.1f} s; retried: {retried}; 5xx answers: {Counter(b for c in callers for b in c.bodies)}"
    )
    assert exits == [0, 0, 0], "each worker drained and exited 0"
    assert [p.id for p in still] == [pending.id], "the approval request survived every restart"
    assert stopped.is_error and json.loads(stopped.content[0].text)["error"]["retryable"] is True, stopped
    assert answered.status_code == 200, answered.text
    assert again.structured_content["stdout"] == f"remove {asked_id}\nafter\n", again
    assert _pending(database) == [], "the grant was used, nothing asked again"

    wanted = [i for _, ids in completed for i in ids]
    calls = logged_calls(log)
    assert Counter(calls) == Counter([f"record {i}" for i in wanted] + [f"remove {asked_id}"]), (
        "every completed call ran once, and no call that was retried had run"
    )
    rows = _query(
        database,
        "SELECT n.input_preview, n.outcome, s.exit_code FROM nested_calls n JOIN shell_calls s "
        "ON n.shell_call_id = s.id WHERE n.command = 'tools ledger record' AND n.input_preview LIKE ?",
        (f'%"{marker}-%',),
    )
    recorded = Counter(json.loads(str(r["input_preview"]))["id"] for r in rows)
    assert recorded == Counter(wanted), "each tool call of each completed call is in the timeline once"
    assert {(r["outcome"], r["exit_code"]) for r in rows} == {("completed", 0)}


DRAINS_LONG = CONFIG.replace("drain_seconds = 6", "drain_seconds = 30")
BUFFERED = "option http-buffer-request"


async def test_while_a_worker_drains_the_documented_haproxy_resends_its_503_to_another_worker(
    database: str, tmp_path: Path
) -> None:
    """The draining worker's 503 says nothing ran; HAProxy resends it (`retry-on 503`) only for a
    request it holds whole, which `option http-buffer-request` makes it do."""
    with _fleet(database, tmp_path, 2, DRAINS_LONG) as [one, two]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            url = f"http://127.0.0.1:{one.port}/mcp"
            async with Client(streamable_http_client(url, http_client=http), elicitation_callback=_never) as c:
                held = await c.session.call_tool("bash", {"script": ASKS.format(id="held")}, allow_input_required=True)
        assert isinstance(held, types.InputRequiredResult), "a parked run keeps the worker draining"
        with proxy("haproxy", [one.port, two.port, two.port], tmp_path / "haproxy") as front:
            assert one.proc is not None
            one.proc.send_signal(signal.SIGTERM)
            await _until(lambda: httpx2.get(f"http://127.0.0.1:{one.port}/readyz").status_code == 503)
            async with httpx2.AsyncClient(verify=False, timeout=60) as http:
                statuses = [(await http.post(front.url, content=_CALL, headers=_RAW)).status_code for _ in range(12)]
    assert statuses == [200] * 12, (
        f"a draining worker's 503 reached the client ({statuses}): docs/scale-out.md's HAProxy configuration "
        f"needs `{BUFFERED}` in its defaults, or `retry-on 503` does not resend the POST"
    )


_CALL = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "bash", "arguments": {"script": "echo hi"}, "_meta": META},
    }
)
_RAW = {**MCP_HEADERS, **PUBLIC, "Mcp-Method": "tools/call", "Mcp-Name": "bash"}
