"""The runtime overlay of each session (seed 001): servers it switched off, filtered tools it shows.

Set by the `runtime` built-in (`tools runtime mcp action=enable|disable …`) and forgotten when the
session closes. The overlay only ever narrows what config allows, or re-shows a tool that the
server's own `tools` filter hides; roles still apply (see `registry.building`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Overlays:
    """Every session's overlay, by session id."""

    _disabled: dict[str, set[str]] = field(default_factory=dict)
    _unlocked: dict[str, set[tuple[str, str]]] = field(default_factory=dict)

    def set_enabled(self, session_id: str, server: str, enabled: bool) -> None:
        disabled = self._disabled.setdefault(session_id, set())
        (disabled.discard if enabled else disabled.add)(server)

    def disabled(self, session_id: str) -> set[str]:
        """The servers this session switched off."""
        return self._disabled.get(session_id, set())

    def set_unlocked(self, session_id: str, server: str, tool: str, unlocked: bool) -> None:
        shown = self._unlocked.setdefault(session_id, set())
        (shown.add if unlocked else shown.discard)((server, tool))

    def unlocked(self, session_id: str) -> set[tuple[str, str]]:
        """The (server, tool) pairs this session shows despite the server's `tools` filter."""
        return self._unlocked.get(session_id, set())

    def forget(self, session_id: str) -> None:
        self._disabled.pop(session_id, None)
        self._unlocked.pop(session_id, None)
