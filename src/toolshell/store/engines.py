"""Choosing the engine: the one place a store's location is read (`[state] url`, a state dir's file)."""

from __future__ import annotations

from pathlib import Path

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.store.protocol import StateStore
from toolshell.store.sqlite import Store

_POSTGRES = ("postgresql://", "postgres://")


def open_store(where: str | Path) -> StateStore:
    """The store at `where`: a `postgresql://` URL (shared), or a SQLite file path (the default).

    Raises:
        ToolshellError: `invalid_input` for another URL scheme; `unavailable` when the store cannot be opened.
    """
    text = str(where)
    if text.startswith(_POSTGRES):
        # lazy: psycopg is an optional extra, imported only for a shared store
        from toolshell.store.postgres import PostgresStore

        return PostgresStore(text)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"the state store cannot be a {scheme}:// URL; use postgresql://user@host/db, or a file path for SQLite",
        )
    return Store(Path(text))
