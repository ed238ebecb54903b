"""Which `toolshell.toml` files found in a working directory may be used: the ones a person trusted.

A checkout's `toolshell.toml` can name any program as a server, so `cd repo; toolshell run …`
would run the repo's code. Like mise with `.mise.toml`, such a file is used only after
`toolshell config trust [PATH]`, which records its absolute path and the SHA-256 of its bytes;
any edit changes the hash and withdraws the trust. Records live in the state database of
`$TOOLSHELL_STATE_DIR` or the user data dir, never in a directory the config itself names
(an untrusted file must not choose where its trust is looked up).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from toolshell.store.sqlite import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS config_trust (
    path TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    trusted_at REAL NOT NULL
);
"""


def trust_database(data_dir: Path) -> Path:
    """The database holding trust records: `$TOOLSHELL_STATE_DIR`, else `data_dir`."""
    return Path(os.environ.get("TOOLSHELL_STATE_DIR") or data_dir).expanduser() / "toolshell.db"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def trust(path: Path, database: Path) -> str:
    """Record `path` as trusted in its current form; returns its SHA-256."""
    resolved = path.resolve()
    digest = _digest(resolved)
    store = Store(database)
    try:
        store.ensure(SCHEMA)
        store.execute(
            "INSERT INTO config_trust (path, sha256, trusted_at) VALUES (?, ?, ?) "
            "ON CONFLICT(path) DO UPDATE SET sha256 = excluded.sha256, trusted_at = excluded.trusted_at",
            (str(resolved), digest, time.time()),
        )
    finally:
        store.close()
    return digest


def trust_state(path: Path, database: Path) -> str:
    """`trusted`, `changed` (trusted once, edited since) or `untrusted`. Reading creates nothing."""
    if not database.is_file():
        return "untrusted"
    resolved = path.resolve()
    store = Store(database)
    try:
        store.ensure(SCHEMA)
        rows = store.query("SELECT sha256 FROM config_trust WHERE path = ?", (str(resolved),))
    finally:
        store.close()
    if not rows:
        return "untrusted"
    return "trusted" if rows[0]["sha256"] == _digest(resolved) else "changed"


def ignored_note(path: Path, state: str) -> str:
    """The stderr line for a working-directory config that is not used."""
    why = "it changed since it was trusted" if state == "changed" else "it is not trusted, and it could start programs"
    return (
        f"toolshell: ignoring {path} in the working directory ({why}); "
        f"read it, then run `toolshell config trust {path}` to use it"
    )
