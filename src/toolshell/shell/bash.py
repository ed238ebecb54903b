"""The bashkit adapters: a sandboxed shell with `tools` registered, and collecting its output.

The shell has no host filesystem, network or environment unless `[shell]` grants them. Output is
collected through bashkit's synchronous `on_output` callback (the async sinks can drop text printed
just before a cancel) into `shell.output.Collector`s; past the cap the whole output is saved in
the session's shell by `OutputFiles`.
"""

from __future__ import annotations

import os
import posixpath
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from bashkit import Bash, BuiltinContext, BuiltinResult, ExecutionProfile, FileSystem

from toolshell.config import ShellConfig
from toolshell.errors import ErrorCode, ToolshellError, error_line

WORKDIR = "/home/user"
OUTPUT_DIR = posixpath.join(WORKDIR, "tool-output")
"""Where a shell call's whole stdout and stderr go when they pass `max_output_bytes`."""
MAX_FILE_BYTES = 10_000_000
"""The most bashkit's filesystem holds in one file."""
Builtin = Callable[[BuiltinContext], Awaitable[BuiltinResult]]
NETWORK_COMMANDS = ("curl", "wget", "http")
"""Commands that reach the network: a saved script gets none of them (seed: "no curl")."""


def new_shell(config: ShellConfig, tools: Builtin, *, network: bool = True) -> Bash:
    """A fresh sandboxed shell with `tools` registered (saved scripts run in their own, `network=False`)."""
    builtins: dict[str, Any] = {"tools": tools}
    if not network:
        builtins.update(dict.fromkeys(NETWORK_COMMANDS, _no_network_in_saved_scripts))
    env = shell_env(config)
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


def shell_env(config: ShellConfig) -> dict[str, str]:
    """The variables `[shell] env` passes into a shell, as they are now."""
    return {name: os.environ[name] for name in config.env if name in os.environ}


def both_streams(stdout: Callable[[str], None], stderr: Callable[[str], None]) -> Callable[[str, str], None]:
    """bashkit's synchronous output callback: it loses nothing, even on cancel."""

    def on_output(out: str, err: str) -> None:
        stdout(out)
        stderr(err)

    return on_output


class OutputFiles:
    """A session's whole outputs past the cap, as files under `tool-output/` in its shell.

    The total stays within `bound` bytes: the oldest files are removed first, and one file holds at
    most half the bound (and no more than the sandbox allows in one file).

    Args:
        fs: the session shell's filesystem (`Bash.fs`).
        bound: `[tools_in_shell] output_files_max_bytes`.
    """

    def __init__(self, fs: Callable[[], FileSystem], bound: int) -> None:
        self._fs = fs
        self.bound = bound
        self._files: deque[tuple[str, int]] = deque()

    def save(self, name: str, text: str) -> tuple[str, int | None]:
        """Write `tool-output/<name>`; returns its absolute path, and the bytes it holds when that is
        less than all of `text` (else None). Raises RuntimeError (bashkit's filesystem errors:
        read-only, full)."""
        raw = text.encode("utf-8", "replace")
        data = raw[: min(self.bound // 2, MAX_FILE_BYTES)]
        fs = self._fs()
        while self._files and self.total + len(data) > self.bound:
            old, _ = self._files.popleft()
            if fs.exists(old):  # the script may have removed it already
                fs.remove(old)
        path = posixpath.join(OUTPUT_DIR, name)
        fs.mkdir(OUTPUT_DIR, recursive=True)
        fs.write_file(path, data)
        self._files.append((path, len(data)))
        return path, None if len(data) == len(raw) else len(data)

    @property
    def total(self) -> int:
        return sum(size for _, size in self._files)


async def _no_network_in_saved_scripts(ctx: BuiltinContext) -> BuiltinResult:
    err = ToolshellError(ErrorCode.UNAVAILABLE, f"{ctx.name} is not available inside a saved script")
    return BuiltinResult(stderr=error_line(err), exit_code=1)
