"""Sending a prepared call, in layers (the way httpx's `send` reads):

    send(p)                           ledger: budget, the report, the timeline row
      _send_handling_approval(p)      before-call guards give the final input; policy judges it
                                      (with the static `[[guard]]` rules, judged only there);
                                      blocked → `denied`; needs approval → ask, or stop the script
        _send_handling_guards(p)      the after-call guards see the result before the script does
          _send_single(p)             the one call on the connection

With a `CallFeed` (`calls.replay`), `send` records each call's outcome before the script sees
it, and a run resumed by replay is answered from those records first.

Every caller that makes a real call uses it: the `tools` builtin, `Host.call_tool`, the LLM
adapters and `toolshell serve`'s `keep_visible` proxies.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import anyio
import anyio.to_thread

from toolshell.calls.approval import ApprovalGate
from toolshell.calls.asking import asking_for
from toolshell.calls.ledger import Ledger
from toolshell.calls.prepare import PreparedCall
from toolshell.calls.replay import CallFeed, Replayed
from toolshell.command.masking import masked_result
from toolshell.errors import ErrorCode, StopScript, ToolshellError
from toolshell.policy.credentials import masker
from toolshell.policy.guardrails import GuardCall, Guardrails
from toolshell.policy.policy import Policy
from toolshell.policy.risk import BLOCKED, NEEDS_APPROVAL, Risk


class CallTarget(Protocol):
    """Makes the one call (the host, over its connections)."""

    async def call(self, prepared: PreparedCall) -> Any:
        """The `CallToolResult`. Raises `ToolshellError` (unavailable, timeout, connection_required…)."""
        ...


@dataclass(frozen=True)
class Sent:
    """A call that was made: the input actually sent, how it was judged, and its result."""

    prepared: PreparedCall
    risk: Risk
    result: Any


class Pipeline:
    """The send path of one shell call (or one direct call).

    Args:
        ledger: the shell call's budget, report and timeline.
        policy: judges each call.
        gate: asks a person, or stops the script.
        target: makes the call.
        feed: records each call's outcome, and answers a replayed run's calls from the record.
    """

    def __init__(
        self, ledger: Ledger, policy: Policy, gate: ApprovalGate, target: CallTarget, feed: CallFeed | None = None
    ) -> None:
        self.ledger = ledger
        self.feed = feed
        self.policy = policy
        self.guards: Guardrails = policy.guardrails
        self.gate = gate
        self.target = target

    async def send(self, prepared: PreparedCall, check: Check | None = None) -> Sent:
        """Make one call. Raises `ToolshellError` (the call's error) or `StopScript`.

        `check` refuses a result the script must not get (past the shell's size bound), raising its
        error; a recorded run records that error, never the result it refused."""
        started = time.perf_counter()
        self.ledger.charge(prepared)
        if self.feed is None:
            sent = await self._send_handling_approval(prepared)
        else:
            sent = await self._send_recording(self.feed, prepared, check)
        self.ledger.completed(sent.prepared, sent.risk.level, sent.result, started)
        return sent

    async def _send_recording(self, feed: CallFeed, prepared: PreparedCall, check: Check | None) -> Sent:
        """The call answered from its record (a replayed run), or made and recorded before the
        script sees its result. A call stopped before it was sent (denied, held for approval) is
        not recorded: run again, it is judged again."""
        ordinal = feed.next_ordinal()
        replayed = await _read_record(feed, ordinal, prepared)
        if replayed is not None:
            risk = Risk(replayed.risk)
            if replayed.error is not None:
                self.ledger.failed_in_flight(prepared, risk.level, replayed.error)
                raise replayed.error
            return Sent(prepared, risk, replayed.result)
        try:
            with asking_for(ordinal):  # a question about this call is bound to its place (a parked task's answer)
                sent = await self._send_handling_approval(prepared)
        except _InFlight as failed:
            await _keep(feed, feed.record_error, ordinal, prepared, failed.risk.level, failed.error)
            raise failed.error from None
        try:
            if check is not None:
                check(sent)
        except ToolshellError as refused:
            self.ledger.failed_in_flight(prepared, sent.risk.level, refused)
            await _keep(feed, feed.record_error, ordinal, prepared, sent.risk.level, refused)
            raise
        await _keep(feed, feed.record, ordinal, prepared, sent.risk.level, sent.result)
        return sent

    async def _send_handling_approval(self, prepared: PreparedCall) -> Sent:
        if self.guards.guards:
            arguments = await self.guards.rewrite(GuardCall(prepared.entry, prepared.input, self.ledger.session_id))
            prepared = replace(prepared, input=arguments)
        risk = await self.policy.check(prepared.entry, prepared.input)
        if risk.level == BLOCKED:
            raise ToolshellError(ErrorCode.DENIED, risk.message or f"{prepared.entry.command} is blocked by policy")
        if risk.level == NEEDS_APPROVAL:
            await self.gate.hold(prepared, risk)
        if self.policy.limits.nested_rules:  # counted when it is about to be sent: a denied call is not
            await self._admit(prepared)
        try:
            result = self._masked(prepared, await self._send_handling_guards(prepared))
        except ToolshellError as err:
            self.ledger.failed_in_flight(prepared, risk.level, err)
            if self.feed is None:
                raise
            raise _InFlight(err, risk) from None
        return Sent(prepared, risk, result)

    def _masked(self, prepared: PreparedCall, result: Any) -> Any:
        """The result with credential shapes masked (`[scan]`), before anything records or shows it;
        the model hears how many were masked, and of what kind, never the values."""
        if not self.policy.credentials.scans(prepared.entry):
            return result
        found = masker()
        result = masked_result(result, found)
        if found.kinds:
            source = prepared.entry.server or "toolshell"
            kinds = ", ".join(sorted(set(found.kinds)))
            self.ledger.hints.append(f"{source}: {len(found.kinds)} credential(s) in the result were masked ({kinds})")
        return result

    async def _admit(self, prepared: PreparedCall) -> None:
        """Raise `rate_limited` when a `[[limits]]` rule for nested calls refuses this one."""
        limits, caller = self.policy.limits, self.ledger.caller
        refused = await anyio.to_thread.run_sync(limits.admit_nested_call, caller, prepared.entry)
        if refused is not None:
            raise ToolshellError(
                ErrorCode.RATE_LIMITED, refused.message, retryable=True, retry_after_seconds=refused.retry_after_seconds
            )

    async def _send_handling_guards(self, prepared: PreparedCall) -> Any:
        result = await self._send_single(prepared)
        if not self.guards.guards:
            return result
        return await self.guards.after(GuardCall(prepared.entry, prepared.input, self.ledger.session_id), result)

    async def _send_single(self, prepared: PreparedCall) -> Any:
        return await self.target.call(prepared)


Check = Callable[[Sent], None]
"""Raises the error of a result the script must not get (`Pipeline.send`)."""


class _InFlight(Exception):
    """A call that was sent and failed, with how it was judged (for its record)."""

    def __init__(self, error: ToolshellError, risk: Risk) -> None:
        super().__init__(error.message)
        self.error, self.risk = error, risk


async def _read_record(feed: CallFeed, ordinal: int, prepared: PreparedCall) -> Replayed | None:
    """`feed.replay`: a resumed run reads its records from the store, so from a worker thread."""
    if feed.resumed:
        return await anyio.to_thread.run_sync(feed.replay, ordinal, prepared)
    return feed.replay(ordinal, prepared)


async def short_of(feed: CallFeed) -> StopScript | None:
    """`feed.short` once the run ended: a resumed run names the calls it missed from their records
    in the store, so from a worker thread."""
    return await anyio.to_thread.run_sync(feed.short) if feed.resumed else feed.short()


async def _keep(feed: CallFeed, keep: Callable[..., None], *args: Any) -> None:
    """Record a call: in memory on the loop (no hop to pay) while the feed is there and free, else
    from a worker thread (a task's or yielded call's records go to the store, and never hold the
    event loop), shielded: a record on its way is kept even if the run is being stopped."""
    with feed.in_memory() as here:
        if here:
            keep(*args)
            return
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(keep, *args)


__all__ = ["CallTarget", "Check", "Pipeline", "Sent", "StopScript", "short_of"]
