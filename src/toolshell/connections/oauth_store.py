"""OAuth records in the state store, sealed: what every host and worker on one store logs in with.

One row per server identity (`registry.server_identity`: for an `http` server, a hash of its URL),
so two names for one URL share a login, a server whose URL changed starts from nothing, and a URL
carrying a `${SECRET}` never reaches the store in clear. The record (tokens, registration, issuer,
expiry) is sealed with the state key ring (`store.sealed`, AES-GCM, its own HKDF-derived key) on
either engine: on a shared store it leaves the state dir, so the ring is the configured
`TOOLSHELL_STATE_KEYS`; on the local SQLite store it is the state dir's key file. A record no key
of the ring opens reads as "not logged in" with `connection_required` naming the ring.

Records from before, `<state dir>/oauth/<server>.json`, move into the store the first time they
are read (the file is removed once the store holds it), so an existing login keeps working.

A refresh runs under `StateStore.lock_row` on the record's row (`SELECT … FOR UPDATE` on
PostgreSQL, a `flock` on SQLite) and re-reads the record first: a refresh token is redeemed once
however many workers, on however many hosts, found it expired at once. The block's writes (the new
tokens) commit as it ends.
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.to_thread
from pydantic import ValidationError

from toolshell.config.models import ServerConfig
from toolshell.connections.oauth_tokens import ServerTokens, TokenFile, TokenRecord
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.redact import Redactor
from toolshell.registry.server_identity import server_identity
from toolshell.store.keys import DEFAULT_ENV, key_ring
from toolshell.store.protocol import StateStore, Transaction
from toolshell.store.sealed import seal, unseal

PURPOSE = "oauth records"
"""The HKDF purpose of the key that seals these records (no other purpose shares it)."""

_TABLE = "oauth_records"
MIGRATIONS = [
    f"""
    CREATE TABLE {_TABLE} (
        identity TEXT PRIMARY KEY,
        sealed {{blob}} NOT NULL,
        version BIGINT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )
    """,
]
"""`version` grows with every write: what a worker compares to see another's login or refresh."""

_UPSERT = f"""
INSERT INTO {_TABLE} (identity, sealed, version, updated_at) VALUES (?, ?, 1, ?)
ON CONFLICT (identity) DO UPDATE SET
    sealed = excluded.sealed, version = {_TABLE}.version + 1, updated_at = excluded.updated_at
"""

# One refresh per process and record reaches the row lock; the others wait here, holding no
# connection or thread. By store object: two hosts in one process meet at the row lock itself.
_LOCKS: weakref.WeakKeyDictionary[StateStore, dict[str, anyio.Lock]] = weakref.WeakKeyDictionary()


class UnopenableRecord(ToolshellError):
    """A stored record no key of the ring opens: the person is not logged in, as far as we can tell."""


class StoredTokens(ServerTokens):
    """The record of one server in the state store.

    Args:
        store: the host's state store.
        server: the server's config (its identity keys the row).
        state_dir: where the local key file and the old token files are.
    """

    def __init__(self, store: StateStore, server: ServerConfig, state_dir: Path) -> None:
        self.store = store
        self.server = server.name
        self.server_url = server.url or ""
        self.identity = server_identity(server, Redactor()).id
        self.state_dir = state_dir
        self._legacy = TokenFile(state_dir / "oauth", server.name, self.server_url)
        self._held: Transaction | None = None
        store.migrate("oauth", MIGRATIONS)

    @property
    def _db(self) -> Transaction:
        """The held row's transaction during a refresh, else the store."""
        return self._held if self._held is not None else self.store

    def _ring(self) -> list[bytes]:
        return key_ring(os.environ.get(DEFAULT_ENV), self.state_dir, shared=self.store.shared)

    def check(self) -> None:
        self._ring()  # a shared store without a configured ring could not keep the login

    def read(self) -> TokenRecord:
        rows = self._db.query(f"SELECT sealed FROM {_TABLE} WHERE identity = ?", (self.identity,))
        if not rows:
            return self._adopt_legacy()
        plain = unseal(self._ring(), PURPOSE, self.identity, bytes(rows[0]["sealed"]))
        if plain is None:
            raise UnopenableRecord(
                ErrorCode.CONNECTION_REQUIRED,
                f"the OAuth login to server {self.server!r} is stored sealed with a key the state key ring "
                f"does not hold (${DEFAULT_ENV}, newest key first; without it, {self.state_dir / 'state-key'}): "
                f"put the key it was sealed with back in the ring, or log in again: "
                f"run `toolshell auth login {self.server}`",
            )
        try:
            record = TokenRecord.model_validate_json(plain)
        except ValidationError:
            return TokenRecord(server_url=self.server_url)  # damaged: a new login writes a good one
        return record if record.server_url == self.server_url else TokenRecord(server_url=self.server_url)

    def write(self, record: TokenRecord) -> None:
        now = time.time()
        record = record.model_copy(update={"updated_at": now, "server_url": self.server_url})
        sealed = seal(self._ring(), PURPOSE, self.identity, record.model_dump_json(exclude_none=True).encode())
        self._db.execute(_UPSERT, (self.identity, sealed, now))

    def stamp(self) -> object | None:
        rows = self._db.query(f"SELECT version FROM {_TABLE} WHERE identity = ?", (self.identity,))
        return int(rows[0]["version"]) if rows else None

    def forget(self) -> bool:
        gone = self._db.execute(f"DELETE FROM {_TABLE} WHERE identity = ?", (self.identity,)).rowcount > 0
        return self._legacy.forget() or gone  # an old file left would come back as a login

    def forget_tokens(self) -> None:
        try:
            super().forget_tokens()
        except UnopenableRecord:
            self.forget()  # nothing in it can be used: a fresh login starts from nothing

    def _adopt_legacy(self) -> TokenRecord:
        """Move `<state dir>/oauth/<server>.json` into the store (once), or an empty record."""
        record = self._legacy.read()
        if record.tokens is None and record.client_info is None:
            return record
        sealed = seal(self._ring(), PURPOSE, self.identity, record.model_dump_json(exclude_none=True).encode())
        self._db.execute(
            f"INSERT INTO {_TABLE} (identity, sealed, version, updated_at) VALUES (?, ?, 1, ?) "
            "ON CONFLICT (identity) DO NOTHING",
            (self.identity, sealed, time.time()),
        )
        self._legacy.forget()
        return self.read()

    @contextlib.asynccontextmanager
    async def refresh_lock(self) -> AsyncIterator[None]:
        """The process's lock for this record, then the store's row lock (waited for off the loop)."""
        lock = _LOCKS.setdefault(self.store, {}).setdefault(self.identity, anyio.Lock())
        async with lock:
            held = self.store.lock_row(_TABLE, "identity", self.identity)
            entered: list[Transaction] = []
            try:
                await anyio.to_thread.run_sync(lambda: entered.append(held.__enter__()), abandon_on_cancel=False)
            except BaseException:
                if entered:  # cancelled once the lock was ours: give it back
                    held.__exit__(None, None, None)
                raise
            self._held = entered[0]
            try:
                yield
            except BaseException as exc:
                self._held = None
                if not held.__exit__(type(exc), exc, exc.__traceback__):
                    raise
            else:
                self._held = None
                held.__exit__(None, None, None)
