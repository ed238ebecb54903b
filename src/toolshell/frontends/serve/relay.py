"""Parked runs across workers: a retry that lands on another worker is relayed through the store.

A 2026-07-28 `bash` call that asks a question stays parked in the worker that started it
(`upstream.ParkedRun`), so no client needs affinity only if any worker can carry a retry:

- The owner records each round it returns (`parked_runs`: the token, the caller, the owner, the
  `InputRequiredResult` as JSON and a round number, later the result) and keeps a heartbeat there
  while the run lives.
- A retry on another worker appends its answers (`parked_answers`), waits until the row shows the
  round that followed them or the result, and returns that.
- The owner picks answers up and hands them to the run, and records the rounds that follow.
- A stale heartbeat means the owner stopped: the retry gets a stop report at once, never a hang.

Rows go when their result is delivered, and past `KEPT_SECONDS` (no retry can name them then).
The owner polls (`_until_changed`, the one place a store wake-up could replace the poll).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import anyio
import anyio.abc
import mcp_types as types
from pydantic import TypeAdapter

from toolshell.errors import ErrorCode, ToolshellError, error_result
from toolshell.frontends.serve.upstream import ParkedRun, Parking
from toolshell.store.protocol import Row, StateStore

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.1
"""How often an owner looks for answers and a waiting retry for the next round."""
BEAT_SECONDS = 1.0
"""How often an owner renews the heartbeat of its live runs."""
STALE_SECONDS = 6.0
"""A heartbeat a waiting retry sees unchanged this long (six missed beats) means the owner stopped."""
CLOCK_SLACK_SECONDS = 30.0
"""Workers' clocks may differ by this much: a heartbeat older than `STALE_SECONDS` plus this by the
retry's own clock is stale at once (as is one a stopping worker zeroed); a younger one is judged by
watching it not change, which no clock difference fools."""
MARGIN_SECONDS = 30.0
"""A retry waits `[approval] wait_seconds` plus this for the next round: a question is withdrawn
after `wait_seconds`, so by then the run has asked again or ended."""
KEPT_SECONDS = 900.0
"""Rows older than this go: past the requestState TTL (600 s), no retry can name them."""
SWEEP_SECONDS = 60.0

MIGRATIONS = [
    """
    CREATE TABLE parked_runs (
        token TEXT PRIMARY KEY,
        caller TEXT,
        worker TEXT NOT NULL,
        round BIGINT NOT NULL,
        answered BIGINT NOT NULL DEFAULT 0,
        round_json TEXT,
        result_json TEXT,
        beat DOUBLE PRECISION NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX parked_runs_worker ON parked_runs (worker);
    CREATE TABLE parked_answers (
        id {serial},
        token TEXT NOT NULL,
        worker TEXT NOT NULL,
        responses TEXT NOT NULL,
        added_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX parked_answers_worker ON parked_answers (worker, id);
    """,
]

_ROUND = (
    "INSERT INTO parked_runs (token, caller, worker, round, answered, round_json, beat, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (token) DO UPDATE SET"
    " round = excluded.round, answered = excluded.answered, round_json = excluded.round_json,"
    " beat = excluded.beat WHERE parked_runs.result_json IS NULL"
)
_RESPONSES: TypeAdapter[dict[str, types.InputResponse]] = TypeAdapter(dict[str, types.InputResponse])
GONE = "this answer is for a bash call that is no longer waiting (it ended or timed out); run the script again"


@dataclass(eq=False)
class _Owned:
    run: ParkedRun
    answered: int = 0
    """The last answer row handed to the run."""
    published: tuple[int, int] = (-1, -1)
    """(round, answered) of what the row shows."""
    watching: bool = False
    """Whether a task waits to record the round that follows the answers taken."""


_Change = tuple[str, _Owned, types.CallToolResult | types.InputRequiredResult, tuple[int, int]]
"""A run whose row is behind: its token, the run, where it is, and (round, answered) it shows then."""


async def _until_changed(seconds: float) -> None:
    """Wait before looking at the store again (a store wake-up could end it early)."""
    await anyio.sleep(seconds)


class Relay:
    """This worker's side of the relay: owner of its parked runs, carrier of others' retries.

    Args:
        store: the store every worker shares.
        tg: where the owner's loop runs (the serving lifespan's).
        wait_seconds: `[approval] wait_seconds`, the bound of a question's wait.
    """

    def __init__(self, store: StateStore, tg: anyio.abc.TaskGroup, wait_seconds: float) -> None:
        self.store = store  # its tables made by `prepare` (before serving: the loop never waits on it)
        self.worker = uuid.uuid4().hex
        self.wait_seconds = wait_seconds
        self._owned: dict[str, _Owned] = {}
        """The live runs whose rows this worker keeps up to date."""
        self._rows: dict[str, float] = {}
        """The tokens this worker wrote a row for, and when: the rows to remove on a local delivery."""
        self._wake = anyio.Event()
        self._writing = anyio.Lock()
        self.stopping = False
        """Set by `stop`: the owner writes nothing more."""
        self._swept = 0.0
        self._tg = tg
        tg.start_soon(self._serve)

    # The owner's side. Its store steps run in worker threads (never on the event loop), one at a
    # time (`_writing`): a row is never overwritten by an older round that was slower to land.

    async def publish(self, run: ParkedRun, caller: str | None, outcome: types.InputRequiredResult) -> None:
        """Record the round this worker returns, so a retry on any worker finds the run (if the
        store fails, a retry here still does)."""
        if self.stopping:
            return
        owned = self._owned.get(run.token)
        if owned is None:
            owned = self._owned[run.token] = _Owned(run)
            self._wake.set()
        self._rows.setdefault(run.token, time.time())
        try:
            with anyio.CancelScope(shield=True):  # the client gets this round: its row must be there
                async with self._writing:
                    if self._owned.get(run.token) is not owned:  # delivered, or its result recorded, meanwhile
                        return
                    now, shown = time.time(), (run.round, owned.answered)
                    values = (run.token, caller, self.worker, *shown, _dumped(outcome), now, now)
                    await anyio.to_thread.run_sync(self.store.execute, _ROUND, values)
                    owned.published = shown
        except ToolshellError as err:
            logger.warning("a parked run's round is not in the store, so only this worker can take its retry: %s", err)

    async def delivered(self, run: ParkedRun) -> None:
        """The result went to the client from here: the run's rows go (if it had any)."""
        self._owned.pop(run.token, None)
        if self._rows.pop(run.token, None) is not None:
            try:
                with anyio.CancelScope(shield=True):  # else nothing removes them but the sweep
                    async with self._writing:
                        await anyio.to_thread.run_sync(self._forget, run.token)
            except ToolshellError as err:  # the rows go with the sweep instead
                logger.warning("could not remove a delivered parked run from the store: %s", err)

    async def stop(self) -> None:
        """This worker stops serving: the results of runs that finished are recorded (a retry on
        another worker delivers them), and retries of runs still live get the stop report at once.
        After every write of the owner's already on its way, and before any other: none revives
        a heartbeat this zeroed."""
        self.stopping = True
        async with self._writing:
            if self._owned:
                await anyio.to_thread.run_sync(self._write_stop, self._changes())
                self._owned.clear()

    def _write_stop(self, changes: list[_Change]) -> None:
        self._write_changes(changes)
        self.store.execute("UPDATE parked_runs SET beat = 0 WHERE worker = ? AND result_json IS NULL", (self.worker,))

    async def _serve(self) -> None:
        beat = 0.0
        while True:
            if not self._owned:
                await self._wake.wait()
                self._wake = anyio.Event()
                continue
            try:
                await self._take_answers()
                await self._publish_changes()
                if time.monotonic() - beat >= BEAT_SECONDS:
                    beat = time.monotonic()
                    await self._beat()
            except Exception:  # the store failed: the runs go on here, and this retries at the next poll
                logger.warning("could not relay parked runs through the store", exc_info=True)
            await _until_changed(POLL_SECONDS)

    async def _take_answers(self) -> None:
        rows = await anyio.to_thread.run_sync(
            self.store.query,
            "SELECT id, token, responses FROM parked_answers WHERE worker = ? ORDER BY id",
            (self.worker,),
        )
        if not rows:
            return
        answered: dict[str, _Owned] = {}
        for row in rows:
            owned = self._owned.get(row["token"])
            if owned is not None:
                owned.run.answer(_responses(row["responses"]))
                owned.answered = max(owned.answered, int(row["id"]))
                answered[row["token"]] = owned
        # Exactly the rows read: one another worker commits meanwhile waits for the next poll.
        await anyio.to_thread.run_sync(
            self.store.executemany, "DELETE FROM parked_answers WHERE id = ?", [(row["id"],) for row in rows]
        )
        for owned in answered.values():
            if not owned.watching:
                owned.watching = True
                self._tg.start_soon(self._publish_next, owned)

    async def _publish_next(self, owned: _Owned) -> None:
        """Record the round that follows an answer as soon as the run gets there (not a poll later)."""
        with anyio.move_on_after(self.wait_seconds + MARGIN_SECONDS):
            await owned.run.next_round()
        owned.watching = False
        try:
            await self._publish_changes()
        except Exception:  # the store failed: the loop records it at its next poll
            logger.warning("could not relay a parked run's round through the store", exc_info=True)

    async def _publish_changes(self) -> None:
        """Record what changed since the row was written: a new round, answers taken, the result."""
        async with self._writing:
            if self.stopping:
                return
            changes = self._changes()
            if changes:
                await anyio.to_thread.run_sync(self._write_changes, changes)
            for token, owned, outcome, shown in changes:
                if isinstance(outcome, types.CallToolResult):
                    self._owned.pop(token, None)  # the row holds the result now, for the retry that takes it
                else:
                    owned.published = shown

    def _changes(self) -> list[_Change]:
        """The runs whose row does not show where they are: a new round, answers taken, the result."""
        changes = []
        for token, owned in list(self._owned.items()):
            outcome = owned.run.current()
            shown = (owned.run.round, owned.answered)
            if outcome is not None and shown != owned.published:  # else running, or the row shows it
                changes.append((token, owned, outcome, shown))
        return changes

    def _write_changes(self, changes: list[_Change]) -> None:
        now = time.time()
        with self.store.transaction() as tx:
            for token, _, outcome, (round_, answered) in changes:
                column = "result_json" if isinstance(outcome, types.CallToolResult) else "round_json"
                tx.execute(
                    f"UPDATE parked_runs SET {column} = ?, round = ?, answered = ?, beat = ? WHERE token = ?",
                    (_dumped(outcome), round_, answered, now, token),
                )

    async def _beat(self) -> None:
        async with self._writing:
            if self.stopping:
                return
            now = time.time()
            sweep = now - self._swept >= SWEEP_SECONDS
            if sweep:
                self._swept = now
                self._rows = {token: at for token, at in self._rows.items() if at > now - KEPT_SECONDS}
            await anyio.to_thread.run_sync(self._write_beat, now, sweep)

    def _write_beat(self, now: float, sweep: bool) -> None:
        self.store.execute(
            "UPDATE parked_runs SET beat = ? WHERE worker = ? AND result_json IS NULL", (now, self.worker)
        )
        if sweep:
            self.store.execute("DELETE FROM parked_runs WHERE beat < ? AND created_at < ?", (now - KEPT_SECONDS,) * 2)
            self.store.execute("DELETE FROM parked_answers WHERE added_at < ?", (now - KEPT_SECONDS,))

    # The side of a retry whose run is elsewhere.

    async def retry(
        self, token: str, caller: str | None, responses: dict[str, Any] | None
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Hand the answers to the run's owner and return what follows them: the next round, the
        result, or an error that says what to do (the run is gone, or its worker stopped)."""
        try:
            return await self._relayed(token, caller, responses)
        except ToolshellError as err:  # the store failed: say so, as one error
            return error_result(err)

    async def _relayed(
        self, token: str, caller: str | None, responses: dict[str, Any] | None
    ) -> types.CallToolResult | types.InputRequiredResult:
        row = await anyio.to_thread.run_sync(self._row, token)
        if row is None or row["caller"] != caller:
            return error_result(ToolshellError(ErrorCode.INVALID_INPUT, GONE))
        if row["result_json"] is not None:
            return await self._deliver(token, row)
        if _stale(float(row["beat"])):
            return _stopped(row)
        answers = _RESPONSES.dump_json(responses or {}, by_alias=True, exclude_none=True).decode()
        [added] = await anyio.to_thread.run_sync(
            self.store.query,
            "INSERT INTO parked_answers (token, worker, responses, added_at) VALUES (?, ?, ?, ?) RETURNING id",
            (token, row["worker"], answers, time.time()),
        )
        answer = int(added["id"])
        seen, seen_at = float(row["beat"]), time.monotonic()
        bound = self.wait_seconds + MARGIN_SECONDS
        with anyio.move_on_after(bound):
            while True:
                await _until_changed(POLL_SECONDS)
                row = await anyio.to_thread.run_sync(self._row, token, answer)
                if row is None:
                    return error_result(ToolshellError(ErrorCode.INVALID_INPUT, GONE))
                if row["result_json"] is not None:
                    return await self._deliver(token, row)
                taken = not row["waiting"] and int(row["answered"]) >= answer  # the round that follows it
                if taken and row["round_json"] is not None:
                    return types.InputRequiredResult.model_validate_json(row["round_json"])
                if float(row["beat"]) != seen:
                    seen, seen_at = float(row["beat"]), time.monotonic()
                elif time.monotonic() - seen_at > STALE_SECONDS or _stale(seen):
                    return _stopped(row)
        late = (
            f"the worker running this script sent no next round in {bound:g} s; it may still be running. "
            "Run the script again if its result does not show up in `toolshell timeline`"
        )
        return error_result(ToolshellError(ErrorCode.UNAVAILABLE, late, retryable=True))

    def _row(self, token: str, answer: int = 0) -> Row | None:
        """The run's row, and whether the answer row `answer` waits for the owner still."""
        rows = self.store.query(
            "SELECT caller, worker, answered, round_json, result_json, beat,"
            " (SELECT COUNT(*) FROM parked_answers WHERE id = ?) AS waiting FROM parked_runs WHERE token = ?",
            (answer, token),
        )
        return rows[0] if rows else None

    async def _deliver(self, token: str, row: Row) -> types.CallToolResult:
        await anyio.to_thread.run_sync(self._forget, token)
        return types.CallToolResult.model_validate_json(row["result_json"])

    def _forget(self, token: str) -> None:
        with self.store.transaction() as tx:
            tx.execute("DELETE FROM parked_runs WHERE token = ?", (token,))
            tx.execute("DELETE FROM parked_answers WHERE token = ?", (token,))


_relays: WeakKeyDictionary[Parking, Relay] = WeakKeyDictionary()


def prepare(store: StateStore) -> None:
    """Make (or bring up to date) the relay's tables, as the server is built."""
    store.migrate("parked_runs", MIGRATIONS)


def relay_for(parking: Parking, store: StateStore, wait_seconds: float) -> Relay:
    """The relay of one serving lifespan (made on its first parked call)."""
    relay = _relays.get(parking)
    if relay is None:
        relay = _relays[parking] = Relay(store, parking.tg, wait_seconds)
    return relay


async def stop_relay(parking: Parking) -> None:
    """The serving lifespan ends: retries of its live runs get the stop report at once."""
    relay = _relays.pop(parking, None)
    if relay is not None:
        try:
            with anyio.CancelScope(shield=True):
                await relay.stop()
        except Exception:  # the store went first: the heartbeat goes stale instead
            logger.warning("could not mark parked runs stopped", exc_info=True)


def _stale(beat: float) -> bool:
    return time.time() - beat > STALE_SECONDS + CLOCK_SLACK_SECONDS


def _stopped(row: Row) -> types.CallToolResult:
    """The stop report of a run whose worker stopped while it waited for an answer."""
    asked = ""
    if row["round_json"] is not None:
        requests = json.loads(row["round_json"]).get("inputRequests") or {}
        messages = [str(r.get("params", {}).get("message", "")) for r in requests.values() if isinstance(r, dict)]
        if messages:
            asked = f" It was asking: {messages[0].splitlines()[0][:300].rstrip('.')}."
    message = (
        "the worker running this script stopped while the script waited for an answer, so nothing after "
        f"that point ran and this answer was not used.{asked} What it asked stays recorded: an approval it "
        "waited for is still a pending request; list and answer it with `toolshell approvals` (same store). "
        "Run the script again"
    )
    return error_result(ToolshellError(ErrorCode.STOPPED, message, retryable=True))


def _dumped(outcome: types.InputRequiredResult | types.CallToolResult) -> str:
    return outcome.model_dump_json(by_alias=True, exclude_none=True)


def _responses(text: str) -> dict[str, Any]:
    try:
        return _RESPONSES.validate_json(text)
    except ValueError:  # a row another version wrote: no answer rather than a crash
        logger.warning("ignored an unreadable answer row for a parked run")
        return {}


__all__ = ["GONE", "Relay", "prepare", "relay_for", "stop_relay"]
