# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""An answer given anywhere wakes the call waiting for it in another worker at once.

Under `[approval] wait_for = "store"` a call waits, parked, on a subscription to the store's
`approvals` channel; answering a request (`Approvals.grant` / `deny`, which the web page and
`toolshell approvals grant` go through) notifies in the same transaction. The tests watch the
waiting worker's store: the call is woken by a notification naming its request (pushed by
PostgreSQL, found in the notification rows on SQLite) and reads the request's status twice in all
(before it parks, and once woken), not once a second.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from _github_server import make_github
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.config import Config
from toolshell.frontends.web import web_app
from toolshell.host import Host
from toolshell.result import RunResult
from toolshell.store.engines import open_store
from toolshell.store.notify import Wake
from toolshell.store.pg_listen import APPLICATION_NAME
from toolshell.store.protocol import StateStore, Subscription

pytestmark = pytest.mark.anyio
SCRIPT = "echo start; tools github delete-branch branch=x; echo after"
TOOLSHELL = [sys.executable, "-c", "from toolshell.frontends.cli import main; main()"]
STATUS_READ = "SELECT * FROM approval_requests WHERE id=?"


class WatchedSubscription:
    def __init__(self, subscription: Subscription, watched: Watched) -> None:
        self.channel = subscription.channel
        self._subscription, self._watched = subscription, watched

    async def wait(self) -> Wake:
        self._watched.parked.set()
        wake = await self._subscription.wait()
        self._watched.wakes.append(wake)
        self._watched.woken.set()
        return wake


class Watched:
    """A worker's store as the test sees it: when its waiter parks, what wakes it, and how often
    it reads a request's status while it waits."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self.parked = anyio.Event()
        self.woken = anyio.Event()
        self.wakes: list[Wake] = []
        self.status_reads = 0
        self._waiting = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @contextmanager
    def subscribe(self, channel: str) -> Iterator[WatchedSubscription]:
        with self._store.subscribe(channel) as subscription:
            self._waiting = True
            try:
                yield WatchedSubscription(subscription, self)
            finally:
                self._waiting = False

    def query(self, sql: str, params: Iterable[Any] = ()) -> Any:
        if self._waiting and sql == STATUS_READ:
            self.status_reads += 1
        return self._store.query(sql, params)


def _config() -> Config:
    return Config.model_validate({"approval": {"wait_for": "store", "wait_seconds": 600}})


async def _held_then(
    store_url: str, tmp_path: Path, answer: Any, calls: list[Any] | None = None
) -> tuple[RunResult, Watched]:
    """Run SCRIPT on worker one, wait until its call is parked on the store, then `answer(two, id, watched)`."""
    watched, other = Watched(open_store(store_url)), open_store(store_url)
    results: list[RunResult] = []
    with anyio.fail_after(60):  # the whole run: a call that is never woken fails here, not in 600 s
        await _run_and_answer(watched, other, tmp_path, answer, calls, results)
    return results[0], watched


async def _run_and_answer(
    watched: Watched, other: StateStore, tmp_path: Path, answer: Any, calls: list[Any] | None, results: list[RunResult]
) -> None:
    async with (
        Host.open(_config(), store=watched, state_dir=tmp_path / "one", servers={"github": make_github(calls)}) as one,
        Host.open(_config(), store=other, state_dir=tmp_path / "two", servers={"github": make_github(calls)}) as two,
        anyio.create_task_group() as tg,
    ):

        async def run() -> None:
            results.append(await one.session().run(SCRIPT))

        tg.start_soon(run)
        await watched.parked.wait()
        [pending] = two.policy.approvals.list_pending()
        await answer(two, pending.id, watched)


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_call_waiting_on_one_worker_wakes_when_another_worker_grants_it_and_goes_on(
    store_url: str, tmp_path: Path
) -> None:
    calls: list[Any] = []
    granted: list[str] = []

    async def grant(two: Host, request_id: str, _: Watched) -> None:
        granted.append(two.policy.approvals.grant(request_id).id)

    result, watched = await _held_then(store_url, tmp_path, grant, calls)
    assert (result.exit_code, result.stdout) == (0, "start\ndeleted x\nafter\n")
    assert calls == [("delete-branch", {"branch": "x"})]
    assert watched.wakes == [Wake((granted[0],))], "woken once, by the answer's notification"
    assert watched.status_reads == 2, "read before parking and once woken: no polling of the request"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_call_waiting_on_one_worker_stops_at_once_when_another_worker_denies_it(
    store_url: str, tmp_path: Path
) -> None:
    async def deny(two: Host, request_id: str, _: Watched) -> None:
        two.policy.approvals.deny(request_id)

    result, watched = await _held_then(store_url, tmp_path, deny)
    assert result.stdout == "", "asked before the script started: nothing ran"
    assert result.tools is not None and result.tools["stopped"]["approval"] == "denied"
    assert [w.payloads for w in watched.wakes] == [(result.tools["stopped"]["request_id"],)]


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_call_waiting_on_postgresql_wakes_when_toolshell_approvals_grant_answers_from_another_process(
    store_url: str, tmp_path: Path
) -> None:
    env = {**os.environ, "TOOLSHELL_STATE_URL": store_url}
    state = ["--state-dir", str(tmp_path / "cli")]
    said: list[str] = []

    async def grant_from_the_cli(two: Host, request_id: str, _: Watched) -> None:
        listed = await anyio.run_process([*TOOLSHELL, "approvals", "list", "--json", *state], env=env)
        [pending] = json.loads(listed.stdout)
        granted = await anyio.run_process([*TOOLSHELL, "approvals", "grant", pending["id"], *state], env=env)
        said.append(granted.stdout.decode())

    result, watched = await _held_then(store_url, tmp_path, grant_from_the_cli)
    request_id = said[0].split()[1]
    assert [s.partition(":")[0] for s in said] == [f"granted {request_id} (once)"]
    assert (result.exit_code, result.stdout) == (0, "start\ndeleted x\nafter\n")
    assert watched.wakes == [Wake((request_id,))], "pushed by the other process's commit, not found by a poll"
    assert watched.status_reads == 2


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_call_waiting_on_postgresql_sees_the_answer_given_while_its_listening_connection_was_down(
    store_url: str, tmp_path: Path
) -> None:
    async def drop_the_listener_then_grant(two: Host, request_id: str, _: Watched) -> None:
        # Wait (up to 10 s) until the listener's backend has ended, so the grant's notification
        # cannot reach it: only the reconnection's "read again" can wake the call.
        ended = two.store.query(
            "SELECT pg_terminate_backend(pid, 10000) AS ended FROM pg_stat_activity "
            "WHERE application_name = ? AND datname = current_database()",
            (APPLICATION_NAME,),
        )
        assert [r["ended"] for r in ended] == [True], "worker one's listening connection, the only one"
        two.policy.approvals.grant(request_id)

    result, watched = await _held_then(store_url, tmp_path, drop_the_listener_then_grant)
    assert (result.exit_code, result.stdout) == (0, "start\ndeleted x\nafter\n")
    assert watched.wakes and all(w.missed for w in watched.wakes), "woken by the loss, not by the lost notification"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_call_waiting_on_one_worker_wakes_when_the_web_page_of_another_worker_answers_it(
    store_url: str, tmp_path: Path
) -> None:
    token = "test-token-0123456789"
    answered: list[Any] = []

    async def answer_on_the_page(two: Host, request_id: str, _: Watched) -> None:
        transport = httpx2.ASGITransport(app=web_app(two, token))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8766") as page:
            response = await page.post(
                f"/api/approvals/{request_id}", headers={"Authorization": f"Bearer {token}"}, json={"answer": "once"}
            )
        answered.append((response.status_code, response.json()["status"], request_id))

    result, watched = await _held_then(store_url, tmp_path, answer_on_the_page)
    [(status, said, request_id)] = answered
    assert (status, said) == (200, "granted_once")
    assert (result.exit_code, result.stdout) == (0, "start\ndeleted x\nafter\n")
    assert watched.wakes == [Wake((request_id,))]


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_notification_with_no_answer_behind_it_wakes_the_call_which_reads_again_and_keeps_waiting(
    store_url: str, tmp_path: Path
) -> None:
    """Anyone who can reach the store can send on its channel; a notification only says when to look."""

    async def forge_then_grant(two: Host, request_id: str, watched: Watched) -> None:
        watched.parked = anyio.Event()
        two.store.notify("approvals", request_id)  # names the request, but nobody answered it
        await watched.parked.wait()  # woken, it read the status (from a thread) and waits again
        assert two.policy.approvals.get(request_id).status == "pending"
        two.policy.approvals.grant(request_id)

    result, watched = await _held_then(store_url, tmp_path, forge_then_grant)
    assert (result.exit_code, result.stdout) == (0, "start\ndeleted x\nafter\n"), "it waited on for the real answer"
    request_id = watched.wakes[0].payloads[0]
    assert watched.wakes == [Wake((request_id,)), Wake((request_id,))]
    assert watched.status_reads == 3
