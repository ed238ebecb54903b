"""The recorded nested calls of runs that can be resumed by replay (`calls.replay`).

One row per (run, ordinal): the call's server, tool, a hash of its input and what it gave (its
result, or the error it ended with), as JSON sealed with the state key ring (`sealed_json`,
bound to the run and the ordinal): a row written by whoever can write the store, or moved to
another place, does not open, and is not replayed. The owner of the run writes each row the moment the
call's result is back, before the script sees it; a worker that takes the run over reads them one
at a time as its calls come (`RunRecords`: memory holds one record, never the run's all) and
answers the run's first calls from them. A run's rows go with its task (`TaskRows.sweep`).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from toolshell.errors import ToolshellError
from toolshell.store.protocol import StateStore
from toolshell.store.sealed import seal, unseal

logger = logging.getLogger(__name__)

MIGRATIONS = [
    """
    CREATE TABLE run_calls (
        run_key TEXT NOT NULL,
        ordinal BIGINT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (run_key, ordinal)
    );
    """,
]


MAX_RECORD_TEXT = 96 << 20
"""The longest row a replay reads: a run's records are bounded (`calls.replay.MAX_RUN_BYTES`, 64
MiB), sealed and base64 they stay under this; a longer row is none of ours and is not loaded."""
RECORD = "run-call"
RESUME = "task-resume"
"""The purposes (`store.sealed`) of a call's record and of what resuming a task takes."""


def sealed_json(ring: Sequence[bytes], purpose: str, context: str, value: Any) -> str:
    """`value` as JSON, sealed for `purpose` and bound to `context`, as text a row can hold."""
    return base64.b64encode(seal(ring, purpose, context, json.dumps(value, ensure_ascii=False).encode())).decode()


def opened_json(ring: Sequence[bytes], purpose: str, context: str, text: str | None) -> Any:
    """What `sealed_json` sealed; None when it does not open (changed, moved, another key)."""
    if not text:
        return None
    try:
        opened = unseal(ring, purpose, context, base64.b64decode(text, validate=True))
        return None if opened is None else json.loads(opened)
    except ValueError:  # not base64, not JSON: not a record of ours
        return None


class CallRecords:
    """The `run_calls` table of one `StateStore`."""

    def __init__(self, store: StateStore) -> None:
        store.migrate("run_calls", MIGRATIONS)
        self.store = store

    def write(self, ring: Sequence[bytes], run_key: str, ordinal: int, record: dict[str, Any]) -> None:
        """Keep one call's record, sealed (a second write of the same ordinal keeps the first)."""
        sealed = sealed_json(ring, RECORD, f"{run_key}:{ordinal}", record)
        self.store.execute(
            "INSERT INTO run_calls (run_key, ordinal, record) VALUES (?, ?, ?)"
            " ON CONFLICT (run_key, ordinal) DO NOTHING",
            (run_key, ordinal, sealed),
        )

    def writer(self, ring: Sequence[bytes], run_key: str) -> Callable[[int, dict[str, Any]], None]:
        """Writes the run's records (`calls.replay.Write`). A store that fails is logged, not
        raised: the call ran and its script gets its result; only a replay would lack the record."""

        def write(ordinal: int, record: dict[str, Any]) -> None:
            try:
                self.write(ring, run_key, ordinal, record)
            except ToolshellError:
                logger.warning("could not record a nested call for replay", exc_info=True)

        return write

    def read(self, ring: Sequence[bytes], run_key: str) -> RunRecords:
        """The run's records, read one at a time as a replay asks for them."""
        return RunRecords(self.store, ring, run_key)

    def drop(self, run_key: str) -> None:
        self.store.execute("DELETE FROM run_calls WHERE run_key = ?", (run_key,))


class RunRecords:
    """One run's records in the store (`calls.replay.Recorded`): each read when asked for; one that
    does not open is None (never believed: the replay stops at its call)."""

    def __init__(self, store: StateStore, ring: Sequence[bytes], run_key: str) -> None:
        self.store, self.ring, self.run_key = store, ring, run_key
        rows = store.query("SELECT COALESCE(SUM(LENGTH(record)), 0) AS n FROM run_calls WHERE run_key = ?", (run_key,))
        self.size = int(rows[0]["n"])
        """The bytes the run's records take in the store (sealed, base64: a little more than their JSON)."""

    def get(self, ordinal: int) -> dict[str, Any] | None:
        rows = self.store.query(
            "SELECT record FROM run_calls WHERE run_key = ? AND ordinal = ? AND LENGTH(record) <= ?",
            (self.run_key, ordinal, MAX_RECORD_TEXT),
        )
        opened = opened_json(self.ring, RECORD, f"{self.run_key}:{ordinal}", rows[0]["record"]) if rows else None
        return opened if isinstance(opened, dict) else None

    def after(self, ordinal: int) -> list[int]:
        rows = self.store.query(
            "SELECT ordinal FROM run_calls WHERE run_key = ? AND ordinal > ? ORDER BY ordinal", (self.run_key, ordinal)
        )
        return [int(r["ordinal"]) for r in rows]

    def ordinals(self) -> list[int]:
        return self.after(0)


__all__ = [
    "MAX_RECORD_TEXT",
    "MIGRATIONS",
    "RECORD",
    "RESUME",
    "CallRecords",
    "RunRecords",
    "opened_json",
    "sealed_json",
]
