"""The live shells of a serving worker are held to `[serve] live_shell_bytes`, counted on the bytes
of their real files: past it the least recently used idle shell goes to the store (its next call
checks it out again, files intact); a call that cannot fit even then is refused before it starts;
a dropped handle's live shell goes at once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from _gate_support import Gate
from toolshell.config import Config
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host
from toolshell.shell.live_bytes import ENTRY_BYTES
from toolshell.shells import Shells

pytestmark = pytest.mark.anyio
BUDGET = 1 << 20
SEQ_70000 = 408_894
"""The bytes `seq 1 70000` writes: three such files pass `BUDGET`, two do not."""


@asynccontextmanager
async def _worker(tmp_path: Path, gate: Gate | None = None, **serve: Any) -> AsyncIterator[Shells]:
    config = Config.model_validate(
        {"serve": {"live_shell_bytes": BUDGET, **serve}, "mcp": {"servers": [{"name": "gate", "type": "builtin"}]}}
    )
    async with Host.open(config, state_dir=tmp_path / "state", servers={"gate": (gate or Gate()).server()}) as host:
        shells = Shells.for_host(host)  # what `toolshell serve` builds
        try:
            yield shells
        finally:
            shells.close()


def _error(result: Any) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(result.stderr)["error"]
    return error


async def test_the_budget_counts_the_bytes_of_the_files_a_shell_writes(tmp_path: Path) -> None:
    async with _worker(tmp_path) as shells:
        handle = (await shells.run(None, None, "true")).shell
        assert handle is not None
        before = shells.held[handle]
        await shells.run(None, handle, "seq 1 70000 > a.txt")
        grown = shells.held[handle]
        await shells.run(None, handle, "rm a.txt")
        assert (grown - before, shells.held[handle]) == (SEQ_70000 + ENTRY_BYTES, before)


async def test_past_the_budget_the_least_recently_used_idle_shell_goes_to_the_store_and_comes_back_whole(
    tmp_path: Path,
) -> None:
    async with _worker(tmp_path) as shells:
        a, b, c = [(await shells.run(None, None, f"seq 1 70000 > {n}.txt; cd /tmp")).shell for n in "abc"]
        assert a and b and c
        after_three = list(shells.held)
        back = await shells.run(None, a, "wc -c < /home/user/a.txt; tail -n 1 /home/user/a.txt; pwd")
        after_back = list(shells.held)
    assert after_three == [b, c], "the third shell's files passed the budget: the first one went"
    assert (back.exit_code, back.stdout, back.shell) == (0, f"{SEQ_70000}\n70000\n/tmp\n", a)
    assert after_back == [c, a], "checking the first out again made the next least recently used go"


async def test_a_call_that_cannot_fit_while_the_others_run_is_refused_and_runs_once_they_end(tmp_path: Path) -> None:
    gate = Gate()
    async with _worker(tmp_path, gate) as shells:
        small = (await shells.run(None, None, "seq 1 70000 > small.txt")).shell
        busy = (await shells.run(None, None, "seq 1 70000 > p; cat p p > big.txt; rm p")).shell  # fits alone
        assert busy and small and list(shells.held) == [busy], "the two together passed: the older one went"
        async with anyio.create_task_group() as tg:
            tg.start_soon(shells.run, None, busy, "tools gate wait")
            with anyio.fail_after(30):
                await gate.entered.wait()
            refused = await shells.run(None, small, "echo ran > ran.txt")
            gate.open.set()
        later = await shells.run(None, small, "ls; wc -l < small.txt")
    assert (refused.exit_code, refused.stdout, refused.shell) == (1, "", small)
    error = _error(refused)
    assert (error["code"], error["retryable"]) == ("unavailable", True)
    assert "live_shell_bytes" in error["message"] and "call again with it once a call ends" in error["message"]
    assert later.stdout == "small.txt\n70000\n", "nothing ran in the refused call; the shell is whole"


async def test_a_shell_holding_more_than_the_budget_alone_is_refused_and_a_new_shell_is_offered(
    tmp_path: Path,
) -> None:
    async with _worker(tmp_path) as shells:
        big = await shells.run(None, None, "seq 1 70000 > p; cat p p p > big.txt; echo done")
        assert big.stdout == "done\n" and big.shell not in shells.held, "past the budget alone, it went"
        assert "its next call is refused" in (big.shell_note or ""), "the call that grew it says so"
        refused = await shells.run(None, big.shell, "echo ran")
        fresh = await shells.run(None, refused.shell, "ls; echo fresh")
        held = dict(shells.held)
    assert (refused.exit_code, refused.stdout) == (1, "")
    error = _error(refused)
    assert error["code"] == "unavailable" and "more than [serve] live_shell_bytes" in error["message"]
    assert refused.shell != big.shell and f"new shell {refused.shell}" in error["message"]
    assert fresh.stdout == "fresh\n" and big.shell not in held


async def test_a_dropped_handles_live_shell_goes_at_once(tmp_path: Path) -> None:
    async with _worker(tmp_path, max_shells_per_caller=2) as shells:
        first = (await shells.run("token:alice", None, "echo one > f")).shell
        second = (await shells.run("token:alice", None, "echo two > f")).shell
        assert list(shells.held) == [first, second]
        third = shells.new("token:alice")  # past max_shells_per_caller: the first handle is dropped
        assert list(shells.held) == [second], "its live shell went with the handle, before any call"
        gone = await shells.run("token:alice", first, "cat f")
    assert third and gone.exit_code == 1 and "is gone" in (gone.shell_note or "")


async def test_through_serve_a_client_is_told_its_shell_is_past_the_budget_and_given_a_new_one(tmp_path: Path) -> None:
    async with _worker(tmp_path) as shells:
        server = build_server(shells.host, [], shells)
        async with Client(server) as client:
            grown = await client.call_tool("bash", {"script": "seq 1 70000 > p; cat p p p > big.txt"})
            handle = grown.structured_content["shell"]
            refused = (await client.call_tool("bash", {"script": "echo ran", "shell": handle})).structured_content
    assert refused["exit_code"] == 1 and refused["stdout"] == "" and refused["shell"] != handle
    assert "more than [serve] live_shell_bytes" in refused["shell_note"]


async def test_a_shell_grown_past_the_budget_alone_goes_before_any_other_callers_shell(tmp_path: Path) -> None:
    async with _worker(tmp_path) as shells:
        others = [(await shells.run(f"caller{i}", None, "echo hi > x")).shell for i in range(5)]
        grown = await shells.run("grower", None, "seq 1 70000 > p; cat p p p > big; rm p")
        held = list(shells.held)
    assert "its next call is refused" in (grown.shell_note or "")
    assert held == others, "only the shell past the budget went; every other caller's stays live"


async def test_a_caller_past_its_share_makes_room_from_its_own_idle_shells_only(tmp_path: Path) -> None:
    async with _worker(tmp_path) as shells:
        kept = (await shells.run("quiet", None, "echo hi > x")).shell
        # Three shells of 250 KB of files each pass the 1 MiB budget; with two callers the share is half.
        many = [(await shells.run("greedy", None, f"head -c 250000 /dev/zero > {n}")).shell for n in "abc"]
        held = list(shells.held)
    assert held == [kept, many[1], many[2]], "the greedy caller's oldest went, not the quiet caller's shell"


async def test_a_call_refused_because_other_callers_running_shells_hold_the_budget_says_so(tmp_path: Path) -> None:
    gate = Gate()
    async with _worker(tmp_path, gate) as shells:
        busy = (await shells.run("holder", None, "head -c 880000 /dev/zero > big")).shell
        async with anyio.create_task_group() as tg:
            tg.start_soon(shells.run, "holder", busy, "tools gate wait")
            with anyio.fail_after(30):
                await gate.entered.wait()
            refused = await shells.run("other", None, "echo hello")
            gate.open.set()
    error = _error(refused)
    assert (refused.stdout, error["code"], error["retryable"]) == ("", "unavailable", True)
    assert "held by other callers' shells that are running calls" in error["message"]


async def test_a_call_that_waited_on_a_shell_closed_meanwhile_runs_in_one_from_the_store(tmp_path: Path) -> None:
    gate = Gate()
    async with _worker(tmp_path, gate, max_shell_bytes=4096) as shells:
        handle = (await shells.run("c", None, "true")).shell
        results: dict[str, Any] = {}

        async def first() -> None:  # its state is too big to keep: its session is closed after it
            results["first"] = await shells.run("c", handle, "seq 1 70000 > f; tools gate wait")

        async def second() -> None:
            results["second"] = await shells.run("c", handle, "ls")

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            with anyio.fail_after(30):
                await gate.entered.wait()
            tg.start_soon(second)
            for _ in range(3000):  # up to 30 s for the second call to wait on the shell's lock
                if shells._live[handle].lock.statistics().tasks_waiting:
                    break
                await anyio.sleep(0.01)
            gate.open.set()
        live = handle in shells.held
    assert "was not kept" in (results["first"].shell_note or "")
    assert results["second"].stdout == "", "the file whose state was not kept is not in the shell it ran in"
    assert live, "the shell it ran in is the counted live one"


async def test_live_shells_bounds_how_many_shells_a_worker_keeps_and_the_default_holds_a_fleets_sessions(
    tmp_path: Path,
) -> None:
    """`[serve] live_shells` is the count bound (files are `live_shell_bytes`'): past it the least
    recently used idle shell goes to the store and comes back whole. The default keeps the shells of
    a fleet of 12 workers × 16 sessions live on each worker (a round-robin fleet sees every shell on
    every worker; 64 made each call past 4 workers restore its shell whole)."""
    async with _worker(tmp_path, live_shells=2) as shells:
        a, b, c = [(await shells.run(None, None, f"echo {n} > {n}.txt")).shell for n in "abc"]
        after_three = list(shells.held)
        back = await shells.run(None, a, "cat a.txt")
    assert (after_three, back.stdout, back.shell) == ([b, c], "a\n", a)
    async with _worker(tmp_path / "default") as shells:
        assert shells.max_live == Config().serve.live_shells >= 12 * 16
