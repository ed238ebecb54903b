"""One answer, one call: a once-grant lets exactly one execution run, and a request is answered once.

Identical calls made together (`tools … &`) wait on one request; the grant that answers it is used up
atomically by one of them, and the others wait on a new request of their own (or stop with the
report). Two answers given at the same moment make one grant; the other is refused.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from _github_server import make_github
from toolshell.config import Config
from toolshell.errors import ToolshellError
from toolshell.host import Host
from toolshell.policy.approvals import ApprovalRequest, Approvals
from toolshell.policy.risk import Risk
from toolshell.registry.entry import ToolEntry
from toolshell.result import RunResult
from toolshell.store.sqlite import Store

pytestmark = pytest.mark.anyio
THREE_AT_ONCE = "w=x; for i in 1 2 3; do tools github delete-branch branch=$w & done; wait; echo after"
DELETE = ToolEntry("github", "delete_branch", "Delete a branch.", {"type": "object"}, {"destructiveHint": True})
ROOT = Path(__file__).resolve().parents[1]
TOOLSHELL = [sys.executable, "-c", "from toolshell.frontends.cli import main; main()"]


def _waiting_config() -> Config:
    return Config.model_validate({"approval": {"wait_for": "store", "wait_seconds": 60}})


async def _pending(other: Approvals, *, not_id: str | None = None) -> ApprovalRequest:
    """The one pending request (another than `not_id`), once the host has opened it."""
    with anyio.fail_after(20):
        while not (pending := [r for r in other.list_pending() if r.id != not_id]):  # noqa: ASYNC110  (the host writes it)
            await anyio.sleep(0.02)
    assert len(pending) == 1, pending
    return pending[0]


async def _made(calls: list[Any]) -> None:
    """Return once the server got a call (the one the grant let through)."""
    with anyio.fail_after(20):
        while not calls:  # noqa: ASYNC110  (the server appends to it)
            await anyio.sleep(0.02)


async def test_one_once_grant_runs_one_of_three_identical_calls_and_the_others_ask_again(tmp_path: Path) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    results: list[RunResult] = []
    async with Host.open(_waiting_config(), state_dir=tmp_path, servers={"github": make_github(calls)}) as host:
        other = Approvals(Store(tmp_path / "toolshell.db"))  # another process's view of the same state
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                results.append(await host.session().run(THREE_AT_ONCE))

            tg.start_soon(run)
            first = await _pending(other)
            other.grant(first.id)
            second = await _pending(other, not_id=first.id)  # the two calls that lost wait on a new request
            assert (second.command, second.input) == ("tools github delete-branch", {"branch": "x"})
            await _made(calls)
            assert calls == [("delete-branch", {"branch": "x"})]
            assert [r.id for r in other.list_pending()] == [second.id], "both wait on the one new request"
            other.deny(second.id)
    result = results[0]
    assert calls == [("delete-branch", {"branch": "x"})], "one once-answer, one execution"
    assert "after" not in result.stdout
    assert result.tools is not None
    assert result.tools["stopped"]["approval"] == "denied"
    assert result.tools["stopped"]["request_id"] == second.id
    assert [d["input"] for d in result.tools["done"]] == [{"branch": "x"}]


async def test_a_grant_from_the_cli_runs_one_of_three_identical_calls(tmp_path: Path) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    results: list[RunResult] = []
    async with Host.open(_waiting_config(), state_dir=tmp_path, servers={"github": make_github(calls)}) as host:
        other = Approvals(Store(tmp_path / "toolshell.db"))
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                results.append(await host.session().run(THREE_AT_ONCE))

            tg.start_soon(run)
            first = await _pending(other)
            cli = [*TOOLSHELL, "approvals", "grant", first.id, "--state-dir", str(tmp_path)]
            done = await anyio.run_process(cli, check=False, env=_env())
            assert done.returncode == 0, done.stderr.decode()
            said = f'granted {first.id} (once): {first.command} {{"branch": "x"}} (destructive)\n'
            assert done.stdout.decode() == said
            second = await _pending(other, not_id=first.id)
            await _made(calls)
            assert len(calls) == 1
            other.deny(second.id)
    assert calls == [("delete-branch", {"branch": "x"})]
    assert results[0].tools is not None and results[0].tools["stopped"]["approval"] == "denied"


async def test_an_inline_once_answer_runs_one_of_three_identical_calls_and_a_later_no_holds() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    asked: list[str] = []
    all_asking = anyio.Event()
    # The person says yes to each of the three questions, then no: one yes, one execution.
    answers = itertools.chain(["once"] * 3, itertools.repeat("deny"))

    async def approver(entry: ToolEntry, arguments: dict[str, Any], risk: Risk) -> str:
        asked.append(entry.command)
        if len(asked) == 3:
            all_asking.set()
        with anyio.fail_after(10):
            await all_asking.wait()  # the three calls ask at once, so they share the one request
        return next(answers)

    config = Config.model_validate({"approval": {"inline": True}})
    async with Host.open(config, servers={"github": make_github(calls)}) as host:
        session = host.session()
        session.approver = approver
        result = await session.run(THREE_AT_ONCE)
    assert calls == [("delete-branch", {"branch": "x"})], "one yes, one execution"
    assert result.tools is not None and result.tools["stopped"]["approval"] == "denied"
    assert len(asked) >= 4, "a call whose yes another call used up is asked again"


async def test_a_once_grant_given_earlier_runs_one_of_three_identical_calls_and_the_others_stop_with_the_report(
    tmp_path: Path,
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with Host.open(state_dir=tmp_path, servers={"github": make_github(calls)}) as host:
        session = host.session()
        first = await session.run("w=x; tools github delete-branch branch=$w")
        assert first.tools is not None
        host.policy.approvals.grant(first.tools["stopped"]["request_id"])
        result = await session.run(THREE_AT_ONCE)
    assert calls == [("delete-branch", {"branch": "x"})]
    assert result.tools is not None and result.tools["stopped"]["approval"] == "requested"
    assert result.tools["stopped"]["request_id"] != first.tools["stopped"]["request_id"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _at_once(*jobs: Callable[[], str]) -> list[str]:
    """Run each job in its own thread, all released together; their results, sorted."""
    start, results = threading.Barrier(len(jobs)), []

    def run(job: Callable[[], str]) -> None:
        start.wait(5)
        results.append(job())

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return sorted(results)


def _answer(approvals: Approvals, request_id: str, always: bool) -> Callable[[], str]:
    def answer() -> str:
        try:
            approvals.grant(request_id, always=always)
        except ToolshellError as e:
            return e.message
        return "granted"

    return answer


def test_a_once_grant_is_used_up_by_exactly_one_of_two_processes(tmp_path: Path) -> None:
    path = tmp_path / "toolshell.db"
    first, second = Approvals(Store(path)), Approvals(Store(path))
    for _ in range(40):
        first.grant(first.request(DELETE, {"branch": "x"}, "s", "destructive").id)
        used = _at_once(*(lambda a=a: str(a.consume_once(DELETE, {"branch": "x"})) for a in (first, second)))
        assert used == ["False", "True"]


def test_two_answers_given_at_once_make_one_grant_and_the_other_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "toolshell.db"
    first, second = Approvals(Store(path)), Approvals(Store(path))
    for round_ in range(40):
        request = first.request(DELETE, {"branch": f"b{round_}"}, "s", "destructive")
        outcomes = _at_once(_answer(first, request.id, always=False), _answer(second, request.id, always=True))
        winner = first.get(request.id).status
        assert winner in ("granted_once", "granted_always")
        assert outcomes == [
            f"approval request {request.id!r} was already answered ({winner}); only pending requests can be answered",
            "granted",
        ]
        grants = first.store.query("SELECT kind FROM approval_grants WHERE request_id=?", (request.id,))
        assert [g["kind"] for g in grants] == [winner.removeprefix("granted_")]
