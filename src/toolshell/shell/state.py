"""What every `tools` command of one shell call shares: the session's and its saved scripts'."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bashkit import Bash

from toolshell.calls.ledger import Ledger
from toolshell.calls.pipeline import Pipeline
from toolshell.calls.view import CatalogView
from toolshell.config import ShellConfig
from toolshell.redact import Redactor
from toolshell.scripts.store import ScriptStore
from toolshell.shell.precheck import Precheck


@dataclass
class ShellCallState:
    """What every `tools` command of one shell call shares."""

    view: CatalogView
    ledger: Ledger
    pipeline: Pipeline
    precheck: Precheck
    scripts: ScriptStore
    manage_scripts: bool
    shell_config: ShellConfig
    max_output_bytes: int
    shells: list[Bash] = field(default_factory=list)
    """Every shell running for this shell call (the session's, then nested saved scripts): a stop cancels all."""
    stderr_sink: Callable[[str], None] | None = None
    """The session shell's stderr collector: bashkit drops the output of the command that cancels."""
    redact: Redactor = field(default_factory=Redactor)
    """Takes the config's secrets out of every `tools` output before the script sees it."""
    max_result_bytes: int = 30_000_000
    """`[tools_in_shell] max_result_bytes`: the most one `tools` result may print inside the shell."""
