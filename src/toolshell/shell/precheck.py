"""What a script says before it runs: the `tools` calls written out in full, judged as at run time.

Two users, one judgement: the before-start check (a literal call that needs approval holds the
whole script, seed "Approvals") and `tools plan`. Both read the script with the tree-sitter scanner
of `policy.plan`, load the lazy servers that literal calls name, resolve and validate each literal
call with the pure `calls.prepare`, and ask `Policy.assess`.

The before-start check does only what can change its answer: it validates and judges only calls to
a tool that may ask (`Policy.may_ask`), and a shell call on a catalog where no call could be held
(`may_hold`: every server ready, no tool that may ask) does not read its script at all.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from toolshell.calls.approval import ApprovalGate, Asked, approval_message, denied_error
from toolshell.calls.ledger import Ledger
from toolshell.calls.prepare import PreparedCall, lookup, prepare_input, resolve
from toolshell.calls.view import CatalogView
from toolshell.command.argv import Invoke, parse
from toolshell.command.inputs import build_input
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.policy.plan import ScannedCall, plan_json_async, scan, scanned_calls
from toolshell.policy.policy import Policy
from toolshell.policy.risk import CHECKED_AT_RUN_TIME, NEEDS_APPROVAL, Risk
from toolshell.registry.catalog import Catalog
from toolshell.registry.entry import ToolEntry

T = TypeVar("T")
PlanRow = tuple[str, dict[str, Any] | None, Risk, str | None]


@dataclass(frozen=True)
class HeldBeforeStart:
    """The script did not start: a literal call needs approval (or the person declined it)."""

    request_id: str
    message: str
    denied: ToolshellError | None = None
    """The `denied` error when the person said no (then nothing is left to grant)."""

    def error(self) -> ToolshellError:
        if self.denied is not None:
            return ToolshellError(ErrorCode.DENIED, f"the script did not start: {self.denied.message}")
        return ToolshellError(ErrorCode.NEEDS_APPROVAL, f"the script did not start: {self.message}")


class Precheck:
    """The static view of one shell call's script."""

    def __init__(self, view: CatalogView, policy: Policy, gate: ApprovalGate, ledger: Ledger) -> None:
        self.view = view
        self.policy = policy
        self.gate = gate
        self.ledger = ledger

    async def hold_before_start(self, script: str) -> HeldBeforeStart | None:
        """The hold when a call written out in full needs approval and nobody granted it; else None."""
        calls = scanned_calls(script)
        await self.load_named_servers(calls)
        granted_once: list[str] = []  # the requests answered "once" on the spot, before the script ran
        for scanned in calls:
            # Only calls to a tool that may ask are prepared: no input makes the others hold the script.
            prepared = self.prepare_literal(scanned, self.policy.may_ask)
            if prepared is None:
                continue  # built at run time, cannot ask, or input that fails its schema (that fails when it runs)
            risk = await self.policy.assess(prepared.entry, prepared.input)
            if risk.level != NEEDS_APPROVAL:
                continue
            asked = await self.gate.ask(prepared.entry, prepared.input, risk)
            if asked.answer in ("once", "always"):
                if asked.answer == "once" and asked.request_id is not None:
                    granted_once.append(asked.request_id)
                continue  # granted on the spot: the call runs only if it uses the grant up when it is made
            return await self._hold(prepared, risk, asked, granted_once)
        return None

    async def _hold(self, prepared: PreparedCall, risk: Risk, asked: Asked, granted_once: list[str]) -> HeldBeforeStart:
        # Denied: the request the person answered; else the one left pending for a person to answer.
        denied = asked.answer == "deny" and asked.request_id is not None

        def settle() -> str:  # the store, in one worker thread
            request_id = asked.request_id if denied else self.gate.open_request(prepared.entry, prepared.input, risk).id
            for once in granted_once:  # the script does not run: nothing may use them
                self.gate.approvals.withdraw_once(once)
            assert request_id is not None  # a denial names its request
            return request_id

        with anyio.CancelScope(shield=True):  # no grant given for a script that never ran stays usable
            request_id = await anyio.to_thread.run_sync(settle)
        approval = "denied" if denied else "requested"
        code = str(ErrorCode.DENIED if denied else ErrorCode.NEEDS_APPROVAL)
        self.ledger.report.stop(code, prepared.call, approval=approval, before_start=True, request_id=request_id)
        self.ledger.ended(prepared.entry, prepared.input, code, None)
        error = denied_error(prepared.entry, asked) if denied else None
        return HeldBeforeStart(request_id, approval_message(prepared.entry, risk, request_id), error)

    async def load_named_servers(self, calls: list[ScannedCall]) -> None:
        """Load the servers that literal calls name and that are not ready, so they can be judged."""
        if not calls:
            return  # nothing to judge: the catalog is built only if the script calls `tools` after all
        await self.view.current()
        names = {name for scanned in calls if (name := self._server_to_load(scanned)) is not None}
        await self.view.load_quietly(names)

    def _server_to_load(self, scanned: ScannedCall) -> str | None:
        """The server a literal call names when it is lazy, still connecting, or failed (retried)."""
        words = [w for w in scanned.argv or [] if w is not None]
        request = _quiet(lambda: parse(words)) if words else None
        if not isinstance(request, Invoke) or not request.argv:
            return None
        look = _quiet(lambda: lookup(self.view.catalog, request.argv))
        if look is None or look.server is None or look.server.state == "ready":
            return None
        if look.kind == "tool" and look.server.remembered:  # judged from its remembered list; the call starts it
            return None
        return look.server.name

    def literal_input(
        self, scanned: ScannedCall, wanted: Callable[[ToolEntry], bool] | None = None
    ) -> tuple[ToolEntry, dict[str, Any]] | None:
        """Tool and input of a fully literal call whose input does not come from stdin (not yet
        checked against the schema), to a tool `wanted` takes (default: any); else None."""
        if not scanned.literal or scanned.argv is None or scanned.input_from_stdin:
            return None
        request = _quiet(lambda: parse([w for w in scanned.argv or [] if w is not None]))
        if not isinstance(request, Invoke):
            return None
        resolved = _quiet(lambda: resolve(self.view.catalog, request.argv))
        if resolved is None:
            return None
        entry, rest = resolved
        if wanted is not None and not wanted(entry):
            return None
        # With no input arguments a call reads stdin; a top-level script's stdin is empty, so: {}.
        arguments = _quiet(lambda: build_input(rest, None, entry.input_schema))
        return None if arguments is None else (entry, arguments)

    def prepare_literal(
        self, scanned: ScannedCall, wanted: Callable[[ToolEntry], bool] | None = None
    ) -> PreparedCall | None:
        """The prepared call of a literal call (see `literal_input`) whose input passes its schema."""
        literal = self.literal_input(scanned, wanted)
        return None if literal is None else _quiet(lambda: prepare_input(*literal))

    async def plan(self, script: str) -> dict[str, Any]:
        """`tools plan`: every call the scanner sees, with input and risk, as the before-start check judges."""
        found = scan(script)
        await self.load_named_servers(found.calls)
        return await plan_json_async(found, self._plan_one)

    async def _plan_one(self, scanned: ScannedCall) -> PlanRow | None:
        words = [w for w in (scanned.argv or []) if w is not None]
        if scanned.literal and not isinstance(_quiet(lambda: parse(list(words))), Invoke):
            return None  # help, search, plan and scripts verbs call no tool
        literal = self.literal_input(scanned)
        if literal is not None:
            entry, arguments = literal
            risk = await self.policy.assess(entry, arguments)
            return entry.command, arguments, risk, _problem(lambda: prepare_input(entry, arguments))
        look = _quiet(lambda: lookup(self.view.catalog, words)) if words else None
        if look is not None and look.entry is not None:
            return look.entry.command, None, await self.policy.assess(look.entry, None), None
        text = "tools " + " ".join(words[:2]) if words else "tools …"
        unknown = _problem(lambda: lookup(self.view.catalog, words)) if scanned.literal and words else None
        return text, None, Risk(CHECKED_AT_RUN_TIME, message="the command is built while the script runs"), unknown


def may_hold(catalog: Catalog, policy: Policy) -> bool:
    """Whether the before-start check could hold a script on `catalog`: a tool in it may ask
    (`Policy.may_ask`), or a server in it is not ready (a call naming it loads it, and its tools
    are judged then). When not, no script can be held, whatever calls it makes."""
    if any(server.state != "ready" for server in catalog.servers):
        return True
    return any(policy.may_ask(entry) for entry in itertools.chain(catalog.entries, catalog.top_level))


def _problem(check: Callable[[], object]) -> str | None:
    """`code: message` of the error a literal call will end with, or None."""
    try:
        check()
    except ToolshellError as e:
        return f"{e.code}: {e.message}"
    return None


def _quiet(fn: Callable[[], T]) -> T | None:
    """Best effort for the static checks: anything that fails here fails again, loudly, at run time."""
    try:
        return fn()
    except (ToolshellError, RecursionError, ValueError):
        return None
