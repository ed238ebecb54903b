"""The closed set of error codes a `tools` call can end with, and the control-flow signals.

Errors inside toolshell are `ToolshellError`s; they become the seed's one JSON error line in one
place (`command.render.error_line`). Control flow (needs approval, stop, call limit) has its own
types so nothing catches it by accident as an error.
"""

from __future__ import annotations

import enum
from typing import Any


class ErrorCode(enum.StrEnum):
    UNKNOWN_COMMAND = "unknown_command"
    INVALID_INPUT = "invalid_input"
    TOOL_ERROR = "tool_error"
    DENIED = "denied"
    NEEDS_APPROVAL = "needs_approval"
    STOPPED = "stopped"
    CONNECTION_REQUIRED = "connection_required"
    CALL_LIMIT = "call_limit"
    UNAVAILABLE = "unavailable"


class ToolshellError(Exception):
    """An error with one of the nine codes, a message a person can act on, and retryability."""

    def __init__(self, code: ErrorCode, message: str, *, retryable: bool = False, detail: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.detail = detail

    def to_json(self) -> dict[str, Any]:
        return {"error": {"code": str(self.code), "message": self.message, "retryable": self.retryable}}


class ConfigError(Exception):
    """A config file that cannot be used. `problems` lists (place, what is wrong and what to write)."""

    def __init__(self, problems: list[tuple[str, str]], source: str = "") -> None:
        self.problems = problems
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(where + "; ".join(f"{place}: {msg}" if place else msg for place, msg in problems))


class ScriptSignal(BaseException):
    """Base of the control-flow signals that end a script. Caught only at the script boundary."""


class StopScript(ScriptSignal):
    """Stop the script at this call: needs approval, call limit, or a guardrail that ends the run."""

    def __init__(self, error: ToolshellError, call: dict[str, Any] | None = None, approval: str | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.call = call
        self.approval = approval
