"""Sandboxed shells handed on from ended sessions, reset, so a new session does not build one.

bashkit has no cheap clone (`Bash.from_snapshot` costs twice a new `Bash`), but `Bash.reset()`
puts a shell back to what its constructor made (no files, variables, functions, aliases, traps,
options; the working directory, environment, limits and network as configured; a spare built
when a `[shell] env` variable had another value is dropped) for a third of
the cost of a new shell and its first run. A shell is handed on only by its one user once its
shell call has ended (`Host.run`, whose session nobody else holds; bashkit's `execute` returns
after the script's background jobs), and its `tools` command is rebound to the new owner. Shells
with host folders mounted are never handed on (a reset re-applies only the constructor's mounts).
"""

from __future__ import annotations

from bashkit import Bash, BuiltinContext, BuiltinResult

from toolshell.config import ShellConfig
from toolshell.shell.bash import Builtin, new_shell, shell_env

POOL_SIZE = 16
"""Spare shells kept at most: about 30 KB each."""


class Shell:
    """One sandboxed shell and the `tools` command of whoever holds it now."""

    def __init__(self, config: ShellConfig, tools: Builtin) -> None:
        self.owner: Builtin | None = tools
        self.env = shell_env(config)
        """The `[shell] env` values it was built with (a reset restores these)."""
        self.bash: Bash = new_shell(config, self._tools)

    async def _tools(self, ctx: BuiltinContext) -> BuiltinResult:
        owner = self.owner
        if owner is None:  # handed back: nothing of the last owner runs
            return BuiltinResult(stderr="tools: no shell call in progress\n", exit_code=1)
        return await owner(ctx)


class ShellPool:
    """The spare shells of one host (one `[shell]` config)."""

    def __init__(self, config: ShellConfig, size: int = POOL_SIZE) -> None:
        self.config = config
        self.size = size if not config.mounts else 0
        self._spare: list[Shell] = []
        self.reused = 0
        """Shells handed on so far."""

    def take(self, tools: Builtin) -> Shell:
        """A shell whose `tools` command is `tools`: a spare one, else a new one."""
        if self._spare and self._spare[-1].env != shell_env(self.config):
            self._spare.clear()  # a variable `[shell] env` passes changed: spares would show the old value
        if not self._spare:
            return Shell(self.config, tools)
        shell = self._spare.pop()
        shell.owner = tools
        self.reused += 1
        return shell

    def give_back(self, shell: Shell) -> None:
        """Keep an ended session's shell for the next one, reset (or drop it when enough are kept)."""
        shell.owner = None
        if len(self._spare) >= self.size:
            return
        shell.bash.reset()
        shell.bash.clear_cancel()
        self._spare.append(shell)
