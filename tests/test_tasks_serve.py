"""`bash` as an MCP task (SEP-2663): which calls become tasks, what `tasks/get` shows at each
status, approvals as `inputRequests` answered through `tasks/update`, `tasks/cancel`, and the
checks every `tasks/*` request passes. Client (written on the SDK's extension hooks) and server
in one process; the cross-worker flow on PostgreSQL is in `test_tasks_workers.py`."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from _github_server import make_github
from _tasks_support import (
    EXTENSION,
    CreatedTask,
    TasksClient,
    cancel_task,
    get_task,
    until_status,
    update_task,
)
from toolshell.config import Config
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host
from toolshell.store.tasks import TaskRows, id_hash
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio
EVERY_CALL = Config.model_validate({"serve": {"tasks": {"after_seconds": 0}}})
DELETE = "echo start; tools github delete-branch branch=x; echo after"


async def _never(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("a task's question went out as elicitation/create instead of inputRequests")


def _body(result: types.CallToolResult) -> Any:
    return result.structured_content


async def _created(client: Client, script: str) -> CreatedTask:
    first = await client.session.call_tool("bash", {"script": script}, allow_claimed=True)
    assert isinstance(first, CreatedTask), first
    return first


async def test_a_declaring_client_gets_a_task_whose_row_exists_before_the_result_and_polls_it_to_the_end() -> None:
    async with Host.open(EVERY_CALL) as host:
        tasks = TasksClient()
        async with Client(build_server(host, []), extensions=[tasks]) as client:
            created = await _created(client, "echo one; sleep 1; echo two")
            row = TaskRows(host.store).get(id_hash(created.task_id))  # committed before the result was sent
            done = await until_status(client.session, created.task_id, "completed")
            resolved = await client.call_tool("bash", {"script": "echo through the claim"})
    assert row is not None and row.status == "working" and row.caller is None
    assert created.status == "working" and created.poll_interval_ms == 1000
    assert created.ttl_ms is not None and created.ttl_ms >= 3600 * 1000
    assert len(created.task_id) >= 43, "a task id carries 256 random bits"
    assert _body(types.CallToolResult.model_validate(done.result))["stdout"] == "one\ntwo\n"
    assert done.poll_interval_ms is None, "a finished task needs no more polling"
    assert _body(resolved)["stdout"] == "through the claim\n"
    assert [t.status for t in tasks.seen][-1] == "completed"


async def test_a_client_without_the_extension_never_gets_a_task() -> None:
    async with Host.open(EVERY_CALL) as host:
        async with Client(build_server(host, [])) as client:
            plain = await client.session.call_tool("bash", {"script": "sleep 1; echo plain"}, allow_claimed=True)
        async with Client(build_server(host, []), mode="legacy") as legacy:
            older = await legacy.call_tool("bash", {"script": "echo older"})
        rows = host.store.query("SELECT COUNT(*) AS n FROM tasks")
    assert isinstance(plain, types.CallToolResult) and _body(plain)["stdout"] == "plain\n"
    assert _body(older)["stdout"] == "older\n"
    assert rows[0]["n"] == 0


async def test_a_call_that_ends_within_after_seconds_is_answered_plainly_even_to_a_declaring_client() -> None:
    config = Config.model_validate({"serve": {"tasks": {"after_seconds": 60}}})
    async with Host.open(config) as host:
        async with Client(build_server(host, []), extensions=[TasksClient()]) as client:
            quick = await client.session.call_tool("bash", {"script": "echo quick"}, allow_claimed=True)
    assert isinstance(quick, types.CallToolResult) and _body(quick)["stdout"] == "quick\n"


async def test_an_approval_is_an_input_request_answered_once_through_tasks_update() -> None:
    config = Config.model_validate({"serve": {"tasks": {"after_seconds": 60}}})
    async with Host.open(config, servers={"github": make_github()}) as host:
        tasks = TasksClient()
        async with Client(build_server(host, []), extensions=[tasks], elicitation_callback=_never) as client:
            # Asking a person makes the call a task at once, long before after_seconds.
            created = await _created(client, DELETE)
            asked = await until_status(client.session, created.task_id, "input_required")
            [(key, request)] = (asked.input_requests or {}).items()
            again = await get_task(client.session, created.task_id)  # the same question, same key
            deny = {key: {"action": "accept", "content": {"answer": "deny"}}}
            once = {key: {"action": "accept", "content": {"answer": "once"}}}
            await update_task(client.session, created.task_id, {**once, "made-up": {"action": "decline"}})
            await update_task(client.session, created.task_id, deny)  # a second answer to the key is ignored
            done = await until_status(client.session, created.task_id, "completed")
    assert asked.status_message and "tasks/update" in asked.status_message
    assert request["method"] == "elicitation/create" and "delete-branch" in request["params"]["message"]
    assert again.input_requests == asked.input_requests
    assert asked.poll_interval_ms == 5000, "a task waiting for a person is polled less often"
    assert _body(types.CallToolResult.model_validate(done.result))["stdout"] == "start\ndeleted x\nafter\n"


async def _recorded(host: Host, preview: str, ready: Any) -> dict[str, Any]:
    """The shell call's timeline row once `ready(row)`: the run writes it in its own time (a call's
    rows go with its commit, or within the sink's flush interval while it runs)."""

    def found() -> dict[str, Any] | None:
        rows = [r for r in query(host.store) if r["script_preview"].startswith(preview)]
        return rows[0] if rows and ready(rows[0]) else None

    with anyio.fail_after(15):
        while (row := found()) is None:  # noqa: ASYNC110  (a store row)
            await anyio.sleep(0.1)
    return row


async def test_tasks_cancel_stops_the_script_where_it_is() -> None:
    async with Host.open(EVERY_CALL) as host:
        async with Client(build_server(host, []), extensions=[TasksClient()]) as client:
            created = await _created(client, "echo before; sleep 20; echo after")
            await until_status(client.session, created.task_id, "working")
            await _recorded(host, "echo before", lambda row: True)  # the script started (its row is written)
            ack = await cancel_task(client.session, created.task_id)
            cancelled = await until_status(client.session, created.task_id, "cancelled", seconds=15)
            await cancel_task(client.session, created.task_id)  # a finished task: acknowledged, unchanged
            still = await get_task(client.session, created.task_id)
        row = await _recorded(host, "echo before", lambda row: row["exit_code"] is not None)
    assert ack.result_type == "complete"
    assert cancelled.status_message and "tasks/cancel" in cancelled.status_message
    assert cancelled.result is None and still.status == "cancelled"
    assert row["exit_code"] == 130, "the shell call ended as interrupted, nothing after the cancel ran"


async def test_tasks_requests_need_the_extension_and_a_known_task_of_the_same_caller() -> None:
    async with Host.open(EVERY_CALL) as host:
        server = build_server(host, [])
        async with Client(server, extensions=[TasksClient()]) as client:
            created = await _created(client, "echo mine")
            with pytest.raises(MCPError) as unknown:
                await get_task(client.session, "not-a-task-of-anyone")
            TaskRows(host.store).store.execute("UPDATE tasks SET caller = 'someone-else'")
            with pytest.raises(MCPError) as others:
                await get_task(client.session, created.task_id)
        async with Client(server) as undeclared:
            with pytest.raises(MCPError) as missing:
                await get_task(undeclared.session, created.task_id)
    assert unknown.value.code == others.value.code == types.INVALID_PARAMS
    assert unknown.value.message == others.value.message == "Failed to retrieve task: Task not found"
    assert missing.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert missing.value.error.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


async def test_an_answer_that_is_no_elicitation_result_gets_one_clear_error() -> None:
    async with Host.open(EVERY_CALL) as host:
        async with Client(build_server(host, []), extensions=[TasksClient()]) as client:
            created = await _created(client, "echo x")
            with pytest.raises(MCPError) as bad:
                await update_task(client.session, created.task_id, {"q1": "yes"})
    assert bad.value.code == types.INVALID_PARAMS
    assert "inputResponses['q1'] is not an elicitation result" in bad.value.message


async def test_discover_and_the_handshake_advertise_the_extension() -> None:
    async with Host.open() as host:
        server = build_server(host, [])
        async with Client(server) as modern:
            discovered = modern.server_capabilities
        async with Client(server, mode="legacy") as legacy:
            handshake = legacy.server_capabilities
    assert discovered is not None and EXTENSION in (discovered.extensions or {})
    assert handshake is not None and EXTENSION in (handshake.experimental or {}), "2025-11-25 has no `extensions`"


async def test_a_finished_task_past_its_keeping_is_gone() -> None:
    async with Host.open(EVERY_CALL) as host:
        async with Client(build_server(host, []), extensions=[TasksClient()]) as client:
            created = await _created(client, "echo kept")
            await until_status(client.session, created.task_id, "completed")
            host.store.execute("UPDATE tasks SET finished_at = finished_at - keep_seconds - 1")
            with pytest.raises(MCPError) as gone:
                await get_task(client.session, created.task_id)
            with pytest.raises(MCPError) as after:
                await get_task(client.session, created.task_id)
    assert gone.value.message == "Failed to retrieve task: Task has expired"
    assert after.value.message == "Failed to retrieve task: Task not found"


async def test_a_task_whose_worker_went_silent_reads_as_failed() -> None:
    async with Host.open(EVERY_CALL) as host:
        async with Client(build_server(host, []), extensions=[TasksClient()]) as client:
            created = await _created(client, "sleep 20")
            with anyio.fail_after(10):
                # As a dead owner leaves it (no heartbeat for far longer than three beats), not resumable.
                host.store.execute("UPDATE tasks SET beat = beat - 3600, worker = 'gone', resume = NULL")
                failed = await get_task(client.session, created.task_id)
    assert failed.status == "failed" and failed.error and failed.error["code"] == types.INTERNAL_ERROR
    assert failed.status_message and "stopped" in failed.status_message
