"""Shells as data: a handle names a shell whose state is kept in the store between calls.

A `bash` call may pass the handle of the shell it wants (`shell`); its result names the handle of
the shell it ran in. After each call the shell's state (files, working directory, variables,
functions: bashkit's snapshot) is saved under its handle, and the next call restores it in
whichever process gets it. So a client keeps its shell across processes and machines that share
a store, with no affinity.

- A handle is `sh_` + 32 random bytes (256 bits, URL-safe), unguessable.
- It belongs to the caller that made it: another caller's handle is unknown to you.
- It expires after `idle_seconds` without a call; each caller keeps at most `max_per_caller`
  shells (the one idle longest goes first), so one client never evicts another's shell.
- A snapshot is HMAC-sealed (bashkit's keyed snapshots) with the store's key, so state read back
  from a shared database cannot be forged by whoever can write a row; past `max_bytes` it is not
  kept, and the result says so.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from toolshell.store.protocol import StateStore

MIGRATIONS = [
    """
    CREATE TABLE shell_handles (
        handle TEXT PRIMARY KEY,
        caller TEXT NOT NULL,
        snapshot {blob},
        size BIGINT NOT NULL DEFAULT 0,
        version BIGINT NOT NULL DEFAULT 0,
        created_at DOUBLE PRECISION NOT NULL,
        used_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX shell_handles_caller ON shell_handles (caller, used_at);
    """
]

PREFIX = "sh_"
ANONYMOUS = ""
"""The caller key of calls with no identity (stdio, the CLI, the Python API): this machine's user."""


@dataclass(frozen=True)
class Kept:
    """A shell's saved state, as the store has it."""

    handle: str
    snapshot: bytes | None
    """None for a shell made but never saved (its first call is running), or one too big to keep."""
    version: int
    """How many times it was saved: a process holding an older copy restores this one."""


class ShellHandles:
    """The handles and snapshots of shells, in a `StateStore`.

    Args:
        store: where they are kept (SQLite or PostgreSQL).
        idle_seconds: a handle unused this long is gone (`[serve] shell_idle_seconds`).
        max_per_caller: shells one caller may keep (`[serve] max_shells_per_caller`).
        max_bytes: the largest snapshot kept (`[serve] max_shell_bytes`).
    """

    def __init__(self, store: StateStore, *, idle_seconds: float, max_per_caller: int, max_bytes: int) -> None:
        store.migrate("shell_handles", MIGRATIONS)
        self.store = store
        self.idle_seconds = idle_seconds
        self.max_per_caller = max_per_caller
        self.max_bytes = max_bytes

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
            for row in kept[self.max_per_caller :]:
                tx.execute("DELETE FROM shell_handles WHERE handle = ?", (row["handle"],))
        return handle

    def find(self, handle: str, caller: str | None) -> Kept | None:
        """The caller's shell with this handle, or None: unknown, another caller's, or expired."""
        if not handle.startswith(PREFIX) or len(handle) > 100:
            return None
        rows = self.store.query(
            "SELECT handle, snapshot, version, used_at FROM shell_handles WHERE handle = ? AND caller = ?",
            (handle, caller or ANONYMOUS),
        )
        if not rows or rows[0]["used_at"] < time.time() - self.idle_seconds:
            return None
        snapshot = rows[0]["snapshot"]
        return Kept(handle, None if snapshot is None else bytes(snapshot), int(rows[0]["version"]))

    def save(self, handle: str, caller: str | None, snapshot: bytes, version: int) -> int | None:
        """Keep the shell's state after a call that started from `version`; the new version, or
        None when nothing was kept: the snapshot is past `max_bytes` (the shell starts empty next
        time), the handle is gone, or another call saved this shell meanwhile (its state wins)."""
        fits = len(snapshot) <= self.max_bytes
        done = self.store.execute(
            "UPDATE shell_handles SET snapshot = ?, size = ?, used_at = ?, version = version + 1 "
            "WHERE handle = ? AND caller = ? AND version = ?",
            (
                snapshot if fits else None,
                len(snapshot) if fits else 0,
                time.time(),
                handle,
                caller or ANONYMOUS,
                version,
            ),
        )
        return version + 1 if fits and done.rowcount == 1 else None

    def drop_expired(self) -> int:
        """Forget every shell idle past `idle_seconds`; how many went."""
        return self.store.execute(
            "DELETE FROM shell_handles WHERE used_at < ?", (time.time() - self.idle_seconds,)
        ).rowcount
