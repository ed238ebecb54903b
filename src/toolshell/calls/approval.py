"""Asking a person about one call: whoever answers for the session, or the stop report.

With someone who can answer (the terminal under `[approval] inline`, the upstream MCP client under
`toolshell serve`, or the approvals store under `[approval] wait_for = "store"`), the person is
asked on the spot: "once" and "always" let the call run, "deny" stops the script. An approver that
gets no answer (within `[approval] wait_seconds`) returns None: the request stays pending and the
script stops with the report. With nobody to ask, a pending approval request is opened and the
script stops at the call (seed "Approvals").

A "deny" stops the script with `denied`, naming who denied it (the request's recorded answer: the
person through the MCP client, at the terminal, `toolshell approvals deny`, the web page), and
no grant instruction: there is nothing left to grant.

One answer, one call: a call runs only when it used up a once-grant itself (atomically, in the
store) or an "always" grant covers it. Identical calls of one caller share one request, from any
session (`Approvals.request`); the one that uses its once-grant runs, and each of the others asks
again on a new request. A person's own "deny" always stops the call they were asked about.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from toolshell import places
from toolshell.calls.prepare import PreparedCall
from toolshell.config import ApprovalConfig, Config
from toolshell.config.loading import config_in_use
from toolshell.errors import ErrorCode, StopScript, ToolshellError
from toolshell.policy.approvals import (
    DENIED,
    EXPIRED,
    GRANTED_ALWAYS,
    GRANTED_ONCE,
    ApprovalRequest,
    Approvals,
)
from toolshell.policy.risk import Risk
from toolshell.registry.entry import ToolEntry
from toolshell.telemetry.context import child_span
from toolshell.timeline import held

if TYPE_CHECKING:  # metrics: the OpenTelemetry SDK loads only when metrics are on
    from toolshell.telemetry.metrics import Metrics

Approver = Callable[[ToolEntry, dict[str, Any], Risk], Awaitable[str | None]]
"""Asks a person about one call on the spot; returns "once", "always", "deny", or None (no answer)."""

_ANSWER_OF = {GRANTED_ONCE: "once", GRANTED_ALWAYS: "always", DENIED: "deny"}


UNNAMED = "the person asked"
"""Who answered, for an approver that does not say (see `NamedApprover`)."""


@dataclass(frozen=True)
class NamedApprover:
    """An approver that says who answers through it, for the request's record ("the person at the terminal")."""

    ask: Approver
    who: str

    async def __call__(self, entry: ToolEntry, arguments: dict[str, Any], risk: Risk) -> str | None:
        return await self.ask(entry, arguments, risk)


@dataclass(frozen=True)
class Asked:
    """What asking about one call gave: the answer ("once", "always", "deny", None), the request,
    and who gave the answer (as the request records it)."""

    answer: str | None
    request_id: str | None
    by: str | None = None


@dataclass
class ProcessOptions:
    """The config file and state dir this process uses, as absolute paths, so the grant hint in a
    stop report names them (another process must open the same state to answer), however they
    were given: flags, `TOOLSHELL_CONFIG` / `TOOLSHELL_STATE_DIR`, a trusted `./toolshell.toml`."""

    config: str | None = None
    state_dir: str | None = None
    state_url_from_env: bool = False
    """The state is `$TOOLSHELL_STATE_URL`: the grant needs the same variable (never shown: it may
    hold a password)."""

    def cli_args(self) -> str:
        words = [w for flag, v in (("--config", self.config), ("--state-dir", self.state_dir)) if v for w in (flag, v)]
        return "".join(f" {shlex.quote(w)}" for w in words)

    def grant_command(self, request_id: str) -> str:
        command = f"toolshell approvals grant {request_id}{self.cli_args()}"
        return f"TOOLSHELL_STATE_URL=<as set here> {command}" if self.state_url_from_env else command


PROCESS = ProcessOptions()
"""Set once by the CLI command that started this process (`toolshell serve`, …)."""

UNATTENDED = (
    'to run writes unattended in a checkout you trust, set [approval] mode = "off" in its config '
    "(docs/configuration.md, Unattended runs)"
)
"""The setting named by the grant hint: the default mode stays `normal`; the docs say the risk."""


def name_process_options(config: str | None, state_dir: str | None, loaded: Config | None = None) -> None:
    """Record the config and state dir the grant hint must name (called by a CLI command at
    start-up): as given, else from the environment or where the config was found, made absolute.
    With `loaded`, a state dir its `[state] dir` chose is named too; without it only one given by
    flag or variable is (the grant, given the same `--config`, reads the same `[state] dir`)."""
    found = config_in_use(config)[0]
    PROCESS.config = os.path.abspath(found) if found is not None else None
    chosen = state_dir or os.environ.get("TOOLSHELL_STATE_DIR")
    if chosen or loaded is not None:
        PROCESS.state_dir = os.path.abspath(places.state_dir(chosen, None if loaded is None else loaded.state.dir))
    else:
        PROCESS.state_dir = None
    PROCESS.state_url_from_env = bool(os.environ.get("TOOLSHELL_STATE_URL"))


class ApprovalGate:
    """The approval step of one shell call.

    Args:
        approvals: where requests and grants are kept.
        session_id: the session the requests are for.
        approver: who answers on the spot, or None (nobody: the script stops with the report).
        caller: who makes the calls (`Session.caller`), recorded on every request.
    """

    def __init__(
        self,
        approvals: Approvals,
        session_id: str,
        approver: Approver | None,
        caller: str | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.approvals = approvals
        self.session_id = session_id
        self.approver = approver
        self.caller = caller
        self.metrics = metrics  # metrics: how long each wait took; None when metrics are off

    async def ask(self, entry: ToolEntry, arguments: dict[str, Any], risk: Risk) -> Asked:
        """Ask on the spot: "once", "always" or "deny" (recorded as the request's answer); None if
        nobody can, or nobody answered (the request stays pending). An answer lets nothing run by
        itself: the call runs on the grant only if it uses it up (`covered`)."""
        if self.approver is None:
            return Asked(None, None)
        request = await anyio.to_thread.run_sync(self.open_request, entry, arguments, risk)
        started = time.perf_counter()
        with child_span(
            "toolshell.approval.wait", {"toolshell.command": entry.command, "toolshell.why": risk.why or ""}
        ):
            answer = await self.approver(entry, arguments, risk)
        waited = time.perf_counter() - started
        with anyio.CancelScope(shield=True):  # the person's answer is recorded, whatever happens to the call
            asked = await anyio.to_thread.run_sync(self._answered, request.id, answer, entry, arguments, risk)
        if self.metrics is not None:
            self.metrics.approval_waited(entry.server, entry.name, asked.answer, waited)
        return asked

    def _answered(
        self, request_id: str, answer: str | None, entry: ToolEntry, arguments: dict[str, Any], risk: Risk
    ) -> Asked:
        """(From a worker thread: the store) `_record` on the request, or on a new one when the
        person's answer outlived it."""
        if answer is not None and self.approvals.get(request_id).status == EXPIRED:
            request_id = self.open_request(entry, arguments, risk).id
        return self._record(request_id, answer)

    def _record(self, request_id: str, answer: str | None) -> Asked:
        """The request's answer: this one, recorded; or the one given meanwhile (by another process,
        or to an identical call sharing the request), which holds, except over this person's "deny"."""
        if answer is not None:
            said = answer if answer in ("once", "always") else "deny"
            who = self.approver.who if isinstance(self.approver, NamedApprover) else UNNAMED
            try:
                if said == "deny":
                    self.approvals.deny(request_id, by=who)
                else:
                    self.approvals.grant(request_id, always=said == "always", by=who)
                return Asked(said, request_id, who)
            except ToolshellError as e:
                if e.code != ErrorCode.INVALID_INPUT:  # not "already answered": the store failed
                    raise
                if said == "deny":  # the person asked about this call said no: another's yes does not run it
                    return Asked(said, request_id, who)
        found = self.approvals.get(request_id)
        return Asked(_ANSWER_OF.get(found.status), request_id, found.decided_by)

    def covered(self, entry: ToolEntry, arguments: dict[str, Any]) -> bool:
        """Whether this call may run now on a person's yes: an "always" grant covers it, or it used
        up a once-grant (True for exactly one of the calls that try at once)."""
        return self.approvals.is_always(entry) or self.approvals.consume_once(entry, arguments)

    async def hold(self, prepared: PreparedCall, risk: Risk) -> None:
        """Return when a person approves this call on the spot; otherwise stop the script here.

        A yes whose once-grant another call used up first (identical calls made together share a
        request) does not let this call run: it asks again, on a new request of its own.
        """
        entry, arguments = prepared.entry, prepared.input
        while True:
            asked = await self.ask(entry, arguments, risk)
            if asked.answer not in ("once", "always"):
                break
            if await anyio.to_thread.run_sync(self.covered, entry, arguments):
                return
        if asked.answer == "deny":
            raise StopScript(denied_error(entry, asked), prepared.call, approval="denied", request_id=asked.request_id)
        request = await anyio.to_thread.run_sync(self.open_request, entry, arguments, risk)
        err = ToolshellError(ErrorCode.NEEDS_APPROVAL, approval_message(entry, risk, request.id))
        raise StopScript(err, prepared.call, approval="requested", request_id=request.id)

    def open_request(self, entry: ToolEntry, arguments: dict[str, Any], risk: Risk) -> ApprovalRequest:
        """A pending request a person answers later (`toolshell approvals grant …`); the identical
        pending one when there is one."""
        return self.approvals.request(
            entry, arguments, self.session_id, risk.why or "", message=risk.message, caller=self.caller
        )


def store_waiter(
    config: ApprovalConfig, approvals: Approvals, session_id: str, caller: str | None = None
) -> Approver | None:
    """The approver that waits for an answer in the approvals store (`[approval] wait_for = "store"`):
    a person answers from `toolshell approvals grant`, or the web page, in another process; the
    answer's notification wakes the call at once (`Approvals.wait_answered`)."""
    if config.wait_for != "store":
        return None

    async def wait(entry: ToolEntry, arguments: dict[str, Any], risk: Risk) -> str | None:
        def open_request() -> ApprovalRequest:  # from a worker thread (the context goes with it)
            held.write_now()  # the call's timeline row is in the store before the request that names it
            return approvals.request(entry, arguments, session_id, risk.why or "", message=risk.message, caller=caller)

        request = await anyio.to_thread.run_sync(open_request)
        with anyio.move_on_after(config.wait_seconds):
            await approvals.wait_answered(request.id)
        return None  # the gate reads the store's answer

    return wait


def denied_error(entry: ToolEntry, asked: Asked) -> ToolshellError:
    """`denied`, naming who denied the call; nothing to grant (a later run asks again)."""
    return ToolshellError(
        ErrorCode.DENIED,
        f"{entry.command} was denied by {asked.by or UNNAMED} (approval request {asked.request_id}); "
        "a later run asks again",
    )


def approval_message(entry: ToolEntry, risk: Risk, request_id: str) -> str:
    """The `needs_approval` message, one line: why, the exact grant command (then run the script
    again), and the setting for unattended writes."""
    why = risk.message or f"{entry.command} needs a person's approval ({risk.why})"
    grant = PROCESS.grant_command(request_id)
    return f"{why} (approval request {request_id}; a person runs `{grant}`, then run the script again; {UNATTENDED})"
