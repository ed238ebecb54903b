"""The closed set of error codes a `tools` call can end with, and the control-flow signals.

Errors inside toolshell are `ToolshellError`s. This module is also the one place they are shown:
the seed's JSON error line (`error_line`), an MCP error result (`error_result`) and an HTTP error
body (`error_body`, `http_status`); every front end, trigger and LLM adapter uses these. Control
flow (needs approval, stop, call limit) has its own types so nothing catches it by accident as an
error.
"""

from __future__ import annotations

import enum
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp_types


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
    RATE_LIMITED = "rate_limited"


class ToolshellError(Exception):
    """An error with one of the codes, a message a person can act on, and retryability (with the
    seconds to wait first, when the refusal knows them: a rate limit)."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        retryable: bool = False,
        detail: Any = None,
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.detail = detail
        self.retry_after_seconds = retry_after_seconds

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": str(self.code), "message": self.message, "retryable": self.retryable}
        if self.retry_after_seconds is not None:
            error["retry_after_seconds"] = self.retry_after_seconds
        return {"error": error}


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

    def __init__(
        self,
        error: ToolshellError,
        call: dict[str, Any] | None = None,
        approval: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(error.message)
        self.error = error
        self.call = call
        self.approval = approval
        self.request_id = request_id


def unexpected(exc: BaseException, doing: str) -> ToolshellError:
    """The error a bug or an odd input becomes at a boundary, so no traceback reaches anyone.

    Args:
        exc: what was raised.
        doing: what could not be done, e.g. "tools could not run this command".
    """
    return ToolshellError(ErrorCode.UNAVAILABLE, f"{doing}: {type(exc).__name__}: {exc}")


def error_body(err: ToolshellError) -> dict[str, Any]:
    """`{"error": {"code", "message", "retryable"}}`: the object of the line, and of HTTP bodies."""
    return err.to_json()


def error_line(err: ToolshellError) -> str:
    """The one JSON line a failed call writes to stderr: `{"error":{"code":…,…}}` and a newline."""
    return json.dumps(error_body(err), ensure_ascii=False, separators=(",", ":")) + "\n"


_HTTP_STATUS = {
    ErrorCode.UNKNOWN_COMMAND: 404,
    ErrorCode.INVALID_INPUT: 400,
    ErrorCode.DENIED: 403,
    ErrorCode.CONNECTION_REQUIRED: 401,
    ErrorCode.NEEDS_APPROVAL: 409,
    ErrorCode.STOPPED: 409,
    ErrorCode.CALL_LIMIT: 429,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.TOOL_ERROR: 502,
    ErrorCode.UNAVAILABLE: 503,
}


def http_status(err: ToolshellError) -> int:
    """The HTTP status that goes with an error code in an HTTP body."""
    return _HTTP_STATUS[err.code]


def error_result(err: ToolshellError) -> mcp_types.CallToolResult:
    """An MCP tool result with `isError` and the error line's JSON as its text."""
    import mcp_types  # lazy: 0.5 s to import, and the CLI imports this module on every start

    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=error_line(err).rstrip("\n"))], is_error=True
    )


def single_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception a task group wrapped (the body's own error), or the group when there are several."""
    while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
        inner = group.exceptions[0]
        if not isinstance(inner, BaseExceptionGroup):
            return inner
        group = inner
    return group
