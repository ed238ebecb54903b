# ruff: noqa: F811  (the store fixtures are imported from _store_support and named as parameters)
"""The bounds of resume by replay, on both store engines where the store is involved: a replay
that makes fewer calls than its first run stops, naming the calls it did not make; a run's
records are bounded (past it the run cannot be resumed, and a takeover fails it) and read one at
a time; a result the shell refuses is recorded as the error the script got, not kept; a cancel of
a parked task that an answer resumed meanwhile reaches the resumed run; yielded runs whose owner
went silent are swept with their records; a yielded call's resume data opens only on its own row."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from _replay_support import LOG_ENV, calls, counter
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from _tasks_support import get_task
from test_tasks_replay import _serving
from toolshell.calls import replay
from toolshell.calls.replay import CallFeed
from toolshell.config import Config
from toolshell.config.serve import ServeTasksConfig
from toolshell.frontends.serve.server import build_server
from toolshell.frontends.serve.tasks.methods import TaskMethods
from toolshell.frontends.serve.tasks.yielding import Yielder, _sealed_to
from toolshell.host import Host
from toolshell.store import replay as store_replay
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.replay import RESUME, CallRecords, sealed_json
from toolshell.store.tasks import TaskRows, id_hash
from toolshell.store.yields import YieldRows
from toolshell.tasks_wire import TaskParams

pytestmark = pytest.mark.anyio
RING = [b"k" * 32]


async def _run(tmp_path: Path, script: str, feed: CallFeed, **tools_in_shell: Any) -> Any:
    config = Config.model_validate({"approval": {"mode": "off"}, "tools_in_shell": tools_in_shell})
    async with Host.open(config, state_dir=tmp_path / "state", servers={"counter": counter()}) as host:
        return await host.session().run(script, feed=feed)


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_replay_that_makes_fewer_calls_than_its_first_run_stops_naming_the_calls_it_did_not_make(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    store = open_store(store_url)
    try:
        records = CallRecords(store)
        first = CallFeed(write=records.writer(RING, "run"))
        done = await _run(tmp_path, "for i in 1 2 3; do tools counter tick n=$i; done", first)
        again = CallFeed(records.read(RING, "run"), records.writer(RING, "run"), resumed=True)
        short = await _run(tmp_path, "tools counter tick n=1; echo took the other way", again)
    finally:
        store.close()
    assert done.exit_code == 0
    assert short.exit_code == 1 and short.tools["stopped"]["reason"] == "stopped"
    message = json.loads(short.stderr)["error"]["message"]
    assert "ended after 1 call where the first run made 3" in message
    assert 'call 2 `tools counter tick {"n":2}`, call 3 `tools counter tick {"n":3}`' in message
    assert short.tools["stopped"]["call"]["tool"] == "tools counter tick"
    assert calls(tmp_path / "calls.log") == [1, 2, 3], "the replayed call was answered from its record"


def _tick(n: int) -> Any:
    from toolshell.calls.prepare import PreparedCall
    from toolshell.registry.entry import ToolEntry

    return PreparedCall(ToolEntry("counter", "tick"), {"n": n})


def test_records_past_the_runs_bound_are_not_kept_and_the_run_is_forgotten_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(replay, "MAX_RUN_BYTES", 1000)
    written: list[int] = []
    forgotten: list[bool] = []
    feed = CallFeed()
    feed.attach(lambda ordinal, record: written.append(ordinal), lambda: forgotten.append(True))
    result = types.CallToolResult(content=[types.TextContent(type="text", text="x" * 200)])
    for n in range(1, 6):
        feed.record(feed.next_ordinal(), _tick(n), "changes", result)
    assert written == [1, 2] and feed.lost and forgotten == [True]


def test_a_feed_past_its_bound_before_its_run_had_a_row_forgets_the_run_when_attached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A task's or yielded call's row is written from a worker thread while its script goes on: a
    feed that passed its bound meanwhile has nobody to tell yet, so attaching it tells at once."""
    monkeypatch.setattr(replay, "MAX_RUN_BYTES", 1000)
    feed = CallFeed()
    result = types.CallToolResult(content=[types.TextContent(type="text", text="x" * 200)])
    for n in range(1, 6):
        feed.record(feed.next_ordinal(), _tick(n), "changes", result)
    assert feed.lost
    written: list[int] = []
    forgotten: list[bool] = []
    feed.attach(lambda ordinal, record: written.append(ordinal), lambda: forgotten.append(True))
    assert written == [] and forgotten == [True], "nothing of a lost run is written, and the run is forgotten"


def test_a_resumed_run_counts_its_first_runs_records_towards_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "MAX_RUN_BYTES", 1000)
    result = types.CallToolResult(content=[types.TextContent(type="text", text="x" * 200)])
    first: dict[int, dict[str, Any]] = {}
    CallFeed(write=first.__setitem__).record(1, _tick(1), "changes", result)
    forgotten: list[bool] = []
    again = CallFeed(first, resumed=True)
    again.attach(lambda o, r: None, lambda: forgotten.append(True))
    again.replay(again.next_ordinal(), _tick(1))
    for n in (2, 3):
        again.record(again.next_ordinal(), _tick(n), "changes", result)
    assert forgotten == [True], "the first run's record and one more fit; the next does not"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_task_whose_records_pass_the_bound_cannot_be_resumed_and_a_takeover_fails_it(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "MAX_RUN_BYTES", 400)  # one tick record (about 250 bytes) fits, two do not
    script = "for i in 1 2 3 4; do tools counter tick n=$i; done"
    async with _serving(store_url, tmp_path, monkeypatch) as (host, client):
        created = await client.session.call_tool("bash", {"script": script}, allow_claimed=True)
        key = id_hash(created.task_id)
        (tmp_path / "calls.log.hold-4").touch()  # held for good: the run is alive, past its bound
        (tmp_path / "calls.log.hold-3").touch()
        with anyio.fail_after(60):
            while host.store.query("SELECT resume FROM tasks WHERE id_hash = ?", (key,))[0]["resume"]:  # noqa: ASYNC110
                await anyio.sleep(0.2)
        left = host.store.query("SELECT COUNT(*) AS n FROM run_calls WHERE run_key = ?", (key,))[0]["n"]
        host.store.execute("UPDATE tasks SET beat = beat - 3600, worker = 'gone' WHERE id_hash = ?", (key,))
        with anyio.fail_after(30):
            failed = await get_task(client.session, created.task_id)
        (tmp_path / "calls.log.hold-3").unlink()
        (tmp_path / "calls.log.hold-4").unlink()
    assert int(left) == 0, "its records went with its resume data"
    assert failed.status == "failed" and failed.status_message and "stopped" in failed.status_message


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_a_runs_records_are_read_one_at_a_time_as_the_replay_asks(store_url: str) -> None:
    store = open_store(store_url)
    try:
        records = CallRecords(store)
        for ordinal in (1, 2, 3):
            records.write(RING, "run", ordinal, {"tool": "tick", "n": ordinal})
        run = records.read(RING, "run")
        store.execute("DELETE FROM run_calls WHERE ordinal = 3")  # after the read began: not held in memory
        got = [run.get(1), run.get(3)]
        after = run.after(1)
    finally:
        store.close()
    assert got == [{"tool": "tick", "n": 1}, None] and after == [2]
    assert run.size > 0


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_a_row_longer_than_any_record_of_ours_is_not_loaded(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_replay, "MAX_RECORD_TEXT", 1000)
    store = open_store(store_url)
    try:
        records = CallRecords(store)
        records.write(RING, "run", 1, {"tool": "tick", "pad": "x" * 2000})
        records.write(RING, "run", 2, {"tool": "tick"})
        run = records.read(RING, "run")
        got = [run.get(1), run.get(2)]
    finally:
        store.close()
    assert got == [None, {"tool": "tick"}]


async def test_a_result_the_shell_refuses_is_recorded_as_the_error_the_script_got(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    kept: dict[int, dict[str, Any]] = {}
    feed = CallFeed(write=kept.__setitem__)
    done = await _run(tmp_path, "tools counter big n=200000", feed, max_result_bytes=65536)
    again = CallFeed(kept, resumed=True)
    replayed = await _run(tmp_path, "tools counter big n=200000", again, max_result_bytes=65536)
    assert done.exit_code == 1 and "past the shell's limit of 65,536 bytes" in done.stderr
    assert "result" not in kept[1] and kept[1]["error"]["code"] == "tool_error"
    assert len(str(kept[1])) < 2000, "the refused result is not kept"
    assert replayed.exit_code == 1 and "past the shell's limit" in replayed.stderr and again.replayed == 1


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_cancel_of_a_parked_task_an_answer_resumed_meanwhile_reaches_the_resumed_run(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(store_url)
    try:
        rows = TaskRows(store)
        question = {"q1": {"method": "elicitation/create", "params": {"message": "approve?"}}}
        rows.create("k", None, "w1", 600, "sealed", status="input_required", input_requests=question)
        assert rows.park("k", "w1")

        async def found_then_resumed_elsewhere(self: TaskMethods, ctx: object, task_id: str) -> Any:
            row = rows.get("k")  # this worker sees it parked; another's `tasks/update` resumes it now
            rows.answer("k", {"q1": {"action": "accept", "content": {}}})
            assert rows.claim_parked("k", "w2")
            return row

        monkeypatch.setattr(TaskMethods, "_find", found_then_resumed_elsewhere)
        methods = TaskMethods(rows, ServeTasksConfig(), 10, lambda ctx: None, None)
        await methods.cancel(None, TaskParams(task_id="x"))  # type: ignore[arg-type]  (no request: `_find` is the race)
        row = rows.get("k")
    finally:
        store.close()
    assert row is not None and row.worker == "w2" and row.status == "working"
    assert row.cancel_requested, "the resumed run is asked to stop"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_the_sweep_removes_yielded_runs_whose_owner_went_silent_and_their_records(store_url: str) -> None:
    store = open_store(store_url)
    try:
        rows, yields = TaskRows(store), YieldRows(store)
        yields.create("sh_old", "alice", "w", "", "", "yield:old", "sealed")
        yields.create("sh_live", "alice", "w", "", "", "yield:live", "sealed")
        for run_key in ("yield:old", "yield:live"):
            rows.calls.write(RING, run_key, 1, {"tool": "tick"})
        store.execute("UPDATE yielded_runs SET beat = beat - 7200 WHERE handle = 'sh_old'")
        rows.sweep(time.time(), 30, 3600)
        handles = {r["handle"] for r in store.query("SELECT handle FROM yielded_runs")}
        left = {r["run_key"] for r in store.query("SELECT run_key FROM run_calls")}
    finally:
        store.close()
    assert handles == {"sh_live"} and left == {"yield:live"}


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_yielded_calls_resume_data_copied_to_another_shells_row_is_not_run(store_url: str) -> None:
    store = open_store(store_url)
    ran: list[str] = []

    def resumer(info: dict[str, Any]) -> Any:
        async def run(on_output: Any, asker: Any, feed: Any) -> types.CallToolResult:
            ran.append(str(info["handle"]))
            return types.CallToolResult(content=[])

        return run

    try:
        yields = YieldRows(store)
        for handle, key in (("sh_S1", "yield:K1"), ("sh_S2", "yield:K2")):
            info = {"script": "tools fs delete p=/a", "caller": "alice", "handle": handle, "version": 3}
            yields.create(
                handle, "alice", "w1", "", "", key, sealed_json(RING, RESUME, _sealed_to(key, handle, "alice"), info)
            )
        store.execute(  # whoever can write the store gives S2's row S1's run
            "UPDATE yielded_runs SET run_key = 'yield:K1', resume = (SELECT resume FROM yielded_runs WHERE"
            " handle = 'sh_S1') WHERE handle = 'sh_S2'"
        )
        async with anyio.create_task_group() as tg:
            yielder = Yielder(yields, tg, "w2", 1, 10, RING)
            swapped = yields.get("sh_S2")
            own = yields.get("sh_S1")
            assert swapped is not None and own is not None
            took = [await yielder._take_over(row, "alice", resumer) for row in (swapped, own)]
            with anyio.fail_after(30):
                while not ran:  # noqa: ASYNC110
                    await anyio.sleep(0.1)
            tg.cancel_scope.cancel()
    finally:
        store.close()
    assert took == [False, True] and ran == ["sh_S1"], "S1's script runs on S1's row only"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_server_whose_clients_only_yield_sweeps_yielded_runs_too(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    config = Config.model_validate({"serve": {"yield_seconds": 1}})
    store = open_store(store_url)
    async with Host.open(config, store=store, state_dir=tmp_path / "state") as host:
        yields = YieldRows(host.store)
        yields.create("sh_old", "alice", "gone", "", "", "yield:old", "sealed")
        host.store.execute("UPDATE yielded_runs SET beat = beat - 86400 WHERE handle = 'sh_old'")
        async with Client(build_server(host, [])) as client:
            result = await client.call_tool("bash", {"script": "echo hi"})
        left = yields.get("sh_old")
    assert not result.is_error and left is None


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_a_task_with_an_answer_or_a_cancel_its_owner_has_not_taken_is_not_parked(store_url: str) -> None:
    """They came while the owner decided to park (its read, then the park, are two hops): the
    sender saw the task running and left them to the owner, so parking would strand them."""
    store = open_store(store_url)
    try:
        rows = TaskRows(store)
        question = {"q1": {"method": "elicitation/create", "params": {"message": "approve?"}}}
        for key in ("answered", "cancelled", "waiting"):
            rows.create(key, None, "w1", 600, "sealed", status="input_required", input_requests=question)
        rows.answer("answered", {"q1": {"action": "accept", "content": {}}})
        rows.ask_cancel("cancelled")
        parked = {key: rows.park(key, "w1") for key in ("answered", "cancelled", "waiting")}
        rows.take_answers("answered")
        taken_then = rows.park("answered", "w1")
    finally:
        store.close()
    assert parked == {"answered": False, "cancelled": False, "waiting": True}
    assert taken_then, "once the owner took the answer, it may park (the answer is the run's now)"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_cancel_of_a_task_its_owner_parks_meanwhile_ends_it(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tasks/cancel` finds the task running and asks its owner to stop; if the owner parked it in
    between, nobody runs it to see the ask: the cancel ends it there."""
    store = open_store(store_url)
    try:
        rows = TaskRows(store)
        question = {"q1": {"method": "elicitation/create", "params": {"message": "approve?"}}}
        rows.create("k", None, "w1", 600, "sealed", status="input_required", input_requests=question)
        ask_cancel = rows.ask_cancel

        async def found_running(self: TaskMethods, ctx: object, task_id: str) -> Any:
            return rows.get("k")

        def parked_first(key: str) -> None:  # the owner parks it just before the ask lands
            assert rows.park(key, "w1")
            ask_cancel(key)

        monkeypatch.setattr(TaskMethods, "_find", found_running)
        rows.ask_cancel = parked_first  # type: ignore[method-assign]
        methods = TaskMethods(rows, ServeTasksConfig(), 10, lambda ctx: None, None)
        await methods.cancel(None, TaskParams(task_id="x"))  # type: ignore[arg-type]  (no request: `_find` is the race)
        row = rows.get("k")
    finally:
        store.close()
    assert row is not None and row.status == "cancelled" and row.finished
