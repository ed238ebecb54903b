# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""Shells as data (issue 15, items 1-2), on both engines: a handle names a caller's shell whose
files, working directory, variables and functions come back in another process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import bashkit
import pytest

from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.shell import packs
from toolshell.shell.handles import Forged, ShellHandles
from toolshell.store.engines import open_store
from toolshell.store.protocol import StateStore

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("store_url", ENGINES, indirect=True)]
KEY, OLD = b"k" * 32, b"o" * 32


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
    packed = first.commit()
    assert handles.save(handle, "token:alice", 0, packed.id, dict(packed.objects), KEY) == 1

    elsewhere = open_store(store_url)  # another worker on the same store
    try:
        other = _handles(elsewhere)
        kept = other.find(handle, "token:alice", [KEY])
        assert kept is not None and kept.tip == packed.id and kept.version == 1
        objects = other.objects(handle, [KEY])
    finally:
        elsewhere.close()
    second = bashkit.Bash()
    second.checkout(packed.id, objects)
    result = await second.execute("cat ../state.txt; echo $X; greet bob; pwd")
    assert result.stdout == "kept\n7\nhi bob\n/home/user/sub\n"


async def test_a_save_adds_only_new_objects_and_a_replacing_save_drops_the_unreachable(store: StateStore) -> None:
    handles = _handles(store)
    handle = handles.new(None)
    shell = bashkit.Bash()
    await shell.execute("seq 1 50000 > big.txt; echo a > small.txt")
    full = shell.commit()
    handles.save(handle, None, 0, full.id, dict(full.objects), KEY)
    await shell.execute("echo b > small.txt")
    step = shell.commit(have=list(full.objects))
    handles.save(handle, None, 1, step.id, dict(step.objects), KEY)
    kept = handles.find(handle, None, [KEY])
    assert kept is not None
    assert kept.stored == full.stored_bytes + step.stored_bytes and step.stored_bytes < full.stored_bytes / 10
    again = shell.commit()
    handles.save(handle, None, 2, again.id, dict(again.objects), KEY, replace=True)
    assert set(handles.objects(handle, [KEY])) == set(again.objects)


async def test_handles_are_unguessable_and_another_callers_handle_is_unknown(store: StateStore) -> None:
    handles = _handles(store, max_per_caller=32)
    made = {handles.new("token:alice") for _ in range(20)}
    assert len(made) == 20 and all(len(h) >= 3 + 43 for h in made), "32 random bytes, URL-safe"
    one = next(iter(made))
    assert handles.find(one, "token:alice", [KEY]) is not None
    assert handles.find(one, "token:mallory", [KEY]) is None
    assert handles.find(one, None, [KEY]) is None
    assert handles.find("sh_" + "A" * 43, "token:alice", [KEY]) is None


async def test_a_handle_idle_past_its_time_is_gone(store: StateStore) -> None:
    handles = _handles(store, idle_seconds=0)
    handle = handles.new("token:alice")
    handles.save(handle, "token:alice", 0, "c1", {"o1": b"data"}, KEY)
    assert handles.find(handle, "token:alice", [KEY]) is None
    assert handles.drop_expired() >= 1
    assert store.query("SELECT COUNT(*) AS n FROM shell_packs")[0]["n"] == 0


async def test_the_cap_per_caller_drops_that_callers_oldest_shell_never_anothers(store: StateStore) -> None:
    handles = _handles(store, max_per_caller=2)
    bob = handles.new("token:bob")
    first = handles.new("token:alice")
    handles.new("token:alice")
    handles.new("token:alice")
    assert handles.find(first, "token:alice", [KEY]) is None, "alice's oldest shell went"
    assert handles.find(bob, "token:bob", [KEY]) is not None, "bob's shell is untouched by alice's"


async def test_of_two_calls_that_started_from_one_version_the_first_saved_wins(store: StateStore) -> None:
    handles = _handles(store)
    handle = handles.new("token:alice")
    assert handles.save(handle, "token:alice", 0, "first", {"a": b"1"}, KEY) == 1
    assert handles.save(handle, "token:alice", 0, "second", {"b": b"2"}, KEY) is None
    kept = handles.find(handle, "token:alice", [KEY])
    assert kept is not None and (kept.tip, kept.version) == ("first", 1)
    assert set(handles.objects(handle, [KEY])) == {"a"}, "the losing call wrote nothing"


async def test_a_commit_or_object_changed_in_the_store_is_refused(store: StateStore) -> None:
    handles = _handles(store)
    handle = handles.new("token:alice")
    handles.save(handle, "token:alice", 0, "c1", {"o1": b"plan"}, KEY)
    store.execute("UPDATE shell_packs SET data = ? WHERE handle = ?", (packs.packed({"o1": b"evil"}), handle))
    with pytest.raises(Forged):
        handles.objects(handle, [KEY])
    store.execute("UPDATE shell_handles SET tip = ? WHERE handle = ?", ("c2", handle))
    with pytest.raises(Forged):
        handles.find(handle, "token:alice", [KEY])


async def test_state_sealed_with_the_old_key_opens_while_the_old_key_is_in_the_ring(store: StateStore) -> None:
    handles = _handles(store)
    handle = handles.new(None)
    handles.save(handle, None, 0, "c1", {"o1": b"data"}, OLD)
    assert handles.find(handle, None, [KEY, OLD]) is not None
    assert handles.objects(handle, [KEY, OLD]) == {"o1": b"data"}
    with pytest.raises(Forged):
        handles.find(handle, None, [KEY])


async def test_a_commit_id_of_any_shape_reads_back_as_it_was_saved(store: StateStore) -> None:
    """A bashkit id (64 hex digits) and its seal are kept short (`~` and base64); any other text,
    one that looks like a short form included, is kept so that it reads back the same."""
    handles = _handles(store)
    handle = handles.new(None)
    tips = ["ab" * 32, "AB" * 32, "c1", "~" + "a" * 43, "~~", "~"]
    for version, tip in enumerate(tips):
        assert handles.save(handle, None, version, tip, {}, KEY) == version + 1
        kept = handles.find(handle, None, [KEY])
        assert kept is not None and kept.tip == tip
    stored = store.query("SELECT tip, tip_mac FROM shell_handles WHERE handle = ?", (handle,))[0]
    assert len(stored["tip_mac"]) == 44, "the seal in base64, not hex"
