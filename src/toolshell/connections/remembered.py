"""Tool lists that outlive the process: each server's list, remembered in the state store.

Help, search, `tools plan` and the `bash` description read a server's remembered list without
starting it, so an `on_demand` server's tools can be found by a word of their descriptions. The
key is the server's identity (its program: command, arguments and working directory, URL or
module) and its filters, so another program under the same name, or a changed filter, starts
over. A list the server marks `cacheScope: private` is never stored; a `ttlMs` it gives is kept
as an expiry; every fetch (a start, a restart, after `tools/list_changed`) replaces it. The first
call to a tool still starts the server and checks the input against the live schema.
"""

from __future__ import annotations

import hashlib
import json
import time

import mcp_types as types

from toolshell.config import ServerConfig
from toolshell.redact import Redactor
from toolshell.registry.server_identity import server_identity
from toolshell.store.protocol import StateStore

MIGRATIONS = [
    """
    CREATE TABLE remembered_tools (
        server_key TEXT PRIMARY KEY,
        server TEXT NOT NULL,
        tools TEXT NOT NULL,
        fetched_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION
    );
    """
]


def remembered_key(server: ServerConfig, redact: Redactor) -> str:
    """The server's program and filters, hashed: what a remembered list is filed under."""
    described = {"program": server_identity(server, redact).id, "tools": server.tools, "max_tools": server.max_tools}
    return "sha256:" + hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


class RememberedTools:
    """The remembered lists, in a `StateStore`.

    Args:
        store: where they are kept (every worker on a shared store sees them).
        redact: the config's secrets (a server's identity is hashed with them masked in its label).
    """

    def __init__(self, store: StateStore, redact: Redactor) -> None:
        store.migrate("remembered_tools", MIGRATIONS)
        self.store = store
        self.redact = redact

    def remember(self, server: ServerConfig, tools: list[types.Tool], ttl_ms: int | None) -> None:
        """Keep the list a server just gave (a private list is never passed here)."""
        now = time.time()
        body = json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])
        self.store.execute(
            "INSERT INTO remembered_tools (server_key, server, tools, fetched_at, expires_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (server_key) DO UPDATE SET server = excluded.server, tools = excluded.tools, "
            "fetched_at = excluded.fetched_at, expires_at = excluded.expires_at",
            (
                remembered_key(server, self.redact),
                server.name,
                body,
                now,
                None if ttl_ms is None else now + ttl_ms / 1000,
            ),
        )

    def stamp(self, server: ServerConfig) -> tuple[float, float | None] | None:
        """When the list `recall` would return was fetched, and its expiry; None when it would return none."""
        rows = self.store.query(
            "SELECT fetched_at, expires_at FROM remembered_tools WHERE server_key = ?",
            (remembered_key(server, self.redact),),
        )
        if not rows or (rows[0]["expires_at"] is not None and rows[0]["expires_at"] < time.time()):
            return None
        return float(rows[0]["fetched_at"]), rows[0]["expires_at"]

    def recall(self, server: ServerConfig) -> list[types.Tool] | None:
        """The server's remembered list, or None: never fetched, another program, or expired."""
        rows = self.store.query(
            "SELECT tools, expires_at FROM remembered_tools WHERE server_key = ?",
            (remembered_key(server, self.redact),),
        )
        if not rows or (rows[0]["expires_at"] is not None and rows[0]["expires_at"] < time.time()):
            return None
        try:
            return [types.Tool.model_validate(t) for t in json.loads(rows[0]["tools"])]
        except (ValueError, TypeError):  # a row written by another version: fetched again on the next start
            return None
