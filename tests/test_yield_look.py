# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""Yield and wait looks for an earlier yielded call on the shell in the same worker-thread hop as
the shell's find (issue 31, round 3): a plain call makes two hops to a thread, not three. The look
still holds what it held: a call on a shell another worker's yielded call is still running on runs
nothing and says the shell is busy; once that call ended, its rest comes first, every byte once,
then the new call runs; a call whose wait ends before its run looked (a draining worker), or whose
look the store failed, reads first the way it did before. Two workers in one process on one store
of each engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from _gate_support import Gate
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.config import Config
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.frontends.serve.server import build_server
from toolshell.frontends.serve.tasks import yielding
from toolshell.host import Host
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.yields import YieldRows

pytestmark = pytest.mark.anyio
CONFIG = {"serve": {"yield_seconds": 1}, "mcp": {"servers": [{"name": "gate", "type": "builtin"}]}}


@asynccontextmanager
async def _workers(store_url: str, tmp_path: Path, gate: Gate, count: int) -> AsyncIterator[list[Client]]:
    async with AsyncExitStack() as stack:
        clients = []
        for n in range(count):
            host = await stack.enter_async_context(
                Host.open(
                    Config.model_validate(CONFIG),
                    store=open_store(store_url),
                    state_dir=tmp_path / f"worker{n}",
                    servers={"gate": gate.server()},
                )
            )
            clients.append(await stack.enter_async_context(Client(build_server(host, []))))
        yield clients


async def _bash(client: Client, script: str, shell: str | None = None, progress: Any = None) -> dict[str, Any]:
    arguments = {"script": script} | ({"shell": shell} if shell else {})
    result = await client.call_tool("bash", arguments, progress_callback=progress)
    assert not result.is_error, result
    body = result.structured_content
    assert isinstance(body, dict)
    return body


async def _progress(progress: float, total: float | None, message: str | None) -> None:
    """A call with a progress token: its run goes through a task group of its own."""


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_call_on_a_shell_another_workers_yielded_call_runs_on_runs_nothing_then_gets_its_rest_first(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    gate = Gate()
    with anyio.fail_after(120):
        async with _workers(store_url, tmp_path, gate, 2) as (one, two):
            first = await _bash(one, "echo one; tools gate wait; echo two")
            assert first["running"] is True and first["stdout"] == "one\n", first
            shell = first["shell"]
            busy = await _bash(two, "echo mine > mine.txt; echo mine", shell, _progress)
            gate.open.set()
            while (after := await _bash(two, "cat mine.txt 2>/dev/null; echo ran", shell))["earlier"].get("running"):
                assert after["stdout"] == "", "nothing runs while the earlier call runs"
    assert busy["earlier"]["running"] is True and "did not run" in busy["note"], busy
    assert busy["stdout"] == "" and "mine" not in str(busy), "the busy call's script did not run"
    assert "".join([first["stdout"], busy["earlier"]["stdout"], after["earlier"]["stdout"]]) == "one\nopened\ntwo\n"
    assert after["earlier"]["exit_code"] == 0
    assert after["stdout"] == "ran\n", "the new call ran after the rest, and the busy one never wrote its file"
    assert "a yielded bash call failed" not in caplog.text, "a call that did not start is not a failure"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_draining_worker_still_finds_another_workers_yielded_call_before_running(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Draining, a worker answers at once: the call's wait ends before its run has looked, and the
    call reads the yielded row the way it did before (busy), instead of running beside it."""
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    gate = Gate()
    with anyio.fail_after(120):
        async with _workers(store_url, tmp_path, gate, 2) as (one, two):
            known = set(yielding._yielders.values())
            await _bash(two, "true")  # worker two's yielder
            (yielder,) = set(yielding._yielders.values()) - known
            first = await _bash(one, "echo one; tools gate wait; echo two")
            assert first["running"] is True, first
            yielder.drain()
            busy = await _bash(two, "echo mine > mine.txt", first["shell"])
            gate.open.set()
            while (after := await _bash(one, "ls", first["shell"]))["earlier"].get("running"):
                pass
    assert busy["earlier"]["running"] is True and "did not run" in busy["note"], busy
    assert after["stdout"] == "" and after["earlier"]["stdout"].endswith("two\n"), "the busy call wrote nothing"


async def test_a_failed_look_reads_again_the_way_that_reads_first_and_the_shell_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store failing the look made with the shell's find is not the shell's failure: the call
    reads again first (as it did before the look moved), and runs on its kept shell."""
    failures = [ToolshellError(ErrorCode.UNAVAILABLE, "the store is away", retryable=True)]
    real = YieldRows.get

    def get_once_failing(self: YieldRows, handle: str) -> Any:
        if failures:
            raise failures.pop()
        return real(self, handle)

    async with Host.open(Config.model_validate(CONFIG), state_dir=tmp_path / "state") as host:
        async with Client(build_server(host, [])) as client:
            shell = (await _bash(client, "echo kept > f"))["shell"]
            monkeypatch.setattr(YieldRows, "get", get_once_failing)
            body = await _bash(client, "cat f", shell)
    assert failures == [], "the look read the yielded row"
    assert (body["exit_code"], body["stdout"], body["shell"]) == (0, "kept\n", shell), body


async def test_a_plain_call_under_yield_and_wait_makes_two_hops_to_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hops: list[str] = []
    real = anyio.to_thread.run_sync

    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(func, "__qualname__", repr(func)))
        return await real(func, *args, **kwargs)

    async with Host.open(Config.model_validate(CONFIG), state_dir=tmp_path / "state") as host:
        async with Client(build_server(host, [])) as client:
            shell = (await _bash(client, "echo start > log"))["shell"]
            await _bash(client, "echo 1 >> log", shell)  # the yielder's first sweep is behind it
            monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
            bodies = [await _bash(client, f"echo {i} >> log; wc -l < log", shell) for i in range(2, 5)]
    assert [b["stdout"] for b in bodies] == ["3\n", "4\n", "5\n"]
    assert len(hops) == 6, f"two hops a call (find, save), not {hops}"
