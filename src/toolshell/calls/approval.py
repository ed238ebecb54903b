"""Asking a person about one call: whoever answers for the session, or the stop report.

With `[approval] inline` and someone who can answer (the terminal, an upstream client), the person
is asked on the spot: "once" and "always" let the call run, "deny" stops the script. With nobody to
ask, a pending approval request is opened and the script stops at the call (seed "Approvals").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from toolshell.calls.prepare import PreparedCall
from toolshell.errors import ErrorCode, StopScript, ToolshellError
from toolshell.policy.approvals import Approvals
from toolshell.policy.risk import Risk
from toolshell.registry.entry import ToolEntry

Approver = Callable[[ToolEntry, dict[str, Any], Risk], Awaitable[str]]
"""Asks a person about one call on the spot; returns "once", "always" or "deny"."""


class ApprovalGate:
    """The approval step of one shell call.

    Args:
        approvals: where requests and grants are kept.
        session_id: the session the requests are for.
        approver: who answers on the spot, or None (nobody: the script stops with the report).
    """

    def __init__(self, approvals: Approvals, session_id: str, approver: Approver | None) -> None:
        self.approvals = approvals
        self.session_id = session_id
        self.approver = approver

    async def ask(self, entry: ToolEntry, arguments: dict[str, Any], risk: Risk) -> str | None:
        """Ask on the spot: "once", "always" or "deny" (recorded as the request's answer); None if nobody can."""
        if self.approver is None:
            return None
        request = self.approvals.request(entry, arguments, self.session_id, risk.why or "", message=risk.message)
        answer = await self.approver(entry, arguments, risk)
        if answer in ("once", "always"):
            self.approvals.grant(request.id, always=answer == "always")
            return answer
        self.approvals.deny(request.id)
        return "deny"

    async def hold(self, prepared: PreparedCall, risk: Risk) -> None:
        """Return when a person approves this call on the spot; otherwise stop the script here."""
        entry, arguments = prepared.entry, prepared.input
        answer = await self.ask(entry, arguments, risk)
        if answer in ("once", "always"):
            self.approvals.consume_once(entry, arguments)  # a no-op after an "always"
            return
        if answer == "deny":
            err = ToolshellError(ErrorCode.NEEDS_APPROVAL, f"{entry.command}: the person declined this call")
            raise StopScript(err, prepared.call, approval="denied")
        request = self.open_request(entry, arguments, risk)
        err = ToolshellError(ErrorCode.NEEDS_APPROVAL, approval_message(entry, risk, request.id))
        raise StopScript(err, prepared.call, approval="requested")

    def open_request(self, entry: ToolEntry, arguments: dict[str, Any], risk: Risk) -> Any:
        """A pending request a person answers later (`toolshell approvals grant …`)."""
        return self.approvals.request(entry, arguments, self.session_id, risk.why or "", message=risk.message)


def approval_message(entry: ToolEntry, risk: Risk, request_id: str) -> str:
    why = risk.message or f"{entry.command} needs a person's approval ({risk.why})"
    return f"{why} (approval request {request_id}; a person runs `toolshell approvals grant {request_id}`)"
