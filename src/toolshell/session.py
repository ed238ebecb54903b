"""A session: one sandboxed bashkit shell per agent session, running scripts that call `tools`.

Its virtual filesystem persists between runs. A run is one shell call: the literal calls are
checked before the script starts, then the script runs with one `tools` builtin state (budget,
report, stop) for the whole shell call. The catalog is the session's as it is when the shell call
first needs it (a script with no `tools` call needs none).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import shlex
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio
from bashkit import BuiltinContext, BuiltinResult

from toolshell.builtin.hints import HintAccumulator
from toolshell.calls.approval import ApprovalGate, Approver, store_waiter
from toolshell.calls.asking import BEFORE_START, asking_for
from toolshell.calls.ledger import Ledger
from toolshell.calls.pipeline import CallTarget, Pipeline, short_of
from toolshell.calls.prepare import prepare_input, resolve
from toolshell.calls.replay import CallFeed
from toolshell.calls.view import CatalogView
from toolshell.command.masking import masked_result
from toolshell.config import Config
from toolshell.connections.base import Answerer, SessionContext
from toolshell.errors import ErrorCode, StopScript, ToolshellError, error_line
from toolshell.policy.policy import Policy
from toolshell.redact import Redactor, redact_json
from toolshell.registry.catalog import Catalog
from toolshell.registry.entry import ToolEntry
from toolshell.result import RunResult
from toolshell.scripts.store import ScriptStore
from toolshell.shell.bash import MAX_FILE_BYTES, OutputFiles, both_streams
from toolshell.shell.builtin import ToolsBuiltin
from toolshell.shell.outcome import OnOutput, outcome, shell_cut, streamed
from toolshell.shell.output import Bounded, Collected, Collector, bound, where_saved
from toolshell.shell.pool import Shell, ShellPool
from toolshell.shell.precheck import Precheck, may_hold
from toolshell.shell.state import ShellCallState
from toolshell.timeline.events import Event
from toolshell.timeline.sinks import EventSink, ObservedSink
from toolshell.utf8 import not_utf8

if TYPE_CHECKING:  # telemetry: the OpenTelemetry SDK loads only when tracing is on
    from toolshell.telemetry.metrics import Metrics
    from toolshell.telemetry.spans import Telemetry
    from toolshell.timeline.audit import AuditLog

INTERRUPTED = 130
"""The exit code a shell call's row ends with when its caller cancels it (as a shell's after SIGINT)."""
Source = Literal["agent", "cli", "trigger", "script"]


@dataclass(frozen=True)
class SessionServices:
    """The few things of its host a session uses (the host builds them; tests can too)."""

    config: Config
    policy: Policy
    sink: EventSink
    scripts: ScriptStore
    project_id: str
    redact: Redactor
    """Removes the config's secrets from everything a script or the agent sees."""
    catalog: Callable[[Session], Awaitable[Catalog]]
    """The session's catalog, built now."""
    load_server: Callable[[str], Awaitable[None]]
    target: Callable[[Session], CallTarget]
    """Makes this session's calls on the connections."""
    end: Callable[[str], None]
    """Forget what the host keeps for a session id (open questions, runtime switches)."""
    visible_tools: Callable[[Session], Awaitable[list[ToolEntry]]]
    """The `keep_visible` tools: `Host.visible_tools`."""
    kept_catalog: Callable[[Session], Catalog | None] = lambda session: None
    """The session's last catalog while a build now would give it again, building nothing
    (`CatalogMemo.kept`); None otherwise."""
    worker: str = ""
    """The host's id among the workers on its store (`Host.worker_id`)."""
    telemetry: Telemetry | None = None  # telemetry: the host's tracer; None when tracing is off
    metrics: Metrics | None = None  # metrics: the host's instruments; None when metrics are off
    audit: AuditLog | None = None
    """The `[audit]` trail (None: off)."""
    shells: ShellPool | None = None
    """Spare shells of ended sessions (None: every session builds its own)."""


class Session:
    """One agent session. Create with `host.session(...)`.

    Args:
        services: what it uses of its host.
        session_id: a stable id (default: a new random one).
        role: the session's role (default: the config's `role`).
        answerer: who answers the servers' questions for this session.
        source: who runs it, for the timeline: agent, cli, trigger or script.
        workdir: the working directory servers are told about (default: the process's).
        caller: who is calling (the identity `toolshell serve` authenticated); recorded on every
            shell call and approval request, and what per-caller state is keyed by. None: this
            machine's user (the CLI, the Python API).
    """

    def __init__(
        self,
        services: SessionServices,
        *,
        session_id: str | None = None,
        role: str | None = None,
        answerer: Answerer | None = None,
        source: Source = "agent",
        workdir: str | None = None,
        caller: str | None = None,
    ) -> None:
        self.services = services
        self.caller = caller
        config = services.config
        self.id = session_id or uuid.uuid4().hex[:16]
        self.role = role if role is not None else config.role
        self.answerer = answerer
        self.source = source
        workdir = workdir or os.getcwd()
        self._context = SessionContext(
            session_id=self.id,
            role=(self.role or "").split(":")[0],
            spec=(self.role or "").partition(":")[2],
            workdir=workdir,
            project=services.project_id,
            git=os.path.isdir(os.path.join(workdir, ".git")),
        )
        self._epochs = itertools.count(1)
        self.hints = HintAccumulator()
        self.approver: Approver | None = None
        """Asks a person on the spot (`[approval] inline`): returns "once", "always" or "deny"."""
        self._run_approver: Approver | None = None
        self._current: ToolsBuiltin | None = None
        self._held_by: tuple[Catalog, bool] | None = None
        """The last catalog `_may_hold` judged, and its answer."""
        self._lock = anyio.Lock(fast_acquire=True)  # free (one run at a time): no trip round the loop
        self.shell = services.shells.take(self._tools) if services.shells else Shell(config.shell, self._tools)
        """The session's sandboxed shell (handed on to a later session by `Host.run` when it ends)."""
        self.bash = self.shell.bash
        self.output_files = OutputFiles(self.bash.fs, config.tools_in_shell.output_files_max_bytes)
        """The whole outputs of this session's shell calls past the cap (`tool-output/`)."""

    async def _tools(self, ctx: BuiltinContext) -> BuiltinResult:
        current = self._current
        if current is None:  # a `tools` call outside `run` (cannot happen through the API)
            return BuiltinResult(stderr="tools: no shell call in progress\n", exit_code=1)
        await current.state.view.current()  # the shell call's first `tools` command builds its catalog
        return await current(ctx)

    @property
    def context(self) -> SessionContext:
        """What external servers are told about this session (seed 001, "Session Context")."""
        return self._context

    @property
    def context_epoch(self) -> int:
        return self._context.context_epoch

    def new_context_epoch(self) -> int:
        """Say the model lost tool results it was served (compaction, trims, a discarded answer).

        Servers that answer relative to earlier results ("unchanged since your last view") must
        start over; the epoch never repeats within a session. Agent builders call this after they
        compact or rewrite the model's context.
        """
        self._context = dataclasses.replace(self._context, context_epoch=next(self._epochs))
        return self._context.context_epoch

    async def call_tool(self, server: str | None, tool: str, arguments: dict[str, Any]) -> Any:
        """Call one tool directly (a `keep_visible` tool, an LLM's direct call), by the shell's rules.

        The call goes through the same pipeline as a script's (validation, guards, policy,
        approvals), is one shell call of one `tools` call in the timeline, and its result and errors
        have the config's secrets taken out, as a script's output does. A call that needs approval
        is not made: nobody can be asked on a direct call, so the request waits for a person.

        Raises:
            ToolshellError: `unknown_command`, `invalid_input`, `denied`, `needs_approval`, `unavailable`...
        """
        refused = not_utf8("the input", json.dumps(arguments, ensure_ascii=False))
        if refused is not None:  # lone surrogates from a client's JSON: no server could read them
            raise ToolshellError(ErrorCode.INVALID_INPUT, refused)
        services = self.services
        words = [server, tool] if server else [tool]
        ledger = Ledger(
            uuid.uuid4().hex[:16],
            self.id,
            1,
            services.sink,
            services.redact,
            caller=self.caller,
            worker=services.worker,
            telemetry=services.telemetry,  # telemetry
            metrics=services.metrics,  # metrics
            audit=services.audit,
        )
        script = shlex.join(["tools", *words])
        started, exit_code = time.time(), 1
        ledger.shell_call(script, started, self.source, None)
        try:
            result = await self._call_directly(ledger, words, arguments)
            exit_code = 1 if result.is_error else 0
            return masked_result(result, services.redact)
        except ToolshellError as err:
            err.message = services.redact(err.message)
            raise
        finally:
            ledger.shell_call(script, started, self.source, exit_code)

    async def _call_directly(self, ledger: Ledger, words: list[str], arguments: dict[str, Any]) -> Any:
        services = self.services
        view = CatalogView(await services.catalog(self), services.load_server, lambda: services.catalog(self))
        await view.ensure_loaded(words)
        entry, _ = resolve(view.catalog, words)
        gate = ApprovalGate(services.policy.approvals, self.id, approver=None, caller=self.caller)
        pipeline = Pipeline(ledger, services.policy, gate, services.target(self))
        started = time.perf_counter()
        prepared = None
        try:
            prepared = prepare_input(entry, arguments)
            sent = await pipeline.send(prepared)
        except StopScript as stop:  # nobody to ask on a direct call: the request waits for a person
            ledger.ended(entry, arguments if prepared is None else prepared.input, str(stop.error.code), None)
            raise stop.error from None
        except ToolshellError as err:
            ledger.ended(entry, arguments if prepared is None else prepared.input, str(err.code), started)
            raise
        if sent.result.is_error:
            ledger.ended(entry, sent.prepared.input, str(ErrorCode.TOOL_ERROR), started)
        return sent.result

    async def visible_tools(self) -> list[ToolEntry]:
        """The `keep_visible` tools this session can call directly."""
        return await self.services.visible_tools(self)

    def commit(self, have: Collection[str] = ()) -> tuple[str, dict[str, bytes]]:
        """The shell's state (files, working directory, variables, functions) as a bashkit commit:
        its id and the objects not among `have` (those a store already holds)."""
        packed = self.bash.commit(have=list(have) or None)
        return str(packed.id), dict(packed.objects)

    def checkout(self, commit: str, objects: Mapping[str, bytes]) -> None:
        """Take the shell's state from a commit and its objects.

        Raises:
            ToolshellError: `unavailable` when they do not make a whole, valid state.
        """
        try:
            self.bash.checkout(commit, dict(objects))
        except Exception as exc:  # bashkit.BashError: a missing or malformed object
            raise ToolshellError(
                ErrorCode.UNAVAILABLE, f"the saved shell could not be checked out ({exc}); start a new shell"
            ) from None

    def close(self) -> None:
        """End the session: its open elicitation questions are answered `cancel`, its switches dropped."""
        self.services.end(self.id)

    async def run(
        self,
        script: str,
        *,
        answerer: Answerer | None | Literal["session"] = "session",
        approver: Approver | None = None,
        on_output: OnOutput | None = None,
        on_event: Callable[[Event], None] | None = None,
        feed: CallFeed | None = None,
    ) -> RunResult:
        """Run one script as one shell call, with the catalog as it is when the script first needs it.

        Shell calls of one session run one at a time (they share one shell and its files).
        `answerer` answers the servers' questions for this run only (default: the session's);
        `approver` asks about calls that need approval in this run (the caller applied `inline`).
        `on_output(stdout, stderr)` gets the output as the script writes it, in order and with the
        config's secrets masked (a terminal shows progress and which command failed); the result
        still holds the capped whole. `on_event` sees each timeline event of this run (a nested
        call ended) as it is recorded. `feed` records the nested calls (and answers a run resumed by
        replay from the record: `calls.replay`).
        """
        refused = not_utf8("the script", script, script=True)
        if refused is not None:  # lone surrogates from a client's JSON: bashkit and the store take UTF-8 only
            refusal = error_line(ToolshellError(ErrorCode.INVALID_INPUT, refused))
            if on_output is not None:
                on_output("", refusal)
            return RunResult(1, "", refusal)
        async with self._lock:
            kept = self.answerer, self._run_approver
            if answerer != "session":
                self.answerer = answerer
            self._run_approver = approver
            try:
                return await self._run(script, on_output, on_event, feed)
            finally:
                self.answerer, self._run_approver = kept

    async def _run(
        self,
        script: str,
        on_output: OnOutput | None = None,
        on_event: Callable[[Event], None] | None = None,
        feed: CallFeed | None = None,
    ) -> RunResult:
        services, config = self.services, self.services.config
        ledger = Ledger(
            uuid.uuid4().hex[:16],
            self.id,
            config.tools_in_shell.call_limit,
            services.sink if on_event is None else ObservedSink(services.sink, on_event),
            services.redact,
            caller=self.caller,
            worker=services.worker or None,
            telemetry=services.telemetry,  # telemetry
            metrics=services.metrics,  # metrics
            audit=services.audit,
        )
        started = time.time()
        ledger.shell_call(script, started, self.source, None)  # recorded now: a run that never ends shows
        try:
            return await self._started(script, ledger, started, on_output, feed)
        except anyio.get_cancelled_exc_class():  # stopped before its script ran (waiting at the before-start check)
            ledger.shell_call(script, started, self.source, INTERRUPTED)
            raise
        except Exception:
            # The run failed (the store lost mid-run, say): its row ends, never left `running`.
            with contextlib.suppress(Exception):  # the store may still be down; the first error is the one
                ledger.shell_call(script, started, self.source, 1)
            raise

    async def _started(
        self, script: str, ledger: Ledger, started: float, on_output: OnOutput | None, feed: CallFeed | None
    ) -> RunResult:
        services, config = self.services, self.services.config
        kept = services.kept_catalog(self)  # the catalog as a build now would give it, when the session has one
        view = CatalogView(kept, services.load_server, lambda: services.catalog(self))  # else built when first needed
        gate = ApprovalGate(
            services.policy.approvals, self.id, self._approver(), caller=self.caller, metrics=services.metrics
        )
        precheck = Precheck(view, services.policy, gate, ledger)
        # A run resumed by replay passed this check when it first started: its calls are not asked about again.
        # Nor is a script none of whose calls could be held (`_may_hold`): then the check reads nothing.
        held = None
        if (feed is None or not feed.checked) and (kept is None or self._may_hold(kept)):
            with asking_for(BEFORE_START):
                held = await precheck.hold_before_start(script)
        if held is not None:
            ledger.shell_call(script, started, self.source, 1)
            stopped = self._result(1, "", error_line(held.error()), ledger)
            if on_output is not None:
                on_output("", stopped.stderr)
            return stopped
        cap = config.tools_in_shell.max_output_bytes
        # Bounded memory: the head a file can hold, and the tail the answer shows; the middle is counted.
        out, err = Collector(MAX_FILE_BYTES, cap), Collector(MAX_FILE_BYTES, cap)
        collect = both_streams(out.add, err.add)
        if on_output is not None:
            collect = streamed(collect, on_output, services.redact, lambda: ledger.stopped)
        state = ShellCallState(
            view=view,
            ledger=ledger,
            pipeline=Pipeline(ledger, services.policy, gate, services.target(self), feed),
            precheck=precheck,
            scripts=services.scripts,
            manage_scripts=config.tools_in_shell.manage_scripts,
            shell_config=config.shell,
            max_output_bytes=cap,
            shells=[self.bash],
            stderr_sink=lambda line: collect("", line),
            redact=services.redact,
            max_result_bytes=config.tools_in_shell.max_result_bytes,
        )
        self._current = ToolsBuiltin(state)
        try:
            result = await self.bash.execute(script, on_output=collect)
        except anyio.get_cancelled_exc_class():  # the caller went away (a Ctrl-C, a closed connection)
            self.bash.cancel()
            ledger.shell_call(script, started, self.source, INTERRUPTED)
            raise
        finally:
            self._current = None
            self.bash.clear_cancel()
        short = None if feed is None or ledger.stopped else await short_of(feed)
        if short is not None:  # a resumed run that made fewer calls than its first run: not a success
            ledger.stop(short)
            collect("", error_line(short.error))
        errs = err.collected()
        exit_code, end = outcome(result, ledger.stopped, errs.end, services.config.shell.timeout_seconds)
        if on_output is not None and end.startswith(errs.end) and end != errs.end:
            on_output("", services.redact(end[len(errs.end) :]))  # the notes `outcome` added
        call_id = ledger.shell_call_id
        stdout = self._bounded(shell_cut(out.collected(), result, "stdout"), cap, call_id, "stdout")
        err_cap = cap - len(stdout.note.encode())  # the JSON cut's note goes on stderr, inside its cap
        stderr = self._bounded(shell_cut(errs.with_end(end), result, "stderr"), err_cap, call_id, "stderr")
        ledger.shell_call(script, started, self.source, exit_code)
        return self._result(exit_code, stdout.text, stderr.text + stdout.note, ledger)

    def _may_hold(self, catalog: Catalog) -> bool:
        """`precheck.may_hold`, kept for the catalog it was worked out for (the same object while
        nothing it is built from changed; the policy's rules are the host's for its life)."""
        if self._held_by is None or self._held_by[0] is not catalog:
            self._held_by = (catalog, may_hold(catalog, self.services.policy))
        return self._held_by[1]

    def _bounded(self, stream: Collected, cap: int, shell_call_id: str, name: str) -> Bounded:
        """A stream within `cap` bytes; past it, the whole is saved as `tool-output/<id>.<name>`."""
        whole = stream.whole
        if whole is not None and not stream.shell_cut and len(whole.encode("utf-8", "surrogatepass")) <= cap:
            return Bounded(whole)
        try:
            path, kept = self.output_files.save(f"{shell_call_id}.{name}", stream.saved_text())
            if kept is None and (whole is None or stream.shell_cut):  # the file has all we got, not all there was
                kept = stream.size
            where = where_saved(path, kept=kept)
        except RuntimeError as exc:  # bashkit's filesystem: read-only mount, full
            where = where_saved(None, str(exc))
        return bound(stream, cap, where, as_json=name == "stdout")

    def _approver(self) -> Approver | None:
        """Who is asked in this run: the run's, the session's (`inline`), or the store (`wait_for`)."""
        approval = self.services.config.approval
        if self._run_approver is not None:
            return self._run_approver
        if self.approver is not None and approval.inline:
            return self.approver
        return store_waiter(approval, self.services.policy.approvals, self.id, caller=self.caller)

    def _result(self, exit_code: int, stdout: str, stderr: str, ledger: Ledger) -> RunResult:
        """The shell call's result, with the config's secrets taken out of everything in it."""
        self.hints.extend(ledger.hints)
        redact = self.services.redact
        return RunResult(
            exit_code,
            redact(stdout),
            redact(stderr),
            tools=redact_json(ledger.report.to_json(exit_code), redact),
            hints=[redact(h) for h in self.hints.drain()],
        )


__all__ = ["RunResult", "Session", "SessionServices"]
