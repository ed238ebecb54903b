# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""A call has a budget (issue 31, DESIGN §11): a `bash` call on a shell kept by handle writes what
it records (its shell's commit, its timeline rows) in one transaction, asks the store off the event
loop, and a worker holding an older version of the shell reads only what was stored since. On both
engines; the store is counted at its protocol (`benchmarks/store_count.py`)."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  # fixtures
from toolshell.host import Host
from toolshell.shell.handles import ShellHandles
from toolshell.shells import Shells
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.protocol import StateStore
from toolshell.timeline import sinks

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from store_count import CountingStore  # noqa: E402 - benchmarks/ is a folder of scripts, put on the path just above

pytestmark = pytest.mark.anyio
SCRIPT = "echo {i} >> log; tools text-metrics text-length text=x{i}; wc -l < log"


@asynccontextmanager
async def _workers(store: StateStore, tmp: Path, n: int = 1, **servers: Any) -> AsyncIterator[list[Shells]]:
    """`n` workers (hosts) on one store, sharing one state key."""
    keys = [new_key().encode()]
    async with AsyncExitStack() as stack:
        hosts = [
            await stack.enter_async_context(Host.open(state_dir=tmp / f"w{i}", store=store, servers=servers or None))
            for i in range(n)
        ]
        workers = [
            Shells(h, ShellHandles(store, idle_seconds=3600, max_per_caller=8, max_bytes=1 << 24), keys) for h in hosts
        ]
        try:
            yield workers
        finally:
            for w in workers:
                w.close()


def _handles(store: StateStore) -> ShellHandles:
    return ShellHandles(store, idle_seconds=3600, max_per_caller=8, max_bytes=1 << 24)


@contextmanager
def _opened(where: str) -> Iterator[CountingStore]:
    inner = open_store(where)
    try:
        yield CountingStore(inner)
    finally:
        inner.close()


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_call_with_a_nested_tool_call_writes_once_and_its_timeline_is_in_the_store_when_it_returns(
    store_url: str, tmp_path: Path
) -> None:
    with _opened(store_url) as store:
        async with _workers(store, tmp_path) as [shells]:
            handle = (await shells.run("alice", None, SCRIPT.format(i=0))).shell
            store.reset()
            result = await shells.run("alice", handle, SCRIPT.format(i=1))
            counts = store.reset()
            rows = sinks.query(store, limit=1)
    assert (result.exit_code, result.stdout.split()[-1]) == (0, "2")
    assert counts.commits == 1, "the shell's commit and the timeline rows: one writing transaction"
    assert counts.transactions <= 2, "the shell found once, and the one write"
    assert counts.statements <= 5, "find; the handle's update, its objects, the shell row, the nested rows"
    [row] = rows
    assert row["exit_code"] == 0 and [c["command"] for c in row["calls"]] == ["tools text-metrics text-length"]
    assert row["calls"][0]["outcome"] == "completed"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_call_still_running_has_its_row_in_the_store_within_the_flush_interval(
    store_url: str, tmp_path: Path
) -> None:
    """What a run that dies leaves is unchanged: its rows are written while it runs, not only at its end."""
    gate = anyio.Event()
    server = MCPServer("gate")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def wait() -> str:
        await gate.wait()
        return "opened"

    written = anyio.Event()
    loop = asyncio.get_running_loop()
    with _opened(store_url) as store:
        async with _workers(store, tmp_path, gate=server) as [shells]:
            sink = shells.host.sink
            assert isinstance(sink, sinks.SqliteSink)
            handle = (await shells.run("alice", None, "true")).shell
            sink.timed = lambda seconds, what: loop.call_soon_threadsafe(written.set)
            async with anyio.create_task_group() as tg:
                done: list[Any] = []

                async def call() -> None:
                    done.append(await shells.run("alice", handle, "echo started; tools gate wait"))

                tg.start_soon(call)
                with anyio.fail_after(20):
                    await written.wait()  # the held rows, written by the timer while the call runs
                running = sinks.query(store, limit=1)
                gate.set()
            after = sinks.query(store, limit=1)
    assert running[0]["exit_code"] is None and running[0]["script_preview"].startswith("echo started")
    assert done[0].stdout == "started\nopened\n"
    assert after[0]["exit_code"] == 0 and after[0]["calls"][0]["outcome"] == "completed"


class _ThreadSpy(CountingStore):
    """A counting store that also notes the thread of every statement."""

    def __init__(self, inner: StateStore) -> None:
        super().__init__(inner)
        self.threads: set[int] = set()

    def _add(self, **counts: int) -> None:
        self.threads.add(threading.get_ident())
        super()._add(**counts)


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_no_store_statement_of_a_call_runs_on_the_event_loop_thread(store_url: str, tmp_path: Path) -> None:
    inner = open_store(store_url)
    store = _ThreadSpy(inner)
    try:
        async with _workers(store, tmp_path, 2) as [one, two]:
            handle = (await one.run("alice", None, SCRIPT.format(i=0))).shell
            await two.run("alice", handle, SCRIPT.format(i=1))  # `one` now holds an older version
            store.threads.clear()
            result = await one.run("alice", handle, SCRIPT.format(i=2))  # find, restore, commit
            seen = set(store.threads)
    finally:
        inner.close()
    assert result.stdout.split()[-1] == "3"
    assert seen and threading.get_ident() not in seen


class _ObjectSpy(ShellHandles):
    """The object reads of a real `ShellHandles` (with `find`, or alone): (after, ids returned)."""

    reads: list[tuple[int, set[str]]]

    def find(self, handle: str, caller: str | None, keys: list[bytes], after: int | None = None) -> Any:
        kept = super().find(handle, caller, keys, after)
        if kept is not None and kept.newer:
            self.reads.append((after, set(kept.newer)))
        return kept

    def objects(self, handle: str, keys: list[bytes], after: int = -1) -> dict[str, bytes]:
        found = super().objects(handle, keys, after)
        self.reads.append((after, set(found)))
        return found


def _ids(shells: Shells, handle: str, after: int = -1) -> set[str]:
    """The ids of the objects stored after version `after`, read from the store by a handles of its own."""
    return set(_handles(shells.handles.store).objects(handle, shells.keys, after))


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_restore_reads_only_the_objects_stored_since_the_version_the_worker_holds(
    store_url: str, tmp_path: Path
) -> None:
    with _opened(store_url) as store:
        async with _workers(store, tmp_path, 2) as [one, two]:
            for shells in (one, two):
                shells.handles = _ObjectSpy(store, idle_seconds=3600, max_per_caller=8, max_bytes=1 << 24)
                shells.handles.reads = []
            setup = "; ".join(f"echo file{n} > f{n}" for n in range(20)) + "; X=1"
            handle = (await one.run("alice", None, setup)).shell
            assert handle is not None
            await two.run("alice", handle, "echo more >> f3")  # two reads everything: it held nothing
            held = int(store.query("SELECT version FROM shell_handles WHERE handle = ?", (handle,))[0]["version"]) - 1
            new_since = _ids(one, handle, held)
            everything = _ids(one, handle)
            store.reset()
            again = await one.run("alice", handle, "cat f3 f19; echo $X")
            counts = store.reset()
            same = await one.run("alice", handle, "cat f3")  # it holds the current version: no read
    assert [after for after, _ in two.handles.reads] == [-1]  # type: ignore[attr-defined]
    [(after, ids)] = one.handles.reads  # type: ignore[attr-defined]
    assert after == held and ids == new_since and len(ids) < len(everything)
    assert (counts.transactions, counts.commits) == (2, 1), "found with what it lacks in one read; one write"
    assert again.stdout == "file3\nmore\nfile19\n1\n" and same.stdout == "file3\nmore\n"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_worker_behind_a_full_commit_reads_the_whole_shell_and_every_worker_keeps_its_files(
    store_url: str, tmp_path: Path
) -> None:
    """A full commit replaced the objects the worker's version was made of: it reads them all (not
    only the newer ones), and what it saves next opens on a third worker."""
    with _opened(store_url) as store:
        async with _workers(store, tmp_path, 3) as [one, two, three]:
            one.handles = _ObjectSpy(store, idle_seconds=3600, max_per_caller=8, max_bytes=1 << 24)
            one.handles.reads = []
            handle = (await one.run("alice", None, "echo a > small")).shell
            assert handle is not None
            # Past 64 KB (twice the shell, at least that): this save is a full commit.
            big = 'for i in $(seq 1 10000); do echo "$RANDOM$RANDOM$RANDOM$RANDOM"; done > big; echo b >> small'
            await two.run("alice", handle, big)
            base = int(store.query("SELECT base FROM shell_handles WHERE handle = ?", (handle,))[0]["base"])
            moved = await one.run("alice", handle, "cat small; echo c >> small")
            last = await three.run("alice", handle, "cat small")
    assert base > 1, "the second call made a full commit"
    assert one.handles.reads[-1][0] == -1, "everything read: the objects it held were replaced"  # type: ignore[attr-defined]
    assert (moved.stdout, last.stdout) == ("a\nb\n", "a\nb\nc\n")
