"""Resume by replay: a run's nested calls, recorded as they end, answered from the record when
the run is run again.

A `CallFeed` goes with one shell call (`Pipeline.send`). Each `tools` call that reaches the send
path gets the next ordinal. A live call's outcome (its result as the script sees it, masked, or
the error it ended with) is recorded the moment it is back, before the script reads it: written
through `write` at once (the send path does it from a worker thread: `durable`), or kept until the
run gets a key (`attach`: a call becomes a task only after `after_seconds`).

Run again (its worker died, docs/tasks.md "Resume by replay"), the script starts from the shell's
state before the call, and the k-th call is answered from record k when it names the same server,
tool and input (a SHA-256 of its canonical JSON): no tool runs twice, and an approval the first run
got is not asked again. A call whose record differs stops the script at that call, naming both:
nothing from it on runs. A call with no record (past the last one, or one in flight when the
worker died, whose result never came back) is made live and recorded. A run that ends before
making every call the first run made stops too (`short`): its script took another way.

A record that is there but does not open (changed, moved, sealed with another key) stops the
replay at its call: whether the first run made it cannot be told, so it is never taken for a call
that was still in flight. Each record also counts the records of earlier calls written before it
(`before`): a call with no record whose next recorded call counts more earlier records than the
store holds had one that went missing, and stops the replay there too.

The records of a run are bounded (`MAX_RUN_BYTES`): past it the run keeps no more, and cannot be
resumed (`lost`; `forget` tells the store). A resumed run reads its records one at a time, as
its calls come (`Recorded`), never all at once.
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

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
MAX_RUN_BYTES = 64 << 20
"""The records one run keeps in all (its first run's and a resumed run's); past it the run keeps
no more and cannot be resumed: a taken-over task fails as it would without replay."""
SHORT_NAMED = 3
"""How many of the calls a shorter replay did not make its stop names."""


class Recorded(Protocol):
    """The records of an earlier run, read as the replay needs them (`store.replay.RunRecords`)."""

    size: int
    """The bytes of all its records (they count towards `MAX_RUN_BYTES`)."""

    def get(self, ordinal: int) -> dict[str, Any] | None:
        """Record `ordinal`, or None (none, or one that does not open)."""

    def after(self, ordinal: int) -> list[int]:
        """The ordinals recorded past `ordinal`, in order."""

    def ordinals(self) -> list[int]:
        """Every ordinal that has a record (one that opens or not), in order."""


class InMemory:
    """`Recorded` over records already in memory."""

    def __init__(self, records: Mapping[int, dict[str, Any]]) -> None:
        self.records = dict(records)
        self.size = sum(len(canonical_json(r)) for r in self.records.values())

    def get(self, ordinal: int) -> dict[str, Any] | None:
        return self.records.get(ordinal)

    def after(self, ordinal: int) -> list[int]:
        return sorted(o for o in self.records if o > ordinal)

    def ordinals(self) -> list[int]:
        return sorted(self.records)


@dataclass(frozen=True)
class Replayed:
    """What a recorded call gave: its risk level, and its result or its error."""

    risk: str
    result: types.CallToolResult | None
    error: ToolshellError | None


class CallFeed:
    """The recorder (and, run again, the replayer) of one run's nested calls.

    Args:
        recorded: the records of the earlier run (None: a first run).
        write: keeps a record durably; None until the run has a key (`attach`).
        redact: masks the config's secrets in what is recorded.
        resumed: a run run again.
        forget: called once when the run's records pass `MAX_RUN_BYTES` after it has a key (the
            store marks the run not resumable and drops its records).
        checked: the run passed the before-start check already (default: a resumed run did, in
            its first run; one parked at that check's question did not, and is checked again).
    """

    def __init__(
        self,
        recorded: Recorded | Mapping[int, dict[str, Any]] | None = None,
        write: Write | None = None,
        redact: Redactor | None = None,
        resumed: bool = False,
        forget: Callable[[], None] | None = None,
        checked: bool | None = None,
    ) -> None:
        if recorded is None or isinstance(recorded, Mapping):
            recorded = InMemory(recorded or {})
        self.recorded: Recorded = recorded
        self.resumed = resumed
        self.checked = resumed if checked is None else checked
        """Whether the before-start check is skipped (the first run passed it)."""
        self.redact = redact or Redactor()
        self._write, self._forget = write, forget
        self._kept: list[tuple[int, dict[str, Any]]] = []
        self._kept_bytes = 0
        self._bytes = self.recorded.size
        self.lost = False
        """Records were dropped (past a bound): the run must not be resumed."""
        self.shell_version: int | None = None
        """The stored version of the shell the run started from (`Shells.run` sets it once found):
        what running it again must start from, however far the run got since."""
        self._ordinal = 0
        self.replayed = 0
        """How many calls were answered from the record."""
        self._present = recorded.ordinals() if resumed else []
        """The ordinals the earlier run recorded (what a replay answers, or stops at)."""
        self._written = list(self._present)
        """The ordinals recorded so far, in order (each new record counts those before it)."""
        self._lock = threading.RLock()
        """Records are kept from worker threads once they go to the store (`durable`), and the run
        may get its key (`attach`) meanwhile."""

    @property
    def durable(self) -> bool:
        """Records go to the store (the run has a key): keep them from a worker thread."""
        return self._write is not None and self._write is not discard and not self.lost

    @contextmanager
    def in_memory(self) -> Iterator[bool]:
        """Whether a record may be kept here and now, without waiting: the records stay in memory
        and nobody holds them (`attach` may be writing them from a thread). While True, they are
        held for this record."""
        if not self._lock.acquire(blocking=False):
            yield False
            return
        try:
            yield not self.durable
        finally:
            self._lock.release()

    def attach(self, write: Write, forget: Callable[[], None] | None = None) -> None:
        """The run got its key: the records kept so far are written, and every later one at once. A
        feed that passed its bound before (while its row was being written) forgets the run now."""
        with self._lock:
            for ordinal, record in self._kept:
                write(ordinal, record)
            self._kept.clear()
            self._write, self._forget = write, forget
            if self.lost and forget is not None:
                forget()

    def next_ordinal(self) -> int:
        self._ordinal += 1
        return self._ordinal

    def replay(self, ordinal: int, prepared: PreparedCall) -> Replayed | None:
        """The recorded outcome of call `ordinal`, or None (make it live).

        Raises:
            StopScript: `stopped`, when the record is of another call: the run diverged.
        """
        if not self._present or ordinal > self._present[-1]:
            return None  # past the earlier run's calls: made live
        at = bisect.bisect_left(self._present, ordinal)
        if self._present[at] != ordinal:  # no record: in flight, or stopped before it was sent
            self._check_gap(ordinal, self._present[at], at, prepared)
            return None
        record = self.recorded.get(ordinal)
        if record is None:
            raise self._unverified(ordinal, prepared, f"its record in the store does not open{_WHY_NOT_OPEN}")
        entry = prepared.entry
        if (record.get("server"), record.get("tool"), record.get("input")) != (
            entry.server,
            entry.name,
            _hash(prepared),
        ):
            raise StopScript(
                ToolshellError(ErrorCode.STOPPED, self._diverged(ordinal, prepared, record)), prepared.call
            )
        with self._lock:
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

    def _check_gap(self, ordinal: int, following: int, held: int, prepared: PreparedCall) -> None:
        """Stop at a call without a record when the next record says an earlier one is missing:
        it counts `before` it more records of earlier calls than the store holds (`held`)."""
        record = self.recorded.get(following)
        if record is None:
            raise self._unverified(ordinal, prepared, f"the record of call {following} does not open{_WHY_NOT_OPEN}")
        before = record.get("before")
        if isinstance(before, int) and before > held:
            why = (
                f"call {following}'s record counts {before} recorded calls before it and the store holds {held}: a "
                "record is missing (removed from the store, or not written when the store failed), so this call may "
                "have been made"
            )
            raise self._unverified(ordinal, prepared, why)

    def _unverified(self, ordinal: int, prepared: PreparedCall, why: str) -> StopScript:
        now = f"{prepared.entry.command} {self.redact(preview(prepared.input))}"
        message = (
            f"the run, resumed by replay after its worker stopped, stopped at call {ordinal} `{now}`: {why}. It was "
            "not made again, and nothing from it on ran. Check its effects, then run what is left"
        )
        return StopScript(ToolshellError(ErrorCode.STOPPED, message), prepared.call)

    def short(self) -> StopScript | None:
        """The stop of a resumed run that ended with calls of the first run not made (None: it made
        them all, or stopped already): its script took another way, so the run is not the first one."""
        missed = self._present[bisect.bisect_right(self._present, self._ordinal) :]
        if not missed:
            return None
        named = [self._named(o) for o in missed[:SHORT_NAMED]]
        more = f" and {len(missed) - SHORT_NAMED} more" if len(missed) > SHORT_NAMED else ""
        message = (
            f"the run, resumed by replay after its worker stopped, ended after {_calls(self._ordinal)} where the "
            f"first run made {missed[-1]}: it did not make {', '.join(named)}{more} (the script reads something "
            "that changes between runs, such as the clock or $RANDOM). Run the script again"
        )
        first = self.recorded.get(missed[0]) or {}
        call = {"tool": first.get("command"), "preview": first.get("preview")}  # its input is kept as a hash
        return StopScript(ToolshellError(ErrorCode.STOPPED, message), call)

    def _named(self, ordinal: int) -> str:
        record = self.recorded.get(ordinal) or {}
        return f"call {ordinal} `{record.get('command')} {record.get('preview')}`"

    def _keep(self, ordinal: int, record: dict[str, Any]) -> None:
        with self._lock:
            self._keep_locked(ordinal, record)

    def _keep_locked(self, ordinal: int, record: dict[str, Any]) -> None:
        if self.lost:
            return
        at = bisect.bisect_left(self._written, ordinal)
        record["before"] = at  # the records of earlier calls written so far: one that goes missing shows
        self._written.insert(at, ordinal)
        size = len(canonical_json(record))
        self._bytes += size
        if self._bytes > MAX_RUN_BYTES:
            self._lose()
        elif self._write is not None:
            self._write(ordinal, record)
        else:
            self._kept_bytes += size
            if self._kept_bytes > MAX_KEPT_BYTES:
                self._lose()
            else:
                self._kept.append((ordinal, record))

    def _lose(self) -> None:
        self._kept.clear()
        self.lost = True
        if self._forget is not None:
            self._forget()

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


_WHY_NOT_OPEN = (
    " (changed, or written without the state key ring), so whether the first run made this call cannot be told"
)


def discard(ordinal: int, record: dict[str, Any]) -> None:
    """The writer of a run that cannot be resumed: it keeps nothing."""


def _calls(n: int) -> str:
    return f"{n} call" if n == 1 else f"{n} calls"


def _hash(prepared: PreparedCall) -> str:
    return hashlib.sha256(canonical_json(prepared.input).encode()).hexdigest()


__all__ = ["MAX_RUN_BYTES", "CallFeed", "InMemory", "Recorded", "Replayed", "Write", "discard"]
