# ruff: noqa: F811  (the fixtures are imported and named as parameters)
"""A takeover asks the state store from worker threads only (issue 31: no store call blocks the
event loop, not even once per takeover): a task whose owner went silent, claimed on `tasks/get`;
a parked task resumed on another worker by its answer; a yielded call claimed by the collector;
and a resumed run that ends short of its first run's calls, whose missed calls are read to name
them. Approvals on that path (the request, the grant, using it up) are asked from threads too.
The store here is the embedded SQLite one, whose calls the `on_loop` spy sees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from _replay_support import LOG_ENV, calls, counter
from _tasks_support import CreatedTask, TasksClient, get_task, until_status, update_task
from test_serve_loop_store import on_loop  # noqa: F401  (fixture)
from toolshell.calls.replay import CallFeed
from toolshell.config import Config
from toolshell.frontends.serve.server import build_server
from toolshell.frontends.serve.tasks.yielding import Yielder, _sealed_to
from toolshell.host import Host
from toolshell.store.replay import RESUME, CallRecords, sealed_json
from toolshell.store.sqlite import Store
from toolshell.store.tasks import TaskRows, id_hash
from toolshell.store.yields import YieldRows

pytestmark = pytest.mark.anyio
RING = [b"k" * 32]
Spied = tuple[list[str], list[str]]


async def _store(host: Host, sql: str, *args: Any) -> list[dict[str, Any]]:
    """The test's own store steps, from a thread too (the spy counts every call on the loop)."""
    return await anyio.to_thread.run_sync(lambda: host.store.query(sql, args))


async def _recorded(host: Host, key: str, at_least: int) -> None:
    with anyio.fail_after(60):
        sql = "SELECT COUNT(*) AS n FROM run_calls WHERE run_key = ?"
        while (await _store(host, sql, key))[0]["n"] < at_least:  # noqa: ASYNC110  (rows in the store)
            await anyio.sleep(0.1)


async def test_a_silent_owners_task_taken_over_on_tasks_get_asks_the_store_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_loop: Spied
) -> None:
    calls_made, looped = on_loop
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    (tmp_path / "calls.log.hold-3").touch()
    script = "for i in 1 2 3 4; do tools counter tick n=$i; done; echo done"
    config = Config.model_validate({"serve": {"tasks": {"after_seconds": 0}}})
    async with (
        Host.open(config, state_dir=tmp_path / "state", servers={"counter": counter()}) as host,
        Client(build_server(host, []), extensions=[TasksClient()]) as client,
    ):
        created = await client.session.call_tool("bash", {"script": script}, allow_claimed=True)
        assert isinstance(created, CreatedTask), created
        key = id_hash(created.task_id)
        await _recorded(host, key, 2)
        await anyio.to_thread.run_sync(
            lambda: host.store.execute("UPDATE tasks SET beat = beat - 3600, worker = 'gone' WHERE id_hash = ?", (key,))
        )
        calls_made.clear(), looped.clear()
        taken = await get_task(client.session, created.task_id)  # claimed here, run again by replay
        (tmp_path / "calls.log.hold-3").unlink()
        done = await until_status(client.session, created.task_id, "completed", "failed")
    assert taken.status == "working" and done.status == "completed", done
    assert calls(tmp_path / "calls.log") == [1, 2, 3, 4], "the two recorded calls were answered from the record"
    assert any("shell_handles" in call for call in calls_made), "the shell's version was checked"
    assert looped == [], f"store calls on the event loop's thread: {looped}"


async def _never(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("a task's question went out as elicitation/create instead of inputRequests")


async def test_a_parked_task_resumed_by_its_answer_on_another_worker_asks_the_store_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_loop: Spied
) -> None:
    calls_made, looped = on_loop
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    config = Config.model_validate(
        {"serve": {"heartbeat_seconds": 1, "tasks": {"after_seconds": 0}}, "approval": {"park_after_seconds": 1}}
    )
    script = "a=$(tools counter tick n=1); tools counter drop n=2; tools counter tick n=3; echo $a done"
    path = tmp_path / "shared.db"
    async with (
        Host.open(config, store=Store(path), state_dir=tmp_path / "one", servers={"counter": counter()}) as one,
        Host.open(config, store=Store(path), state_dir=tmp_path / "two", servers={"counter": counter()}) as two,
        Client(build_server(one, []), extensions=[TasksClient()], elicitation_callback=_never) as on_one,
        Client(build_server(two, []), extensions=[TasksClient()], elicitation_callback=_never) as on_two,
    ):
        created = await on_one.session.call_tool("bash", {"script": script}, allow_claimed=True)
        assert isinstance(created, CreatedTask), created
        rows = TaskRows(one.store)
        with anyio.fail_after(30):
            key = id_hash(created.task_id)
            while not (row := await anyio.to_thread.run_sync(rows.get, key)) or not row.parked:  # noqa: ASYNC110
                await anyio.sleep(0.2)
        calls_made.clear(), looped.clear()
        parked = await get_task(on_two.session, created.task_id)
        [asked] = parked.input_requests or {}
        await update_task(on_two.session, created.task_id, {asked: {"action": "accept", "content": {"answer": "once"}}})
        done = await until_status(on_two.session, created.task_id, "completed", "failed")
    assert done.status == "completed", done
    assert calls(tmp_path / "calls.log") == [1, -2, 3], "each call once: the first from its record"
    assert any("answers" in call or "UPDATE tasks" in call for call in calls_made), "the answer was claimed"
    assert looped == [], f"store calls on the event loop's thread: {looped}"


async def test_a_yielded_call_claimed_by_the_collector_asks_the_store_off_the_event_loop(
    tmp_path: Path, on_loop: Spied
) -> None:
    calls_made, looped = on_loop
    store = Store(tmp_path / "state.db")
    ran: list[str] = []

    def resumer(info: dict[str, Any]) -> Any:
        async def run(on_output: Any, asker: Any, feed: CallFeed) -> types.CallToolResult:
            ran.append(f"{info['handle']} replays {feed.resumed}")
            return types.CallToolResult(content=[])

        return run

    try:
        yields = YieldRows(store)
        info = {"script": "tools fs delete p=/a", "caller": "alice", "handle": "sh_A", "version": 3}
        yields.create(
            "sh_A",
            "alice",
            "w1",
            "",
            "",
            "yield:K",
            sealed_json(RING, RESUME, _sealed_to("yield:K", "sh_A", "alice"), info),
        )
        CallRecords(store).write(RING, "yield:K", 1, {"server": "fs", "tool": "delete"})
        row = yields.get("sh_A")
        assert row is not None
        async with anyio.create_task_group() as tg:
            yielder = Yielder(yields, tg, "w2", 1, 10, RING)
            calls_made.clear(), looped.clear()
            took = await yielder._take_over(row, "alice", resumer)
            with anyio.fail_after(30):
                while not ran:  # noqa: ASYNC110  (the run started by the takeover)
                    await anyio.sleep(0.1)
            tg.cancel_scope.cancel()
    finally:
        store.close()
    assert took is True and ran == ["sh_A replays True"], "claimed here, and run again by replay"
    assert any("run_calls" in call for call in calls_made), "the records' index was read"
    assert looped == [], f"store calls on the event loop's thread: {looped}"


async def test_a_resumed_run_that_ends_short_reads_the_calls_it_missed_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_loop: Spied
) -> None:
    calls_made, looped = on_loop
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    store = Store(tmp_path / "records.db")
    config = Config.model_validate({"approval": {"mode": "off"}})
    try:
        records = CallRecords(store)
        async with Host.open(config, state_dir=tmp_path / "state", servers={"counter": counter()}) as host:
            first = CallFeed(write=records.writer(RING, "run"))
            await host.session().run("for i in 1 2 3; do tools counter tick n=$i; done", feed=first)
            again = await anyio.to_thread.run_sync(
                lambda: CallFeed(records.read(RING, "run"), records.writer(RING, "run"), resumed=True)
            )
            calls_made.clear(), looped.clear()
            short = await host.session().run("tools counter tick n=1; echo took the other way", feed=again)
    finally:
        store.close()
    message = json.loads(short.stderr)["error"]["message"]
    assert 'call 2 `tools counter tick {"n":2}`' in message, "the missed calls were read and named"
    assert any("run_calls" in call for call in calls_made)
    # (in process, outside `serve`, the timeline's own rows are written on the loop by design: `SqliteSink`)
    assert [c for c in looped if "run_calls" in c] == [], f"records read on the event loop's thread: {looped}"
