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

Before trusting, `toolshell config trust` shows what the file would start (`describe`: each
server's exact command line or URL, escaped, with literal secrets masked). The record keeps those
lines, never the file's text (which may hold a literal token), so trusting the file again after an
edit shows only what changed (`changes`).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shlex
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from toolshell import places
from toolshell.config.models import Config
from toolshell.redact import MASK, is_secret
from toolshell.safe_text import escape
from toolshell.store.sqlite import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS config_trust (
    path TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    trusted_at REAL NOT NULL,
    directory TEXT,
    servers TEXT
);
"""
_ADDED_COLUMNS = ("directory TEXT", "servers TEXT")  # to a database from before each was recorded


@dataclass(frozen=True)
class TrustState:
    """What the trust records say about one file: `trusted`, `changed` (trusted once, edited since)
    or `untrusted`, and the directory its relative `command`/`cwd` resolve against."""

    state: str
    directory: Path
    servers: list[str] | None = None
    """What the file started when it was last trusted (`describe`), when the record keeps it."""


def trust_database(data_dir: Path) -> Path:
    """The database holding trust records: `$TOOLSHELL_STATE_DIR`, else `data_dir` (a daemon's
    address names it: `places.trust_dir`)."""
    return Path(places.trust_dir(str(data_dir))) / "toolshell.db"


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
    for column in _ADDED_COLUMNS:
        try:
            store.execute(f"ALTER TABLE config_trust ADD COLUMN {column}")
        except sqlite3.OperationalError:
            pass  # the column is there already
    return store


def trust(path: Path, database: Path, servers: list[str] | None = None, *, data: bytes | None = None) -> str:
    """Record `path` (as found) as trusted in its current form, for its directory, with what it
    starts (`describe`, shown as the difference next time); returns its SHA-256. `data` is the
    file's bytes as read and shown to the person, so a file changed meanwhile stays untrusted."""
    found = as_found(path)
    digest = hashlib.sha256(data).hexdigest() if data is not None else _digest(found)
    store = _open(database)
    try:
        store.execute(
            "INSERT INTO config_trust (path, sha256, trusted_at, directory, servers) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(path) DO UPDATE SET sha256 = excluded.sha256, trusted_at = excluded.trusted_at, "
            "directory = excluded.directory, servers = excluded.servers",
            (_key(found), digest, time.time(), _key(found.parent), None if servers is None else json.dumps(servers)),
        )
    finally:
        store.close()
    return digest


def trust_state(path: Path, database: Path, *, data: bytes | None = None) -> TrustState:
    """The trust of `path` exactly as found (a symlink is not its target). Reading creates nothing.
    `data` is the file's bytes as the caller read them (to parse next): their digest is compared,
    so an edit saved between the check and the parse is never used as trusted."""
    found = as_found(path)
    if not database.is_file():
        return TrustState("untrusted", found.parent)
    store = _open(database)
    try:
        rows = store.query("SELECT sha256, directory, servers FROM config_trust WHERE path = ?", (_key(found),))
    finally:
        store.close()
    if not rows:
        return TrustState("untrusted", found.parent)
    if (rows[0]["directory"] or _key(found.parent)) != _key(found.parent):  # older records: no directory
        return TrustState("untrusted", found.parent)
    digest = hashlib.sha256(data).hexdigest() if data is not None else _digest(found)
    state = "trusted" if rows[0]["sha256"] == digest else "changed"
    return TrustState(state, found.parent, _servers(rows[0]["servers"]))


def _servers(stored: object) -> list[str] | None:
    try:
        lines = json.loads(stored) if isinstance(stored, str) else None
    except ValueError:
        return None
    return [str(line) for line in lines] if isinstance(lines, list) else None


# --- what a file starts ------------------------------------------------------------------------

_REFERENCE = re.compile(r"\$\{[^}]*\}")


def _value(name: str, value: str, *, header: bool = False) -> str:
    """An `env`/`headers` value as shown: `${VAR}` references as written (the secret is in the
    environment), a literal header value or one under a secret name (`redact.secret_name`) masked."""
    if _REFERENCE.search(value) or not (is_secret(name, value) or (header and value)):
        return value
    return MASK


def _url(url: str) -> str:
    """A URL with a password and the query's values masked (tokens travel there too)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if parts.password:
        netloc = netloc.replace(f":{parts.password}@", f":{MASK}@", 1)
    query = "&".join(f"{k.partition('=')[0]}={MASK}" if "=" in k else k for k in parts.query.split("&") if k)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def describe(config: Config) -> list[str]:
    """One line per thing a config would start or reach: each enabled server's exact command line
    (with its `cwd`), URL or module, then its `env` and `headers`. Escaped, literal secrets masked,
    `${VAR}` as written (load the file with `expand=False`)."""
    lines: list[str] = []
    for server in config.mcp.servers:
        off = "" if server.enabled else " (disabled)"
        if server.type == "stdio":
            words = shlex.join([server.command or "", *server.args])
            where = f" in {shlex.quote(server.cwd)}" if server.cwd else ""
            lines.append(f"server {server.name}{off}: runs {words}{where}")
        elif server.type == "http":
            lines.append(f"server {server.name}{off}: connects to {_url(server.url or '')}")
        else:
            lines.append(f"server {server.name}{off}: imports {server.module or 'the shipped ' + server.name}")
        lines += [f"  env {k}={_value(k, v)}" for k, v in server.env.items()]
        lines += [f"  header {k}: {_value(k, v, header=True)}" for k, v in server.headers.items()]
    return [escape(line) for line in lines]


def changes(before: list[str], after: list[str]) -> list[str]:
    """The unified diff of two `describe` listings, without its file headers; empty when equal."""
    return list(difflib.unified_diff(before, after, lineterm="", n=1))[2:]


def ignored_note(path: Path, state: str) -> str:
    """The stderr line for a working-directory config that is not used."""
    why = "it changed since it was trusted" if state == "changed" else "it is not trusted, and it could start programs"
    return (
        f"toolshell: ignoring {path} in the working directory ({why}); "
        f"read it, then run `toolshell config trust {path}` to use it"
    )
