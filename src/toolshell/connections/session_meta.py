"""Carry the calling session's context to the server (seed 001, "Session Context").

Every request carries it in `_meta[SESSION_META_KEY]`. It also goes where the seed puts it,
`capabilities.experimental.session`:
- on 2026-07-28 connections in the per-request client capabilities of each request, overriding
  the connect-time value with the calling session's context;
- on older (handshake) connections once, in `initialize`, with the context of the session whose
  call opened the connection.

Elicitation is offered the same way (seed 001, "Elicitation"): a 2026-07-28 request offers it
only when the call that sends it has someone to answer (`CallOptions.answerer`); a handshake,
which speaks for the whole shared connection, always offers it (a question then finds no answerer
and is declined). The Tasks extension is declared the same way: only on the requests of a call
that declares it (`upstream_tasks`).

The SDK builds client capabilities in `ClientSession._build_capabilities` (always with
`experimental=None`) and stamps the per-request ones in a stamp installed by `adopt`. Neither is
public, so `SessionClient` overrides them; this pins us to the `mcp` 2.3 line (see pyproject).
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any, cast

import mcp_types as types
from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import CallOptions
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolshell.connections.elicitation import CURRENT_CALL
from toolshell.registry.schema_cost import paths
from toolshell.tasks_wire import EXTENSION as TASKS
from toolshell.telemetry.context import OUTGOING

SESSION_META_KEY = "io.toolshell/session"
"""The request `_meta` key under which a server finds the calling session's context."""


class _SessionAwareClientSession(ClientSession):
    """`ClientSession` that advertises the session context under `capabilities.experimental`."""

    connect_session: dict[str, Any] | None = None
    _elicitation: dict[str, Any] | None = None
    """The SDK's elicitation capability, held back from 2026-07-28 requests until a call can answer."""

    def _build_capabilities(self, version: str) -> types.ClientCapabilities:
        caps = super()._build_capabilities(version)
        if self.connect_session is not None:
            caps.experimental = {**(caps.experimental or {}), "session": self.connect_session}
        if version in MODERN_PROTOCOL_VERSIONS and caps.elicitation is not None:
            # Per-request capabilities (discover, and the base the stamp copies) offer no
            # elicitation; `stamp_with_session` adds it for a call whose session has an answerer.
            self._elicitation = caps.elicitation.model_dump(by_alias=True, mode="json", exclude_none=True)
            caps.elicitation = None
        return caps

    def adopt(self, result: types.InitializeResult | types.DiscoverResult) -> None:
        super().adopt(result)
        stamp = self._stamp

        def stamp_with_session(data: dict[str, Any], opts: CallOptions) -> None:
            stamp(data, opts)
            meta = (data.get("params") or {}).get("_meta") or {}
            caps = meta.get(types.CLIENT_CAPABILITIES_META_KEY)
            if not isinstance(caps, dict):
                return  # a handshake connection: its capabilities went once, in `initialize`
            caps = dict(caps)  # the stamped dict is shared by every request: copy before changing it
            if SESSION_META_KEY in meta:
                caps["experimental"] = {**caps.get("experimental", {}), "session": meta[SESSION_META_KEY]}
            if self._elicitation is not None and _caller_can_answer():
                caps["elicitation"] = self._elicitation
            extensions = caps.get("extensions")
            if isinstance(extensions, dict) and TASKS in extensions and not _caller_declares_tasks():
                caps["extensions"] = {k: v for k, v in extensions.items() if k != TASKS}
            meta[types.CLIENT_CAPABILITIES_META_KEY] = caps

        self._stamp = stamp_with_session

    def _output_schema_validator(self, name: str, output_schema: dict[str, Any]) -> Validator:
        """The SDK checks structured results against the server's output schema with jsonschema,
        whose work a schema can multiply without bound (`schema_cost`); such a schema, or a
        recursive one (its work grows with the result), is not checked: the result passes as sent.
        A validator already made (the SDK drops it when the tool's listed schema changes) is
        returned here, as the SDK's own method would, without its per-call imports."""
        made = self._tool_output_validators.get(name)
        if made is not None:
            return made
        cost = paths(output_schema)
        if cost.over or cost.recursive:
            self._tool_output_validators[name] = _ANY_RESULT
        return super()._output_schema_validator(name, output_schema)


_ANY_RESULT: Validator = Draft202012Validator(True)


def _caller_declares_tasks() -> bool:
    """Whether the request is sent for a call that declares the Tasks extension (its `tools/call`
    and its `tasks/*`); every other request is sent as by a client without it."""
    call = CURRENT_CALL.get()
    return call is not None and call.tasks


def _caller_can_answer() -> bool:
    """Whether the request is sent for a call whose session has an answerer (the stamp runs in the
    calling task, where `ElicitationRouter.track` set the call; listings and streams have none)."""
    call = CURRENT_CALL.get()
    return call is not None and call.answerer is not None


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
    """The `_meta` a request sends for a session, with the trace context of the nested call being
    sent when tracing is on (in-process servers get it here; the SDK's JSON-RPC client also
    injects the current context itself)."""
    meta: dict[str, Any] = {SESSION_META_KEY: session_json}
    trace = OUTGOING.get()
    if trace is not None:
        meta.update(trace)
    return cast(types.RequestParamsMeta, meta)
