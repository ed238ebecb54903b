"""A `bash` call through `serve` asks the state store from worker threads only (issue 31: no store
call blocks the event loop): finding its client session's shell (stdio, an HTTP session), making a
new one for a stateless request, running and saving it, the lookups of yield-and-wait, a task's
polls and cancel, an unlabeled tool's rating, and an approval (asked over 2026-07-28 rounds, whose
relay rows are written too, or waited for in the store). A store that hangs then holds a thread,
not every other call of the worker. Takeovers: `test_takeover_off_loop.py`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from _serve_http_support import http_serving
from _tasks_support import CreatedTask, TasksClient, cancel_task, get_task, until_status
from toolshell.config import Config
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host
from toolshell.store import notify, sqlite
from toolshell.store.keys import new_key

pytestmark = pytest.mark.anyio
NESTED_THEN_WAIT = (
    "tools text-metrics text-length text=a; sleep 1; tools text-metrics text-length text=b; sleep 30; echo never"
)
"""A nested call as the call becomes a task, one once it is (its row written), then a wait to cancel."""


@pytest.fixture
def on_loop(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[str], list[str]]]:
    """(every store call, the ones made on the event loop's thread), as the test clears them."""
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    loop_thread = threading.get_ident()
    calls: list[str] = []
    looped: list[str] = []
    for name in ("query", "execute", "executemany", "transaction"):
        original = getattr(sqlite.Store, name)

        def spied(self: sqlite.Store, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            what = f"{_name}: {args[0] if args and isinstance(args[0], str) else ''}"[:120]
            calls.append(what)
            if threading.get_ident() == loop_thread:
                looped.append(what)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(sqlite.Store, name, spied)
    made = notify.Subscription.__init__

    def subscribed(sub: notify.Subscription, channel: str, poll: Any, *args: Any) -> None:
        def polled() -> Any:  # a waiting subscription's look at the notifications table
            what = f"poll: {channel}"
            calls.append(what)
            if threading.get_ident() == loop_thread:
                looped.append(what)
            return poll()

        made(sub, channel, polled, *args)

    monkeypatch.setattr(notify.Subscription, "__init__", subscribed)
    yield calls, looped


async def _two_calls(client: Client) -> tuple[str, str]:
    first = await client.call_tool("bash", {"script": "echo one >> f; cat f"})  # no shell named
    second = await client.call_tool("bash", {"script": "echo two >> f; cat f"})
    return (first.structured_content or {})["stdout"], (second.structured_content or {})["stdout"]


async def test_a_stdio_clients_calls_ask_the_store_off_the_event_loop(
    tmp_path: Path, on_loop: tuple[list[str], list[str]]
) -> None:
    calls, looped = on_loop
    async with Host.open(state_dir=tmp_path / "state") as host:
        async with Client(build_server(host, [])) as client:  # in process: the one client, as over stdio
            await client.list_tools()
            calls.clear(), looped.clear()  # what starting the server asked
            outputs = await _two_calls(client)
    assert outputs == ("one\n", "one\ntwo\n"), "the client's session keeps its shell"
    assert calls and looped == [], f"store calls on the event loop's thread: {looped}"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_http_clients_calls_ask_the_store_off_the_event_loop(
    mode: str, tmp_path: Path, on_loop: tuple[list[str], list[str]]
) -> None:
    """A legacy client's HTTP session keeps its shell; a 2026-07-28 request is stateless and gets a
    new shell when it names none."""
    calls, looped = on_loop
    async with Host.open(state_dir=tmp_path / "state") as host, http_serving(host) as url:
        with anyio.fail_after(60):
            async with Client(url, mode=mode) as client:  # type: ignore[arg-type]
                await client.list_tools()
                calls.clear(), looped.clear()
                outputs = await _two_calls(client)
    assert outputs == (("one\n", "one\ntwo\n") if mode == "legacy" else ("one\n", "two\n"))
    assert calls and looped == [], f"store calls on the event loop's thread: {looped}"


async def test_a_tasks_polls_and_cancel_ask_the_store_off_the_event_loop(
    tmp_path: Path, on_loop: tuple[list[str], list[str]]
) -> None:
    """A call that becomes a task writes its row, records its nested calls for replay, `tasks/get`
    and `tasks/cancel` read and write it, and the keeper that runs it keeps it in step: every
    store call from a worker thread."""
    calls, looped = on_loop
    every_call = Config.model_validate({"serve": {"tasks": {"after_seconds": 0}}})
    async with Host.open(every_call, state_dir=tmp_path / "state") as host:
        async with Client(build_server(host, []), extensions=[TasksClient()]) as client:
            await client.list_tools()
            calls.clear(), looped.clear()
            created = await client.session.call_tool("bash", {"script": NESTED_THEN_WAIT}, allow_claimed=True)
            assert isinstance(created, CreatedTask), created
            with anyio.fail_after(60):  # its nested call is recorded for replay (from a worker thread)
                while sum("run_calls" in call for call in calls) < 2:  # noqa: ASYNC110  (rows in the store)
                    await anyio.sleep(0.05)
            polled = await get_task(client.session, created.task_id)
            await cancel_task(client.session, created.task_id)
            ended = await until_status(client.session, created.task_id, "cancelled")
    assert polled.status == "working" and ended.status == "cancelled"
    assert calls and looped == [], f"store calls on the event loop's thread: {looped}"


async def test_a_yielded_call_and_the_collection_of_its_rest_ask_the_store_off_the_event_loop(
    tmp_path: Path, on_loop: tuple[list[str], list[str]]
) -> None:
    """A call that yields writes its row, records the nested call it makes after, its owner records
    its output, and the next calls on its shell collect the rest: every store call from a worker
    thread."""
    calls, looped = on_loop
    yielding = Config.model_validate({"serve": {"yield_seconds": 1}})
    async with Host.open(yielding, state_dir=tmp_path / "state") as host:
        async with Client(build_server(host, [])) as client:
            await client.list_tools()
            calls.clear(), looped.clear()
            script = "echo one; sleep 2; tools text-metrics text-length text=x >/dev/null; sleep 1; echo two"
            first = (await client.call_tool("bash", {"script": script})).structured_content
            assert first is not None and first["running"], first
            pieces, body = [first["stdout"]], {}
            with anyio.fail_after(60):  # each call waits up to yield_seconds for the rest: bounded
                while "earlier" not in body or body["earlier"].get("running"):
                    body = (await client.call_tool("bash", {"script": "echo mine"})).structured_content or {}
                    pieces += [body["earlier"]["stdout"]] if "earlier" in body else []
    assert "".join(pieces) == "one\ntwo\n", "every byte, each once"
    assert body["stdout"] == "mine\n"
    assert any("run_calls" in call for call in calls), "its nested call, made after it yielded, is recorded"
    assert calls and looped == [], f"store calls on the event loop's thread: {looped}"


def _tools() -> MCPServer:
    """An unlabeled tool (rated, the rating kept in the store) and a destructive one (asks a person)."""
    server = MCPServer("t")

    def note(text: str) -> str:
        return f"noted {text}"

    def wipe(name: str) -> str:
        return f"wiped {name}"

    server.add_tool(note, name="note")
    server.add_tool(wipe, name="wipe", annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
    return server


async def _once(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": "once"})


async def test_a_rated_tool_and_a_call_a_person_approves_ask_the_store_off_the_event_loop(
    tmp_path: Path, on_loop: tuple[list[str], list[str]]
) -> None:
    """An unlabeled tool's rating (read, then kept) and the approval of a destructive call (its
    request, the person's answer over the 2026-07-28 rounds, the grant used up) are store steps of
    the call: none on the loop."""
    calls, looped = on_loop
    async with Host.open(state_dir=tmp_path / "state", servers={"t": _tools()}) as host:
        async with Client(build_server(host, []), elicitation_callback=_once) as client:
            await client.list_tools()
            calls.clear(), looped.clear()
            with anyio.fail_after(60):
                result = await client.call_tool("bash", {"script": "tools t note text=a; tools t wipe name=b"})
    body = result.structured_content or {}
    assert body.get("stdout") == "noted a\nwiped b\n", body
    assert any("tool_ratings" in call for call in calls), "the rating was read and kept"
    assert any("approval_grants" in call for call in calls), "the grant was made and used up"
    assert any("parked_runs" in call for call in calls), "the round was recorded for a retry elsewhere"
    assert looped == [], f"store calls on the event loop's thread: {looped}"


async def test_a_call_waiting_for_an_answer_in_the_store_asks_it_off_the_event_loop(
    tmp_path: Path, on_loop: tuple[list[str], list[str]]
) -> None:
    """`[approval] wait_for = "store"`: the request is opened, its status read while the call waits
    and once woken, the grant used up: none on the loop (a person answers from another process)."""
    calls, looped = on_loop
    config = Config.model_validate({"approval": {"wait_for": "store", "wait_seconds": 600}})
    results: list[Any] = []
    with anyio.fail_after(60):  # the whole of it: a call that is never woken fails here, not in 600 s
        async with Host.open(config, state_dir=tmp_path / "state", servers={"t": _tools()}) as host:
            async with Client(build_server(host, [])) as client, anyio.create_task_group() as tg:
                await client.list_tools()
                calls.clear(), looped.clear()

                async def call() -> None:
                    results.append(await client.call_tool("bash", {"script": "tools t wipe name=b"}))

                tg.start_soon(call)
                approvals = host.policy.approvals
                while not (pending := await anyio.to_thread.run_sync(approvals.list_pending)):  # noqa: ASYNC110
                    await anyio.sleep(0.1)
                await anyio.to_thread.run_sync(approvals.grant, pending[0].id)
    [result] = results
    assert (result.structured_content or {}).get("stdout") == "wiped b\n", result
    assert any("approval_requests" in call for call in calls), "the request was opened and read"
    assert any(call == "poll: approvals" for call in calls), "the wait looked at the notifications"
    assert looped == [], f"store calls on the event loop's thread: {looped}"
