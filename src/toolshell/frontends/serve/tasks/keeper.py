"""The owner's side of tasks: the `bash` calls this worker runs as tasks, kept in step with the store.

`TaskKeeper.call` starts the script in the serving lifespan's task group and waits
`[serve.tasks] after_seconds` for it. A script done by then is answered as a plain
`CallToolResult`; one still running (or asking a person) becomes a task: its row is committed
(`store.tasks`) and only then is the `CreateTaskResult` returned. From then on the keeper's loop,
woken by the run itself and by store notifications from any worker:

- writes what changed (a question opened, answered or withdrawn; the result; a cancel taking
  effect) to the row, so `tasks/get` on any worker sees it;
- hands the answers `tasks/update` recorded (on any worker) to the run's open questions;
- cancels the script when `tasks/cancel` asked (the shell call stops where it is, as on a closed
  connection: nothing after that point runs);
- renews the heartbeat of its open tasks every `[serve] heartbeat_seconds` and sweeps rows past
  their keeping.

Each nested call of a task's script is recorded as it ends (`calls.replay`), so a task whose owner
went silent for three heartbeats is taken over by the worker that notices (`TaskKeeper.resume`):
it runs the script again from the shell's state before the call, answered from the records.
A task that waited `[approval] park_after_seconds` for a person is parked the same way: its run
stops and this worker forgets it; the answer, on any worker, resumes it there by replay, the
question the replay asks again answered with it.
"""

from __future__ import annotations

import functools
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import anyio
import anyio.abc
import mcp_types as types

from toolshell.calls.asking import BEFORE_START, asked_for
from toolshell.calls.replay import CallFeed, discard
from toolshell.config.serve import ServeTasksConfig
from toolshell.errors import ErrorCode, ToolshellError, error_result
from toolshell.frontends.serve.tasks.wire import created
from toolshell.frontends.serve.upstream import Asker, ParkedRun, Parking
from toolshell.redact import Redactor
from toolshell.store.replay import RESUME, sealed_json
from toolshell.store.tasks import CHANNEL, TERMINAL, TaskRow, TaskRows, id_hash

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 60.0
CANCELLED = "cancelled by tasks/cancel: the script stopped where it was; what it had done stays done"
WAITING = "waiting for a person's answer to inputRequests (send it with tasks/update)"
STOPPED = "the worker running this task stopped before the script ended; run the script again"
NOT_REPLAYED = "the worker running this task stopped before the script ended, and it is not run again by replay: {why}"

RunScript = Callable[[Asker | None, CallFeed], Awaitable[types.CallToolResult]]
"""Runs the `bash` call's script, asking through the asker given (None: nobody can be asked), its
nested calls going through the feed (recorded; a resumed run's answered from the record)."""


Answered = list[tuple[int, str, types.ElicitResult]]
"""The answers a parked task got: the place of the question each answers (the ordinal of the call
it was about, `calls.asking`), its message, and the answer."""
_PLACE = re.compile(r"(?:^|\.)c(\d+)\.q\d+$")


class TaskRun(ParkedRun):
    """A parked run whose questions and result wake the keeper at once.

    A question's key names the call it is about (`r1.c3.q7`: attempt 1, call 3), so a run resumed
    from parking gets the answers its questions were given (`answered`): a question the replay asks
    again about the same call with the same message takes its answer, without asking the person
    twice; any other question is asked anew."""

    def __init__(self, wake: Callable[[], None], attempt: int = 0, answered: Answered | None = None) -> None:
        super().__init__()
        self._wake = wake
        self.key_prefix = f"r{attempt}." if attempt else ""
        self._answered = list(answered or ())

    def question_prefix(self) -> str:
        place = asked_for()
        return self.key_prefix + ("" if place is None else f"c{place}.")

    async def ask(self, params: types.ElicitRequestParams) -> types.ElicitResult | None:
        place, message = asked_for(), getattr(params, "message", None)
        for i, (at, said, answer) in enumerate(self._answered):
            if place is not None and (at, said) == (place, message):
                del self._answered[i]
                return answer
        self._wake()  # the keeper looks once this task waits, when the question is open
        return await super().ask(params)

    def finish(self, result: types.CallToolResult) -> None:
        super().finish(result)
        self._wake()


@dataclass(eq=False)
class _Owned:
    run: TaskRun
    scope: anyio.CancelScope
    feed: CallFeed
    key: str = ""
    resumable: bool = False
    not_replayed: str | None = None
    """Why the run is not resumed by replay (its shell reaches the host), when that is why."""
    waiting_since: float | None = None
    cancel_asked: bool = False
    cancelled: bool = False
    failed: dict[str, Any] | None = None
    published: dict[str, Any] | None = None


class TaskKeeper:
    """This worker's tasks, in one serving lifespan.

    Args:
        rows: the task tables of the store every worker shares.
        tg: the lifespan's task group (the scripts outlive their requests there).
        worker: this worker's id (the rows it owns).
        config: `[serve.tasks]`.
        heartbeat_seconds: `[serve] heartbeat_seconds`.
        ring: the state key ring (the records and what resuming takes are sealed with it).
        redact: masks the config's secrets in the records.
        park_after: `[approval] park_after_seconds` (0: never parked).
    """

    def __init__(
        self,
        rows: TaskRows,
        tg: anyio.abc.TaskGroup,
        worker: str,
        config: ServeTasksConfig,
        heartbeat_seconds: float,
        ring: list[bytes],
        redact: Redactor | None = None,
        park_after: float = 0.0,
    ) -> None:
        self.rows, self.tg, self.worker, self.config = rows, tg, worker, config
        self.heartbeat_seconds = heartbeat_seconds
        self.ring, self.redact, self.park_after = ring, redact, park_after
        self._owned: dict[str, _Owned] = {}
        self._wake = anyio.Event()
        tg.start_soon(self._serve)
        tg.start_soon(self._listen)

    async def call(
        self, caller: str | None, run_script: RunScript, asks: bool, resume: dict[str, Any] | None = None
    ) -> types.CallToolResult | dict[str, Any]:
        """The call's result if it ends within `after_seconds`, else a committed task's `CreateTaskResult`.

        `resume` is what running it again takes (script, shell handle and version, caller, asks),
        kept sealed on the row; None: the task cannot be resumed (it fails with its worker)."""
        owned = _Owned(TaskRun(self._poke), anyio.CancelScope(), CallFeed(redact=self.redact))
        self.tg.start_soon(self._execute, owned, run_script, asks)
        try:
            with anyio.move_on_after(self.config.after_seconds):
                await owned.run.next_round()
        except anyio.get_cancelled_exc_class():  # the request went away before it became a task
            owned.scope.cancel()
            raise
        outcome = owned.run.current()
        if isinstance(outcome, types.CallToolResult):
            return outcome
        task_id = secrets.token_urlsafe(32)  # 256 bits: the capability a client polls with
        owned.key = id_hash(task_id)
        state = _state(owned)
        why = None if resume is None else resume.get("not_replayed")
        resumable = resume is not None and why is None and not owned.feed.lost
        # A run not replayed keeps only why, sealed: the worker that finds it silent says so.
        kept = resume if resumable or why is not None else None
        sealed = None if kept is None else sealed_json(self.ring, RESUME, owned.key, kept)
        key, keep = owned.key, self.config.keep_seconds

        def record() -> TaskRow | None:
            self.rows.create(key, caller, self.worker, keep, sealed, **state)
            # The calls made so far are recorded now (a task that cannot be resumed records nothing).
            if resumable:
                owned.feed.attach(self.rows.calls.writer(self.ring, key), self._forgetter(owned))
            else:
                owned.feed.attach(discard)
            return self.rows.get(key)

        # The store from a worker thread, shielded: a row written is this worker's to keep, whatever the caller does.
        with anyio.CancelScope(shield=True):
            try:
                row = await anyio.to_thread.run_sync(record)
            except ToolshellError as err:  # no row, no task: the script must not run on unseen
                owned.scope.cancel()
                return error_result(
                    ToolshellError(err.code, f"could not record the task, so the script stopped: {err}")
                )
            resumable = resumable and not owned.feed.lost  # past its bound while the row was written: forgotten
            owned.published, owned.resumable, owned.not_replayed = state, resumable, why
            self._owned[owned.key] = owned
            self._poke()  # the run may have ended or asked while the row was written: unseen by a wake then
        assert row is not None  # committed just above
        return created(task_id, row, self.config.poll_milliseconds)

    def replay_feed(self, key: str, answered: Answered) -> CallFeed:
        """(From a worker thread: it reads the store) the feed of a task run again by replay."""
        checked = all(at != BEFORE_START for at, _, _ in answered)  # parked at the before-start check: again
        return CallFeed(self.rows.calls.read(self.ring, key), redact=self.redact, resumed=True, checked=checked)

    def resume(
        self, key: str, attempt: int, run_script: RunScript, asks: bool, feed: CallFeed, answered: Answered
    ) -> None:
        """Run a task taken over (this worker won `TaskRows.claim` or `claim_parked`) again: its calls
        recorded by the first run are answered from their records (`feed`, `replay_feed`), its
        questions from `answered`."""
        run = TaskRun(self._poke, attempt, answered)
        owned = _Owned(run, anyio.CancelScope(), feed, key=key, resumable=True)
        feed.attach(self.rows.calls.writer(self.ring, key), self._forgetter(owned))
        owned.published = {"status": "working"}
        earlier = self._owned.pop(key, None)
        if earlier is not None:  # this worker's own run, judged dead (its beats did not reach the store)
            earlier.scope.cancel()
        self._owned[key] = owned
        self.tg.start_soon(self._execute, owned, run_script, asks)
        self._poke()

    async def _execute(self, owned: _Owned, run_script: RunScript, asks: bool) -> None:
        with owned.scope:
            try:
                result = await run_script(owned.run if asks else None, owned.feed)
            except Exception as exc:  # the boundary of a background run: the task fails with it
                logger.warning("a task's bash call failed", exc_info=True)
                owned.failed = {"code": types.INTERNAL_ERROR, "message": f"bash failed: {exc}"}
                result = error_result(ToolshellError(ErrorCode.UNAVAILABLE, f"bash failed: {exc}"))
            owned.run.finish(result)
        owned.cancelled = owned.scope.cancelled_caught and owned.cancel_asked
        self._poke()

    def _forgetter(self, owned: _Owned) -> Callable[[], None]:
        """What a run whose records passed their bound does: it goes on, but cannot be resumed."""

        def forget() -> None:
            owned.resumable = False
            try:
                self.rows.forget(owned.key)
            except ToolshellError:  # the store failed: a takeover may replay the records up to the bound
                logger.warning("could not mark a task not resumable", exc_info=True)

        return forget

    def _poke(self) -> None:
        self._wake.set()

    async def _serve(self) -> None:
        beat = swept = 0.0
        while True:
            with anyio.move_on_after(self.heartbeat_seconds):
                await self._wake.wait()
            self._wake = anyio.Event()
            try:
                await self._sync()
                now = time.monotonic()
                # the store alone, so in a worker thread: a store that hangs holds it, not the event loop
                if self._owned and now - beat >= self.heartbeat_seconds:
                    beat = now
                    await anyio.to_thread.run_sync(self.rows.beat, self.worker, list(self._owned))
                if now - swept >= SWEEP_SECONDS:
                    swept = now
                    keep = (time.time(), 3 * self.heartbeat_seconds, self.config.keep_seconds)
                    await anyio.to_thread.run_sync(self.rows.sweep, *keep)
            except Exception:  # the store failed: the runs go on, and this retries at the next wake
                logger.warning("could not keep tasks in step with the store", exc_info=True)

    async def _listen(self) -> None:
        """Wake the loop when another worker wrote to one of this worker's tasks (an answer, a cancel)."""
        try:
            with self.rows.store.subscribe(CHANNEL) as subscription:
                while True:
                    wake = await subscription.wait()
                    if wake.missed or any(p in self._owned for p in wake.payloads):
                        self._poke()
        except ToolshellError:  # no wake-ups: the loop still looks every heartbeat
            logger.warning("task wake-ups are off; tasks are kept in step every heartbeat", exc_info=True)

    async def _sync(self) -> None:
        """Each owned task in step with its row: a takeover or a cancel acted on, the answers given
        to it, its state published, a run that waited too long for a person parked. The store is
        asked from a worker thread: a store that hangs holds that thread, not the event loop."""
        for key, owned in list(self._owned.items()):
            row, answers = await anyio.to_thread.run_sync(self._read, key)
            if (now := self._owned.get(key)) is not owned:  # resumed here while the store was read
                owned.scope.cancel()  # the old run stops (the resume stopped it already)
                if now is not None and answers:
                    now.run.answer(_elicit_results(answers))
                continue
            if row is None or row.finished or row.worker != self.worker:
                owned.scope.cancel()  # swept, or ended or taken over by another worker (it judged this one dead)
                self._drop(key, owned)
                continue
            if row.cancel_requested and not owned.cancel_asked:
                owned.cancel_asked = True
                owned.scope.cancel()
            if answers:
                owned.run.answer(_elicit_results(answers))
            state = _state(owned)
            publish, park = functools.partial(self.rows.set_state, key, self.worker, **state), self.rows.park
            if state != owned.published and await anyio.to_thread.run_sync(publish):
                owned.published = state
            if (now := self._owned.get(key)) is not owned:  # resumed while published: the new run publishes again
                if now is not None:
                    now.published = None
                continue
            if state["status"] in TERMINAL:
                self._drop(key, owned)
            elif self._parks(owned, state["status"]) and await anyio.to_thread.run_sync(park, key, self.worker):
                owned.scope.cancel()  # its question stays on the row; the answer resumes it by replay
                self._drop(key, owned)

    def _drop(self, key: str, owned: _Owned) -> None:
        """Stop keeping `owned`, unless a resumed run took its key while the store was asked."""
        if self._owned.get(key) is owned:
            del self._owned[key]

    def _read(self, key: str) -> tuple[TaskRow | None, dict[str, Any]]:
        """The task's row, and the answers given to it (taken) while it is still this worker's to run."""
        row = self.rows.get(key)
        if row is None or row.finished or row.worker != self.worker:
            return row, {}
        return row, self.rows.take_answers(key)

    def _parks(self, owned: _Owned, status: str) -> bool:
        """Whether the run has waited `park_after` for a person (and can be resumed)."""
        if status != "input_required" or owned.published is None or owned.published["status"] != status:
            owned.waiting_since = None
            return False
        now = time.monotonic()
        if owned.waiting_since is None:
            owned.waiting_since = now
        return owned.resumable and self.park_after > 0 and now - owned.waiting_since >= self.park_after

    def stopped(self) -> None:
        """The serving lifespan ends: this worker's open tasks are handed to the store (a question
        waiting for a person parked, the others left for the next worker that reads them to run
        again by replay); one that cannot be resumed fails, saying why. The runs here stop next."""
        silent = time.time() - 3 * self.heartbeat_seconds - 1
        for key, owned in list(self._owned.items()):
            if owned.resumable and self.rows.hand_over(key, self.worker, silent):
                continue
            message = STOPPED if owned.not_replayed is None else NOT_REPLAYED.format(why=owned.not_replayed)
            error = {"code": types.INTERNAL_ERROR, "message": message}
            self.rows.set_state(key, self.worker, status="failed", status_message=message, error=error)
        self._owned.clear()


def _state(owned: _Owned) -> dict[str, Any]:
    """The row's status and payload for where the run is now."""
    if owned.cancelled:
        return {"status": "cancelled", "status_message": CANCELLED}
    if owned.failed is not None:
        return {"status": "failed", "status_message": owned.failed["message"], "error": owned.failed}
    outcome = owned.run.current()
    if isinstance(outcome, types.CallToolResult):
        return {"status": "completed", "result": outcome.model_dump(by_alias=True, mode="json", exclude_none=True)}
    if isinstance(outcome, types.InputRequiredResult):
        requests = {
            k: v.model_dump(by_alias=True, mode="json", exclude_none=True)
            for k, v in (outcome.input_requests or {}).items()
        }
        return {"status": "input_required", "status_message": WAITING, "input_requests": requests}
    return {"status": "working"}


def _elicit_results(answers: dict[str, Any]) -> dict[str, Any]:
    """The recorded answers as elicitation results (`tasks.methods` checked their shape)."""
    out: dict[str, Any] = {}
    for key, answer in answers.items():
        try:
            out[key] = types.ElicitResult.model_validate(answer)
        except ValueError:  # a row another version wrote: no answer rather than a crash
            logger.warning("ignored an unreadable answer to a task's question")
    return out


_keepers: WeakKeyDictionary[Parking, TaskKeeper] = WeakKeyDictionary()


def keeper_for(parking: Parking, make: Callable[[anyio.abc.TaskGroup], TaskKeeper]) -> TaskKeeper:
    """The keeper of one serving lifespan (made on its first task)."""
    keeper = _keepers.get(parking)
    if keeper is None:
        keeper = _keepers[parking] = make(parking.tg)
    return keeper


def stop_tasks(parking: Parking) -> None:
    """The serving lifespan ends: its open tasks are handed over (or fail) at once instead of going stale."""
    keeper = _keepers.pop(parking, None)
    if keeper is not None:
        try:
            keeper.stopped()
        except Exception:  # the store went first: the heartbeat goes stale instead
            logger.warning("could not mark this worker's tasks stopped", exc_info=True)


def question_place(key: str) -> int | None:
    """The ordinal of the call a question was about, from its key (None: not told)."""
    found = _PLACE.search(key)
    return None if found is None else int(found.group(1))


__all__ = ["Answered", "TaskKeeper", "TaskRun", "keeper_for", "question_place", "stop_tasks"]
