"""Carry the calling session's context to the server (seed 001, "Session Context").

Every request carries it in `_meta[SESSION_META_KEY]`. It also goes where the seed puts it,
`capabilities.experimental.session`:
- on 2026-07-28 connections in the per-request client capabilities of each request, overriding
  the connect-time value with the calling session's context;
- on older (handshake) connections once, in `initialize`, with the context of the session whose
  call opened the connection.

The SDK builds client capabilities in `ClientSession._build_capabilities` (always with
`experimental=None`) and stamps the per-request ones in a stamp installed by `adopt`. Neither is
public, so `SessionClient` overrides them; this pins us to the `mcp` 2.3 line (see pyproject).
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any, cast

import mcp_types as types
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import CallOptions

SESSION_META_KEY = "io.toolshell/session"
"""The request `_meta` key under which a server finds the calling session's context."""


class _SessionAwareClientSession(ClientSession):
    """`ClientSession` that advertises the session context under `capabilities.experimental`."""

    connect_session: dict[str, Any] | None = None

    def _build_capabilities(self, version: str) -> types.ClientCapabilities:
        caps = super()._build_capabilities(version)
        if self.connect_session is not None:
            caps.experimental = {**(caps.experimental or {}), "session": self.connect_session}
        return caps

    def adopt(self, result: types.InitializeResult | types.DiscoverResult) -> None:
        super().adopt(result)
        stamp = self._stamp

        def stamp_with_session(data: dict[str, Any], opts: CallOptions) -> None:
            stamp(data, opts)
            meta = (data.get("params") or {}).get("_meta") or {}
            caps = meta.get(types.CLIENT_CAPABILITIES_META_KEY)
            if SESSION_META_KEY in meta and isinstance(caps, dict):
                # The stamped dict is shared by every request: copy before changing it.
                experimental = {**caps.get("experimental", {}), "session": meta[SESSION_META_KEY]}
                meta[types.CLIENT_CAPABILITIES_META_KEY] = {**caps, "experimental": experimental}

        self._stamp = stamp_with_session


class SessionClient(Client):
    """`mcp.client.Client` whose handshake and requests carry the session context."""

    connect_session: dict[str, Any] | None = None

    async def _build_session(self, exit_stack: AsyncExitStack) -> ClientSession:
        session = await super()._build_session(exit_stack)
        session.__class__ = _SessionAwareClientSession
        assert isinstance(session, _SessionAwareClientSession)
        session.connect_session = self.connect_session
        return session


def request_meta(session_json: dict[str, Any]) -> types.RequestParamsMeta:
    """The `_meta` a request sends for a session."""
    return cast(types.RequestParamsMeta, {SESSION_META_KEY: session_json})
