"""Asking the upstream MCP client of `toolshell serve`, in the form its protocol version speaks.

Two kinds of question reach the person behind the client: an approval (a call that needs one) and
a server's own question (elicitation). Both become one `ElicitRequestParams` and go through an
`Asker`:

- `StreamAsker` (clients before 2026-07-28): `elicitation/create` on the `bash` call's own stream.
- `ParkedRun` (2026-07-28 clients): the `bash` call returns an `InputRequiredResult` with the
  question while the script waits, parked; the client's retry (same call, with its answer and the
  sealed `requestState`) hands the answer over and waits for the next round or the result. A
  retry that lands on another worker goes through the store (`frontends.serve.relay`).

An asker that gets no answer within `[approval] wait_seconds` returns None: an approval then stays
pending (the script stops with the report), a server's question is cancelled.

What the person reads (the message, the input shown, the titles of a server's form) passes through
`safe_text`, as on the terminal and the page: a client may render bidi overrides, zero-width
characters or U+2028 as they are. The values a form sends back (`enum`, `const`, `default`) are kept.
"""

from __future__ import annotations

import itertools
import json
import logging
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.abc
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolshell.calls.approval import Approver, NamedApprover
from toolshell.policy.risk import Risk
from toolshell.registry.entry import ToolEntry
from toolshell.safe_text import escape, escape_lines

logger = logging.getLogger(__name__)

APPROVAL_CHOICES = ["once", "always", "deny"]
THROUGH_CLIENT = "the person through the MCP client"
"""Who answered, as a request records an answer (or a decline) the upstream client sent."""
MAX_PARKED = 64
"""Parked runs kept per connection; the oldest is dropped past this (a retry for it then goes
through the store, as one from another worker does: `frontends.serve.relay`)."""


class Asker(Protocol):
    """Puts one question to the person behind the upstream client."""

    async def ask(self, params: types.ElicitRequestParams) -> types.ElicitResult | None:
        """The answer, or None when none came."""
        ...


def can_ask(ctx: ServerRequestContext[Any], mode: str = "form") -> bool:
    """True when the client declared elicitation (of this mode: "form", or "url")."""
    caps = ctx.session.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    if elicitation is None:
        return False
    if elicitation.form is None and elicitation.url is None:
        return mode == "form"  # an empty `elicitation: {}` means form only (spec)
    return (elicitation.url if mode == "url" else elicitation.form) is not None


def speaks_rounds(ctx: ServerRequestContext[Any]) -> bool:
    """True for a 2026-07-28 client: questions go in `input_required` rounds."""
    return ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS


class StreamAsker:
    """Older clients: `elicitation/create`, related to the `bash` call (so it rides its stream)."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self.ctx = ctx

    async def ask(self, params: types.ElicitRequestParams) -> types.ElicitResult | None:
        metadata = ServerMessageMetadata(related_request_id=self.ctx.request_id)
        request = types.ElicitRequest(params=params)
        return await self.ctx.session.send_request(request, types.ElicitResult, metadata=metadata)


_keys = itertools.count(1)


@dataclass(eq=False)
class _Question:
    params: types.ElicitRequestParams
    key: str = field(default_factory=lambda: f"q{next(_keys)}")
    answer: types.ElicitResult | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)


class ParkedRun:
    """One `bash` call of a 2026-07-28 client: the script runs in the background, and each
    question it asks becomes one `input_required` round of the call.

    `current()` is what a retry would get now, read without taking anything, so this worker's
    retry and the relay that publishes rounds to other workers (`frontends.serve.relay`) see the same."""

    key_prefix = ""
    """Put before each question's key (a task run again elsewhere: its keys never repeat the first run's)."""

    def question_prefix(self) -> str:
        """What the key of a question asked now starts with (`key_prefix`, and where a task asks it)."""
        return self.key_prefix

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(18)
        self._open: dict[str, _Question] = {}
        self.result: types.CallToolResult | None = None
        self.round = 0
        """Counts the changes a retry waits for: a question opened, the result came."""
        self._changed = anyio.Event()

    def _bump(self) -> None:
        self.round += 1
        self._changed.set()
        self._changed = anyio.Event()

    async def ask(self, params: types.ElicitRequestParams) -> types.ElicitResult | None:
        question = _Question(params)
        question.key = self.question_prefix() + question.key
        self._open[question.key] = question
        self._bump()
        try:
            await question.answered.wait()
        finally:
            self._open.pop(question.key, None)  # withdrawn when the wait is over (timeout, the call ended)
        return question.answer

    def finish(self, result: types.CallToolResult) -> None:
        self.result = result
        self._bump()

    def answer(self, responses: dict[str, Any] | None) -> None:
        """Hand the client's answers to the questions they answer (keys the client made up are ignored)."""
        for key, response in (responses or {}).items():
            question = self._open.get(key)
            if question is not None and isinstance(response, types.ElicitResult) and not question.answered.is_set():
                question.answer = response
                question.answered.set()

    def current(self) -> types.CallToolResult | types.InputRequiredResult | None:
        """The call's result; else the questions not answered yet, as one round; else None (running)."""
        if self.result is not None:
            return self.result
        waiting = {k: q for k, q in self._open.items() if not q.answered.is_set()}
        if not waiting:
            return None
        requests: dict[str, Any] = {k: types.ElicitRequest(params=q.params) for k, q in waiting.items()}
        return types.InputRequiredResult(input_requests=requests, request_state=self.token)

    async def next_round(self) -> types.CallToolResult | types.InputRequiredResult:
        """The next question (again, if the client has not answered it yet) or the call's result."""
        while True:
            changed = self._changed
            outcome = self.current()
            if outcome is not None:
                return outcome
            await changed.wait()


class Parking:
    """The parked runs of one serving lifespan, and the task group their scripts run in."""

    def __init__(self, tg: anyio.abc.TaskGroup) -> None:
        self.tg = tg
        self.runs: OrderedDict[str, ParkedRun] = OrderedDict()

    def park(self, run: ParkedRun) -> None:
        self.runs[run.token] = run
        while len(self.runs) > MAX_PARKED:
            self.runs.popitem(last=False)

    def take(self, token: str) -> ParkedRun | None:
        return self.runs.get(token)

    def done(self, run: ParkedRun) -> None:
        self.runs.pop(run.token, None)


def live_runs(parking: Parking) -> int:
    """How many of `parking`'s runs have not finished (what a drain waits for)."""
    return sum(run.result is None for run in parking.runs.values())


def approval_form(entry: ToolEntry, arguments: dict[str, Any], risk: Risk) -> types.ElicitRequestFormParams:
    """The question about one call: the tool, its exact input, its risk and why, and the choices."""
    why = f" ({escape(risk.why)})" if risk.why else ""
    shown = escape(json.dumps(arguments, ensure_ascii=False))
    message = (
        f"toolshell: a script wants to run {escape(entry.command)} with input {shown}.\n"
        f"Risk: {escape(risk.level)}{why}. {escape(risk.message)}\n"
        "Allow it once, always (this tool while it stays the same), or deny?"
    )
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "answer": {
                "type": "string",
                "title": "Allow this call?",
                "enum": APPROVAL_CHOICES,
            }
        },
        "required": ["answer"],
    }
    return types.ElicitRequestFormParams(message=message, requested_schema=schema)


def upstream_approver(asker: Asker, wait_seconds: float) -> Approver:
    """Asks the upstream client about a call: "once", "always", "deny", or None (no answer in time)."""

    async def approve(entry: ToolEntry, arguments: dict[str, Any], risk: Risk) -> str | None:
        reply = None
        with anyio.move_on_after(wait_seconds):
            reply = await asker.ask(approval_form(entry, arguments, risk))
        if reply is None or reply.action == "cancel":
            return None
        answer = (reply.content or {}).get("answer") if reply.action == "accept" else "deny"
        return answer if answer in APPROVAL_CHOICES else "deny"

    return NamedApprover(approve, THROUGH_CLIENT)


class UpstreamAnswerer:
    """Answers a server's question by asking the upstream client (the session's `Answerer`).

    Args:
        asker: how this client is asked; None when it declared no elicitation.
        ctx: the `bash` call (for the client's declared modes).
        wait_seconds: how long a question may wait for the person.
    """

    def __init__(self, asker: Asker | None, ctx: ServerRequestContext[Any], wait_seconds: float) -> None:
        self.asker = asker
        self.ctx = ctx
        self.wait_seconds = wait_seconds

    async def elicit(self, server: str, params: Any) -> types.ElicitResult:
        mode = getattr(params, "mode", "form") or "form"
        if self.asker is None or not can_ask(self.ctx, mode):
            logger.info("declined a %s question from server %r: the upstream client cannot show it", mode, server)
            return types.ElicitResult(action="decline")
        labelled = params.model_copy(update=_shown(server, params))
        reply = None
        with anyio.move_on_after(self.wait_seconds):
            reply = await self.asker.ask(labelled)
        if reply is None:
            logger.info("cancelled a question from server %r: no answer in %g s", server, self.wait_seconds)
            return types.ElicitResult(action="cancel")
        return reply


def _shown(server: str, params: Any) -> dict[str, Any]:
    """A server's question as the person is to read it: labelled with the server, text escaped."""
    update: dict[str, Any] = {"message": f"[{escape(server)}] {escape_lines(str(params.message))}", "meta": None}
    schema = getattr(params, "requested_schema", None)
    if isinstance(schema, dict):
        update["requested_schema"] = _escaped_schema(schema)
    return update


_SHOWN = ("title", "description")
_CHOICES = ("oneOf", "anyOf")


def _escaped_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The form's schema with what is shown escaped: titles, descriptions, `enumNames` and the
    titles of `oneOf`/`anyOf` choices (the flat form elicitation allows; values stay as sent)."""
    out = _escaped_texts(schema)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        out["properties"] = {name: _escaped_field(prop) for name, prop in properties.items()}
    return out


def _escaped_field(prop: Any) -> Any:
    if not isinstance(prop, dict):
        return prop
    out = _escaped_texts(prop)
    if isinstance(prop.get("enumNames"), list):
        out["enumNames"] = [escape(n) if isinstance(n, str) else n for n in prop["enumNames"]]
    for key in _CHOICES:
        if isinstance(prop.get(key), list):
            out[key] = [_escaped_texts(c) if isinstance(c, dict) else c for c in prop[key]]
    items = prop.get("items")
    if isinstance(items, dict):
        out["items"] = {
            **items,
            **{
                k: [_escaped_texts(c) if isinstance(c, dict) else c for c in items[k]]
                for k in _CHOICES
                if isinstance(items.get(k), list)
            },
        }
    return out


def _escaped_texts(node: dict[str, Any]) -> dict[str, Any]:
    return {k: escape_lines(v) if k in _SHOWN and isinstance(v, str) else v for k, v in node.items()}


__all__ = [
    "Asker",
    "ParkedRun",
    "Parking",
    "StreamAsker",
    "UpstreamAnswerer",
    "approval_form",
    "can_ask",
    "live_runs",
    "speaks_rounds",
    "upstream_approver",
]
