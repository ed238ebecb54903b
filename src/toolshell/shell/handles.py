"""Shells as data: a handle names a shell whose state is kept in the store between calls.

A `bash` call may pass the handle of the shell it wants (`shell`); its result names the handle of
the shell it ran in. After each call the shell's state (files, working directory, variables,
functions) is saved under its handle as a bashkit commit: content-addressed objects, so a call
that changed one small file stores a few hundred bytes however large the shell is. The next call
checks that commit out in whichever process gets it, so a client keeps its shell across
processes and machines that share a store, with no affinity.

- A handle is `sh_` + 32 random bytes (256 bits, URL-safe), unguessable.
- It belongs to the caller that made it: another caller's handle is unknown to you.
- It expires after `idle_seconds` without a call; each caller keeps at most `max_per_caller`
  shells (the one idle longest goes first), so one client never evicts another's shell.
- The commit id and every object are HMAC-sealed with the state key, so state read back from a
  shared database cannot be forged by whoever can write a row. The commit's seal binds the handle,
  the caller and the version with it: a commit written back from an older version (a rollback), or
  a row given another `caller` (a shell moved to another client), does not open. The empty state a
  saved shell may have (not kept: past `max_bytes`) is sealed the same way.
- The commit id and its seal are kept as `~` and their 32 bytes in base64 (44 characters, not 64
  hex digits): a save updates its handle's row in place, and logs the fewer bytes. Rows written
  in hex read as before.
- A process remembers the highest version it saw of each shell (`SEEN_MAX` shells) and refuses a
  stored version lower than it: an older row written back whole, seal and version together, is
  refused by every worker that saw a later one. (A worker that never saw the later one cannot tell;
  `docs/security.md` states what the seals do and do not protect.)
- The objects one save adds are kept in one row of `shell_packs` (`shell.packs`), sealed once and
  keyed by the version that made it: a call's commit is one row however many objects it made.
  The objects kept by versions before it (`shell_objects`: one row per object, or per pack) still
  read; a full commit replaces them.
- The objects a shell keeps are bounded by `max_bytes`; the objects no longer reachable are
  dropped when the kept bytes pass twice what the shell holds (a full commit replaces them).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolshell.shell import packs
from toolshell.store.protocol import Row, StateStore, Transaction

MIGRATIONS = [
    """
    CREATE TABLE shell_handles (
        handle TEXT PRIMARY KEY,
        caller TEXT NOT NULL,
        tip TEXT,
        tip_mac TEXT,
        stored BIGINT NOT NULL DEFAULT 0,
        version BIGINT NOT NULL DEFAULT 0,
        created_at DOUBLE PRECISION NOT NULL,
        used_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX shell_handles_caller ON shell_handles (caller, used_at);
    CREATE TABLE shell_objects (
        handle TEXT NOT NULL,
        id TEXT NOT NULL,
        data {blob} NOT NULL,
        mac TEXT NOT NULL,
        PRIMARY KEY (handle, id)
    );
    """,
    """
    CREATE TABLE shell_sessions (
        session_key TEXT PRIMARY KEY,
        caller TEXT NOT NULL,
        handle TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    );
    """,
    # The seal binds caller and version since this step: shells sealed the old way are dropped
    # (their next call reads "gone") rather than opened under a seal that no longer proves enough.
    """
    DELETE FROM shell_sessions;
    DELETE FROM shell_objects;
    DELETE FROM shell_handles;
    """,
    # Incremental restore: the version that first stored each object, and the version of the last
    # full commit (before it, the objects were replaced). Rows from before read as version 0.
    """
    ALTER TABLE shell_objects ADD COLUMN since BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE shell_handles ADD COLUMN base BIGINT NOT NULL DEFAULT 0;
    """,
    # A save changes `used_at`: out of the index, PostgreSQL updates the row in place (HOT), with
    # no new index entries. A caller has a few shells: they are sorted by `used_at` as they are read.
    """
    DROP INDEX shell_handles_caller;
    CREATE INDEX shell_handles_caller ON shell_handles (caller);
    """,
    # A save's objects in one row keyed by its version, ids as bytes, the seal as bytes: about a
    # third less WAL than a `shell_objects` row (text ids, a hex seal, a `pack:N` id).
    """
    CREATE TABLE shell_packs (
        handle TEXT NOT NULL,
        since BIGINT NOT NULL,
        data {blob} NOT NULL,
        seal {blob} NOT NULL,
        PRIMARY KEY (handle, since)
    );
    """,
]
_OBJECTS = (
    "(SELECT handle, since, id, data, mac, NULL AS seal FROM shell_objects "
    "UNION ALL SELECT handle, since, NULL, data, NULL, seal FROM shell_packs)"
)
"""Every kept object row: a pack (`seal` set) or one kept before packs had a table (`id`, `mac`)."""

PREFIX = "sh_"
ANONYMOUS = ""
"""The caller key of calls with no identity (stdio, the CLI, the Python API): this machine's user."""
PACK = "pack:"
"""The id of a `shell_objects` row holding the objects one save added, before `shell_packs`."""
SEEN_MAX = 100_000
"""Shells whose highest version a process remembers (about 100 bytes each); past it the one seen
longest ago is forgotten."""


class Forged(Exception):
    """A kept shell that does not open: its seal does not match (changed in the store, moved to
    another caller, an older commit written back, or sealed with another key), or its version is
    lower than one this process saw."""

    def __init__(self, handle: str, why: str) -> None:
        super().__init__(why)
        self.handle = handle
        self.why = why


_NOT_SEALED = (
    "its seal does not match the state keys (the row was changed in the store: another commit or an "
    "older one written back, or another caller; or it was sealed with a key no longer in the ring)"
)


@dataclass(frozen=True)
class Kept:
    """A shell as the store has it."""

    handle: str
    tip: str | None
    """The commit to check out; None for a shell never saved (or not kept)."""
    version: int
    """How many times it was saved: a process holding an older copy checks this one out."""
    stored: int
    """Bytes of objects kept for it."""
    base: int = 0
    """The version of its last full commit: the objects kept before it were replaced then."""
    newer: dict[str, bytes] | None = None
    """The objects stored after the version `find` was given (checked against their seals)."""


class ShellHandles:
    """The handles and commits of shells, in a `StateStore`.

    Args:
        store: where they are kept (SQLite or PostgreSQL).
        idle_seconds: a handle unused this long is gone (`[serve] shell_idle_seconds`).
        max_per_caller: shells one caller may keep (`[serve] max_shells_per_caller`).
        max_bytes: the most bytes of objects one shell may keep (`[serve] max_shell_bytes`).
    """

    def __init__(self, store: StateStore, *, idle_seconds: float, max_per_caller: int, max_bytes: int) -> None:
        store.migrate("shell_handles", MIGRATIONS)
        self.store = store
        self.idle_seconds = idle_seconds
        self.max_per_caller = max_per_caller
        self.max_bytes = max_bytes
        self._seen: OrderedDict[str, int] = OrderedDict()
        self.on_drop: Callable[[str], None] = _nothing
        """Told each handle this process drops (past the cap, expired): a live copy of it goes too."""

    def new(self, caller: str | None) -> str:
        """A new handle for `caller`; the caller's shells idle longest are dropped past the cap."""
        handle = PREFIX + secrets.token_urlsafe(32)
        now = time.time()
        who = caller or ANONYMOUS
        with self.store.transaction() as tx:
            tx.execute(
                "INSERT INTO shell_handles (handle, caller, created_at, used_at) VALUES (?, ?, ?, ?)",
                (handle, who, now, now),
            )
            kept = tx.query(
                "SELECT handle FROM shell_handles WHERE caller = ? ORDER BY used_at DESC, created_at DESC", (who,)
            )
            dropped = [row["handle"] for row in kept[self.max_per_caller :]]
            for gone in dropped:
                _drop(tx, gone)
        for gone in dropped:
            self.on_drop(gone)
        return handle

    def for_session(self, session_key: str, caller: str | None) -> str:
        """The handle of the shell a client session (`Mcp-Session-Id`, the stdio client) keeps, made
        on its first call; any worker finds the same one."""
        who = caller or ANONYMOUS
        rows = self.store.query(
            "SELECT handle FROM shell_sessions WHERE session_key = ? AND caller = ?", (session_key, who)
        )
        if rows and self._alive(rows[0]["handle"], caller):
            return str(rows[0]["handle"])
        handle = self.new(caller)
        with self.store.transaction():  # two first calls at once: one handle wins, both use it
            if rows:  # the session's shell is gone: it gets a new one
                self.store.execute(
                    "DELETE FROM shell_sessions WHERE session_key = ? AND handle = ?", (session_key, rows[0]["handle"])
                )
            self.store.execute(
                "INSERT INTO shell_sessions (session_key, caller, handle, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (session_key) DO NOTHING",
                (session_key, who, handle, time.time()),
            )
            won = self.store.query("SELECT handle FROM shell_sessions WHERE session_key = ?", (session_key,))
        return str(won[0]["handle"])

    def _alive(self, handle: str, caller: str | None) -> bool:
        rows = self.store.query(
            "SELECT used_at FROM shell_handles WHERE handle = ? AND caller = ?", (handle, caller or ANONYMOUS)
        )
        return bool(rows) and rows[0]["used_at"] >= time.time() - self.idle_seconds

    def find(self, handle: str, caller: str | None, keys: list[bytes], after: int | None = None) -> Kept | None:
        """The caller's shell with this handle, or None: unknown, another caller's, or expired.
        Given `after` (the version a worker holds), the objects stored since come with it
        (`Kept.newer`), read in the same statement.

        Raises:
            Forged: its commit's seal (handle, caller, version, commit) matches no key, or one of
                the objects' does, or its version is lower than one this process saw.
        """
        if not handle.startswith(PREFIX) or len(handle) > 100:
            return None
        columns = "h.tip, h.tip_mac, h.version, h.stored, h.base, h.used_at"
        params: list[Any] = [handle, caller or ANONYMOUS]
        if after is None:
            sql = f"SELECT {columns} FROM shell_handles h"
        else:  # one row per newer object, or one with no object when there is none
            sql = (
                f"SELECT {columns}, o.since, o.id, o.data, o.mac, o.seal FROM shell_handles h "
                f"LEFT JOIN {_OBJECTS} o ON o.handle = h.handle AND o.since > ?"
            )
            params.insert(0, after)
        rows = self.store.query(sql + " WHERE h.handle = ? AND h.caller = ?", params)
        if not rows or rows[0]["used_at"] < time.time() - self.idle_seconds:
            return None
        row = rows[0]
        tip, mac, version = _expanded(row["tip"]), _expanded(row["tip_mac"]), int(row["version"])
        fresh = version == 0 and tip is None and mac is None  # made by `new`, never saved
        if not fresh and not _opens(keys, _tip_text(handle, caller, version, tip), mac):
            raise Forged(handle, _NOT_SEALED)
        seen = self._seen.get(handle, 0)
        if version < seen:
            raise Forged(
                handle,
                f"the store holds version {version} of it, older than version {seen} this worker saw "
                "(an older state was written back into the store)",
            )
        newer = None if after is None else self._opened(handle, keys, [r for r in rows if r["data"] is not None])
        self._saw(handle, version)
        return Kept(handle, tip, version, int(row["stored"]), int(row["base"]), newer)

    def objects(self, handle: str, keys: list[bytes], after: int = -1) -> dict[str, bytes]:
        """The objects kept for the shell (only those stored by a version after `after`: what a
        worker holding version `after` lacks), each checked against its seal.

        Raises:
            Forged: an object's seal matches no key.
        """
        rows = self.store.query(
            f"SELECT since, id, data, mac, seal FROM {_OBJECTS} o WHERE handle = ? AND since > ?", (handle, after)
        )
        return self._opened(handle, keys, rows)

    def _opened(self, handle: str, keys: list[bytes], rows: Sequence[Row]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for row in sorted(rows, key=lambda r: int(r["since"])):  # a later save's object wins
            data = bytes(row["data"])
            try:
                if row["seal"] is not None:
                    if not _opens_raw(keys, _pack_text(handle, int(row["since"]), data), bytes(row["seal"])):
                        raise Forged(handle, "the seal of one of its objects does not match the state keys")
                    found |= packs.unpacked(data)
                    continue
                if not _opens(keys, _object_text(handle, row["id"], data), row["mac"]):
                    raise Forged(handle, "the seal of one of its objects does not match the state keys")
                if str(row["id"]).startswith(PACK):  # the objects of a save, before `shell_packs`
                    found |= packs.legacy_unpacked(data)
                else:  # an object stored alone (by a version before packs)
                    found[row["id"]] = data
            except packs.Malformed:  # sealed by our key, yet not a pack: none of ours
                raise Forged(handle, "one of its packs of objects is malformed") from None
        return found

    def save(
        self,
        handle: str,
        caller: str | None,
        version: int,
        tip: str | None,
        objects: Mapping[str, bytes],
        key: bytes,
        *,
        replace: bool = False,
        also: Callable[[Transaction], None] | None = None,
    ) -> int | None:
        """Keep the shell as commit `tip` after a call that started from `version`, adding `objects`
        (or, with `replace`, keeping only them). The new version, or None when another call saved
        this shell meanwhile (its state wins) or the handle is gone. `tip` None keeps nothing.
        `also` writes what else the call recorded (its timeline rows) in the same transaction,
        whether or not the shell's state is kept."""
        added = sum(len(d) for d in objects.values())
        full = replace or tip is None
        with self.store.transaction() as tx:
            if also is not None:
                also(tx)
            done = tx.execute(
                "UPDATE shell_handles SET tip = ?, tip_mac = ?, stored = "
                + ("?, base = version + 1" if full else "stored + ?")
                + ", used_at = ?, version = version + 1 WHERE handle = ? AND caller = ? AND version = ?",
                (
                    _compact(tip),
                    _compact(_seal(key, _tip_text(handle, caller, version + 1, tip))),
                    added if tip is not None else 0,
                    time.time(),
                    handle,
                    caller or ANONYMOUS,
                    version,
                ),
            )
            if done.rowcount != 1:
                return None
            if full:
                _drop_objects(tx, handle)
            if objects:  # one row, one seal, for the objects of one save
                data, since = packs.packed(objects), version + 1
                # A plain insert (an upsert's check costs WAL); one kept at this version already
                # (a store rolled back under it) stays, as before.
                tx.execute(
                    "INSERT INTO shell_packs (handle, since, data, seal) SELECT ?, ?, ?, ? "
                    "WHERE NOT EXISTS (SELECT 1 FROM shell_packs WHERE handle = ? AND since = ?)",
                    (handle, since, data, _seal_raw(key, _pack_text(handle, since, data)), handle, since),
                )
        self._saw(handle, version + 1)
        return version + 1

    def _saw(self, handle: str, version: int) -> None:
        self._seen[handle] = max(version, self._seen.get(handle, 0))
        self._seen.move_to_end(handle)
        if len(self._seen) > SEEN_MAX:
            self._seen.popitem(last=False)

    def drop_expired(self) -> int:
        """Forget every shell idle past `idle_seconds`; how many went."""
        cutoff = time.time() - self.idle_seconds
        with self.store.transaction() as tx:
            gone = tx.query("SELECT handle FROM shell_handles WHERE used_at < ?", (cutoff,))
            for row in gone:
                _drop(tx, row["handle"])
        for row in gone:
            self.on_drop(row["handle"])
        return len(gone)


def _nothing(handle: str) -> None:
    pass


def _drop(tx: Transaction, handle: str) -> None:
    tx.execute("DELETE FROM shell_sessions WHERE handle = ?", (handle,))
    _drop_objects(tx, handle)
    tx.execute("DELETE FROM shell_handles WHERE handle = ?", (handle,))


def _drop_objects(tx: Transaction, handle: str) -> None:
    tx.execute("DELETE FROM shell_packs WHERE handle = ?", (handle,))
    tx.execute("DELETE FROM shell_objects WHERE handle = ?", (handle,))


def _tip_text(handle: str, caller: str | None, version: int, tip: str | None) -> bytes:
    """What a commit's seal covers: the shell, whose it is, which save, and the commit (none: empty).
    Lengths first, so no two different tuples read as one text."""
    parts = [handle, caller or ANONYMOUS, str(version), "" if tip is None else tip]
    return ("tip:" + "".join(f"{len(p)}:{p}" for p in parts)).encode()


def _object_text(handle: str, oid: str, data: bytes) -> bytes:
    return f"{handle}:object:{oid}:".encode() + data


def _compact(hex_text: str | None) -> str | None:
    """A 64-digit hex text (a bashkit commit id, a seal) as `~` and its 32 bytes in base64url: 44
    characters, not 64, so a save's update of its handle's row logs 40 bytes fewer. Any other
    text as it is (`_expanded` reads both)."""
    if hex_text is None:
        return None
    raw = b""
    if len(hex_text) == 64:
        try:
            raw = bytes.fromhex(hex_text)
        except ValueError:
            pass
    if raw and raw.hex() == hex_text:  # lowercase hex: it reads back the same
        return "~" + base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return "~" + hex_text if hex_text.startswith("~") else hex_text  # `~~`: a text of its own


def _expanded(text: str | None) -> str | None:
    """The text `_compact` kept, as it was given."""
    if text is None or not text.startswith("~"):
        return text
    if text.startswith("~~") or len(text) != 44:
        return text[1:] if text.startswith("~~") else text
    try:
        raw = base64.urlsafe_b64decode(text[1:] + "=")
    except ValueError:  # binascii.Error: not ours; its seal will not open
        return text
    return raw.hex() if len(raw) == 32 else text


def _pack_text(handle: str, since: int, data: bytes) -> bytes:
    """What a pack's seal covers: the shell, the version that stored it, its objects."""
    return f"{handle}:pack:{since}:".encode() + data


def _seal(key: bytes, text: bytes) -> str:
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def _seal_raw(key: bytes, text: bytes) -> bytes:
    return hmac.new(key, text, hashlib.sha256).digest()


def _opens(keys: list[bytes], text: bytes, mac: str | None) -> bool:
    return mac is not None and any(hmac.compare_digest(_seal(k, text), mac) for k in keys)


def _opens_raw(keys: list[bytes], text: bytes, seal: bytes) -> bool:
    return any(hmac.compare_digest(_seal_raw(k, text), seal) for k in keys)
