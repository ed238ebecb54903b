"""A session: one sandboxed bashkit shell per agent session, running scripts that call `tools`.

The shell has no host filesystem, network or environment unless `[shell]` grants them. Its virtual
filesystem persists between runs of one session. Output is collected through bashkit's synchronous
`on_output` callback (the async sinks can drop text printed just before a cancel) with a byte cap.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
from bashkit import Bash, BuiltinContext, BuiltinResult, ExecutionProfile, FileSystem

from toolshell.builtin.functions import HintAccumulator
from toolshell.connections.base import Answerer, SessionContext
from toolshell.registry.entry import ToolEntry
from toolshell.shell_call import ShellCall

if TYPE_CHECKING:
    from toolshell.host import Host

WORKDIR = "/home/user"
Approver = Callable[[ToolEntry, dict[str, Any], Any], Awaitable[str]]
_CANCEL_NOISE = "execution cancelled"


@dataclass
class RunResult:
    """What one shell call returns: the `bash` tool's result for an agent."""

    exit_code: int
    stdout: str
    stderr: str
    tools: dict[str, Any] | None = None
    hints: list[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.exit_code == 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "exit_code": self.exit_code,
            "success": self.success,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }
        if self.tools is not None:
            out["tools"] = self.tools
        if self.hints:
            out["hints"] = self.hints
        return out


class _Capped:
    """Collects one stream up to a byte cap and says how much it dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def add(self, text: str) -> None:
        if not text:
            return
        n = len(text.encode())
        room = self.cap - self.size
        if n <= room:
            self.parts.append(text)
            self.size += n
            return
        if room > 0:
            self.parts.append(text.encode()[:room].decode("utf-8", "ignore"))
            self.size = self.cap
        self.dropped += n - max(room, 0)

    def text(self) -> str:
        body = "".join(self.parts)
        if self.dropped:
            body += f"\n[output cut: {self.dropped:,} bytes dropped; print less or filter with jq]\n"
        return body


class Session:
    """One agent session over a `Host`. Create with `host.session(...)`."""

    def __init__(
        self,
        host: Host,
        *,
        session_id: str | None = None,
        role: str | None = None,
        answerer: Answerer | None = None,
        source: str = "agent",
        workdir: str | None = None,
    ) -> None:
        self.host = host
        self.id = session_id or uuid.uuid4().hex[:16]
        self.role = role if role is not None else host.config.role
        self.answerer = answerer
        self.source = source
        self._context = SessionContext(
            session_id=self.id,
            role=(self.role or "").split(":")[0],
            spec=(self.role or "").partition(":")[2],
            workdir=workdir or os.getcwd(),
            project=host.project_id,
            git=os.path.isdir(os.path.join(workdir or os.getcwd(), ".git")),
        )
        self._epochs = itertools.count(1)
        self.hints = HintAccumulator()
        self.approver: Approver | None = None
        """Asks a person on the spot (`[approval] inline`): returns "once", "always" or "deny"."""
        self._current: ShellCall | None = None
        self._lock = anyio.Lock()
        self.bash = self.new_shell(self._tools_builtin)

    def new_shell(self, tools_fn: Any, *, network: bool = True) -> Bash:
        """A fresh sandboxed shell with `tools` registered (saved scripts run in their own)."""
        shell = self.host.config.shell
        builtins: dict[str, Any] = {"tools": tools_fn}
        if not network:
            builtins["curl"] = builtins["wget"] = builtins["http"] = _no_network_in_saved_scripts
        env = {name: os.environ[name] for name in shell.env if name in os.environ}
        kwargs: dict[str, Any] = {}
        if shell.network_allow and network:  # a saved script gets no network at all
            kwargs["network"] = {"allow": list(shell.network_allow)}
        bash = Bash(
            cwd=WORKDIR,
            env=env,
            custom_builtins=builtins,
            profile=ExecutionProfile.Interactive,
            timeout_seconds=shell.timeout_seconds,
            max_commands=shell.max_commands,
            max_loop_iterations=shell.max_loop_iterations,
            **kwargs,
        )
        for m in shell.mounts:
            bash.mount(m.path, FileSystem.real(m.host, writable=m.writable), read_only=not m.writable)
        return bash

    async def _tools_builtin(self, ctx: BuiltinContext) -> BuiltinResult:
        if self._current is None:  # a `tools` call outside `run` (cannot happen through the API)
            return BuiltinResult(stderr="tools: no shell call in progress\n", exit_code=1)
        return await self._current.handle(ctx, depth=0)

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

    def close(self) -> None:
        """End the session: its open elicitation questions are answered `cancel`, its switches dropped."""
        self.host.manager.cancel_session(self.id)
        self.host.forget_session(self.id)

    async def run(self, script: str, *, answerer: Answerer | None | Literal["session"] = "session") -> RunResult:
        """Run one script as one shell call; the catalog is rebuilt first.

        Shell calls of one session run one at a time (they share one shell and its files).
        `answerer` answers the servers' questions for this run only (default: the session's).
        """
        async with self._lock:
            if answerer == "session":
                return await self._run(script)
            kept, self.answerer = self.answerer, answerer
            try:
                return await self._run(script)
            finally:
                self.answerer = kept

    async def _run(self, script: str) -> RunResult:
        call = await ShellCall.begin(self, script)
        if call.before_start_stop is not None:
            return call.finish_before_start()
        out, err = _Capped(self.host.config.tools_in_shell.max_output_bytes), _Capped(1_000_000)
        call.stderr_sink = err.add
        self._current = call
        try:
            result = await self.bash.execute(script, on_output=both_streams(out.add, err.add))
            exit_code = result.exit_code
        finally:
            self._current = None
            self.bash.clear_cancel()
        stderr = err.text()
        if call.stopped and stderr.endswith(_CANCEL_NOISE):
            stderr = stderr[: -len(_CANCEL_NOISE)]
        if call.stopped:
            exit_code = exit_code or 1
        elif result.error and result.error not in stderr:
            stderr += f"{result.error}\n"
        if result.error and "timeout" in result.error:
            limit = self.host.config.shell.timeout_seconds
            stderr += (
                f"the script ran past the shell's {limit:g} s limit; raise [shell] timeout_seconds for longer runs\n"
            )
        return call.finish(exit_code, out.text(), stderr)


def both_streams(stdout: Callable[[str], None], stderr: Callable[[str], None]) -> Callable[[str, str], None]:
    """bashkit's synchronous output callback: it loses nothing, even on cancel."""

    def on_output(out: str, err: str) -> None:
        stdout(out)
        stderr(err)

    return on_output


async def _no_network_in_saved_scripts(ctx: BuiltinContext) -> BuiltinResult:
    line = '{"error":{"code":"unavailable","message":"%s is not available inside a saved script","retryable":false}}\n'
    return BuiltinResult(stderr=line % ctx.name, exit_code=1)
