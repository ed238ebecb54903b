# ruff: noqa: F811  (the PostgreSQL fixture is imported from _store_support and named as a parameter)
"""A drain loses no answer (issue 30, items 7 and 8): a `bash` call running across SIGTERM, sent by
the official SDK client straight to the worker, is answered at once with its output so far and
its shell (`running: true`), and the SDK's check of it against the output schema (a `tools/list`
to the draining worker) passes; the draining worker still answers `tools/list` and `ping` but
refuses new `tools/call`s and `initialize`; the run goes on through the drain, and one still
running when the drain ends is handed over, so the next call on its shell, on another worker,
takes it over at once and gets all of it."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from _fleet_support import MCP_HEADERS, META, fleet, fleet_env, raw_call
from _serve_auth_support import GITHUB_CONFIG, Served, client, serving
from _store_support import fresh_database, needs_postgres, postgres_server  # noqa: F401  (fixture)
from toolshell.config.loading import STATE_FILE
from toolshell.store.engines import open_store
from toolshell.store.protocol import StateStore

pytestmark = pytest.mark.anyio
TOKEN = "serve-token-for-the-fleet-tests-0123456789abcdef"  # the one `_fleet_support` sends
RUNNING = "SELECT id FROM shell_calls WHERE script_preview = ? AND exit_code IS NULL"


async def _until_running(store: StateStore, script: str) -> None:
    with anyio.fail_after(30):
        while not store.query(RUNNING, (script,)):  # noqa: ASYNC110  (another process writes it)
            await anyio.sleep(0.2)  # a poll, bounded above


async def _raw(url: str, method: str, params: dict[str, Any]) -> httpx2.Response:
    """One JSON-RPC request as bytes on the wire, naming its method in `Mcp-Method`."""
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": META}}
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "Mcp-Method": method}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(url, content=json.dumps(body), headers=headers)


async def _call_across_sigterm(worker: Served, store: StateStore, script: str, **kwargs: Any) -> dict[str, Any]:
    """The SDK client's call of `script`, with SIGTERM sent to its worker while it runs; the
    structured result (validated by the SDK against the output schema it lists after the result)."""
    async with client(worker.url, TOKEN, **kwargs) as sdk:  # it has not listed the tools: it lists them to validate
        async with anyio.create_task_group() as tg:
            answers: list[Any] = []

            async def call() -> None:
                answers.append(await sdk.call_tool("bash", {"script": script}))

            tg.start_soon(call)
            await _until_running(store, script)
            worker.proc.send_signal(signal.SIGTERM)
    [result] = answers
    assert not result.is_error, result
    body = result.structured_content
    assert isinstance(body, dict)
    return body


async def test_a_call_running_across_sigterm_is_answered_at_once_validated_by_the_sdk_and_its_run_goes_on(
    tmp_path: Path,
) -> None:
    """`yield_seconds = 600`: the answer comes at SIGTERM, not 600 s later. While
    draining, the worker answers `tools/list` and `server/discover`, and refuses new calls and sessions."""
    script = "echo start; sleep 3; echo finished"
    config = GITHUB_CONFIG + "[serve]\nyield_seconds = 600\n"
    with serving(tmp_path / "state", config=config, env={"TOOLSHELL_SERVE_TOKEN": TOKEN}) as worker:
        store = open_store(str(tmp_path / "state" / STATE_FILE))
        with anyio.fail_after(30):  # far less than yield_seconds
            body = await _call_across_sigterm(worker, store, script)
        listed = await _raw(worker.url, "tools/list", {})
        discover = await _raw(worker.url, "server/discover", {})
        refused = await raw_call(worker.url, "echo too late")
        handshake = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        session = await _raw(worker.url, "initialize", handshake)
        status = await anyio.to_thread.run_sync(worker.proc.wait, 60)
        ended = store.query("SELECT exit_code FROM shell_calls WHERE script_preview = ?", (script,))
        store.close()
    assert (body["running"], body["exit_code"]) == (True, -1) and body["shell"].startswith("sh_")
    assert listed.status_code == 200 and '"bash"' in listed.text, listed.text
    assert discover.status_code == 200, discover.text
    assert refused.status_code == 503 and refused.json()["error"]["retryable"] is True
    assert session.status_code == 503, "a new session belongs on a worker that stays"
    assert [r["exit_code"] for r in ended] == [0], "the run went on through the drain and ended"
    assert status == 0


async def _answers(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


async def test_a_call_that_ends_during_the_drain_is_answered_whole_and_the_sdk_can_still_check_it(
    tmp_path: Path,
) -> None:
    """A client that can answer questions waits for its call (it is not yielded): the call ends
    during the drain, and the worker stays to answer the `tools/list` the SDK sends to check it."""
    script = "echo start; sleep 2; echo finished"
    with serving(tmp_path / "state", env={"TOOLSHELL_SERVE_TOKEN": TOKEN}) as worker:
        store = open_store(str(tmp_path / "state" / STATE_FILE))
        with anyio.fail_after(20):
            body = await _call_across_sigterm(worker, store, script, elicitation_callback=_answers)
        status = await anyio.to_thread.run_sync(worker.proc.wait, 60)
        store.close()
    assert (body["exit_code"], body["stdout"]) == (0, "start\nfinished\n")
    assert status == 0


async def test_a_call_running_when_the_drain_ends_is_handed_over_and_the_next_call_on_its_shell_gets_all_of_it(
    postgres_server: str | None, tmp_path: Path
) -> None:
    """Heartbeats 10 s apart: without the hand-over, the collector would see the owner silent only
    after 30 s, past its own wait (`yield_seconds = 15`), and find the call still running."""
    store_url = fresh_database(needs_postgres(postgres_server))
    config = GITHUB_CONFIG + "[serve]\nheartbeat_seconds = 10\ndrain_seconds = 1\nyield_seconds = 15\n"
    script = "echo start; sleep 4; echo finished; exit 3"
    with fleet(tmp_path, fleet_env(store_url), 2, config=config) as [one, two]:
        store = open_store(store_url)
        with anyio.fail_after(20):
            first = await _call_across_sigterm(one, store, script)
        status = await anyio.to_thread.run_sync(one.proc.wait, 60)
        with anyio.fail_after(60):
            async with client(two.url, TOKEN) as sdk:
                result = await sdk.call_tool("bash", {"script": "echo after", "shell": first["shell"]})
        store.close()
    body = result.structured_content
    assert status == 0 and first["running"] is True
    assert isinstance(body, dict) and "running" not in body["earlier"], body
    assert first["stdout"] + body["earlier"]["stdout"] == "start\nfinished\n", "all of it, each byte once"
    assert (body["earlier"]["exit_code"], body["stdout"]) == (3, "after\n")


async def test_an_open_subscriptions_listen_stream_does_not_hold_the_drain(tmp_path: Path) -> None:
    """`drain_seconds = 300`: counted as in flight, the stream (which never ends by itself) would keep
    the worker up past the bound below."""
    config = GITHUB_CONFIG + "[serve]\ndrain_seconds = 300\n"
    method = "subscriptions/listen"
    body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"notifications": {"toolsListChanged": True}}}
    body["params"]["_meta"] = META
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "Mcp-Method": method}
    with serving(tmp_path / "state", config=config, env={"TOOLSHELL_SERVE_TOKEN": TOKEN}) as worker:
        async with httpx2.AsyncClient(timeout=30) as http:
            async with http.stream("POST", worker.url, content=json.dumps(body), headers=headers) as stream:
                lines = stream.aiter_lines()
                with anyio.fail_after(30):
                    while '"result"' not in (line := await anext(lines)) and "acknowledged" not in line:
                        pass  # the acknowledgement comes first: the stream is open
                worker.proc.send_signal(signal.SIGTERM)
                status = await anyio.to_thread.run_sync(worker.proc.wait, 60)
    assert status == 0
