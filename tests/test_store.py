"""The SQLite store: private files, and clear errors for a state directory or file it cannot use."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.store.sqlite import Store

SCHEMA = "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL);"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_store_keeps_what_was_written_across_reopening(tmp_path):
    store = Store(tmp_path / "state" / "toolshell.db")
    store.ensure(SCHEMA)
    store.execute("INSERT INTO notes (text) VALUES (?)", ["kept"])
    store.close()
    again = Store(tmp_path / "state" / "toolshell.db")
    again.ensure(SCHEMA)
    assert [tuple(r) for r in again.query("SELECT id, text FROM notes")] == [(1, "kept")]
    again.close()


def test_a_memory_store_needs_no_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = Store()
    store.ensure(SCHEMA)
    store.execute("INSERT INTO notes (text) VALUES ('x')")
    assert [r["text"] for r in store.query("SELECT text FROM notes")] == ["x"]
    store.close()
    assert list(tmp_path.iterdir()) == []


def test_a_new_state_directory_and_its_database_files_are_private_to_the_owner(tmp_path):
    old = os.umask(0o022)  # the common default, which would leave files world-readable
    try:
        store = Store(tmp_path / "state" / "toolshell.db")
        store.ensure(SCHEMA)
        store.execute("INSERT INTO notes (text) VALUES ('secret')")
    finally:
        os.umask(old)
    files = sorted(p.name for p in (tmp_path / "state").iterdir())
    assert files == ["toolshell.db", "toolshell.db-shm", "toolshell.db-wal"]
    assert _mode(tmp_path / "state") == 0o700
    assert {name: _mode(tmp_path / "state" / name) for name in files} == dict.fromkeys(files, 0o600)
    store.close()


def test_an_existing_state_directory_keeps_its_mode(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    Store(shared / "toolshell.db").close()
    assert _mode(shared) == 0o755
    assert _mode(shared / "toolshell.db") == 0o600


def test_a_state_directory_that_cannot_be_created_is_unavailable_and_names_the_fix(tmp_path):
    (tmp_path / "blocker").write_text("a file where a directory should be")
    with pytest.raises(ToolshellError) as caught:
        Store(tmp_path / "blocker" / "state" / "toolshell.db")
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert caught.value.message == (
        f"cannot create the state directory {tmp_path / 'blocker' / 'state'}: Not a directory;"
        " choose a writable state directory with --state-dir or TOOLSHELL_STATE_DIR"
    )


def test_a_file_in_the_place_of_the_state_directory_is_unavailable(tmp_path):
    (tmp_path / "state").write_text("not a directory")
    with pytest.raises(ToolshellError) as caught:
        Store(tmp_path / "state" / "toolshell.db")
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert caught.value.message == (
        f"cannot create the state directory {tmp_path / 'state'}: a file is in the way;"
        " choose a writable state directory with --state-dir or TOOLSHELL_STATE_DIR"
    )


def test_a_directory_in_the_place_of_the_database_is_unavailable(tmp_path):
    (tmp_path / "toolshell.db").mkdir()
    with pytest.raises(ToolshellError) as caught:
        Store(tmp_path / "toolshell.db")
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert caught.value.message == (
        f"cannot open the state database {tmp_path / 'toolshell.db'}: unable to open database file;"
        " choose a writable state directory with --state-dir or TOOLSHELL_STATE_DIR"
    )


def test_a_corrupt_database_file_is_unavailable_and_says_to_move_it_aside(tmp_path):
    path = tmp_path / "toolshell.db"
    path.write_bytes(b"this is not a SQLite database\n" * 200)
    with pytest.raises(ToolshellError) as caught:
        Store(path)
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert caught.value.message == (
        f"the state database {path} is damaged (file is not a database); move it aside to start with"
        " empty state, or choose another state directory with --state-dir or TOOLSHELL_STATE_DIR"
    )
    assert path.read_bytes() == b"this is not a SQLite database\n" * 200


def test_a_transaction_commits_its_statements_together_and_rolls_all_back_when_it_raises(tmp_path: Path) -> None:
    store = Store(tmp_path / "toolshell.db")
    store.ensure("CREATE TABLE IF NOT EXISTS t (v TEXT)")
    with pytest.raises(RuntimeError), store.transaction():
        store.execute("INSERT INTO t VALUES ('lost')")
        raise RuntimeError("half-way")
    with store.transaction():
        store.execute("INSERT INTO t VALUES ('a')")
        store.execute("INSERT INTO t VALUES ('b')")
    other = Store(tmp_path / "toolshell.db")  # another process sees the committed rows only
    assert [r["v"] for r in other.query("SELECT v FROM t ORDER BY v")] == ["a", "b"]


def test_a_transaction_holds_the_write_lock_so_another_store_cannot_write_meanwhile(tmp_path: Path) -> None:
    store, other = Store(tmp_path / "toolshell.db"), Store(tmp_path / "toolshell.db")
    store.ensure("CREATE TABLE IF NOT EXISTS t (v TEXT)")
    other.execute("PRAGMA busy_timeout=0")  # fail at once instead of waiting for the lock
    with store.transaction():
        store.execute("INSERT INTO t VALUES ('mine')")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("INSERT INTO t VALUES ('theirs')")
    assert [r["v"] for r in other.query("SELECT v FROM t")] == ["mine"]
