# ruff: noqa: F811  (the store fixtures are imported from _store_support and named as parameters)
"""Resume by replay, client and server in one process, on both store engines: a task whose owner
went silent is taken over on `tasks/get` and run again from the shell's state before the call,
its recorded nested calls answered from their records (each tool call made once); a replay whose
script makes another call than the record stops there with a report naming both; two workers
that try to take one task over get one winner; a record changed in the store is not believed.
The same across real worker processes killed with SIGKILL is `test_tasks_replay_workers.py`."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from _replay_support import LOG_ENV, calls, counter
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from _tasks_support import CreatedTask, TasksClient, cancel_task, get_task, until_status, update_task
from toolshell.config import Config
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.replay import CallRecords
from toolshell.store.tasks import TaskRows, id_hash
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio
EVERY_CALL = Config.model_validate({"serve": {"tasks": {"after_seconds": 0}}})


@asynccontextmanager
async def _serving(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Host, Client]]:
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    store = open_store(store_url)
    async with Host.open(EVERY_CALL, store=store, state_dir=tmp_path / "state", servers={"counter": counter()}) as host:
        async with Client(build_server(host, []), extensions=[TasksClient()]) as client:
            yield host, client


async def _held_task(host: Host, client: Client, tmp_path: Path, script: str, hold: int, recorded: int) -> str:
    """Start `script` as a task, held before call `hold` does anything, once `recorded` calls are
    recorded; then leave it as a dead owner does (its heartbeat far older than three beats)."""
    (tmp_path / f"calls.log.hold-{hold}").touch()
    created = await client.session.call_tool("bash", {"script": script}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    key = id_hash(created.task_id)
    with anyio.fail_after(60):
        while _recorded(host, key) < recorded:  # noqa: ASYNC110  (the records are rows in the store)
            await anyio.sleep(0.2)
    host.store.execute("UPDATE tasks SET beat = beat - 3600, worker = 'gone' WHERE id_hash = ?", (key,))
    return created.task_id


def _recorded(host: Host, key: str) -> int:
    return int(host.store.query("SELECT COUNT(*) AS n FROM run_calls WHERE run_key = ?", (key,))[0]["n"])


def _body(state: Any) -> dict[str, Any]:
    result = types.CallToolResult.model_validate(state.result)
    return dict(result.structured_content)


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_task_whose_owner_went_silent_is_run_again_by_replay_and_each_call_is_made_once(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "echo start; for i in 1 2 3 4; do tools counter tick n=$i; done; echo done"
    async with _serving(store_url, tmp_path, monkeypatch) as (host, client):
        task_id = await _held_task(host, client, tmp_path, script, hold=3, recorded=2)
        taken = await get_task(client.session, task_id)  # this worker reads it: takes it over
        (tmp_path / "calls.log.hold-3").unlink()
        done = await until_status(client.session, task_id, "completed", "failed")
        row = TaskRows(host.store).get(id_hash(task_id))
    assert taken.status == "working"
    assert done.status == "completed", done
    body = _body(done)
    assert body["stdout"] == "start\ntick 1\ntick 2\ntick 3\ntick 4\ndone\n" and body["exit_code"] == 0
    assert calls(tmp_path / "calls.log") == [1, 2, 3, 4], "the two recorded calls were answered from the record"
    assert row is not None and row.worker == host.worker_id and row.attempt == 1


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_replay_whose_script_makes_another_call_stops_there_naming_it_and_runs_nothing_more(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "tools counter tick n=1; tools counter tick n=$RANDOM$RANDOM; tools counter tick n=3; echo after"
    async with _serving(store_url, tmp_path, monkeypatch) as (host, client):
        task_id = await _held_task(host, client, tmp_path, script, hold=3, recorded=2)
        first = calls(tmp_path / "calls.log")
        await get_task(client.session, task_id)
        (tmp_path / "calls.log.hold-3").unlink()
        done = await until_status(client.session, task_id, "completed", "failed")
    body = _body(done)
    [error] = [json.loads(line)["error"] for line in body["stderr"].splitlines() if line.startswith("{")]
    assert error["code"] == "stopped"
    assert "diverged at call 2" in error["message"] and f'{{"n":{first[1]}}}' in error["message"]
    assert body["tools"]["stopped"]["call"]["tool"] == "tools counter tick"
    assert "after" not in body["stdout"] and body["exit_code"] == 1
    assert calls(tmp_path / "calls.log") == first, "nothing ran after the call that differed"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_task_that_cannot_be_resumed_reads_as_failed_when_its_owner_went_silent(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _serving(store_url, tmp_path, monkeypatch) as (host, client):
        created = await client.session.call_tool("bash", {"script": "sleep 20"}, allow_claimed=True)
        assert isinstance(created, CreatedTask)
        host.store.execute("UPDATE tasks SET beat = beat - 3600, worker = 'gone', resume = 'not sealed by us'")
        with anyio.fail_after(20):
            failed = await get_task(client.session, created.task_id)
    assert failed.status == "failed" and failed.error and failed.error["code"] == types.INTERNAL_ERROR
    assert failed.status_message and "stopped" in failed.status_message


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_one_worker_of_those_that_try_at_once_takes_a_task_over(store_url: str) -> None:
    one, two = open_store(store_url), open_store(store_url)
    try:
        rows_one, rows_two = TaskRows(one), TaskRows(two)
        rows_one.create("k", None, "dead", 60, "sealed", status="working")
        one.execute("UPDATE tasks SET beat = beat - 3600")
        stale_before = time.time() - 30  # three beats of 10 s
        won = [rows.claim("k", name, stale_before) for rows, name in ((rows_one, "a"), (rows_two, "b"))]
        row = rows_two.get("k")
    finally:
        one.close()
        two.close()
    assert won == [True, False], "the second claim sees a fresh beat: the first worker owns it now"
    assert row is not None and row.worker == "a" and row.attempt == 1


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_a_record_changed_in_the_store_is_not_believed(store_url: str) -> None:
    store = open_store(store_url)
    ring = [b"k" * 32]
    try:
        records = CallRecords(store)
        records.write(ring, "run", 1, {"tool": "tick", "result": {"content": []}})
        records.write(ring, "run", 2, {"tool": "tick", "result": {"content": []}})
        kept = [o for o in (1, 2) if records.read(ring, "run").get(o)]
        store.execute(
            "UPDATE run_calls SET record = (SELECT record FROM run_calls WHERE ordinal = 1) WHERE ordinal = 2"
        )
        moved = [o for o in (1, 2) if records.read(ring, "run").get(o)]
        other_key = [o for o in (1, 2) if records.read([b"x" * 32], "run").get(o)]
    finally:
        store.close()
    assert kept == [1, 2]
    assert moved == [1], "a record copied to another ordinal does not open there"
    assert other_key == []


async def _never(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("a task's question went out as elicitation/create instead of inputRequests")


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_task_waiting_for_a_person_is_parked_and_the_answer_on_another_worker_resumes_it(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`park_after_seconds = 1`: the run stops and its worker forgets it (its shell call ends,
    interrupted); the answer, sent to another worker, resumes it there by replay."""
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    config = Config.model_validate(
        {"serve": {"heartbeat_seconds": 1, "tasks": {"after_seconds": 0}}, "approval": {"park_after_seconds": 1}}
    )
    script = "a=$(tools counter tick n=1); tools counter drop n=2; tools counter tick n=3; echo $a done"
    async with (
        Host.open(
            config, store=open_store(store_url), state_dir=tmp_path / "one", servers={"counter": counter()}
        ) as one,
        Host.open(
            config, store=open_store(store_url), state_dir=tmp_path / "two", servers={"counter": counter()}
        ) as two,
        Client(build_server(one, []), extensions=[TasksClient()], elicitation_callback=_never) as on_one,
        Client(build_server(two, []), extensions=[TasksClient()], elicitation_callback=_never) as on_two,
    ):
        created = await on_one.session.call_tool("bash", {"script": script}, allow_claimed=True)
        assert isinstance(created, CreatedTask), created
        asked = await until_status(on_one.session, created.task_id, "input_required")
        rows = TaskRows(one.store)
        with anyio.fail_after(30):
            while not (row := rows.get(id_hash(created.task_id))) or not row.parked:  # noqa: ASYNC110  (a store row)
                await anyio.sleep(0.2)
            while not _interrupted(one):  # noqa: ASYNC110  (the timeline row of the stopped run)
                await anyio.sleep(0.2)
        parked = await get_task(on_two.session, created.task_id)
        [key] = parked.input_requests or {}
        await update_task(on_two.session, created.task_id, {key: {"action": "accept", "content": {"answer": "once"}}})
        done = await until_status(on_two.session, created.task_id, "completed", "failed")
        resumed = rows.get(id_hash(created.task_id))
    assert parked.status == "input_required" and parked.input_requests == asked.input_requests
    assert done.status == "completed", done
    assert _body(done)["stdout"] == "dropped 2\ntick 3\ntick 1 done\n"
    assert calls(tmp_path / "calls.log") == [1, -2, 3], "each call once: the first from its record"
    assert resumed is not None and resumed.worker == two.worker_id


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_a_parked_task_cancelled_ends_at_once_and_runs_nothing_more(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    config = Config.model_validate(
        {"serve": {"heartbeat_seconds": 1, "tasks": {"after_seconds": 0}}, "approval": {"park_after_seconds": 1}}
    )
    script = "tools counter tick n=1; n=2; tools counter drop n=$n; tools counter tick n=3"
    async with (
        Host.open(
            config, store=open_store(store_url), state_dir=tmp_path / "one", servers={"counter": counter()}
        ) as one,
        Client(build_server(one, []), extensions=[TasksClient()], elicitation_callback=_never) as client,
    ):
        created = await client.session.call_tool("bash", {"script": script}, allow_claimed=True)
        assert isinstance(created, CreatedTask), created
        rows = TaskRows(one.store)
        with anyio.fail_after(30):
            while not (row := rows.get(id_hash(created.task_id))) or not row.parked:  # noqa: ASYNC110  (a store row)
                await anyio.sleep(0.2)
        await cancel_task(client.session, created.task_id)
        cancelled = await get_task(client.session, created.task_id)
    assert cancelled.status == "cancelled" and "parked" in (cancelled.status_message or "")
    assert calls(tmp_path / "calls.log") == [1]


def _interrupted(host: Host) -> bool:
    return any(r["exit_code"] == 130 for r in query(host.store) if r["script_preview"].startswith("a=$(tools"))


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_task_whose_shell_moved_on_since_it_started_is_not_run_again(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "for i in 1 2 3; do tools counter tick n=$i; done"
    async with _serving(store_url, tmp_path, monkeypatch) as (host, client):
        task_id = await _held_task(host, client, tmp_path, script, hold=3, recorded=2)
        host.store.execute("UPDATE shell_handles SET version = version + 1")  # saved by someone since
        await get_task(client.session, task_id)
        (tmp_path / "calls.log.hold-3").unlink()
        done = await until_status(client.session, task_id, "completed", "failed")
    result = types.CallToolResult.model_validate(done.result)
    assert result.is_error and "could not be run again by replay" in result.content[0].text
    assert calls(tmp_path / "calls.log") == [1, 2], "nothing ran again"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_worker_that_stops_cleanly_hands_its_task_over_and_another_finishes_it(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    (tmp_path / "calls.log.hold-3").touch()
    script = "for i in 1 2 3 4; do tools counter tick n=$i; done; echo done"
    async with Host.open(
        EVERY_CALL, store=open_store(store_url), state_dir=tmp_path / "two", servers={"counter": counter()}
    ) as two:
        async with Host.open(
            EVERY_CALL, store=open_store(store_url), state_dir=tmp_path / "one", servers={"counter": counter()}
        ) as one:
            async with Client(build_server(one, []), extensions=[TasksClient()]) as on_one:
                created = await on_one.session.call_tool("bash", {"script": script}, allow_claimed=True)
                assert isinstance(created, CreatedTask), created
                with anyio.fail_after(60):
                    while _recorded(one, id_hash(created.task_id)) < 2:  # noqa: ASYNC110  (store rows)
                        await anyio.sleep(0.2)
        # worker one stopped: its run with it, the task handed to the store
        (tmp_path / "calls.log.hold-3").unlink()
        async with Client(build_server(two, []), extensions=[TasksClient()]) as on_two:
            done = await until_status(on_two.session, created.task_id, "completed", "failed")
    assert done.status == "completed", done
    assert _body(done)["stdout"] == "tick 1\ntick 2\ntick 3\ntick 4\ndone\n"
    assert calls(tmp_path / "calls.log") == [1, 2, 3, 4]


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_the_sweep_drops_the_records_of_tasks_gone_and_keeps_those_of_yielded_calls(store_url: str) -> None:
    store = open_store(store_url)
    ring = [b"k" * 32]
    try:
        rows = TaskRows(store)
        rows.create("kept", None, "w", 60, "sealed", status="working")
        for run_key in ("kept", "gone", "yield:running"):
            rows.calls.write(ring, run_key, 1, {"tool": "tick"})
        rows.sweep(time.time(), 30)
        left = {r["run_key"] for r in store.query("SELECT run_key FROM run_calls")}
    finally:
        store.close()
    assert left == {"kept", "yield:running"}


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_takeover_whose_records_cannot_be_read_hands_the_task_back_and_the_next_poll_takes_it_over(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim is made, then the store fails to give the run's records: the poll gets one clear
    error, and the claim is handed back (its heartbeat stale), so the next poll claims it again and
    runs it by replay. Kept, the claim would hold the task `working` under this worker's heartbeat
    with nothing running (here the first owner's run is still in this process: the second claim
    is what shows it was handed back)."""
    script = "echo start; for i in 1 2 3; do tools counter tick n=$i; done; echo done"
    async with _serving(store_url, tmp_path, monkeypatch) as (host, client):
        task_id = await _held_task(host, client, tmp_path, script, hold=2, recorded=1)
        read = CallRecords.read

        def fails_once(self: CallRecords, *args: Any) -> Any:
            monkeypatch.setattr(CallRecords, "read", read)
            raise ToolshellError(ErrorCode.UNAVAILABLE, "the store went away")

        monkeypatch.setattr(CallRecords, "read", fails_once)
        with pytest.raises(MCPError, match="the task store failed: the store went away"):
            await get_task(client.session, task_id)
        taken = await get_task(client.session, task_id)  # handed back: taken over again
        (tmp_path / "calls.log.hold-2").unlink()
        done = await until_status(client.session, task_id, "completed", "failed")
        row = TaskRows(host.store).get(id_hash(task_id))
    assert taken.status == "working" and done.status == "completed", done
    assert _body(done)["stdout"] == "start\ntick 1\ntick 2\ntick 3\ndone\n"
    assert calls(tmp_path / "calls.log") == [1, 2, 3], "the recorded call was answered from its record"
    assert row is not None and row.attempt == 2, "claimed twice: the first claim was handed back"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_workers_heartbeat_renews_only_the_tasks_it_runs(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task claimed by this worker whose run is not here (its start lost, with the store down at
    the claim) is not kept alive by the heartbeat of the tasks it does run: it goes silent, and the
    next poll anywhere takes it over."""
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    (tmp_path / "calls.log.hold-1").touch()
    config = Config.model_validate({"serve": {"heartbeat_seconds": 1, "tasks": {"after_seconds": 0}}})
    async with (
        Host.open(
            config, store=open_store(store_url), state_dir=tmp_path / "s", servers={"counter": counter()}
        ) as host,
        Client(build_server(host, []), extensions=[TasksClient()]) as client,
    ):
        created = await client.session.call_tool("bash", {"script": "tools counter tick n=1"}, allow_claimed=True)
        assert isinstance(created, CreatedTask), created
        rows, running = TaskRows(host.store), id_hash(created.task_id)
        rows.create("claimed-here-not-run", None, host.worker_id, 600, status="working")
        host.store.execute("UPDATE tasks SET beat = beat - 60 WHERE id_hash = ?", ("claimed-here-not-run",))
        lost = rows.get("claimed-here-not-run")
        first = rows.get(running)
        assert lost is not None and first is not None
        with anyio.fail_after(30):  # two of the worker's beats (1 s apart) renew the task it runs
            while (now := rows.get(running)) is None or now.beat < first.beat + 1.5:  # noqa: ASYNC110
                await anyio.sleep(0.2)
        after = rows.get("claimed-here-not-run")
        (tmp_path / "calls.log.hold-1").unlink()
    assert after is not None and after.beat == lost.beat, "the heartbeat renewed a task this worker does not run"
