# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""A store of the previous version opens with this one: its migration steps upgrade it in place,
on both engines, and what it kept still reads. The shell of the previous version (its objects in
`shell_objects`: a pack row `pack:N`, or a row per object, each with a hex seal) opens, and the next
save adds a pack of this version beside them; its timeline (made with `seq` as its key) reads the
same, and takes this version's rows."""

from __future__ import annotations

import hashlib
import hmac
import struct
import time
from collections.abc import Iterator

import pytest

from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  # fixtures
from toolshell.shell.handles import MIGRATIONS, Forged, ShellHandles
from toolshell.store.engines import open_store
from toolshell.store.protocol import StateStore
from toolshell.timeline import NestedCall, ShellCall, SqliteSink, query
from toolshell.timeline.held import Held, holding
from toolshell.timeline.sinks import SCHEMA

pytestmark = pytest.mark.parametrize("store_url", ENGINES, indirect=True)
KEY = b"k" * 32
CALLER = "token:alice"
HANDLE = "sh_" + "a" * 43
THREE = "三".encode()
HEX_ID = "e" * 64
PREVIOUS_HANDLE_STEPS = 5
"""The `shell_handles` steps of the previous version (before `shell_packs`)."""


@pytest.fixture
def store(store_url: str) -> Iterator[StateStore]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def _hex_seal(text: bytes) -> str:
    return hmac.new(KEY, text, hashlib.sha256).hexdigest()


def _previous_pack(objects: dict[str, bytes]) -> bytes:
    """A pack as the previous version wrote it: id length, data length, id, data."""
    return b"".join(struct.pack(">HI", len(k), len(v)) + k.encode() + v for k, v in objects.items())


def _previous_shell(store: StateStore) -> None:
    """A shell at version 2 as the previous version kept it: an object alone (from before packs)
    and a pack, each sealed in hex, and its commit sealed to its handle, caller and version."""
    store.migrate("shell_handles", MIGRATIONS[:PREVIOUS_HANDLE_STEPS])
    now = time.time()
    tip_text = "tip:" + "".join(f"{len(p)}:{p}" for p in (HANDLE, CALLER, "2", "c2"))
    store.execute(
        "INSERT INTO shell_handles (handle, caller, tip, tip_mac, stored, version, created_at, used_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (HANDLE, CALLER, "c2", _hex_seal(tip_text.encode()), 6, 2, now, now),
    )
    pack = _previous_pack({"b": b"two", "c": THREE})
    for oid, data, since in (("a", b"one", 1), ("pack:2", pack, 2)):
        store.execute(
            "INSERT INTO shell_objects (handle, id, data, mac, since) VALUES (?, ?, ?, ?, ?)",
            (HANDLE, oid, data, _hex_seal(f"{HANDLE}:object:{oid}:".encode() + data), since),
        )


def test_a_shell_kept_by_the_previous_version_opens_and_its_next_save_adds_to_it(store: StateStore) -> None:
    _previous_shell(store)
    handles = ShellHandles(store, idle_seconds=3600, max_per_caller=4, max_bytes=1 << 20)
    kept = handles.find(HANDLE, CALLER, [KEY])
    assert kept is not None and (kept.tip, kept.version) == ("c2", 2)
    assert handles.objects(HANDLE, [KEY]) == {"a": b"one", "b": b"two", "c": THREE}
    assert handles.save(HANDLE, CALLER, 2, "c3", {"d": b"four", HEX_ID: b"hex id"}, KEY) == 3
    since_1 = handles.objects(HANDLE, [KEY], after=1)
    assert since_1 == {"b": b"two", "c": THREE, "d": b"four", HEX_ID: b"hex id"}
    newer = handles.find(HANDLE, CALLER, [KEY], after=2)
    assert newer is not None and newer.newer == {"d": b"four", HEX_ID: b"hex id"}
    store.execute("UPDATE shell_objects SET data = ? WHERE id = ?", (b"evil", "a"))  # its old seal still guards it
    with pytest.raises(Forged):
        handles.objects(HANDLE, [KEY])


def test_a_full_save_replaces_the_objects_the_previous_version_kept(store: StateStore) -> None:
    _previous_shell(store)
    handles = ShellHandles(store, idle_seconds=3600, max_per_caller=4, max_bytes=1 << 20)
    assert handles.save(HANDLE, CALLER, 2, "c3", {"z": b"all"}, KEY, replace=True) == 3
    assert handles.objects(HANDLE, [KEY]) == {"z": b"all"}
    assert store.query("SELECT COUNT(*) AS n FROM shell_objects")[0]["n"] == 0


def test_a_timeline_of_the_previous_version_reads_the_same_and_takes_new_rows(store: StateStore) -> None:
    store.migrate("timeline", [SCHEMA])  # the previous version's one step: `seq` the key; its rows
    store.execute(
        "INSERT INTO shell_calls (id, session_id, script_preview, exit_code, started_at, duration_ms, source) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("old", "s", "echo old", 0, 100.0, 1.0, "agent"),
    )
    store.execute(
        "INSERT INTO nested_calls (id, shell_call_id, session_id, command, input_preview, outcome, duration_ms, "
        "started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ("old.1", "old", "s", "tools time now", "{}", "completed", 2.0, 100.5),
    )
    before = query(store)
    sink = SqliteSink(store)  # upgrades it
    assert query(store) == before
    held = Held()
    with holding(held):
        sink.emit(ShellCall("new", "s", "echo new", None, 100.0, None, "agent"))  # the same start: seq orders
        sink.emit(NestedCall("new.1", "new", "s", "tools time now", "{}", "completed", None, 1.0, 100.2))
        sink.write_held(held)  # a timed write, while it runs
        sink.emit(ShellCall("new", "s", "echo new", 0, 100.0, 3.0, "agent"))
        sink.write_held(held)  # its commit: the row a write took is updated, not added again
    rows = query(store)
    assert [(r["id"], r["exit_code"], [c["id"] for c in r["calls"]]) for r in rows] == [
        ("new", 0, ["new.1"]),
        ("old", 0, ["old.1"]),
    ]
    if store.engine == "postgresql":  # the key's index is the id's; `seq` has none
        indexes = store.query(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('shell_calls', 'nested_calls')"
        )
        assert not [i for i in indexes if "(seq)" in i["indexdef"]]
        assert {i["indexname"] for i in indexes} == {
            "shell_calls_pkey",
            "shell_calls_session",
            "nested_calls_pkey",
            "nested_calls_shell",
        }
