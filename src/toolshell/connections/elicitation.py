"""Route a server's question (elicitation) to whoever answers for the session whose call asked.

How a question is tied to its call:
- 2026-07-28 servers ask through `input_required` rounds of the call itself; the SDK runs those
  rounds (and our callback) in the calling task, so the call is found in `CURRENT_CALL`.
- Older servers send `elicitation/create` as a request of their own. Over Streamable HTTP and the
  in-process transport it arrives on the call's stream and the SDK runs the callback in the
  sender's context, so `CURRENT_CALL` finds the call there too. Over stdio nothing ties the
  question to a call (SEP-2260 defines no wire field): it is routed only when every in-flight call
  on that connection belongs to one session, otherwise declined.

While a question is open, the timers of the call(s) it may belong to are paused.
"""

from __future__ import annotations

import itertools
import logging
from contextvars import ContextVar
from dataclasses import dataclass, field

import anyio
import mcp_types as types
from mcp.client.session import ClientRequestContext

from toolshell.connections.base import Answerer, SessionContext
from toolshell.connections.timer import CallTimer

logger = logging.getLogger(__name__)

_ids = itertools.count(1)


@dataclass(eq=False)
class InFlightCall:
    """One `tools/call` under way on a connection."""

    session: SessionContext
    answerer: Answerer | None
    timer: CallTimer
    tool: str
    tasks: bool = False
    """Whether this call's requests declare the Tasks extension (`upstream_tasks`)."""
    id: int = field(default_factory=lambda: next(_ids))


CURRENT_CALL: ContextVar[InFlightCall | None] = ContextVar("toolshell_current_call", default=None)
"""The call the current task (or the SDK task acting for it) is making."""


@dataclass(eq=False)
class _Question:
    session_id: str
    calls: list[InFlightCall]
    scope: anyio.CancelScope


def _decline() -> types.ElicitResult:
    return types.ElicitResult(action="decline")


class _Tracked:
    """`ElicitationRouter.track`'s block (a class, not a generator: it is entered on every call)."""

    __slots__ = ("call", "router", "token")

    def __init__(self, router: ElicitationRouter, call: InFlightCall) -> None:
        self.router, self.call = router, call

    def __enter__(self) -> None:
        self.router._calls[self.call.id] = self.call  # noqa: SLF001  (the router's own helper)
        self.token = CURRENT_CALL.set(self.call)

    def __exit__(self, *exc: object) -> None:
        CURRENT_CALL.reset(self.token)
        self.router._ended(self.call)  # noqa: SLF001


class ElicitationRouter:
    """Per connection: the in-flight calls, the open questions, and the SDK elicitation callback."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._calls: dict[int, InFlightCall] = {}
        self._questions: list[_Question] = []

    def track(self, call: InFlightCall) -> _Tracked:
        """Register `call` as in flight for the block, and make it the current call of this task."""
        return _Tracked(self, call)

    def _ended(self, call: InFlightCall) -> None:
        del self._calls[call.id]
        # A question outlives nothing: when its call ends, the question is withdrawn.
        for q in self._questions:
            if all(c.id not in self._calls for c in q.calls):
                q.scope.cancel()

    def in_flight(self) -> list[InFlightCall]:
        return list(self._calls.values())

    def open_questions(self, session_id: str | None = None) -> int:
        return sum(1 for q in self._questions if session_id is None or q.session_id == session_id)

    def cancel_session(self, session_id: str) -> int:
        """Resolve every open question of that session as `cancel`. Returns how many were open."""
        hit = [q for q in self._questions if q.session_id == session_id]
        for q in hit:
            q.scope.cancel()
        return len(hit)

    def _owners(self) -> list[InFlightCall]:
        """The call(s) a question may belong to; empty when it cannot be told (decline)."""
        call = CURRENT_CALL.get()
        if call is not None and call.id in self._calls:
            return [call]
        calls = self.in_flight()
        if calls and len({c.session.session_id for c in calls}) == 1:
            return calls
        return []

    async def callback(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """The `elicitation_callback` given to `mcp.client.Client`."""
        owners = self._owners()
        answerer = owners[0].answerer if owners else None
        if answerer is None:
            why = "no session answers questions" if owners else "it cannot be tied to one session's call"
            logger.info("declined a question from server %r: %s", self.server, why)
            return _decline()
        question = _Question(owners[0].session.session_id, owners, anyio.CancelScope())
        self._questions.append(question)
        for c in owners:
            c.timer.pause()
        try:
            with question.scope:
                return await answerer.elicit(self.server, params)
            return types.ElicitResult(action="cancel")
        except Exception:
            logger.exception("the answerer for server %r failed; the question is cancelled", self.server)
            return types.ElicitResult(action="cancel")
        finally:
            self._questions.remove(question)
            for c in owners:
                c.timer.resume()
