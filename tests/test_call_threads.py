"""What a shell call does on the event loop's thread (issue 31, round 3): bashkit's commit and the
count of the shell's bytes run in the save's worker thread, with the write, so the loop serves
other calls while bashkit commits (it does so without the GIL). Each test records the thread the
work ran on, and the state the call saved is still whole."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolshell.config import Config
from toolshell.host import Host
from toolshell.session import Session
from toolshell.shell.live_bytes import LiveBytes
from toolshell.shells import Shells

pytestmark = pytest.mark.anyio


async def test_the_commit_and_the_count_of_a_shells_bytes_run_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    commits: list[int] = []
    measures: list[int] = []
    commit, measure = Session.commit, LiveBytes.measure

    def commit_where(self: Session, *args: Any, **kwargs: Any) -> Any:
        commits.append(threading.get_ident())
        return commit(self, *args, **kwargs)

    def measure_where(self: LiveBytes, *args: Any, **kwargs: Any) -> Any:
        measures.append(threading.get_ident())
        return measure(self, *args, **kwargs)

    monkeypatch.setattr(Session, "commit", commit_where)
    monkeypatch.setattr(LiveBytes, "measure", measure_where)
    async with Host.open(Config(), state_dir=tmp_path / "state") as host:
        shells = Shells.for_host(host)
        try:
            first = await shells.run(None, None, "echo one > f")
            assert first.shell is not None
            size = shells.held[first.shell]
            commits.clear(), measures.clear()  # the first call also counted its new, empty shell
            second = await shells.run(None, first.shell, "echo two >> f; cat f")
            grown = shells.held[first.shell]
        finally:
            shells.close()
    assert (second.exit_code, second.stdout) == (0, "one\ntwo\n")
    assert grown - size == 4, "the count follows the file the second call grew"
    assert len(commits) == 1 and len(measures) == 1
    assert loop_thread not in commits, "bashkit's commit ran on the event loop's thread"
    assert loop_thread not in measures, "the count of the shell's bytes ran on the event loop's thread"


async def test_a_shell_the_store_drops_from_a_worker_thread_leaves_its_live_session_on_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new shell past `max_shells_per_caller` drops the caller's oldest in the store, from the
    worker thread that made it: its live session goes on the event loop's thread, which walks the
    live shells (a change from another thread raised `OrderedDict mutated during iteration`)."""
    loop_thread = threading.get_ident()
    closed: list[int] = []
    close = Session.close

    def close_where(self: Session) -> None:
        closed.append(threading.get_ident())
        close(self)

    monkeypatch.setattr(Session, "close", close_where)
    config = Config.model_validate({"serve": {"max_shells_per_caller": 2}})
    async with Host.open(config, state_dir=tmp_path / "state") as host:
        shells = Shells.for_host(host)
        try:
            made = [(await shells.run("alice", None, f"echo {i}")).shell for i in range(4)]
            live, closed_then = set(shells.held), list(closed)
        finally:
            shells.close()
    assert live == set(made[2:]), "the two oldest went"
    assert len(closed_then) >= 2 and set(closed_then) == {loop_thread}, "a live session closed from a worker thread"


async def test_a_shell_dropped_while_a_call_holds_it_is_not_reused_and_closes_when_the_call_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed run drops the live copy of its shell (it may hold a stopped run's half): one still
    held by the stopping call leaves the live shells at once, so the next call starts from the
    store, and is closed when that call ends."""
    closed: list[Session] = []
    close = Session.close

    def close_seen(self: Session) -> None:
        closed.append(self)
        close(self)

    monkeypatch.setattr(Session, "close", close_seen)
    async with Host.open(Config(), state_dir=tmp_path / "state") as host:
        shells = Shells.for_host(host)
        try:
            handle = (await shells.run(None, None, "echo kept > f")).shell
            assert handle is not None
            held = shells._live[handle].session
            async with anyio.create_task_group() as tg:
                tg.start_soon(shells.run, None, handle, "sleep 1")
                with anyio.fail_after(30):
                    while not shells._live[handle].lock.locked():  # noqa: ASYNC110  (the call takes it)
                        await anyio.sleep(0.01)
                shells.handles.on_drop(handle)  # as a resumed run does, on the loop
                gone_at_once, closed_before_end = handle not in shells.held, held in closed
            after = await shells.run(None, handle, "cat f")
        finally:
            shells.close()
    assert gone_at_once and not closed_before_end, "dropped at once, closed only when its call ended"
    assert held in closed and after.stdout == "kept\n"
