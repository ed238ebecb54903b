"""What a script says before it runs: the `tools` calls written out in full, judged as at run time.

Two users, one judgement: the before-start check (a literal call that needs approval holds the
whole script, seed "Approvals") and `tools plan`. Both read the script with the tree-sitter scanner
of `policy.plan`, load the lazy servers that literal calls name, and ask `Policy.assess`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolshell.command.argv import Invoke, parse
from toolshell.command.inputs import build_input
from toolshell.errors import ToolshellError
from toolshell.registry.entry import ToolEntry
from toolshell.registry.validate import validate_input

if TYPE_CHECKING:
    from toolshell.policy.risk import Risk
    from toolshell.shell_call import ShellCall


class Precheck:
    """The static view of one shell call's script."""

    def __init__(self, call: ShellCall) -> None:
        self.call = call
        self.host = call.host

    async def hold_before_start(self) -> None:
        """Stop the script before it starts when a call written out in full needs approval."""
        from toolshell.policy.plan import scan
        from toolshell.shell_call import approval_message

        call = self.call
        calls = scan(call.script).calls
        await self.load_named_servers(calls)
        granted_once: list[tuple[ToolEntry, dict[str, Any]]] = []
        for scanned in calls:
            resolved = self.resolve_literal(scanned)
            if resolved is None or not _valid(*resolved):
                continue  # built at run time, or input that fails its schema (that fails when it runs)
            entry, arguments = resolved
            risk = await self.host.policy.assess(entry, arguments)
            if risk.level != "needs_approval":
                continue
            answer = await call.ask_inline(entry, arguments, risk)
            if answer in ("once", "always"):
                if answer == "once":
                    granted_once.append((entry, arguments))
                continue  # granted on the spot: the run-time check uses the grant
            request = self.host.policy.approvals.request(
                entry, arguments, call.session.id, risk.why or "", message=risk.message
            )
            if answer == "deny":
                self.host.policy.approvals.deny(request.id)
            for done_entry, done_input in granted_once:  # the script does not run: nothing may use them
                self.host.policy.approvals.consume_once(done_entry, done_input)
            held = {"tool": entry.command, "input": arguments}
            approval = "denied" if answer == "deny" else "requested"
            call.report.stop("needs_approval", held, approval=approval, before_start=True)
            call.before_start_stop = {"request": request, "message": approval_message(entry, risk, request.id)}
            call.emit(entry, arguments, "stopped_for_approval", "needs_approval", 0.0)
            return

    async def load_named_servers(self, calls: list[Any]) -> None:
        """Load the lazy servers that literal calls name, so they can be judged before the run."""
        names = set()
        for scanned in calls:
            request = quiet(lambda c=scanned: parse([w for w in c.argv if w is not None])) if scanned.argv else None
            if isinstance(request, Invoke) and request.argv:
                look = quiet(lambda r=request: self.call.catalog.lookup(r.argv))
                if look is not None and look.server is not None and look.server.state != "ready":
                    names.add(look.server.name)  # lazy, still connecting, or failed (retried)
        for name in sorted(names):
            await quiet_async(self.host.load_server(name))
        if names:
            self.call.catalog = await self.host.catalog(self.call.session)

    def resolve_literal(self, scanned: Any) -> tuple[ToolEntry, dict[str, Any]] | None:
        """Entry and input of a fully literal call whose input does not come from stdin; else None."""
        if not scanned.literal or scanned.argv is None or scanned.input_from_stdin:
            return None
        request = quiet(lambda: parse(list(scanned.argv)))
        if not isinstance(request, Invoke):
            return None
        look = quiet(lambda: self.call.catalog.lookup(request.argv))
        if look is None or look.kind != "tool" or look.entry is None:
            return None
        # With no input arguments a call reads stdin; a top-level script's stdin is empty, so: {}.
        arguments = quiet(lambda: build_input(look.rest, None, look.entry.input_schema))
        return None if arguments is None else (look.entry, arguments)

    async def plan(self, script: str) -> dict[str, Any]:
        """`tools plan`: every call the scanner sees, with input and risk, as the before-start check judges."""
        from toolshell.policy.plan import plan_json_async, scan

        found = scan(script)
        await self.load_named_servers(found.calls)
        return await plan_json_async(found, self._plan_one)

    async def _plan_one(self, scanned: Any) -> tuple[str, dict[str, Any] | None, Risk, str | None] | None:
        from toolshell.policy.risk import Risk

        words = [w for w in (scanned.argv or []) if w is not None]
        if scanned.literal and not isinstance(quiet(lambda: parse(list(words))), Invoke):
            return None  # help, search, plan and scripts verbs call no tool
        literal = self.resolve_literal(scanned)
        if literal is not None:
            entry, arguments = literal
            risk = await self.host.policy.assess(entry, arguments)
            return entry.command, arguments, risk, _problem(lambda: validate_input(entry, arguments))
        look = quiet(lambda: self.call.catalog.lookup(words)) if words else None
        if look is not None and look.entry is not None:
            return look.entry.command, None, await self.host.policy.assess(look.entry, None), None
        text = "tools " + " ".join(words[:2]) if words else "tools …"
        unknown = _problem(lambda: self.call.catalog.lookup(words)) if scanned.literal and words else None
        return text, None, Risk("checked_at_run_time", message="the command is built while the script runs"), unknown


def _problem(check: Any) -> str | None:
    """`code: message` of the error a literal call will end with, or None."""
    try:
        check()
    except ToolshellError as e:
        return f"{e.code}: {e.message}"
    return None


def _valid(entry: ToolEntry, arguments: dict[str, Any]) -> bool:
    try:
        validate_input(entry, arguments)
    except ToolshellError:
        return False
    return True


def quiet(fn: Any) -> Any:
    """Best effort for the static checks: anything that fails here fails again, loudly, at run time."""
    try:
        return fn()
    except (ToolshellError, RecursionError, ValueError):
        return None


async def quiet_async(awaitable: Any) -> Any:
    try:
        return await awaitable
    except ToolshellError:
        return None
