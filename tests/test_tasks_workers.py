# ruff: noqa: F811  (the PostgreSQL fixture is imported from _store_support and named as a parameter)
"""Tasks across workers on the real PostgreSQL: three `toolshell serve --http` processes on one
store. A task created on one worker is polled on the others, approved through `tasks/update` sent
to a third, and cancelled from another worker than the one running it; `tasks/*` requests carry
the task id in `Mcp-Name`; a client without the extension gets a plain result."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from _serve_auth_support import GITHUB_CONFIG, Served, client, serving
from _store_support import fresh_database, needs_postgres, postgres_server  # noqa: F401  (fixture)
from _tasks_support import EXTENSION, CreatedTask, TasksClient, cancel_task, get_task, until_status, update_task
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio
TOKEN = "serve-token-for-the-task-worker-tests-0123"
CONFIG = GITHUB_CONFIG + "[serve]\nheartbeat_seconds = 1\nyield_seconds = 2\n[serve.tasks]\nafter_seconds = 0\n"
DELETE = "echo start; tools github delete-branch branch=x; echo after"


async def _never(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("a task's question went out as elicitation/create instead of inputRequests")


@pytest.fixture(scope="module")
def workers(
    postgres_server: str | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, list[Served]]]:
    """Three workers on one fresh PostgreSQL database (each its own state dir, one key ring)."""
    store = fresh_database(needs_postgres(postgres_server))
    env = {"TOOLSHELL_SERVE_TOKEN": TOKEN, "TOOLSHELL_STATE_URL": store, "TOOLSHELL_STATE_KEYS": new_key()}
    root = tmp_path_factory.mktemp("task-workers")
    with ExitStack() as stack:
        served = []
        for name in ("a", "b", "c"):
            (root / name).mkdir()
            served.append(stack.enter_context(serving(root / name / "state", config=CONFIG, env=env)))
        yield store, served


async def _create(worker: Served, script: str) -> CreatedTask:
    async with client(worker.url, TOKEN, extensions=[TasksClient()], elicitation_callback=_never) as c:
        created = await c.session.call_tool("bash", {"script": script}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created


async def test_a_task_made_on_one_worker_is_polled_on_another_and_approved_through_a_third(
    workers: tuple[str, list[Served]],
) -> None:
    _, (a, b, c) = workers
    created = await _create(a, DELETE)
    async with (
        client(b.url, TOKEN, extensions=[TasksClient()]) as on_b,
        client(c.url, TOKEN, extensions=[TasksClient()]) as on_c,
    ):
        asked_b = await until_status(on_b.session, created.task_id, "input_required")
        asked_c = await get_task(on_c.session, created.task_id)
        [key] = asked_c.input_requests or {}
        await update_task(on_c.session, created.task_id, {key: {"action": "accept", "content": {"answer": "once"}}})
        done = await until_status(on_b.session, created.task_id, "completed")
    assert asked_b.input_requests == asked_c.input_requests, "every worker shows the same question, same key"
    assert "delete-branch" in asked_b.input_requests[key]["params"]["message"]  # type: ignore[index]
    result = types.CallToolResult.model_validate(done.result)
    assert result.structured_content["stdout"] == "start\ndeleted x\nafter\n"


async def _row(look: Any, ready: Any) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        rows = [r for r in query(look) if r["script_preview"].startswith("echo cancel-me")]
        return rows[0] if rows and ready(rows[0]) else None

    with anyio.fail_after(20):
        while (row := found()) is None:  # noqa: ASYNC110  (a row another process writes)
            await anyio.sleep(0.1)
    return row


async def test_a_task_cancelled_from_another_worker_stops_where_it_is(workers: tuple[str, list[Served]]) -> None:
    store, (a, b, c) = workers
    created = await _create(a, "echo cancel-me; sleep 30; echo never")
    look = open_store(store)
    try:
        await _row(look, lambda row: True)  # the script started: its row is in the store
        async with (
            client(b.url, TOKEN, extensions=[TasksClient()]) as on_b,
            client(c.url, TOKEN, extensions=[TasksClient()]) as on_c,
        ):
            await cancel_task(on_b.session, created.task_id)
            cancelled = await until_status(on_c.session, created.task_id, "cancelled", seconds=20)
        row = await _row(look, lambda row: row["exit_code"] is not None)  # worker a ends it in its own time
    finally:
        look.close()
    assert cancelled.status_message and "tasks/cancel" in cancelled.status_message
    assert row["exit_code"] == 130


async def test_the_sdk_client_resolves_a_task_transparently_and_a_client_without_the_extension_gets_a_plain_result(
    workers: tuple[str, list[Served]],
) -> None:
    _, (a, _b, _c) = workers
    tasks = TasksClient()
    async with client(a.url, TOKEN, extensions=[tasks]) as declaring:
        resolved = await declaring.call_tool("bash", {"script": "sleep 1; echo resolved"})
    async with client(a.url, TOKEN) as plain:
        direct = await plain.session.call_tool("bash", {"script": "sleep 1; echo direct"}, allow_claimed=True)
    assert resolved.structured_content["stdout"] == "resolved\n"
    assert [t.status for t in tasks.created] == ["working"] and tasks.seen[-1].status == "completed"
    assert isinstance(direct, types.CallToolResult) and direct.structured_content["stdout"] == "direct\n"


async def test_a_call_longer_than_the_clients_timeout_completes_through_yield_and_wait_on_other_workers(
    workers: tuple[str, list[Served]],
) -> None:
    """Scaled down: a 10 s script, a client that gives up on a request after 6 s, `yield_seconds = 2`."""
    _, (a, b, c) = workers
    script = "for i in 1 2 3 4 5; do echo line $i; sleep 2; done; echo done"
    pieces, calls = [], 0
    async with client(a.url, TOKEN, read_timeout_seconds=6) as on_a:
        first = (await on_a.call_tool("bash", {"script": script})).structured_content
    assert isinstance(first, dict) and first["running"] is True
    pieces.append(first["stdout"])
    with anyio.fail_after(90):
        while True:
            worker = (b, c)[calls % 2]  # each collecting call lands on another worker
            calls += 1
            async with client(worker.url, TOKEN, read_timeout_seconds=6) as other:
                got = (
                    await other.call_tool("bash", {"script": "echo after", "shell": first["shell"]})
                ).structured_content
            assert isinstance(got, dict)
            pieces.append(got["earlier"]["stdout"] if "earlier" in got else "")
            if "earlier" in got and not got["earlier"].get("running"):
                break
    assert "".join(pieces) == "".join(f"line {i}\n" for i in range(1, 6)) + "done\n"
    assert got["earlier"]["exit_code"] == 0 and got["stdout"] == "after\n", json.dumps(got)


def _raw(
    method: str, params: dict[str, Any], name: str | None, extensions: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return body, headers


async def test_tasks_requests_over_http_name_their_task_in_mcp_name(workers: tuple[str, list[Served]]) -> None:
    _, (a, b, _c) = workers
    created = await _create(a, "echo named")
    task = {"taskId": created.task_id}
    declared = {EXTENSION: {}}
    async with httpx2.AsyncClient(timeout=30) as http:
        answers = {}
        for label, name, extensions in [
            ("right", created.task_id, declared),
            ("wrong", "another-task", declared),
            ("absent", None, declared),
            ("undeclared", created.task_id, {}),
        ]:
            body, headers = _raw("tasks/get", task, name, extensions)
            with anyio.fail_after(30):
                response = await http.post(b.url, json=body, headers=headers)
            answers[label] = _json_rpc(response.text)
    assert answers["right"]["result"]["taskId"] == created.task_id
    assert answers["wrong"]["error"]["code"] == answers["absent"]["error"]["code"] == types.HEADER_MISMATCH
    assert "Mcp-Name" in answers["wrong"]["error"]["message"]
    assert answers["undeclared"]["error"]["code"] == types.MISSING_REQUIRED_CLIENT_CAPABILITY


def _json_rpc(text: str) -> dict[str, Any]:
    """The response of a JSON body or of the last `data:` line of an SSE body."""
    if text.lstrip().startswith("{"):
        return dict(json.loads(text))
    data = [line.removeprefix("data:").strip() for line in text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data[-1]))
