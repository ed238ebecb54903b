# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""Shells as data (issue 15, items 1-2), on both engines: a handle names a caller's shell whose
files, working directory, variables and functions come back in another process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import bashkit
import pytest

from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.shell.handles import ShellHandles
from toolshell.store.engines import open_store
from toolshell.store.protocol import StateStore

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("store_url", ENGINES, indirect=True)]
KEY = b"k" * 32


@pytest.fixture
def store(store_url: str) -> Iterator[StateStore]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def _handles(store: StateStore, **overrides: Any) -> ShellHandles:
    settings: dict[str, Any] = {"idle_seconds": 3600, "max_per_caller": 4, "max_bytes": 1 << 20}
    return ShellHandles(store, **{**settings, **overrides})


async def test_a_shell_saved_by_one_process_comes_back_whole_in_another(store_url: str, store: StateStore) -> None:
    handles = _handles(store)
    handle = handles.new("token:alice")
    first = bashkit.Bash()
    await first.execute("echo kept > state.txt; X=7; greet(){ echo hi $1; }; mkdir -p sub; cd sub")
    assert handles.save(handle, "token:alice", first.snapshot_keyed(KEY), 0) == 1

    elsewhere = open_store(store_url)  # another worker on the same store
    try:
        kept = _handles(elsewhere).find(handle, "token:alice")
    finally:
        elsewhere.close()
    assert kept is not None and kept.snapshot is not None
    second = bashkit.Bash()
    second.restore_snapshot_keyed(kept.snapshot, KEY)
    result = await second.execute("cat ../state.txt; echo $X; greet bob; pwd")
    assert result.stdout == "kept\n7\nhi bob\n/home/user/sub\n"


async def test_handles_are_unguessable_and_another_callers_handle_is_unknown(store: StateStore) -> None:
    handles = _handles(store, max_per_caller=32)
    made = {handles.new("token:alice") for _ in range(20)}
    assert len(made) == 20 and all(len(h) >= 3 + 43 for h in made), "32 random bytes, URL-safe"
    one = next(iter(made))
    assert handles.find(one, "token:alice") is not None
    assert handles.find(one, "token:mallory") is None
    assert handles.find(one, None) is None
    assert handles.find("sh_" + "A" * 43, "token:alice") is None


async def test_a_handle_idle_past_its_time_is_gone(store: StateStore) -> None:
    handles = _handles(store, idle_seconds=0)
    handle = handles.new("token:alice")
    assert handles.find(handle, "token:alice") is None
    assert handles.drop_expired() >= 1


async def test_the_cap_per_caller_drops_that_callers_oldest_shell_never_anothers(store: StateStore) -> None:
    handles = _handles(store, max_per_caller=2)
    bob = handles.new("token:bob")
    first = handles.new("token:alice")
    handles.new("token:alice")
    handles.new("token:alice")
    assert handles.find(first, "token:alice") is None, "alice's oldest shell went"
    assert handles.find(bob, "token:bob") is not None, "bob's shell is untouched by alice's"


async def test_a_snapshot_past_max_bytes_is_not_kept_and_says_so(store: StateStore) -> None:
    handles = _handles(store, max_bytes=10)
    handle = handles.new(None)
    shell = bashkit.Bash()
    await shell.execute("echo data > f")
    assert handles.save(handle, None, shell.snapshot_keyed(KEY), 0) is None
    kept = handles.find(handle, None)
    assert kept is not None and kept.snapshot is None


async def test_of_two_calls_that_started_from_one_version_the_first_saved_wins(store: StateStore) -> None:
    handles = _handles(store)
    handle = handles.new("token:alice")
    assert handles.save(handle, "token:alice", b"first", 0) == 1
    assert handles.save(handle, "token:alice", b"second", 0) is None, "it started from a state since replaced"
    kept = handles.find(handle, "token:alice")
    assert kept is not None and (kept.snapshot, kept.version) == (b"first", 1)


async def test_a_snapshot_changed_in_the_store_is_refused_when_restored(store: StateStore) -> None:
    handles = _handles(store)
    handle = handles.new("token:alice")
    shell = bashkit.Bash()
    await shell.execute("echo secret-plan > plan.txt")
    snapshot = bytearray(shell.snapshot_keyed(KEY))
    snapshot[-1] ^= 1
    handles.save(handle, "token:alice", bytes(snapshot), 0)
    kept = handles.find(handle, "token:alice")
    assert kept is not None and kept.snapshot is not None
    with pytest.raises(Exception, match="HMAC mismatch"):
        bashkit.Bash().restore_snapshot_keyed(kept.snapshot, KEY)
