"""Resume by replay: a run's nested calls, recorded as they end, answered from the record when
the run is run again.

A `CallFeed` goes with one shell call (`Pipeline.send`). Each `tools` call that reaches the send
path gets the next ordinal. A live call's outcome (its result as the script sees it, masked, or
the error it ended with) is recorded the moment it is back, before the script reads it: written
through `write` at once, or kept until the run gets a key (`attach`: a call becomes a task only
after `after_seconds`).

Run again (its worker died, docs/tasks.md "Resume by replay"), the script starts from the shell's
state before the call, and the k-th call is answered from record k when it names the same server,
tool and input (a SHA-256 of its canonical JSON): no tool runs twice, and an approval the first run
got is not asked again. A call whose record differs stops the script at that call, naming both:
nothing from it on runs. A call with no record (past the last one, or one in flight when the
worker died, whose result never came back) is made live and recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from toolshell.calls.prepare import PreparedCall
from toolshell.errors import ErrorCode, StopScript, ToolshellError
from toolshell.policy.canonical import canonical_json
from toolshell.redact import Redactor, redact_json
from toolshell.timeline.events import preview

Write = Callable[[int, dict[str, Any]], None]
"""Keeps one record durably (ordinal, record); returns once it is kept."""
MAX_KEPT_BYTES = 16 << 20
"""The records a run keeps in memory before it has a key; past it they are dropped and the run
cannot be resumed (`lost`): a call that never becomes a task holds no second copy of big results."""


@dataclass(frozen=True)
class Replayed:
    """What a recorded call gave: its risk level, and its result or its error."""

    risk: str
    result: types.CallToolResult | None
    error: ToolshellError | None


class CallFeed:
    """The recorder (and, run again, the replayer) of one run's nested calls.

    Args:
        recorded: the records of the earlier run, by ordinal (empty: a first run).
        write: keeps a record durably; None until the run has a key (`attach`).
        redact: masks the config's secrets in what is recorded.
        resumed: a run run again (its first run passed the before-start check: it is not held again).
    """

    def __init__(
        self,
        recorded: Mapping[int, dict[str, Any]] | None = None,
        write: Write | None = None,
        redact: Redactor | None = None,
        resumed: bool = False,
    ) -> None:
        self.recorded = dict(recorded or {})
        self.resumed = resumed
        self.redact = redact or Redactor()
        self._write = write
        self._kept: list[tuple[int, dict[str, Any]]] = []
        self._kept_bytes = 0
        self.lost = False
        """Records were dropped before the run got a key: it must not be resumed."""
        self._ordinal = 0
        self.replayed = 0
        """How many calls were answered from the record."""

    def attach(self, write: Write) -> None:
        """The run got its key: the records kept so far are written, and every later one at once."""
        for ordinal, record in self._kept:
            write(ordinal, record)
        self._kept.clear()
        self._write = write

    def next_ordinal(self) -> int:
        self._ordinal += 1
        return self._ordinal

    def replay(self, ordinal: int, prepared: PreparedCall) -> Replayed | None:
        """The recorded outcome of call `ordinal`, or None (make it live).

        Raises:
            StopScript: `stopped`, when the record is of another call: the run diverged.
        """
        record = self.recorded.get(ordinal)
        if record is None:
            return None
        entry = prepared.entry
        if (record.get("server"), record.get("tool"), record.get("input")) != (
            entry.server,
            entry.name,
            _hash(prepared),
        ):
            raise StopScript(
                ToolshellError(ErrorCode.STOPPED, self._diverged(ordinal, prepared, record)), prepared.call
            )
        self.replayed += 1
        error = record.get("error")
        if isinstance(error, dict):
            failed = ToolshellError(ErrorCode(error["code"]), str(error["message"]), retryable=bool(error["retryable"]))
            return Replayed(str(record["risk"]), None, failed)
        return Replayed(str(record["risk"]), types.CallToolResult.model_validate(record["result"]), None)

    def record(self, ordinal: int, prepared: PreparedCall, risk: str, result: Any) -> None:
        """Keep a live call's result (masked: the record holds what the script sees)."""
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        self._keep(ordinal, {**self._call(prepared), "risk": risk, "result": redact_json(dumped, self.redact)})

    def record_error(self, ordinal: int, prepared: PreparedCall, risk: str, err: ToolshellError) -> None:
        """Keep a live call that was sent and failed (a timeout may still have changed something)."""
        error = {"code": str(err.code), "message": self.redact(err.message), "retryable": err.retryable}
        self._keep(ordinal, {**self._call(prepared), "risk": risk, "error": error})

    def _keep(self, ordinal: int, record: dict[str, Any]) -> None:
        if self._write is not None:
            self._write(ordinal, record)
            return
        if self.lost:
            return
        self._kept_bytes += len(canonical_json(record))
        if self._kept_bytes > MAX_KEPT_BYTES:
            self._kept.clear()
            self.lost = True
        else:
            self._kept.append((ordinal, record))

    def _call(self, prepared: PreparedCall) -> dict[str, Any]:
        entry = prepared.entry
        shown = self.redact(preview(prepared.input))
        return {
            "server": entry.server,
            "tool": entry.name,
            "input": _hash(prepared),
            "command": entry.command,
            "preview": shown,
        }

    def _diverged(self, ordinal: int, prepared: PreparedCall, record: dict[str, Any]) -> str:
        now = f"{prepared.entry.command} {self.redact(preview(prepared.input))}"
        then = f"{record.get('command')} {record.get('preview')}"
        return (
            f"the run, resumed by replay after its worker stopped, diverged at call {ordinal}: it called `{now}` "
            f"where the first run called `{then}` (the script reads something that changes between runs, such as "
            "the clock or $RANDOM); nothing from this call on ran. Run the script again"
        )


def discard(ordinal: int, record: dict[str, Any]) -> None:
    """The writer of a run that cannot be resumed: it keeps nothing."""


def _hash(prepared: PreparedCall) -> str:
    return hashlib.sha256(canonical_json(prepared.input).encode()).hexdigest()


__all__ = ["CallFeed", "Replayed", "Write", "discard"]
