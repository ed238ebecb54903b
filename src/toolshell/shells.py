"""The shells of a serving process, by handle: live ones in memory, every one in the store.

`toolshell serve` runs each `bash` call in a shell named by a handle (`shell.handles`). The
shell a call asks for is the live session of this process when it holds the stored version,
else a new session restored from the store's snapshot (so any worker can take any call), else,
for a handle that is gone, nothing runs: the result says so and carries a new shell's handle.
Refusing is the safer choice: a script written for files and a working directory that are gone
could do the wrong thing in an empty shell. After the call the shell's state is saved.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from toolshell.errors import ErrorCode, ToolshellError, error_line
from toolshell.result import RunResult
from toolshell.shell.handles import ShellHandles

if TYPE_CHECKING:
    from toolshell.host import Host
    from toolshell.session import Session

MAX_LIVE = 64
"""Sessions this process keeps in memory; past it the least recently used is closed (its state
stays in the store, so the next call restores it)."""


@dataclass
class _Live:
    session: Session
    version: int
    lock: anyio.Lock


class Shells:
    """Shells by handle for one process.

    Args:
        host: makes the sessions.
        handles: the handles and snapshots in the store.
        keys: the state key ring (`store.keys.key_ring`): the first seals, each opens.
    """

    def __init__(self, host: Host, handles: ShellHandles, keys: Sequence[bytes], max_live: int = MAX_LIVE) -> None:
        self.host = host
        self.handles = handles
        self.keys = list(keys)
        self.max_live = max_live
        self._live: OrderedDict[str, _Live] = OrderedDict()

    def new(self, caller: str | None) -> str:
        """A new, empty shell's handle."""
        return self.handles.new(caller)

    async def run(self, caller: str | None, handle: str | None, script: str, **options: Any) -> RunResult:
        """Run `script` in the caller's shell `handle` (a new shell when None); `options` go to
        `Session.run` (answerer, approver). The result names the shell's handle."""
        if handle is None:
            handle = self.handles.new(caller)
        kept = self.handles.find(handle, caller)
        if kept is None:
            return self._gone(handle, self.handles.new(caller))
        live = self._live_for(handle, caller, kept.version)
        async with live.lock:
            kept = self.handles.find(handle, caller)  # another call may have saved it while we waited
            if kept is None:
                return self._gone(handle, self.handles.new(caller))
            if kept.version != live.version:
                if kept.snapshot is not None:
                    try:
                        live.session.restore(kept.snapshot, self.keys)
                    except ToolshellError as err:  # changed in the store, or sealed with a dropped key
                        self._forget(handle)
                        new = self.handles.new(caller)
                        return RunResult(1, "", error_line(err), shell=new, shell_note=err.message)
                live.version = kept.version
            result = await live.session.run(script, **options)
            snapshot = live.session.snapshot(self.keys[0])
            saved = self.handles.save(handle, caller, snapshot, live.version)
        result.shell = handle
        if saved is None:
            result.shell_note = _not_kept(len(snapshot), self.handles.max_bytes)
            self._forget(handle)
        else:
            live.version = saved
        return result

    def _live_for(self, handle: str, caller: str | None, version: int) -> _Live:
        live = self._live.get(handle)
        if live is None:
            # version -1: a session of this process has not seen any stored state of this shell yet
            live = self._live[handle] = _Live(self.host.session(source="agent", caller=caller), -1, anyio.Lock())
            if len(self._live) > self.max_live:
                _, oldest = self._live.popitem(last=False)
                oldest.session.close()
        self._live.move_to_end(handle)
        return live

    def _forget(self, handle: str) -> None:
        live = self._live.pop(handle, None)
        if live is not None:
            live.session.close()

    def _gone(self, asked: str, new: str) -> RunResult:
        err = ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"the shell {asked[:12]}… is gone (idle past [serve] shell_idle_seconds, dropped past "
            "max_shells_per_caller, or not yours); nothing ran. Run the script again in the new shell "
            f"{new}, setting up what it needs (files, cd) first",
        )
        return RunResult(1, "", error_line(err), shell=new, shell_note=err.message)

    def close(self) -> None:
        for live in self._live.values():
            live.session.close()
        self._live.clear()


def _not_kept(size: int, max_bytes: int) -> str:
    if size > max_bytes:
        return (
            f"this shell's state was not kept: its {size} bytes are past [serve] max_shell_bytes ({max_bytes}); "
            "the next call with this handle starts in an empty shell. Keep fewer or smaller files"
        )
    return "another call changed this shell at the same time; its state is the one kept, not this call's"


__all__ = ["Shells"]
