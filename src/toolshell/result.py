"""What one shell call returns: the `bash` tool's result for an agent (`RunResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunResult:
    """One shell call's outcome: exit code, the (capped) output, the stop report and hints.

    `tools` is the stop report (`policy.report.ScriptReport.to_json`), present when the script
    stopped or changed something.
    """

    exit_code: int
    stdout: str
    stderr: str
    tools: dict[str, Any] | None = None
    hints: list[str] = field(default_factory=list)
    shell: str | None = None
    """The handle of the shell it ran in (`toolshell serve`): pass it back to keep that shell."""
    shell_note: str | None = None
    """Why the shell was not what the call asked for (gone, or its state not kept)."""

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
        if self.shell is not None:
            out["shell"] = self.shell
        if self.shell_note is not None:
            out["shell_note"] = self.shell_note
        return out
