"""One shell call: the `tools` builtin's state from the first call of a script to its report.

The call path of one `tools` invocation reads top to bottom in `ShellCall.invoke`:
parse → resolve → build input → validate → guardrails → policy → call → guardrails → render.
Errors become the seed's JSON error line here and nowhere else (`_fail`).
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
import uuid
from typing import TYPE_CHECKING, Any, Literal

from bashkit import Bash, BuiltinContext, BuiltinResult

from toolshell.command.argv import Help, Plan, Scripts, Search, parse
from toolshell.command.helptext import search_text, server_help, tool_help, top_help, verb_help
from toolshell.command.inputs import build_input
from toolshell.command.render import error_line, render_result, structured_value
from toolshell.errors import ErrorCode, StopScript, ToolshellError
from toolshell.precheck import Precheck, quiet_async
from toolshell.registry.entry import ToolEntry
from toolshell.timeline.events import NestedCall, outcome_for, preview
from toolshell.timeline.events import ShellCall as ShellCallEvent

if TYPE_CHECKING:
    import mcp_types as types

    from toolshell.policy.risk import Risk
    from toolshell.registry.catalog import Catalog
    from toolshell.session import RunResult, Session

logger = logging.getLogger(__name__)
Outcome = Literal["completed", "failed", "refused", "stopped_for_approval"]
_STOPPED = "an earlier call stopped the script, so this call did not run"


class ShellCall:
    """State of one shell call, shared by nested saved-script runs (budget, report, stop)."""

    def __init__(self, session: Session, catalog: Catalog, script: str) -> None:
        from toolshell.policy.report import ScriptReport

        self.session = session
        self.host = session.host
        self.catalog = catalog
        self.script = script
        self.id = uuid.uuid4().hex[:16]
        self.started = time.time()
        self.calls = 0
        self.report = ScriptReport()
        self.stopped = False
        self.before_start_stop: dict[str, Any] | None = None
        self.shells: list[Bash] = [session.bash]
        self.stderr_sink: Any = None
        self.hints: list[str] = []

    # --- lifecycle ---------------------------------------------------------------------------

    @classmethod
    async def begin(cls, session: Session, script: str) -> ShellCall:
        call = cls(session, await session.host.catalog(session), script)
        call._emit_shell_call(None)  # recorded now, so a run that never finishes still shows up
        await Precheck(call).hold_before_start()
        return call

    def finish_before_start(self) -> RunResult:
        from toolshell.session import RunResult

        assert self.before_start_stop is not None
        msg = self.before_start_stop["message"]
        err = ToolshellError(ErrorCode.NEEDS_APPROVAL, f"the script did not start: {msg}")
        self._emit_shell_call(1)
        return RunResult(1, "", error_line(err), tools=self.report.to_json(), hints=self._drain_hints())

    def finish(self, exit_code: int, stdout: str, stderr: str) -> RunResult:
        from toolshell.session import RunResult

        self._emit_shell_call(exit_code)
        report = self.report.to_json()
        return RunResult(exit_code, stdout, stderr, tools=report, hints=self._drain_hints())

    def _drain_hints(self) -> list[str]:
        for hint in self.hints:
            self.session.hints.push(hint)
        return self.session.hints.drain()

    # --- the builtin -------------------------------------------------------------------------

    async def handle(self, ctx: BuiltinContext, *, depth: int) -> BuiltinResult:
        entry: ToolEntry | None = None
        arguments: dict[str, Any] | None = None
        started = time.perf_counter()
        try:
            if self.stopped:
                raise ToolshellError(ErrorCode.STOPPED, _STOPPED)
            request = parse(list(ctx.argv))
            if isinstance(request, Help):
                return BuiltinResult(stdout=await self._help(request.target))
            if isinstance(request, Search):
                return BuiltinResult(stdout=await self._search(request.query))
            if isinstance(request, Plan):
                plan = await Precheck(self).plan(ctx.stdin or "")
                return BuiltinResult(stdout=json.dumps(plan, indent=2, ensure_ascii=False) + "\n")
            if isinstance(request, Scripts):
                from toolshell.scripts.runner import run_scripts_verb

                return await run_scripts_verb(self, ctx, request.args, depth)
            entry, rest = await self._resolve(request.argv)
            arguments = build_input(rest, ctx.stdin, entry.input_schema)
            return await self.invoke(ctx, entry, arguments, started)
        except ToolshellError as err:
            if entry is not None:
                self.emit(entry, arguments or {}, outcome_for(str(err.code)), str(err.code), _ms(started))
            return self._fail(err)
        except StopScript as stop:
            return self._stop(stop)
        except Exception as exc:  # the boundary: a bug or an odd tool result must not lose the error line
            logger.debug("tools %s failed unexpectedly", " ".join(ctx.argv[:2]), exc_info=True)
            internal = ToolshellError(
                ErrorCode.UNAVAILABLE, f"tools could not run this command: {type(exc).__name__}: {exc}"
            )
            if entry is not None:
                self.emit(entry, arguments or {}, "failed", str(internal.code), _ms(started))
            return self._fail(internal)

    async def _resolve(self, argv: list[str]) -> tuple[ToolEntry, list[str]]:
        try:
            look = self.catalog.lookup(argv)
        except ToolshellError as err:
            raise self._if_disabled(argv[0]) or err from None
        needs_start = look.kind == "unloaded_server" or (look.server is not None and look.server.state != "ready")
        if needs_start and look.server is not None:
            # Load a lazy server, or restart a failed one (the connection applies its backoff).
            await self.host.load_server(look.server.name)
            self.catalog = await self.host.catalog(self.session)
            look = self.catalog.lookup(argv)
        if look.kind != "tool" or look.entry is None:
            name = look.server.name if look.server else argv[0]
            if look.server is not None and look.server.state != "ready":
                raise self._server_unavailable(look.server.name)
            raise ToolshellError(
                ErrorCode.UNKNOWN_COMMAND,
                f"'tools {name}' names a server, not a tool; run `tools {name} --help` to list its tools",
            )
        return look.entry, look.rest

    def _if_disabled(self, word: str) -> ToolshellError | None:
        """A clearer error than "no such tool" for a server this session switched off."""
        from toolshell.registry.naming import fold

        name = next((n for n in self.host.disabled_for(self.session.id) if fold(n) == fold(word)), None)
        if name is None:
            return None
        return ToolshellError(
            ErrorCode.UNAVAILABLE,
            f"server {name!r} is disabled for this session; `tools runtime mcp action=enable server={name}` "
            "turns it on again",
        )

    def _server_unavailable(self, name: str) -> ToolshellError:
        status = next((s for s in self.host.statuses() if s.name == name), None)
        why = f": {status.last_error}" if status is not None and status.last_error else ""
        return ToolshellError(
            ErrorCode.UNAVAILABLE,
            f"server {name!r} is not available{why}; `toolshell servers` shows its state and stderr",
            retryable=True,
        )

    async def invoke(
        self, ctx: BuiltinContext | None, entry: ToolEntry, arguments: dict[str, Any], started: float
    ) -> BuiltinResult:
        """Validate, judge, guard, call and render one tool call."""
        self.calls += 1
        limit = self.host.config.tools_in_shell.call_limit
        call = {"tool": entry.command, "input": arguments}
        if self.calls > limit:
            err = ToolshellError(
                ErrorCode.CALL_LIMIT,
                f"more than {limit} tool calls in one shell call; write a new script for the rest",
            )
            self.emit(entry, arguments, "refused", "call_limit", 0.0)
            raise StopScript(err, call)
        arguments, risk = await self.host.prepare(entry, arguments, self.session)
        call = {"tool": entry.command, "input": arguments}
        if risk.level == "blocked":
            raise ToolshellError(ErrorCode.DENIED, risk.message or f"{entry.command} is blocked by policy")
        if risk.level == "needs_approval":
            await self._hold_for_approval(entry, arguments, risk, call)
        try:
            result = await self.host.call_entry(entry, arguments, self.session)
        except ToolshellError as err:  # a timeout or a crash mid-call may still have changed something
            self.report.record(entry.command, arguments, risk.level, False, {"error": err.message})
            raise
        rendered = render_result(
            result,
            max_bytes=self.host.config.tools_in_shell.max_output_bytes,
            tool="-".join(w for w in (entry.server, entry.name) if w).replace("_", "-"),
            output_schema=entry.output_schema,
            taken=_taken_images(ctx) if _has_images(result) else frozenset(),
        )
        self.hints.extend(_hints(result))
        ok = rendered.error is None
        self.report.record(entry.command, arguments, risk.level, ok, _result_value(result, entry))
        if rendered.error is not None:
            raise _tool_error(rendered.error, entry)
        self.emit(entry, arguments, "completed", None, _ms(started))
        stderr = self._write_images(ctx, rendered.images) if ctx is not None else ""
        return BuiltinResult(stdout=_text_safe(rendered.stdout), stderr=stderr)

    async def _hold_for_approval(
        self, entry: ToolEntry, arguments: dict[str, Any], risk: Risk, call: dict[str, Any]
    ) -> None:
        """Return when a person approves on the spot; otherwise stop the script at this call."""
        answer = await self.ask_inline(entry, arguments, risk)
        if answer in ("once", "always"):
            self.host.policy.approvals.consume_once(entry, arguments)  # a no-op after an "always"
            return
        self.emit(entry, arguments, "stopped_for_approval", "needs_approval", 0.0)
        if answer == "deny":
            err = ToolshellError(ErrorCode.NEEDS_APPROVAL, f"{entry.command}: the person declined this call")
            raise StopScript(err, call, approval="denied")
        request = self.host.policy.approvals.request(
            entry, arguments, self.session.id, risk.why or "", message=risk.message
        )
        err = ToolshellError(ErrorCode.NEEDS_APPROVAL, approval_message(entry, risk, request.id))
        raise StopScript(err, call, approval="requested")

    async def ask_inline(self, entry: ToolEntry, arguments: dict[str, Any], risk: Risk) -> str | None:
        """With `[approval] inline`, ask the person on the spot: "once", "always", "deny"; None if nobody can."""
        approver = self.session.approver
        if not self.host.config.approval.inline or approver is None:
            return None
        approvals = self.host.policy.approvals
        request = approvals.request(entry, arguments, self.session.id, risk.why or "", message=risk.message)
        answer = await approver(entry, arguments, risk)
        if answer in ("once", "always"):
            approvals.grant(request.id, always=answer == "always")
        else:
            approvals.deny(request.id)
            answer = "deny"
        return answer

    def _write_images(self, ctx: BuiltinContext, images: list[Any]) -> str:
        lines = []
        for image in images:
            path = posixpath.join(ctx.cwd, image.suggested_name)
            ctx.fs.mkdir(posixpath.dirname(path), recursive=True)
            ctx.fs.write_file(path, image.data)
            lines.append(f"tools: image saved to {image.suggested_name} ({image.mime_type})\n")
        return "".join(lines)

    # --- stops and errors --------------------------------------------------------------------

    def _fail(self, err: ToolshellError) -> BuiltinResult:
        return BuiltinResult(stderr=_text_safe(error_line(err)), exit_code=1)

    def _stop(self, stop: StopScript) -> BuiltinResult:
        """End the script at this call: nothing after it runs, and it is never resumed."""
        self.stopped = True
        self.report.stop(str(stop.error.code), stop.call or {}, approval=stop.approval)
        line = error_line(stop.error)
        if self.stderr_sink is not None:
            self.stderr_sink(line)  # bashkit drops the output of the command that cancels
        for shell in self.shells:
            shell.cancel()
        return BuiltinResult(stderr=line, exit_code=1)

    # --- verbs -------------------------------------------------------------------------------

    async def _help(self, target: list[str]) -> str:
        if not target:
            return top_help(self.catalog)
        if len(target) == 1 and (text := verb_help(target[0])) is not None:
            return text
        entry, _ = await self._resolve_for_help(target)
        if entry is None:
            return server_help(self.catalog, target[0] if len(target) == 1 else target[0])
        return tool_help(entry)

    async def _resolve_for_help(self, target: list[str]) -> tuple[ToolEntry | None, Any]:
        look = self.catalog.lookup(target)
        if look.kind == "unloaded_server" and look.server is not None:
            await self.host.load_server(look.server.name)
            self.catalog = await self.host.catalog(self.session)
            look = self.catalog.lookup(target)
        if look.kind == "server" and look.server is not None:
            if look.rest:
                raise ToolshellError(
                    ErrorCode.UNKNOWN_COMMAND,
                    f"no tool {look.rest[0]!r} in server {look.server.name!r}; run `tools {look.server.name} --help`",
                )
            return None, look.server
        return look.entry, None

    async def _search(self, query: str) -> str:
        lazy = self.catalog.unloaded_servers_matching(query)
        for name in lazy:
            await quiet_async(self.host.load_server(name))
        if lazy:
            self.catalog = await self.host.catalog(self.session)
        return search_text(self.catalog.search(query))

    # --- timeline ----------------------------------------------------------------------------

    def emit(self, entry: ToolEntry, arguments: dict[str, Any], outcome: Outcome, code: str | None, ms: float) -> None:
        self.host.sink.emit(
            NestedCall(
                id=uuid.uuid4().hex[:16],
                shell_call_id=self.id,
                session_id=self.session.id,
                command=entry.command,
                input_preview=preview(arguments),
                outcome=outcome,
                error_code=code,
                duration_ms=ms,
                started_at=time.time(),
            )
        )

    def _emit_shell_call(self, exit_code: int | None) -> None:
        self.host.sink.emit(
            ShellCallEvent(
                id=self.id,
                session_id=self.session.id,
                script_preview=self.script[:200],
                exit_code=exit_code,
                started_at=self.started,
                duration_ms=None if exit_code is None else (time.time() - self.started) * 1000,
                source=self.session.source,  # type: ignore[arg-type]  # one of agent/cli/trigger/script
            )
        )


def approval_message(entry: ToolEntry, risk: Risk, request_id: str) -> str:
    why = risk.message or f"{entry.command} needs a person's approval ({risk.why})"
    return f"{why} (approval request {request_id}; a person runs `toolshell approvals grant {request_id}`)"


def _has_images(result: types.CallToolResult) -> bool:
    return any(getattr(b, "type", "") == "image" for b in result.content)


def _taken_images(ctx: BuiltinContext | None) -> frozenset[str]:
    if ctx is None:
        return frozenset()
    folder = posixpath.join(ctx.cwd, "tool-images")
    if not ctx.fs.exists(folder):
        return frozenset()
    return frozenset(f"tool-images/{e['name']}" for e in ctx.fs.read_dir(folder))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _text_safe(text: str) -> str:
    """Replace lone surrogates (a server's broken UTF-16) so the shell can carry the text."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _tool_error(err: ToolshellError, entry: ToolEntry) -> ToolshellError:
    """A tool's soft error. The top-level web-fetch's `denied:` refusal (its SSRF guard) is `denied`;
    an MCP server cannot fake a refusal that way."""
    if entry.server is None and err.message.startswith("denied:"):
        return ToolshellError(ErrorCode.DENIED, err.message.removeprefix("denied:").strip())
    return err


def _hints(result: types.CallToolResult) -> list[str]:
    from toolshell.builtin.functions import hints_from_result

    return hints_from_result(result)


def _result_value(result: types.CallToolResult, entry: ToolEntry) -> Any:
    """The result as the report shows it: structured content, else parsed JSON text, else text."""
    value = structured_value(result, entry.output_schema)
    if value is not None:
        return value
    texts = [str(getattr(b, "text", "")) for b in result.content if getattr(b, "type", "") == "text"]
    text = "\n".join(texts)
    try:
        return json.loads(text)
    except ValueError:
        return text
