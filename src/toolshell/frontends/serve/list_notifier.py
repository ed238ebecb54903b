"""Telling `serve`'s clients that the tool list they saw changed, and holding the first one.

A client lists tools right after `initialize` (Claude Code, Codex, Cursor, the SDK), while the
startup servers are still starting. So a `tools/list` that comes within `[serve]
list_wait_seconds` of the start waits for them to settle (`settled`), at most until then: the first
`bash` description names their tools. A server still starting after that shows as
`github (connecting)`; when it becomes ready (or fails, or needs a login), every client session
that listed tools and can still hear the server gets `notifications/tools/list_changed`, and its
next `tools/list` shows the server's tools. A stateless 2026-07-28 request keeps no channel open,
so those clients see them on their next `tools/list` only.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import anyio

from toolshell.connections.base import ConnState

logger = logging.getLogger(__name__)

SETTLED = {ConnState.READY, ConnState.FAILED, ConnState.NEEDS_AUTH}
"""The states a starting server ends in: each changes what the `bash` description says of it."""
SEND_SECONDS = 5.0
"""How long one client may take to accept the notification before it is skipped."""
MAX_SESSIONS = 1024
"""Sessions remembered (the oldest are forgotten first; one whose send fails goes at once)."""


class ListNotifier:
    """The client sessions that listed tools, told when a server settles.

    Args:
        wait_seconds: How long from now a listing may wait for the startup servers (`settled`).
    """

    def __init__(self, wait_seconds: float = 0.0) -> None:
        # By identity: the SDK's sessions take no weak references, so ended ones go on a failed send.
        self._sessions: OrderedDict[int, Any] = OrderedDict()
        self._deadline = time.monotonic() + wait_seconds
        self._moved = anyio.Event()
        self.sent = 0
        """Notifications sent (for diagnostics and tests)."""
        self.first_wait: float | None = None
        """Seconds the first listing waited in `settled` (for diagnostics and the benchmarks)."""

    async def settled(self, starting: Callable[[], bool]) -> None:
        """Wait while `starting()` (a startup server is still connecting), at most until the
        deadline: each server's progress wakes the check."""
        began = time.monotonic()
        while (left := self._deadline - time.monotonic()) > 0 and starting():
            moved = self._moved
            with anyio.move_on_after(left):
                await moved.wait()
        if self.first_wait is None:
            self.first_wait = time.monotonic() - began

    def listed(self, session: Any) -> None:
        """A client session answered `tools/list`: tell it when the list changes."""
        self._sessions[id(session)] = session
        self._sessions.move_to_end(id(session))
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)

    async def progress(self, server: str, state: ConnState) -> None:
        """The host's `on_server_progress`: a server that settled changes the list."""
        self._moved.set()  # the listings waiting in `settled` check again
        self._moved = anyio.Event()
        if state in SETTLED:
            await self.changed()

    async def changed(self) -> None:
        for key, session in list(self._sessions.items()):
            try:
                with anyio.fail_after(SEND_SECONDS):
                    await session.send_tool_list_changed()
                self.sent += 1
            except Exception:  # a closed stream, a stateless request long answered: that client is gone
                logger.debug("tools/list_changed not delivered", exc_info=True)
                self._sessions.pop(key, None)
