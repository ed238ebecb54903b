"""Numbered migration steps, applied the same way on every engine (each engine takes its lock first)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from toolshell.store.dialect import ddl, split_statements
from toolshell.store.protocol import Transaction


def apply_steps(tx: Transaction, engine: str, component: str, steps: Sequence[str]) -> None:
    """Apply, inside the caller's transaction and lock, the steps of `component` not applied yet,
    in order, recording each in `toolshell_migrations`."""
    rows = tx.query("SELECT version FROM toolshell_migrations WHERE component = ?", (component,))
    applied = {row["version"] for row in rows}
    for version, step in enumerate(steps, start=1):
        if version in applied:
            continue
        for statement in split_statements(ddl(engine, step)):
            tx.execute(statement)
        tx.execute(
            "INSERT INTO toolshell_migrations (component, version, applied_at) VALUES (?, ?, ?)",
            (component, version, time.time()),
        )
