"""The shells of a serving process, by handle: live ones in memory, every one in the store.

`toolshell serve` runs each `bash` call in a shell named by a handle (`shell.handles`). The shell
a call asks for is the live session of this process when it holds the stored version, else a
new session that checks the stored commit out (so any worker can take any call), else, for a
handle that is gone, nothing runs: the result says so and carries a new shell's handle. Refusing
is the safer choice: a script written for files and a working directory that are gone could do
the wrong thing in an empty shell. After the call the shell's state is saved as an incremental
commit: only the objects the store does not hold yet are written, in one transaction with the
timeline rows the call recorded (DESIGN §11, "a call has a budget"). A live session a call on
another worker moved past reads only the objects stored since its version. Every store call runs
in a worker thread: the event loop never waits on a round trip.

The store failing is not the shell being gone: a transient store error (`retryable`) before the
script starts keeps the caller's handle (call again with it); once the script has started, the
result never says "nothing ran", and the shell keeps the state saved before the call.

Live sessions are a cache of the store, bounded by count (`max_live`) and by the bytes of their
files (`[serve] live_shell_bytes`, counted by `shell.live_bytes`): past either, an idle one is
closed (its state stays in the store). The budget is shared fairly: a shell holding more than all
of it alone goes first, and room for a caller holding more than its share (the budget over the
callers holding live shells, at least the one shell) is made from its own idle shells only, so
one caller cannot flush everyone else's; otherwise the least recently used idle shell goes, a
caller's past its share first. A call whose shell does not fit even after that (the others are
all in calls, or it alone holds more) is refused before it starts: nothing runs, and the result
says what to do and whose shells hold the budget. A live session whose handle was dropped or
expired is closed at once; a call that waited on a session closed meanwhile runs in a new one
from the store.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from toolshell.errors import ToolshellError
from toolshell.host import state_ring
from toolshell.result import RunResult
from toolshell.shell import refusals
from toolshell.shell.first_read import Check, first_read
from toolshell.shell.handles import Forged, Kept, ShellHandles
from toolshell.shell.live_bytes import LiveBytes
from toolshell.shell.restore import Recent
from toolshell.store.keys import for_purpose
from toolshell.timeline.held import Held, holding
from toolshell.timeline.sinks import SqliteSink

if TYPE_CHECKING:
    from toolshell.host import Host
    from toolshell.session import Session

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

MAX_LIVE = 1024
"""Sessions this process keeps in memory (`[serve] live_shells`); past it the least recently used
is closed (its state stays in the store, so the next call checks it out again)."""
LIVE_BYTES = 1 << 30
"""The bytes of files the live sessions of one process may hold between calls (`[serve] live_shell_bytes`)."""
COMPACT_FLOOR = 64 * 1024
"""Objects kept for a shell may reach twice its size (at least this) before a full commit
replaces them, dropping those no longer reachable."""


@dataclass
class _Live:
    session: Session
    version: int
    """The stored version this session holds; -1: none yet."""
    lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))  # free: no trip round the loop
    have: set[str] = field(default_factory=set)
    """The ids of the objects the store holds for this shell."""
    stored: int = 0
    full: int = 0
    """The size of the last full commit: what the shell itself holds."""
    size: int = 0
    """The bytes of its files after its last call (what it holds in memory between calls)."""
    files: LiveBytes = field(default_factory=LiveBytes)
    """Keeps `size` up to date from the shell's commits (`shell.live_bytes`)."""
    recent: Recent = field(default_factory=Recent)
    """Objects seen lately, for the next catch-up."""
    used: float = field(default_factory=time.monotonic)
    dropped: bool = False
    """Its handle was dropped while a call held it: that call closes it when done."""


class Shells:
    """Shells by handle for one process.

    Args:
        host: makes the sessions.
        handles: the handles and commits in the store.
        keys: the state key ring (`store.keys.key_ring`): the first seals, each opens.
    """

    def __init__(
        self,
        host: Host,
        handles: ShellHandles,
        keys: Sequence[bytes],
        max_live: int = MAX_LIVE,
        live_bytes: int = LIVE_BYTES,
    ) -> None:
        self.host = host
        self.handles = handles
        self.keys = list(keys)
        self.max_live = max_live
        self.live_bytes = live_bytes
        self._live: OrderedDict[str, _Live] = OrderedDict()
        self._mounted = [m.path for m in host.config.shell.mounts]
        # Handles the store dropped (past the cap, expired), often in a worker thread: their live
        # sessions go on the loop, never under its feet while it walks `_live`.
        self._dropped: deque[str] = deque()
        self._loop_thread, handles.on_drop = threading.get_ident(), self._drop

    @classmethod
    def for_host(cls, host: Host) -> Shells:
        """The shells of `host`, kept in its store, with `[serve]`'s bounds and the state key ring.

        Raises:
            ToolshellError: `invalid_input` when the store is shared and no key ring is configured.
        """
        serve = host.config.serve
        handles = ShellHandles(
            host.store,
            idle_seconds=serve.shell_idle_seconds,
            max_per_caller=serve.max_shells_per_caller,
            max_bytes=serve.max_shell_bytes,
        )
        keys = for_purpose(state_ring(host), "shell-seal")
        return cls(host, handles, keys, max_live=serve.live_shells, live_bytes=serve.live_shell_bytes)

    def new(self, caller: str | None) -> str:
        """A new, empty shell's handle."""
        return self.handles.new(caller)

    def for_session(self, session_key: str, caller: str | None) -> str:
        """The handle of the shell a client session keeps (`ShellHandles.for_session`)."""
        return self.handles.for_session(session_key, caller)

    async def run(self, caller: str | None, handle: str | None, script: str, **options: Any) -> RunResult:
        """Run `script` in the caller's shell `handle` (a new shell when None); `options` go to
        `Session.run` (answerer, approver, feed). The result names the shell's handle. The store is
        asked off the event loop (a thread), once to find the shell (and, if this worker holds an
        older version, once for the objects stored since), and once at the end: the shell's commit
        and what the call recorded in the timeline, in one transaction."""
        try:
            if handle is None:
                handle = await _off_loop(self.handles.new, caller)
        except ToolshellError as err:
            return refusals.store_failed(handle, err)
        self._forget_dropped()
        live = await self._locked(handle, caller)
        try:
            try:
                # After the lock: what the last call saved, and what this worker lacks of it.
                after, first = live.version if live.version >= 0 else None, first_read()
                kept = await _off_loop(self._find, handle, caller, after, first)
                if kept is None:
                    return self._gone(handle, caller)
                if (feed := options.get("feed")) is not None:  # a replay of this run starts from here
                    feed.shell_version = kept.version
                await self._catch_up(live, kept)
            except (Forged, ToolshellError) as err:
                self._forget(handle)
                if isinstance(err, ToolshellError) and err.retryable:
                    return refusals.store_failed(handle, err)
                return self._unreadable(handle, caller, err)
            refused = self._admit(handle, caller, live)
            if refused is not None:
                return refused
            held = Held()
            try:
                try:
                    with holding(held):
                        result = await live.session.run(script, **options)
                except ToolshellError as err:  # the script started: never "nothing ran"
                    self._forget(handle)
                    return refusals.failed_after_start(handle, err)
                try:
                    note = await self._save(handle, caller, live, held)
                except ToolshellError as err:  # it ran; the store failed after
                    self._forget(handle)
                    note = (
                        f"the script ran, but its shell's state could not be saved ({err.message}); the next call "
                        "with this shell starts from the state saved before this one"
                    )
            finally:
                if not held.empty:  # what the call recorded is kept even when its shell's state is not
                    with anyio.CancelScope(shield=True):  # a cancelled run's rows (interrupted) too
                        await self._record(held)
            live.used = time.monotonic()  # `live.size`: counted by the save
            if live.size > self.live_bytes and note is None:
                note = (
                    f"this shell now holds {live.size} bytes of files, more than [serve] live_shell_bytes "
                    f"({self.live_bytes}): its next call is refused (raise the bound, or go on in a new shell)"
                )
        finally:
            live.lock.release()
            if live.dropped:
                live.session.close()
            self._trim(caller)  # on every way out: a call that stopped early leaves no shell past the bounds
        result.shell, result.shell_note = handle, note
        return result

    def _find(self, handle: str, caller: str | None, after: int | None, first: Check | None) -> Kept | None:
        if first is not None:  # the caller's own read, in this hop (`shell.first_read`)
            first(handle)
        return self.handles.find(handle, caller, self.keys, after)

    async def _catch_up(self, live: _Live, kept: Kept) -> None:
        """Bring the live session to the stored version (a call on another worker saved it): read
        only the objects stored after the version it holds, unless a full commit replaced them
        since (or they do not make the stored state: then all of them)."""
        if kept.version == live.version:
            return
        if live.version >= 0 and kept.tip is not None and kept.base <= live.version:
            newer = kept.newer
            if newer is None:
                newer = await _off_loop(self.handles.objects, kept.handle, self.keys, live.version)
            if live.stored + sum(len(d) for d in newer.values()) == kept.stored:
                with contextlib.suppress(ToolshellError):  # not whole after all: read them all
                    whole = live.recent.objects_for(kept.tip, newer, live.session.commit, live.have)
                    live.session.checkout(kept.tip, whole)
                    live.recent.reset(whole)
                    live.have |= set(newer)
                    live.stored, live.version = kept.stored, kept.version
                    live.size = live.files.measure(live.session.bash, kept.tip, newer)
                    return
        if live.version >= 0 or kept.tip is None:  # start over from the stored state (or empty)
            live.session.close()
            live.session = self.host.session(source="agent", caller=live.session.caller)
            live.have, live.stored, live.full = set(), 0, 0
        if kept.tip is not None:
            objects = await _off_loop(self.handles.objects, kept.handle, self.keys)
            live.session.checkout(kept.tip, objects)
            live.have, live.stored, live.full = set(objects), kept.stored, kept.stored
            live.recent.reset(objects)
        live.version = kept.version
        live.size = live.files.measure(live.session.bash, kept.tip, objects if kept.tip is not None else None)

    async def _save(self, handle: str, caller: str | None, live: _Live, held: Held) -> str | None:
        """Save the shell after a call, with the timeline rows it `held`, in one transaction; a
        note for the result when its state was not kept.

        The commit, the count of the shell's bytes and the write run in one worker thread: bashkit
        commits without the GIL, so the event loop serves other calls meanwhile."""
        sink, limit = self._sink, self.handles.max_bytes
        if sink is not None:
            sink.release(held)
        if sink is not None and sink.store is not self.handles.store:  # rows elsewhere: written on their own
            sink = None

        def save() -> tuple[int | None, dict[str, bytes], int, bool, bool]:
            """The new version (None: not saved), the commit's objects, their bytes, whether they
            replace what the store held, and whether they were too big to keep."""
            tip, objects = live.session.commit(live.have)
            added = sum(len(d) for d in objects.values())
            replace = live.stored + added > max(2 * live.full, COMPACT_FLOOR) or live.stored + added > limit
            if replace:
                tip, objects = live.session.commit()
                added = sum(len(d) for d in objects.values())
            live.size = live.files.measure(live.session.bash, tip, objects)
            too_big = replace and added > limit
            kept, kept_objects = (None, {}) if too_big else (tip, objects)
            with contextlib.nullcontext() if sink is None else sink.committing(held) as also:
                saved = self.handles.save(
                    handle, caller, live.version, kept, kept_objects, self.keys[0], replace=replace, also=also
                )
            return saved, objects, added, replace, too_big

        saved, objects, added, replace, too_big = await _off_loop(save)
        if saved is None:
            self._forget(handle)
            return "another call changed this shell at the same time; its state is the one kept, not this call's"
        live.version = saved
        if too_big:
            self._forget(handle)
            return (
                f"this shell's state was not kept: its {added} bytes are past [serve] max_shell_bytes ({limit}); "
                "the next call with this handle starts in an empty shell. Keep fewer or smaller files"
            )
        live.have = set(objects) if replace else live.have | set(objects)
        (live.recent.reset if replace else live.recent.add)(objects)
        live.stored = added if replace else live.stored + added
        if replace:
            live.full = added
        return None

    async def _record(self, held: Held) -> None:
        """Write the timeline rows a call held when its shell's save did not take them (logged, not
        raised: the call's own result says what failed)."""
        sink = self._sink
        if sink is None:
            return
        sink.release(held)
        try:
            await _off_loop(sink.write_held, held)
        except ToolshellError:
            sink.keep(held)
            logger.warning("the timeline of a call could not be written yet; it goes with the next", exc_info=True)

    @property
    def _sink(self) -> SqliteSink | None:
        """The host's store sink, which can hold a call's rows for its commit (another sink: none)."""
        return self.host.sink if isinstance(self.host.sink, SqliteSink) else None

    async def _locked(self, handle: str, caller: str | None) -> _Live:
        """The live session of `handle`, its lock taken. A session closed while this call waited
        (the call before it forgot it) is not run in: the next one comes from the store."""
        live = self._live_for(handle, caller)
        await live.lock.acquire()
        while self._live.get(handle) is not live:
            live.lock.release()
            live = self._live_for(handle, caller)
            await live.lock.acquire()
        return live

    def _live_for(self, handle: str, caller: str | None) -> _Live:
        live = self._live.get(handle)
        if live is None:
            session = self.host.session(source="agent", caller=caller)
            live = self._live[handle] = _Live(session, -1, files=LiveBytes(self._mounted))
        self._live.move_to_end(handle)
        return live

    @property
    def held(self) -> dict[str, int]:
        """The live shells of this process, least recently used first, and the bytes of files each
        held after its last call. Safe from another thread (a metrics reader): the items are copied
        in one step first."""
        return {handle: live.size for handle, live in list(self._live.items())}

    def _admit(self, handle: str, caller: str | None, live: _Live) -> RunResult | None:
        """Make room for `live` within `live_bytes`, closing idle shells (`_victim`); None when it
        fits, else the refusal (and `live` is closed: its state stays in the store)."""
        if live.size > self.live_bytes:
            self._forget(handle)
            return self._too_big(handle, caller, live.size)
        while (held := sum(v.size for v in self._live.values())) > self.live_bytes:
            idle = self._victim(caller, handle)
            if idle is None:
                refused = self._full(handle, caller, held)  # before it goes: it counts as the caller's
                self._forget(handle)
                return refused
            self._forget(idle)
        return None

    def _victim(self, caller: str | None, keep: str | None) -> str | None:
        """The idle shell to close to make room for `caller`'s: while the caller holds more than its
        share, only one of its own; else, least recently used first, one of a caller past its share,
        then any. None when no shell may go."""
        share, held = self._share(keep), self._by_caller()
        idle = [h for h, v in self._live.items() if h != keep and not v.lock.locked()]
        if held.get(caller, 0) > share:
            return next((h for h in idle if self._live[h].session.caller == caller), None)
        past = [h for h in idle if held.get(self._live[h].session.caller, 0) > share]
        return next(iter(past or idle), None)

    def _share(self, keep: str | None) -> int:
        """A caller's fair share of `live_bytes`: an equal part for each caller holding live shells,
        at least the shell `keep` (so one shell within the budget always may run)."""
        callers = max(1, len(self._by_caller()))
        live = self._live.get(keep) if keep is not None else None
        return max(self.live_bytes // callers, live.size if live is not None else 0)

    def _by_caller(self) -> dict[str | None, int]:
        held: dict[str | None, int] = {}
        for live in self._live.values():
            held[live.session.caller] = held.get(live.session.caller, 0) + live.size
        return held

    def _trim(self, caller: str | None = None) -> None:
        """Close live sessions past the bounds, never one in a call: expired ones and ones holding
        more than `live_bytes` alone, then the least recently used past `max_live` sessions, then
        past `live_bytes` bytes of files the ones `_victim` picks for `caller`."""
        self._forget_dropped()
        expired = time.monotonic() - self.handles.idle_seconds
        for handle, live in list(self._live.items()):
            if (live.used < expired or live.size > self.live_bytes) and not live.lock.locked():
                self._forget(handle)
        while len(self._live) > self.max_live:
            idle = next((h for h, v in self._live.items() if not v.lock.locked()), None)
            if idle is None:
                return
            self._forget(idle)
        while sum(v.size for v in self._live.values()) > self.live_bytes:
            victim = self._victim(caller, None)
            if victim is None:
                return
            self._forget(victim)

    def _forget(self, handle: str) -> None:
        live = self._live.pop(handle, None)
        if live is not None:
            live.session.close()

    def _drop(self, handle: str) -> None:
        self._dropped.append(handle)
        if threading.get_ident() == self._loop_thread:  # dropped on the loop: it goes at once
            self._forget_dropped()

    def _forget_dropped(self) -> None:
        """Close the live sessions of dropped handles (one in a call: once the call is done); the
        next call with the handle starts from the store."""
        while self._dropped:
            live = self._live.pop(self._dropped.popleft(), None)
            if live is not None and live.lock.locked():
                live.dropped = True
            elif live is not None:
                live.session.close()

    def _gone(self, asked: str, caller: str | None) -> RunResult:
        self._forget(asked)
        return refusals.gone(asked, self.handles.new(caller))

    def _unreadable(self, asked: str, caller: str | None, cause: Forged | ToolshellError) -> RunResult:
        why = cause.message if isinstance(cause, ToolshellError) else cause.why
        return refusals.unreadable(asked, self.handles.new(caller), why)

    def _full(self, handle: str, caller: str | None, held: int) -> RunResult:
        """The idle shells that could go are gone and the rest hold the budget: nothing ran, the
        shell is kept (`refusals.full` says whose shells hold it)."""
        by_caller = self._by_caller()
        own = by_caller.get(caller, 0)
        return refusals.full(handle, held, self.live_bytes, own, own > self._share(handle), len(by_caller))

    def _too_big(self, asked: str, caller: str | None, size: int) -> RunResult:
        """The shell alone holds more than the budget: nothing ran; it stays in the store."""
        return refusals.too_big(asked, self.handles.new(caller), size, self.live_bytes)

    def close(self) -> None:
        for live in self._live.values():
            live.session.close()
        self._live.clear()


async def _off_loop(call: Callable[..., _T], *args: Any) -> _T:
    """`call(*args)` in a worker thread: a store's round trips never hold the event loop. Not
    abandoned when cancelled: a write in flight finishes (or fails) before the call returns."""
    return await anyio.to_thread.run_sync(call, *args)


__all__ = ["Shells"]
