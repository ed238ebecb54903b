"""What a built-in server may ask of the host that runs it (the host implements this Protocol)."""

from __future__ import annotations

from typing import Protocol

from toolshell.connections.base import ServerStatus


class OverlayHandle(Protocol):
    """Each session's runtime switches (`runtime_overlay.RuntimeOverlay`)."""

    def statuses_for(self, session_id: str) -> list[ServerStatus]:
        """The servers the session's role makes active, with their connection state, in config order."""
        ...

    def set_enabled(self, session_id: str, server: str, enabled: bool) -> None:
        """Enable or disable a configured server for one session.

        Raises:
            ToolshellError: `INVALID_INPUT` when no server of that name is configured.
        """
        ...

    def enabled_for(self, session_id: str) -> dict[str, bool]:
        """Per configured server, whether it is enabled for the session."""
        ...

    async def set_tool_unlocked(self, session_id: str, server: str, tool: str, unlocked: bool) -> None:
        """Show (or hide again) one tool that the server's `tools` filter hides, for one session.

        Raises:
            ToolshellError: `INVALID_INPUT` for an unknown server or a tool the server does not have.
        """
        ...


class HostHandle(Protocol):
    """The host's side of the built-in servers that manage the host itself (e.g. `runtime`)."""

    @property
    def runtime(self) -> OverlayHandle:
        """Each session's switches."""
        ...

    def statuses(self) -> list[ServerStatus]:
        """Every configured server with its connection state, in config order."""
        ...
