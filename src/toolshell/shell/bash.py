"""The bashkit adapters: a sandboxed shell with `tools` registered, and collecting its output.

The shell has no host filesystem, network or environment unless `[shell]` grants them. Output is
collected through bashkit's synchronous `on_output` callback (the async sinks can drop text printed
just before a cancel) with a byte cap.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from bashkit import Bash, BuiltinContext, BuiltinResult, ExecutionProfile, FileSystem

from toolshell.config import ShellConfig
from toolshell.errors import ErrorCode, ToolshellError, error_line

WORKDIR = "/home/user"
Builtin = Callable[[BuiltinContext], Awaitable[BuiltinResult]]
NETWORK_COMMANDS = ("curl", "wget", "http")
"""Commands that reach the network: a saved script gets none of them (seed: "no curl")."""


def new_shell(config: ShellConfig, tools: Builtin, *, network: bool = True) -> Bash:
    """A fresh sandboxed shell with `tools` registered (saved scripts run in their own, `network=False`)."""
    builtins: dict[str, Any] = {"tools": tools}
    if not network:
        builtins.update(dict.fromkeys(NETWORK_COMMANDS, _no_network_in_saved_scripts))
    env = {name: os.environ[name] for name in config.env if name in os.environ}
    kwargs: dict[str, Any] = {}
    if config.network_allow and network:  # a saved script gets no network at all
        kwargs["network"] = {"allow": list(config.network_allow)}
    bash = Bash(
        cwd=WORKDIR,
        env=env,
        custom_builtins=builtins,
        profile=ExecutionProfile.Interactive,
        timeout_seconds=config.timeout_seconds,
        max_commands=config.max_commands,
        max_loop_iterations=config.max_loop_iterations,
        **kwargs,
    )
    for m in config.mounts:
        bash.mount(m.path, FileSystem.real(m.host, writable=m.writable), read_only=not m.writable)
    return bash


def both_streams(stdout: Callable[[str], None], stderr: Callable[[str], None]) -> Callable[[str, str], None]:
    """bashkit's synchronous output callback: it loses nothing, even on cancel."""

    def on_output(out: str, err: str) -> None:
        stdout(out)
        stderr(err)

    return on_output


class Capped:
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


async def _no_network_in_saved_scripts(ctx: BuiltinContext) -> BuiltinResult:
    err = ToolshellError(ErrorCode.UNAVAILABLE, f"{ctx.name} is not available inside a saved script")
    return BuiltinResult(stderr=error_line(err), exit_code=1)
