"""Which `toolshell.toml` files found in a working directory may be used: the ones a person trusted.

A checkout's `toolshell.toml` can name any program as a server, so `cd repo; toolshell run …`
would run the repo's code. Like mise with `.mise.toml`, such a file is used only after
`toolshell config trust [PATH]`, which records the file's path as found, the SHA-256 of its bytes
and its directory; any edit changes the hash and withdraws the trust. Records live in the state
database of `$TOOLSHELL_STATE_DIR` or the user data dir, never in a directory the config itself
names (an untrusted file must not choose where its trust is looked up).

The path is recorded as found, not as its symlink resolves: a checkout whose `toolshell.toml` is
a symlink to a trusted file elsewhere is a different checkout (its relative `command` would run
its own programs), so it is asked about on its own. Only the directory part is resolved, because
that is what the process's working directory is (`os.getcwd()` is always the physical directory).
Records written before the directory was kept were keyed by the resolved path: for a regular file
that is the same key, so they keep working; for a symlink they no longer match, and the file is
asked about again.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from toolshell.store.sqlite import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS config_trust (
    path TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    trusted_at REAL NOT NULL,
    directory TEXT
);
"""


@dataclass(frozen=True)
class TrustState:
    """What the trust records say about one file: `trusted`, `changed` (trusted once, edited since)
    or `untrusted`, and the directory its relative `command`/`cwd` resolve against."""

    state: str
    directory: Path


def trust_database(data_dir: Path) -> Path:
    """The database holding trust records: `$TOOLSHELL_STATE_DIR`, else `data_dir`."""
    return Path(os.environ.get("TOOLSHELL_STATE_DIR") or data_dir).expanduser() / "toolshell.db"


def as_found(path: Path) -> Path:
    """`path` made absolute with its directory resolved and its last part kept: a symlinked
    `toolshell.toml` stays itself, not the file it points to."""
    absolute = path.absolute()
    return absolute.parent.resolve() / absolute.name


def _key(path: Path) -> str:
    """How a path is written in the database: as text, or for a name that is not UTF-8 (SQLite text
    must be) its bytes in hex after `fs:`, which no absolute path starts with."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "fs:" + os.fsencode(text).hex()
    return text


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _open(database: Path) -> Store:
    store = Store(database)
    store.ensure(SCHEMA)
    try:  # a database from before the directory was recorded
        store.execute("ALTER TABLE config_trust ADD COLUMN directory TEXT")
    except sqlite3.OperationalError:
        pass  # the column is there already
    return store


def trust(path: Path, database: Path) -> str:
    """Record `path` (as found) as trusted in its current form, for its directory; returns its SHA-256."""
    found = as_found(path)
    digest = _digest(found)
    store = _open(database)
    try:
        store.execute(
            "INSERT INTO config_trust (path, sha256, trusted_at, directory) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(path) DO UPDATE SET sha256 = excluded.sha256, trusted_at = excluded.trusted_at, "
            "directory = excluded.directory",
            (_key(found), digest, time.time(), _key(found.parent)),
        )
    finally:
        store.close()
    return digest


def trust_state(path: Path, database: Path) -> TrustState:
    """The trust of `path` exactly as found (a symlink is not its target). Reading creates nothing."""
    found = as_found(path)
    if not database.is_file():
        return TrustState("untrusted", found.parent)
    store = _open(database)
    try:
        rows = store.query("SELECT sha256, directory FROM config_trust WHERE path = ?", (_key(found),))
    finally:
        store.close()
    if not rows:
        return TrustState("untrusted", found.parent)
    if (rows[0]["directory"] or _key(found.parent)) != _key(found.parent):  # older records: no directory
        return TrustState("untrusted", found.parent)
    return TrustState("trusted" if rows[0]["sha256"] == _digest(found) else "changed", found.parent)


def ignored_note(path: Path, state: str) -> str:
    """The stderr line for a working-directory config that is not used."""
    why = "it changed since it was trusted" if state == "changed" else "it is not trusted, and it could start programs"
    return (
        f"toolshell: ignoring {path} in the working directory ({why}); "
        f"read it, then run `toolshell config trust {path}` to use it"
    )
