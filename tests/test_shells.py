"""Shells by handle across processes (issue 15, items 1-2): two hosts on one store act as two
workers; a client alternating between them keeps its shell; a gone handle runs nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import bashkit
import pytest

from toolshell.host import Host
from toolshell.shell import packs
from toolshell.shell.handles import ShellHandles
from toolshell.shells import Shells
from toolshell.store.keys import key_ring

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _worker(state: Path, max_bytes: int = 1 << 20) -> AsyncIterator[Shells]:
    async with Host.open(state_dir=state) as host:
        handles = ShellHandles(host.store, idle_seconds=3600, max_per_caller=8, max_bytes=max_bytes)
        shells = Shells(host, handles, key_ring(None, state, shared=False))
        yield shells
        shells.close()


async def test_a_client_alternating_workers_call_by_call_keeps_its_files_variables_and_directory(
    tmp_path: Path,
) -> None:
    async with _worker(tmp_path) as one, _worker(tmp_path) as two:
        first = await one.run("token:alice", None, "echo x > f; X=1; greet(){ echo hi; }; mkdir -p d; cd d")
        handle = first.shell
        assert handle is not None and handle.startswith("sh_")
        second = await two.run("token:alice", handle, "cat ../f; echo $X; greet; pwd; echo y >> ../f")
        third = await one.run("token:alice", handle, "cat ../f")
    assert (first.exit_code, second.stdout, third.stdout) == (0, "x\n1\nhi\n/home/user/d\n", "x\ny\n")
    assert second.shell == third.shell == handle
    assert first.to_json()["shell"] == handle


async def test_another_callers_handle_is_refused_as_gone_and_nothing_runs(tmp_path: Path) -> None:
    async with _worker(tmp_path) as shells:
        mine = (await shells.run("token:alice", None, "echo private > notes.txt")).shell
        assert mine is not None
        theirs = await shells.run("token:mallory", mine, "cat notes.txt; echo ran")
        new = theirs.shell
        assert new is not None and new != mine
        again = await shells.run("token:mallory", new, "ls; echo fresh")
    assert (theirs.exit_code, theirs.stdout) == (1, "")
    assert json.loads(theirs.stderr)["error"]["code"] == "invalid_input"
    assert "is gone" in (theirs.shell_note or "") and new in (theirs.shell_note or "")
    assert again.stdout == "fresh\n", "the new shell works and holds nothing of alice's"


async def test_a_shell_past_max_bytes_is_not_kept_and_the_result_says_so(tmp_path: Path) -> None:
    async with _worker(tmp_path, max_bytes=4096) as shells:
        big = await shells.run(None, None, "seq 1 200000 > big.txt; echo done")
        after = await shells.run(None, big.shell, "ls")
    assert big.stdout == "done\n" and "max_shell_bytes" in (big.shell_note or "")
    assert after.stdout == "" and after.shell_note is None, "the next call starts in an empty shell"


async def _planted_commit() -> tuple[str, dict[str, bytes]]:
    """A well-formed commit of the attacker's own, made with bashkit's snapshot API: a `tools`
    function that logs every call, and a ledger of its choosing."""
    shell = bashkit.Bash()
    await shell.execute('echo balance=1000000 > ledger; tools() { echo "$*" >> /tmp/seen; }')
    packed = shell.commit()
    return packed.id, dict(packed.objects)


async def test_a_well_formed_commit_written_into_the_store_is_refused_by_the_commits_seal(tmp_path: Path) -> None:
    async with _worker(tmp_path) as one, _worker(tmp_path) as two:
        handle = (await one.run(None, None, "echo balance=100 > ledger")).shell
        tip, objects = await _planted_commit()
        store = one.handles.store
        store.execute("UPDATE shell_handles SET tip = ? WHERE handle = ?", (tip, handle))
        store.execute(  # the objects under a seal copied from a genuine pack
            "INSERT INTO shell_packs (handle, since, data, seal) SELECT handle, since + 1, ?, seal FROM shell_packs "
            "WHERE handle = ?",
            (packs.packed(objects), handle),
        )
        forged = await two.run(None, handle, "cat ledger; echo ran")
    assert (forged.exit_code, forged.stdout) == (1, "")
    assert "could not be opened: its seal does not match the state keys" in (forged.shell_note or "")
    assert forged.shell != handle


async def test_well_formed_objects_written_under_a_genuine_commit_are_refused_by_their_seals(tmp_path: Path) -> None:
    """The commit's seal holds, so only the objects' seals stand between bashkit and bytes the
    attacker chose (bashkit's content hash would refuse them later, as a broken shell)."""
    async with _worker(tmp_path) as one, _worker(tmp_path) as two:
        handle = (await one.run(None, None, "echo balance=100 > ledger")).shell
        _, planted = await _planted_commit()
        store = one.handles.store
        store.execute("UPDATE shell_packs SET data = ? WHERE handle = ?", (packs.packed(planted), handle))
        forged = await two.run(None, handle, "cat ledger; echo ran")
    assert (forged.exit_code, forged.stdout) == (1, "")
    assert "could not be opened: the seal of one of its objects does not match" in (forged.shell_note or "")
