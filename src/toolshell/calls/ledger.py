"""The ledger of one shell call: the call budget, the stop report, hints and the timeline rows.

Every `tools` call of a script, and of the saved scripts it runs, goes through one ledger, so they
share one budget of `call_limit` calls and one report. A call is recorded when its result comes
back, before anything renders it: a call that really ran is in `done` whatever happens next.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from toolshell.builtin.hints import hints_from_result
from toolshell.calls.prepare import PreparedCall
from toolshell.command.inputs import given_input
from toolshell.command.render import structured_value
from toolshell.errors import ErrorCode, StopScript, ToolshellError
from toolshell.policy.credentials import mask_credentials
from toolshell.policy.report import ScriptReport
from toolshell.policy.risk import READ_ONLY
from toolshell.redact import Redactor
from toolshell.registry.entry import ToolEntry
from toolshell.timeline.address import caller_address
from toolshell.timeline.events import NestedCall, Outcome, ShellCall, cut, outcome_for, preview
from toolshell.timeline.sinks import EventSink

if TYPE_CHECKING:  # the OpenTelemetry SDK loads only when tracing is on
    from toolshell.telemetry.metrics import Metrics
    from toolshell.telemetry.spans import ShellTrace, Telemetry
    from toolshell.timeline.audit import AuditLog

COMMAND_LIMIT = 120
"""The longest command a timeline row names for a call that named no tool (the words are the script's)."""


class Ledger:
    """Budget, report and timeline of one shell call.

    Args:
        shell_call_id: the shell call's timeline id.
        session_id: the session it runs in.
        call_limit: the most `tools` calls it may make (`[tools_in_shell] call_limit`).
        sink: where timeline events go.
        redact: takes the config's secrets out of the previews.
        caller: who made the shell call (`Session.caller`), recorded on its row.
        worker: the host running it (`Host.worker_id`), recorded on its row.
        telemetry: the host's tracer (None: tracing is off).
        metrics: the host's instruments (None: metrics are off).
        audit: the host's audit trail (None: `[audit]` is off).
    """

    def __init__(
        self,
        shell_call_id: str,
        session_id: str,
        call_limit: int,
        sink: EventSink,
        redact: Redactor | None = None,
        caller: str | None = None,
        worker: str | None = None,
        telemetry: Telemetry | None = None,
        metrics: Metrics | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        self.shell_call_id = shell_call_id
        self.audit = audit
        self.caller = caller
        self.address = caller_address()  # the request's, when `serve` runs it (`timeline.address`)
        self.worker = worker
        self.session_id = session_id
        self.call_limit = call_limit
        self.sink = sink
        self.redact = redact or Redactor()
        self.calls = 0
        self.by_command: Counter[str] = Counter()
        self.report = ScriptReport()
        self.hints: list[str] = []
        self.stopped = False
        self._rows = 0
        self.metrics = metrics
        self.trace: ShellTrace | None = (
            None if telemetry is None else telemetry.shell_trace(shell_call_id, session_id, caller)
        )

    def charge(self, prepared: PreparedCall) -> None:
        """Count one call against the budget; the call past it stops the script with `call_limit`."""
        self.calls += 1
        if self.calls > self.call_limit:
            raise StopScript(ToolshellError(ErrorCode.CALL_LIMIT, self._over_budget(prepared)), prepared.call)
        self.by_command[prepared.entry.command] += 1
        if self.trace is not None:
            self.trace.call_started(prepared.entry, prepared.input)

    def _over_budget(self, prepared: PreparedCall) -> str:
        """The `call_limit` message: how the calls were spent, and the shape that needs fewer."""
        command, most = self.by_command.most_common(1)[0] if self.by_command else (prepared.entry.command, 0)
        spent = f" ({most} of them {command})" if most > 1 else ""
        server = f"tools {prepared.entry.server.replace('_', '-')} --help" if prepared.entry.server else "tools --help"
        return (
            f"more than {self.call_limit} tool calls in one shell call{spent}; make fewer, bigger calls: "
            f"one call that takes many items (an array argument, e.g. read-multiple-files paths='[…]'; "
            f"`{server}` shows each tool's arguments), or one listing or search filtered with jq, "
            f"instead of one call per item; or raise [tools_in_shell] call_limit. "
            "Write a new script for the rest"
        )

    def completed(self, prepared: PreparedCall, risk_level: str, result: Any, started: float) -> None:
        """Record a call whose result came back (ok or a tool's error result)."""
        ok = not result.is_error
        if self.trace is not None:
            self.trace.call_result(risk_level, result)
        value = None if risk_level == READ_ONLY else _result_value(result, prepared.entry)
        command = prepared.entry.command  # computed from the entry's words: once
        self.report.record(command, prepared.input, risk_level, ok, value)
        if prepared.entry.hints:  # attributed: the model must know which server is talking
            source = prepared.entry.server or "toolshell"
            self.hints.extend(f"{source}: {hint}" for hint in hints_from_result(result))
        if ok:
            size = None if self.audit is None else result_size(result)
            self.emit(prepared.entry, prepared.input, "completed", None, started, command, size)
        if risk_level != READ_ONLY:  # what changed something is written now, not in the next batch
            flush = getattr(self.sink, "flush", None)
            if flush is not None:
                flush()

    def failed_in_flight(self, prepared: PreparedCall, risk_level: str, err: ToolshellError) -> None:
        """Record a call that was sent and failed (a timeout or a crash may still have changed something)."""
        if self.trace is not None:
            self.trace.call_failed(risk_level)
        self.report.record(prepared.entry.command, prepared.input, risk_level, False, {"error": err.message})

    def ended(self, entry: ToolEntry, arguments: dict[str, Any], code: str, started: float | None) -> None:
        """The timeline row of a call that ended with an error code (refused, failed, stopped)."""
        self.emit(entry, arguments, outcome_for(code), code, started)

    def ended_unresolved(self, words: list[str], code: str, started: float | None) -> None:
        """The timeline row of a call that named no tool it could reach (`unknown_command`, a server
        not available): the words that named it (up to two), and what the rest gave."""
        named: list[str] = []
        for word in words[:2]:
            if word.startswith("-") or "=" in word or word.lstrip()[:1] in ("{", "["):
                break
            named.append(word)
        command = cut(" ".join(["tools", *named]), COMMAND_LIMIT)
        arguments = given_input(words[len(named) :])
        ms = self._row(command, arguments, outcome_for(code), code, started)
        if self.trace is not None:
            self.trace.call_unresolved(command, arguments, outcome_for(code), code, ms)
        if self.metrics is not None:  # no tool was resolved: one fixed label, whatever the words (issue 30 §5)
            self.metrics.unresolved_call(outcome_for(code), code, ms)
        if self.audit is not None:
            self._audit(None, command, arguments, outcome_for(code), code, ms, None)

    def stop(self, stop: StopScript) -> None:
        """The script ends at this call: nothing after it runs."""
        self.stopped = True
        self.report.stop(str(stop.error.code), stop.call or {}, approval=stop.approval, request_id=stop.request_id)

    def shell_call(self, script: str, started_at: float, source: str, exit_code: int | None) -> None:
        """The shell call's own row: written when it starts (so a run that never ends still shows) and
        again with its exit code."""
        self.sink.emit(
            ShellCall(
                id=self.shell_call_id,
                session_id=self.session_id,
                script_preview=self.redact(script[:200]),
                exit_code=exit_code,
                started_at=started_at,
                duration_ms=None if exit_code is None else (time.time() - started_at) * 1000,
                source=source,  # type: ignore[arg-type]  # one of agent/cli/trigger/script
                caller=self.caller,
                address=self.address,
                worker=self.worker,
            )
        )
        if self.trace is not None:
            self.trace.shell_call(script, source, exit_code, self.calls)
        if self.metrics is not None and exit_code is not None:
            self.metrics.shell_call(source, exit_code, time.time() - started_at)
        if self.audit is not None and exit_code is not None:
            self.audit.shell_call(
                shell_call_id=self.shell_call_id,
                session_id=self.session_id,
                caller=self.caller,
                address=self.address,
                source=source,
                exit_code=exit_code,
                duration_ms=(time.time() - started_at) * 1000,
            )

    def emit(
        self,
        entry: ToolEntry,
        arguments: dict[str, Any],
        outcome: Outcome,
        code: str | None,
        started: float | None,
        command: str | None = None,
        result_bytes: int | None = None,
    ) -> None:
        """The timeline row (and span) of a call; `command` is `entry.command` when the caller has it."""
        ms = self._row(command or entry.command, arguments, outcome, code, started)
        if self.trace is not None:
            self.trace.call_ended(entry, arguments, outcome, code, ms)
        if self.metrics is not None:
            self.metrics.nested_call(entry.server, entry.name, outcome, code, ms)
        if self.audit is not None:
            self._audit(entry.server, entry.name, arguments, outcome, code, ms, result_bytes)

    def _audit(
        self,
        server: str | None,
        tool: str,
        arguments: dict[str, Any],
        outcome: str,
        code: str | None,
        ms: float,
        result_bytes: int | None,
    ) -> None:
        if self.audit is None:
            return
        self.audit.nested_call(
            shell_call_id=self.shell_call_id,
            session_id=self.session_id,
            caller=self.caller,
            address=self.address,
            server=server,
            tool=tool,
            arguments=arguments,
            outcome=outcome,
            error_code=code,
            duration_ms=ms,
            result_bytes=result_bytes,
        )

    def _row(
        self, command: str, arguments: dict[str, Any], outcome: Outcome, code: str | None, started: float | None
    ) -> float:
        """Write the timeline row of a call; its duration in ms."""
        ms = 0.0 if started is None else round((time.perf_counter() - started) * 1000, 3)
        self._rows += 1
        shown = mask_credentials(preview(arguments))  # the timeline keeps a marker, never a credential
        if self.redact:  # no secrets configured: nothing to mask
            command, shown = self.redact(command), self.redact(shown)
        self.sink.emit(
            NestedCall(
                id=f"{self.shell_call_id}.{self._rows}",  # unique: the shell call's id is random
                shell_call_id=self.shell_call_id,
                session_id=self.session_id,
                command=command,
                input_preview=shown,
                outcome=outcome,
                error_code=code,
                duration_ms=ms,
                started_at=time.time(),
            )
        )
        return ms


def result_size(result: Any) -> int:
    """The result's size in bytes: its text blocks, and its structured content as JSON."""
    size = sum(len(str(getattr(b, "text", "")).encode("utf-8", "surrogatepass")) for b in result.content)
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        size += len(json.dumps(structured, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
    return size


def _result_value(result: Any, entry: ToolEntry) -> Any:
    """The result as the report shows it: structured content, else parsed JSON text, else text."""
    value = structured_value(result, entry.output_schema)
    if value is not None:
        return value
    text = "\n".join(str(getattr(b, "text", "")) for b in result.content if getattr(b, "type", "") == "text")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # too deep to parse is text, like anything else that is not JSON
        return text
