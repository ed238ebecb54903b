# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""A parked run across workers (issue 15): a 2026-07-28 client's retry that lands on a worker other
than the one running its script is carried through the store, round by round, to the result; if
that worker died, the retry gets the stop report at once and the approval request stays listed."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import anyio.abc
import mcp_types as types
import pytest

from _serve_auth_support import SRC, TESTS, Served, client, serving, toolshell_exe
from _store_support import ENGINES, fresh_database, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.config.loading import STATE_FILE
from toolshell.frontends.serve.relay import Relay, prepare
from toolshell.frontends.serve.upstream import ParkedRun
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.protocol import StateStore

pytestmark = pytest.mark.anyio
TOKEN = "serve-token-for-the-relay-tests-0123456789"
TWO = "echo start; for b in x y; do tools github delete-branch branch=$b; done; echo after"
ONE = "echo start; tools github delete-branch branch=x; echo after"


async def _never(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("the SDK client was asked: the test drives the rounds itself")


@contextmanager
def _two_workers(store: str, tmp_path: Path) -> Iterator[tuple[Served, Served, dict[str, str]]]:
    """Two `serve --http` processes on one store: PostgreSQL (each its own state dir, one key ring),
    or SQLite (one state dir, so one file, shared by both); the env a CLI needs to reach it."""
    env = {"TOOLSHELL_SERVE_TOKEN": TOKEN}
    if store.startswith("postgresql"):
        env |= {"TOOLSHELL_STATE_URL": store, "TOOLSHELL_STATE_KEYS": new_key()}
        dirs = [tmp_path / "w1" / "state", tmp_path / "w2" / "state"]
    else:
        dirs = [tmp_path / "one" / "state"] * 2
    for d in dirs:
        d.parent.mkdir(exist_ok=True)
    with ExitStack() as stack:
        first = stack.enter_context(serving(dirs[0], env=env))
        second = stack.enter_context(serving(dirs[1], env=env))
        yield first, second, env


def _store_of(store: str, worker: Served) -> str:
    return store if store.startswith("postgresql") else str(worker.state / STATE_FILE)


async def _start(worker: Served, script: str) -> types.InputRequiredResult:
    async with client(worker.url, TOKEN, elicitation_callback=_never) as c:
        first = await c.session.call_tool("bash", {"script": script}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult) and first.request_state, first
    return first


async def _retry(
    worker: Served, script: str, round_: types.InputRequiredResult, answer: str | None
) -> types.CallToolResult | types.InputRequiredResult:
    """The client's retry of `round_`, sent to `worker`: with `answer` to its one question, or none."""
    [key] = round_.input_requests or {}
    responses = {key: types.ElicitResult(action="accept", content={"answer": answer})} if answer else None
    async with client(worker.url, TOKEN, elicitation_callback=_never) as c:
        with anyio.fail_after(45):
            return await c.session.call_tool(
                "bash",
                {"script": script},
                input_responses=responses,
                request_state=round_.request_state,
                allow_input_required=True,
            )


def _question(round_: types.InputRequiredResult) -> str:
    [request] = (round_.input_requests or {}).values()
    assert isinstance(request, types.ElicitRequest)
    return request.params.message


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_retry_sent_to_another_worker_carries_the_parked_run_round_by_round_to_its_result(
    store_url: str, tmp_path: Path
) -> None:
    with _two_workers(store_url, tmp_path) as (one, two, _):
        first = await _start(one, TWO)
        unanswered = await _retry(two, TWO, first, None)
        assert isinstance(unanswered, types.InputRequiredResult), unanswered
        second = await _retry(two, TWO, unanswered, "once")
        assert isinstance(second, types.InputRequiredResult), second
        done = await _retry(one, TWO, second, "once")  # back on the owner: the local path
        store = open_store(_store_of(store_url, one))
        left = store.query("SELECT token FROM parked_runs")
        store.close()
    assert list(unanswered.input_requests or {}) == list(first.input_requests or {}), "the same question again"
    assert '"branch": "x"' in _question(first) and '"branch": "y"' in _question(second)
    assert isinstance(done, types.CallToolResult) and not done.is_error, done
    assert done.structured_content["stdout"] == "start\ndeleted x\ndeleted y\nafter\n"
    assert list(left) == [], "the run's rows go once its result is delivered"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_the_result_of_a_run_parked_on_one_worker_comes_back_through_another(
    store_url: str, tmp_path: Path
) -> None:
    with _two_workers(store_url, tmp_path) as (one, two, _):
        first = await _start(one, ONE)
        done = await _retry(two, ONE, first, "once")
        again = await _retry(two, ONE, first, "once")
        store = open_store(_store_of(store_url, one))
        left = store.query("SELECT token FROM parked_runs UNION ALL SELECT token FROM parked_answers")
        store.close()
    assert list(left) == [], "the rows go once the result is delivered, answers and all"
    assert isinstance(done, types.CallToolResult) and not done.is_error, done
    body = done.structured_content
    assert body["stdout"] == "start\ndeleted x\nafter\n" and body["shell"].startswith("sh_")
    assert isinstance(again, types.CallToolResult) and again.is_error and "no longer waiting" in again.content[0].text


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_retry_for_a_worker_killed_while_its_run_was_parked_gets_the_stop_report_and_the_request_stays(
    store_url: str, tmp_path: Path
) -> None:
    with _two_workers(store_url, tmp_path) as (one, two, env):
        first = await _start(one, ONE)
        one.proc.send_signal(signal.SIGKILL)
        await anyio.to_thread.run_sync(one.proc.wait, 10)
        stopped = await _retry(two, ONE, first, "once")
        with anyio.fail_after(60):
            listed = await anyio.run_process(
                [toolshell_exe(), "approvals", "list", "--json", "--state-dir", str(one.state)],
                env={**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}", **env},
                check=False,
            )
    assert isinstance(stopped, types.CallToolResult) and stopped.is_error, stopped
    error = json.loads(stopped.content[0].text)["error"]
    assert error["code"] == "stopped" and "the worker running this script stopped" in error["message"]
    assert "toolshell approvals" in error["message"] and "Run the script again" in error["message"]
    assert "delete-branch" in error["message"], "the report says what the run was asking"
    assert listed.returncode == 0, listed.stderr.decode()
    [pending] = json.loads(listed.stdout)
    assert pending["status"] == "pending" and pending["input"] == {"branch": "x"}


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_relayed_retry_from_another_caller_finds_no_run(store_url: str, tmp_path: Path) -> None:
    async with _published(store_url) as (_, tg, (owner, other), run):
        with anyio.fail_after(10):
            stranger = await other.retry(run.token, "bob", {})
            unknown = await other.retry("no-such-token", "alice", {})
        tg.cancel_scope.cancel()
    for refused in (stranger, unknown):
        assert isinstance(refused, types.CallToolResult) and refused.is_error
        assert "no longer waiting" in refused.content[0].text


async def _parked_round(tg: anyio.abc.TaskGroup) -> tuple[ParkedRun, types.InputRequiredResult]:
    run = ParkedRun()
    question = types.ElicitRequestFormParams(message="ok?", requested_schema={"type": "object"})
    tg.start_soon(run.ask, question)
    with anyio.fail_after(10):
        round_ = await run.next_round()
    assert isinstance(round_, types.InputRequiredResult)
    return run, round_


@asynccontextmanager
async def _published(
    store_url: str,
) -> AsyncIterator[tuple[StateStore, anyio.abc.TaskGroup, tuple[Relay, Relay], ParkedRun]]:
    """Two workers' relays on one store, the first owning a run parked at its question, published."""
    store = open_store(store_url)
    try:
        prepare(store)
        async with anyio.create_task_group() as tg:
            owner, other = Relay(store, tg, 5), Relay(store, tg, 5)
            run, round_ = await _parked_round(tg)
            await owner.publish(run, "alice", round_)
            yield store, tg, (owner, other), run
    finally:
        store.close()


def _beat_of(store: StateStore, token: str) -> float | None:
    rows = store.query("SELECT beat FROM parked_runs WHERE token = ?", (token,))
    return float(rows[0]["beat"]) if rows else None


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_stopped_relay_writes_nothing_after_so_a_retry_elsewhere_reads_stopped_at_once(store_url: str) -> None:
    """The owner's writes go through worker threads; once `stop` zeroed the heartbeat of its live
    runs, no beat, round or change of its lands after it (a revived beat would keep a retry on
    another worker waiting, STALE_SECONDS, for an owner that is gone)."""
    async with _published(store_url) as (store, tg, (owner, other), run):
        published = _beat_of(store, run.token)
        await owner.stop()
        await owner._beat()  # the owner's loop, had it been mid-poll
        later, later_round = await _parked_round(tg)
        await owner.publish(later, "alice", later_round)
        with anyio.fail_after(10):
            retried = await other.retry(run.token, "alice", {})
        zeroed, never = _beat_of(store, run.token), _beat_of(store, later.token)
        tg.cancel_scope.cancel()
    assert published is not None and published > 0 and zeroed == 0.0, "the stop zeroed the beat, and it stayed so"
    assert never is None, "a round published after the stop is not recorded"
    assert isinstance(retried, types.CallToolResult) and retried.is_error
    assert "worker running this script stopped" in retried.content[0].text


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_round_whose_run_was_settled_while_it_waited_to_be_written_is_not_written(store_url: str) -> None:
    """The owner writes one row at a time; a round that waited its turn while the run was settled
    (its result recorded, or delivered here) writes nothing: it would bring back a row a retry
    elsewhere had already delivered and removed."""
    store = open_store(store_url)
    try:
        prepare(store)
        async with anyio.create_task_group() as tg:
            owner = Relay(store, tg, 5)
            run, round_ = await _parked_round(tg)
            async with owner._writing:  # another of the owner's writes, on its way
                tg.start_soon(owner.publish, run, "alice", round_)
                await anyio.wait_all_tasks_blocked()
                owner._owned.pop(run.token)  # what recording its result does
            with anyio.fail_after(10):
                while owner._writing.locked():  # noqa: ASYNC110  (the publish takes its turn)
                    await anyio.sleep(0.05)
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
        row = _beat_of(store, run.token)
    finally:
        store.close()
    assert row is None, "the round of a settled run was written after all"
