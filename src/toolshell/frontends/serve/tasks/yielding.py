"""Yield and wait: long `bash` calls for clients without Tasks.

A client's tool timeout (often 60 s) would lose a long call. So a `bash` call still running after
`[serve] yield_seconds` (default 25) returns what it has so far: its output, `running: true`
(and `exit_code: -1`, none yet) and its `shell`. The script goes on, in the worker that started
it (its owner), which records the output it writes and, at the end, its result in the store
(`store.yields.YieldRows`) every `[serve] heartbeat_seconds` and at once when it ends.

The next `bash` call on that shell, on any worker, first collects the rest: it waits (up to
`yield_seconds` again) for the earlier call to end, then runs its own script and returns its
result with the earlier call's rest as `earlier` (the output not delivered yet, its exit code
and stop report). If the earlier call is still running then, the new call returns the output
that came meanwhile (`running: true` again) and its own script does not run: nothing runs while
the shell is busy, nothing twice, and each piece of output is delivered once. If the owner went
silent for three heartbeats, the collector takes the call over and runs it again by replay, as a
task's (`calls.replay`: its nested calls, recorded as they ended, are answered from the record),
and collects it as before: the replay writes the same output again, and only what was not
delivered yet is. A call that cannot be resumed reads as stopped (exit code 137).

Where the earlier call's row is looked for: in the hop to a thread that finds the shell, after
its lock (`shell.first_read`), so a plain call makes one hop fewer; a call that finds one there
runs nothing and collects first as above. A worker that owns a yielded run on the shell, a call
whose wait ended before its run looked, and a look the store failed collect first directly.

A worker that drains (SIGTERM, `frontends.serve.drain`) answers every call still waiting at once:
it yields there and then, whatever its age, so no client waits on a worker that is going away.
Its runs go on through the drain; one still running when the worker stops is handed over (its
heartbeat is set stale), and the next call on its shell, on another worker, takes it over at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary, WeakSet

import anyio
import anyio.abc
import mcp_types as types

from toolshell.calls.replay import CallFeed, discard
from toolshell.errors import ToolshellError
from toolshell.frontends.serve.tasks.yield_results import busy_result, failed, rest_of, result_so_far, with_earlier
from toolshell.frontends.serve.upstream import Asker, Parking
from toolshell.redact import Redactor
from toolshell.shell.first_read import read_first
from toolshell.store.replay import RESUME, opened_json, sealed_json
from toolshell.store.yields import YIELD_CHANNEL, YieldedRow, YieldRows

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 60.0
"""How often the yielder sweeps the store (as the task keeper does)."""
STOP_SECONDS = 5.0
"""How long a stopping worker waits for its cancelled yielded runs to end before handing them over."""

OnOutput = Callable[[str, str], None]
RunBash = Callable[[OnOutput, Asker | None, CallFeed | None], Awaitable[types.CallToolResult]]
"""Runs the call's script with an output observer, the asker to use and the feed its nested calls go through."""
Resumer = Callable[[dict[str, Any]], RunBash]
"""Makes the run of a yielded call taken over, from what it was started with."""
RUNNING = (
    "still running: this is its output so far. Call bash again with this `shell` (any script, e.g. `true`)"
    " to get the rest first, as `earlier`"
)


@dataclass(eq=False)
class _Run:
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    result: types.CallToolResult | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    yielded: bool = False
    handle: str = ""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    feed: CallFeed | None = None
    key: str = field(default_factory=lambda: "yield:" + secrets.token_urlsafe(24))
    """Its yielded row's run key, if it yields."""
    earlier: bool = False
    """It did not start: it found another call's yielded run on its shell (or could not look), or
    its caller's wait ended before it looked."""
    looked: bool = False
    """It looked and found no other call's yielded run (or was started without a look): it runs."""
    gate: threading.Lock = field(default_factory=threading.Lock)
    """`earlier` and `looked` are decided under it: by the look in a thread, or by the loop when the
    caller's wait ends first."""

    def output(self, stdout: str, stderr: str) -> None:
        self.out.append(stdout)
        self.err.append(stderr)


class _AfterYield:
    """The call's asker until it yields; after that nobody can be asked on its stream (None)."""

    def __init__(self, asker: Asker, run: _Run) -> None:
        self.asker, self.run = asker, run

    async def ask(self, params: types.ElicitRequestParams) -> types.ElicitResult | None:
        return None if self.run.yielded else await self.asker.ask(params)


class Yielder:
    """Yield-and-wait of one serving lifespan.

    Args:
        rows: the yielded runs in the shared store.
        tg: the lifespan's task group (a yielded script goes on there).
        worker: this worker's id.
        yield_seconds: `[serve] yield_seconds`.
        heartbeat_seconds: `[serve] heartbeat_seconds`.
        ring: the state key ring (records and what resuming takes are sealed with it).
        redact: masks the config's secrets in the records.
        sweep: removes tasks and yielded runs past their keeping (`TaskRows.sweep`), run at most
            every `SWEEP_SECONDS` from here too: a server whose clients never make tasks sweeps.
    """

    def __init__(
        self,
        rows: YieldRows,
        tg: anyio.abc.TaskGroup,
        worker: str,
        yield_seconds: float,
        heartbeat_seconds: float,
        ring: list[bytes],
        redact: Redactor | None = None,
        sweep: Callable[[], None] | None = None,
    ) -> None:
        self.rows, self.tg, self.worker = rows, tg, worker
        self.sweep, self._swept = sweep, float("-inf")
        self.yield_seconds, self.heartbeat_seconds = yield_seconds, heartbeat_seconds
        self.ring, self.redact = ring, redact
        self.draining = False
        self._waits: set[anyio.CancelScope] = set()
        """The waits of calls and collectors in this worker, cut short when it drains."""
        self._owned: dict[str, _Run] = {}
        """The yielded runs this worker runs, by shell handle."""

    async def call(
        self,
        caller: str | None,
        handle: str,
        run_bash: RunBash,
        asker: Asker | None,
        resume: Callable[[int | None], dict[str, Any] | None] | None = None,
        resumer: Resumer | None = None,
    ) -> types.CallToolResult:
        """The rest of an earlier yielded call on `handle` first, then this call (or its output so far).

        `resume` gives what running this call again takes, read once it yields (None: it cannot be
        resumed), given the shell's version the run started from (None: not found yet); `resumer`
        runs an earlier call taken over from a silent owner."""
        await self._sweep()
        earlier, look_first = None, handle not in self._owned  # else: an earlier call here yielded
        while True:
            if not look_first:  # the earlier call's rest first
                earlier = await self._collect(caller, handle, resumer)
                if earlier is not None and earlier.get("running"):
                    return busy_result(handle, earlier)
            run = self._start(run_bash, asker, look_first)
            try:
                with self._waiting():
                    await run.done.wait()
            except anyio.get_cancelled_exc_class():  # the client cancelled the call: the script stops
                run.scope.cancel()
                raise
            with run.gate:  # a run that has not looked yet is stopped: the call goes the way that reads first
                run.earlier = run.earlier or not (run.looked or run.done.is_set())
            if not run.earlier:
                break
            look_first = False  # the run did not start; an earlier yielded call may be on the shell
        feed = run.feed
        assert feed is not None  # `_start` gave it one
        if run.result is not None:
            return with_earlier(run.result, earlier)
        stdout, stderr = "".join(run.out), "".join(run.err)
        run_key = run.key

        def record() -> None:  # the store, from a worker thread: the row, then the calls made so far
            info = None if resume is None or feed.lost else resume(feed.shell_version)
            sealed = None if info is None else sealed_json(self.ring, RESUME, _sealed_to(run_key, handle, caller), info)
            self.rows.create(handle, caller, self.worker, stdout, stderr, run_key, sealed)
            if info is None or info.get("not_replayed"):  # nothing kept if not resumable
                feed.attach(discard)
            else:
                feed.attach(self.rows.calls.writer(self.ring, run_key), self._forgetter(handle, run_key))

        run.yielded = True  # from now on nobody is asked on the call's stream: it closes with the output so far
        try:
            with anyio.CancelScope(shield=True):  # a row written is kept by this worker, whatever the caller does
                await anyio.to_thread.run_sync(record)
        except ToolshellError:  # no row, no collector could find the rest: wait for the whole call
            run.yielded = False
            logger.warning("could not record a yielded call; waiting for its end instead", exc_info=True)
            await run.done.wait()
            return with_earlier(run.result or failed("the call ended without a result"), earlier)
        run.handle = handle
        self._owned[handle] = run
        self.tg.start_soon(self._keep, run, handle)
        so_far = {"exit_code": -1, "success": False, "running": True, "stdout": stdout, "stderr": stderr}
        return result_so_far({**so_far, "shell": handle, "note": RUNNING}, earlier=earlier)

    async def _take_over(self, row: YieldedRow, caller: str | None, resumer: Resumer | None) -> bool | str:
        """Run a call whose owner went silent again here, by replay; False when it cannot be resumed,
        or why when that is known (`resume.not_replayed`); True too when another collector took it
        first (it runs there). The claim and the records' index are read in a worker thread."""
        key = row.run_key
        resume = (
            None if key is None else opened_json(self.ring, RESUME, _sealed_to(key, row.handle, row.caller), row.resume)
        )
        if resumer is None or key is None or not isinstance(resume, dict) or resume.get("caller") != caller:
            return False
        if resume.get("not_replayed"):
            return str(resume["not_replayed"])
        if resume.get("handle") != row.handle:  # another run's, moved here
            return False

        def claim() -> CallFeed | None:
            if not self.rows.claim(row, self.worker):
                return None
            return CallFeed(self.rows.calls.read(self.ring, key), redact=self.redact, resumed=True)

        with anyio.CancelScope(shield=True):  # a claim made is a run started: the caller's cancel waits
            feed = await anyio.to_thread.run_sync(claim)
        if feed is not None:
            run = _Run(yielded=True, handle=row.handle)  # nobody can be asked: its stream is gone
            self._owned[row.handle] = run
            feed.attach(self.rows.calls.writer(self.ring, key), self._forgetter(row.handle, key))
            self.tg.start_soon(self._execute, run, resumer(resume), None, feed)
            self.tg.start_soon(self._keep, run, row.handle)
        return True

    def drain(self) -> None:
        """The worker drains: every call and collector waiting here is answered now, and none waits from now on."""
        self.draining = True
        for wait in list(self._waits):
            wait.cancel()

    def running(self) -> int:
        """How many yielded runs this worker still runs (the drain waits for them)."""
        return sum(not run.done.is_set() for run in self._owned.values())

    async def stop(self) -> None:
        """The worker stops: its yielded runs still running stop, and are handed over for the next call
        on their shell (on any worker) to take over at once, by replay."""
        left = [run for run in self._owned.values() if not run.done.is_set()]
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_SECONDS):
            for run in left:
                run.scope.cancel()
            for run in left:
                await run.done.wait()
        for run in left:
            try:
                self.rows.hand_over(run.handle, self.worker, time.time() - 3 * self.heartbeat_seconds - 1)
            except ToolshellError:  # the store failed: its heartbeat goes stale instead
                logger.warning("could not hand a yielded call over", exc_info=True)

    @contextmanager
    def _waiting(self) -> Iterator[None]:
        """Wait up to `yield_seconds` (none once draining), cut short when the worker drains."""
        with anyio.move_on_after(0 if self.draining else self.yield_seconds) as wait:
            self._waits.add(wait)
            try:
                yield
            finally:
                self._waits.discard(wait)

    async def _sweep(self) -> None:
        now = time.monotonic()
        if self.sweep is None or now - self._swept < SWEEP_SECONDS:
            return
        self._swept = now
        try:
            await anyio.to_thread.run_sync(self.sweep)
        except ToolshellError:  # the store failed: the next call sweeps
            logger.warning("could not sweep yielded runs", exc_info=True)

    def _forgetter(self, handle: str, run_key: str) -> Callable[[], None]:
        """What a run whose records passed their bound does: it goes on, but cannot be resumed."""

        def forget() -> None:
            try:
                self.rows.forget(handle, run_key)
            except ToolshellError:  # the store failed: a takeover may replay the records up to the bound
                logger.warning("could not mark a yielded call not resumable", exc_info=True)

        return forget

    def _start(self, run_bash: RunBash, asker: Asker | None, look_first: bool) -> _Run:
        """Start the call's run. With `look_first` it looks for an earlier yielded call on the shell
        in the hop that finds the shell (`shell.first_read`): if one is there, nothing runs and
        `run.earlier` says so."""
        run = _Run(feed=(feed := CallFeed(redact=self.redact)), looked=not look_first)
        gated = None if asker is None else _AfterYield(asker, run)
        self.tg.start_soon(self._execute, run, run_bash, gated, feed, look_first)
        return run

    async def _execute(
        self, run: _Run, run_bash: RunBash, asker: Asker | None, feed: CallFeed, look_first: bool = False
    ) -> None:
        with run.scope:
            try:
                with read_first(self._no_earlier(run)) if look_first else contextlib.nullcontext():
                    run.result = await run_bash(run.output, asker, feed)
            except Exception as exc:  # the boundary of a background run: its collector gets the error
                if not run.earlier:  # else it stopped before its script (`_EarlierFirst`, maybe in a group)
                    logger.warning("a yielded bash call failed", exc_info=True)
                    run.result = failed(f"bash failed: {exc}")
        run.done.set()

    async def _keep(self, run: _Run, handle: str) -> None:
        """The owner: record the output every heartbeat, and the result as soon as it is there."""
        while True:
            with anyio.move_on_after(self.heartbeat_seconds):
                await run.done.wait()
            ended = run.result if run.done.is_set() else None
            if run.done.is_set() and ended is None:  # cancelled (the worker stops): handed over by `stop`
                return
            body = None if ended is None else ended.model_dump(by_alias=True, mode="json", exclude_none=True)
            try:
                out, err = "".join(run.out), "".join(run.err)
                owned = await anyio.to_thread.run_sync(self.rows.write, handle, self.worker, out, err, body)
            except Exception:  # the store failed: the next beat writes it all again
                logger.warning("could not record a yielded call's output", exc_info=True)
                await anyio.sleep(self.heartbeat_seconds if run.done.is_set() else 0)  # ended: no spin on a dead store
                continue
            if not owned:  # another worker judged this one dead and runs it again: this copy stops
                run.scope.cancel()
                self._forget(run)
                return
            if body is not None:  # not `run.done`: the run may have ended during a write without its result
                self._forget(run)
                return

    def _no_earlier(self, run: _Run) -> Callable[[str], None]:
        """The look `run` makes with its shell's find: another call's yielded run stops it."""

        def check(handle: str) -> None:
            try:
                row = self.rows.get(handle)
                other = row is not None and row.run_key != run.key
            except ToolshellError:  # the store failed: the way that reads first reads again, and says so
                other = True
            with run.gate:
                run.earlier = run.earlier or other  # set by the loop: its caller stopped waiting first
                run.looked = not run.earlier
            if run.earlier:
                raise _EarlierFirst

        return check

    def _forget(self, run: _Run) -> None:
        if self._owned.get(run.handle) is run:
            del self._owned[run.handle]

    async def _collect(self, caller: str | None, handle: str, resumer: Resumer | None) -> dict[str, Any] | None:
        """The earlier call's rest: all of it once it ended, else what came within `yield_seconds`."""
        # Read in a worker thread: the store's round trip never holds the event loop (every call makes it).
        if await anyio.to_thread.run_sync(self.rows.get, handle) is None:
            return None
        # Read again once subscribed: a change between the two reads would otherwise be missed.
        with self.rows.store.subscribe(YIELD_CHANNEL) as subscription, self._waiting():
            while (row := await anyio.to_thread.run_sync(self.rows.get, handle)) is not None and row.caller == caller:
                silent = row.result is None and time.time() - row.beat > 3 * self.heartbeat_seconds
                if silent and self.draining:
                    break  # a worker that stays takes it over
                taken = await self._take_over(row, caller, resumer) if silent else False
                if taken is True:
                    continue  # run again (here, or by the collector that claimed it first): wait for it
                if row.result is not None or silent:
                    why = taken if isinstance(taken, str) else None
                    with anyio.CancelScope(shield=True):  # taken is delivered: the rest goes back
                        finished = await anyio.to_thread.run_sync(self.rows.finish, row)
                    return rest_of(row, why) if finished else None
                with anyio.move_on_after(self.heartbeat_seconds):
                    await subscription.wait()
            return None
        row = await anyio.to_thread.run_sync(self.rows.get, handle)
        if row is None or row.caller != caller:
            return None
        # A replay writes its output again from the start: what was delivered stays delivered.
        sent = (row, max(len(row.stdout), row.sent_out), max(len(row.stderr), row.sent_err))
        with anyio.CancelScope(shield=True):  # a piece marked delivered goes back
            if not await anyio.to_thread.run_sync(self.rows.delivered, *sent):
                return None  # another call took this piece
        rest = {"stdout": row.stdout[row.sent_out :], "stderr": row.stderr[row.sent_err :]}
        return {"running": True, **rest, "shell": handle}


class _EarlierFirst(Exception):
    """A call found another call's yielded run on its shell once it held it: its rest goes first."""


_yielders: WeakKeyDictionary[Parking, Yielder] = WeakKeyDictionary()
_draining: WeakSet[Parking] = WeakSet()


def yielder_for(parking: Parking, make: Callable[[anyio.abc.TaskGroup], Yielder]) -> Yielder:
    """The yielder of one serving lifespan (made on its first call)."""
    yielder = _yielders.get(parking)
    if yielder is None:
        yielder = _yielders[parking] = make(parking.tg)
        if parking in _draining:
            yielder.drain()
    return yielder


def drain_yields(parking: Parking) -> None:
    """The serving lifespan drains: its calls waiting to yield yield now (`Yielder.drain`)."""
    _draining.add(parking)
    yielder = _yielders.get(parking)
    if yielder is not None:
        yielder.drain()


def draining(parking: Parking) -> bool:
    """Whether the serving lifespan drains."""
    return parking in _draining


def running_yields(parking: Parking) -> int:
    """The yielded runs the serving lifespan still runs."""
    yielder = _yielders.get(parking)
    return 0 if yielder is None else yielder.running()


async def stop_yields(parking: Parking) -> None:
    """The serving lifespan ends: its yielded runs still running are handed over (`Yielder.stop`)."""
    yielder = _yielders.pop(parking, None)
    if yielder is not None:
        await yielder.stop()


def _sealed_to(run_key: str, handle: str, caller: str | None) -> str:
    """What a yielded call's resume data is bound to: its run, its shell and its caller (a row
    given another row's data does not open it)."""
    return json.dumps([run_key, handle, caller])


__all__ = ["Yielder", "drain_yields", "draining", "running_yields", "stop_yields", "yielder_for"]
