# ruff: noqa: F811  (the store fixtures are imported from _store_support and named as parameters)
"""A yielded call's bookkeeping across its thread hops. The owner records its result, also when the
run ends while a heartbeat's write of the output so far is on its way (in a worker thread): that
write carried no result, so the owner writes again. Without it the row never got its result, and a
collector took the live owner's finished run for a silent one (found by tests/test_tasks_workers.py
on a quiet machine). And nobody is asked on the call's stream once it yields."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.from_thread
import mcp_types as types
import pytest

from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.frontends.serve.tasks.yielding import Yielder, _Run
from toolshell.shell.first_read import first_read
from toolshell.store.engines import open_store
from toolshell.store.yields import YieldRows

pytestmark = pytest.mark.anyio
RING = [b"k" * 32]


class _EndsDuringFirstWrite(YieldRows):
    """The run ends (from the loop) while the first heartbeat's write is in its thread."""

    def __init__(self, store: Any, run: _Run) -> None:
        super().__init__(store)
        self.run = run
        self.written: list[dict[str, Any] | None] = []

    def write(self, handle: str, worker: str, stdout: str, stderr: str, result: dict[str, Any] | None) -> bool:
        if not self.written:
            anyio.from_thread.run_sync(self._end)
        self.written.append(result)
        return super().write(handle, worker, stdout, stderr, result)

    def _end(self) -> None:
        self.run.output("done\n", "")
        self.run.result = types.CallToolResult(content=[], structured_content={"exit_code": 0, "success": True})
        self.run.done.set()


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_run_that_ends_while_its_output_is_written_gets_its_result_recorded(store_url: str) -> None:
    store = open_store(store_url)
    run = _Run(yielded=True, handle="sh_kept")
    try:
        rows = _EndsDuringFirstWrite(store, run)
        rows.create("sh_kept", "alice", "w1", "", "", "yield:kept", None)
        async with anyio.create_task_group() as tg:
            yielder = Yielder(rows, tg, "w1", 1, 0.2, RING)
            yielder._owned["sh_kept"] = run
            with anyio.fail_after(30):
                await yielder._keep(run, "sh_kept")
            row = rows.get("sh_kept")
    finally:
        store.close()
    assert rows.written[0] is None, "the first write was the output so far"
    assert row is not None and row.result is not None, "the result is recorded"
    assert row.result["structuredContent"] == {"exit_code": 0, "success": True} and row.stdout == "done\n"
    assert "sh_kept" not in yielder._owned, "the owner lets it go once the result is written"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_nobody_is_asked_on_a_yielding_calls_stream_while_its_row_is_written(store_url: str) -> None:
    """Once a call yields, its stream closes with the output so far: a question its script asks
    while the row is written (in a worker thread) must not go to that stream, where nobody would
    answer it (the nested call would wait out `approval.wait_seconds` on a busy shell)."""
    store = open_store(store_url)
    asked_stream: list[Any] = []
    got: list[Any] = []
    gates: list[Any] = []
    go_on = anyio.Event()

    class Stream:
        async def ask(self, params: Any) -> Any:
            asked_stream.append(params)
            return types.ElicitResult(action="accept", content={})

    async def run_bash(on_output: Any, asker: Any, feed: Any) -> types.CallToolResult:
        check = first_read()
        assert check is not None
        check("sh_asks")  # the look the shell's find makes: no earlier yielded call here
        gates.append(asker)
        await go_on.wait()
        return types.CallToolResult(content=[])

    class AsksDuringCreate(YieldRows):
        def create(self, *args: Any, **kwargs: Any) -> None:
            params = types.ElicitRequestFormParams(
                message="approve?", requested_schema={"type": "object", "properties": {}}
            )
            got.append(anyio.from_thread.run(gates[0].ask, params))
            super().create(*args, **kwargs)

    try:
        async with anyio.create_task_group() as tg:
            yielder = Yielder(AsksDuringCreate(store), tg, "w1", 0.2, 60, RING)
            with anyio.fail_after(30):
                result = await yielder.call("alice", "sh_asks", run_bash, Stream())
            go_on.set()
            tg.cancel_scope.cancel()
    finally:
        store.close()
    assert isinstance(result.structured_content, dict) and result.structured_content["running"] is True
    assert got == [None] and asked_stream == [], "the question went to the closing stream"


async def test_an_ended_runs_owner_waits_a_heartbeat_after_a_failed_write_rather_than_spin() -> None:
    """The store fails while the owner records a run that has ended: it tries again a heartbeat
    later (the loop would otherwise try at once, over and over, while the store is down)."""
    run = _Run(yielded=True, handle="sh_spin")
    run.result = types.CallToolResult(content=[])
    run.done.set()
    tried: list[str] = []

    class Down(YieldRows):
        def __init__(self) -> None:  # no store: every write fails
            pass

        def write(self, *args: Any) -> bool:
            tried.append("write")
            raise ToolshellError(ErrorCode.UNAVAILABLE, "the state store is down")

    async with anyio.create_task_group() as tg:
        yielder = Yielder(Down(), tg, "w1", 1, 3600, RING)
        tg.start_soon(yielder._keep, run, "sh_spin")
        with anyio.fail_after(30):
            while not tried:  # noqa: ASYNC110  (a write in a worker thread)
                await anyio.sleep(0.05)
        for _ in range(5):  # room for the loop to try again at once, if it did
            await anyio.to_thread.run_sync(lambda: None)
            await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    assert tried == ["write"], "the owner tried again at once"
