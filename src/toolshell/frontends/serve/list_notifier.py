"""Telling `serve`'s clients that the tool list they saw changed.

`serve` answers `tools/list` at once, while servers are still starting, so the `bash` description
a client got may say `github (connecting)`. When a server becomes ready (or fails, or needs a
login) afterwards, every client session that listed tools and can still hear the server gets
`notifications/tools/list_changed`, and its next `tools/list` shows each server's tool count. A
stateless 2026-07-28 request keeps no channel open, so those clients see the counts on their next
`tools/list` only.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
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
    """The client sessions that listed tools, told when a server settles."""

    def __init__(self) -> None:
        # By identity: the SDK's sessions take no weak references, so ended ones go on a failed send.
        self._sessions: OrderedDict[int, Any] = OrderedDict()
        self.sent = 0
        """Notifications sent (for diagnostics and tests)."""

    def listed(self, session: Any) -> None:
        """A client session answered `tools/list`: tell it when the list changes."""
        self._sessions[id(session)] = session
        self._sessions.move_to_end(id(session))
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)

    async def progress(self, server: str, state: ConnState) -> None:
        """The host's `on_server_progress`: a server that settled changes the list."""
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
