"""The one place where foreign errors from a server connection become `ToolshellError`s.

Everything the SDK, the transports and the operating system can raise while we talk to a server
arrives here, most specific first (the way httpx maps httpcore's exceptions). Exception groups
are unwrapped so none ever escapes a connection.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2
import mcp_types as types
from mcp.client import InputRequiredRoundsExceededError
from mcp.client.auth import OAuthFlowError
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.tasks_wire import EXTENSION as TASKS

SESSION_TERMINATED = "Session terminated"
"""The message the SDK's Streamable HTTP transport gives a 404 on a request that carried a session id."""
STREAM_BROKE = "SSE stream "
"""How the SDK's Streamable HTTP transport begins the error it gives a request whose event stream broke."""


@dataclass(frozen=True)
class Situation:
    """What the connection knows beside the exception: who, doing what, and transport hints."""

    server: str
    action: str
    """A phrase that completes "server 'x' failed while …", e.g. "calling 'echo'" or "starting"."""
    http_status: int | None = None
    """The last HTTP status the transport saw that was an error (401, 404 …), if any."""
    stderr_line: str | None = None
    """The last line the server wrote to stderr, for messages about a server that died."""
    challenge: str | None = None
    """The server's `WWW-Authenticate` reason with its last 401/403, described (see `http.describe_challenge`)."""
    oauth: bool = False
    """Whether the server logs in with OAuth (else its `headers` carry the credentials)."""
    stream_ended: bool = False
    """Whether the stream of messages from the server has ended: the connection itself is gone."""


def first_leaf(exc: BaseException) -> BaseException:
    """The most telling exception inside (possibly nested) exception groups.

    A `ToolshellError` wins, then an `MCPError`, then any other non-cancellation error.
    """
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    leaves: list[BaseException] = []
    stack: list[BaseException] = [exc]
    while stack:
        item = stack.pop()
        if isinstance(item, BaseExceptionGroup):
            stack.extend(reversed(item.exceptions))
        else:
            leaves.append(item)
    for kind in (ToolshellError, MCPError, Exception):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return leaves[0] if leaves else exc


def is_session_lost(exc: BaseException, http_status: int | None) -> bool:
    """Whether a Streamable HTTP server forgot our session (a 404), so a fresh initialize is the cure."""
    leaf = first_leaf(exc)
    if isinstance(leaf, MCPError) and leaf.code == types.INVALID_REQUEST and leaf.message == SESSION_TERMINATED:
        return True
    return http_status == 404 and isinstance(leaf, MCPError) and leaf.code == types.INVALID_REQUEST


def is_connection_lost(exc: BaseException, *, stream_ended: bool) -> bool:
    """Whether the transport itself is gone (process exited, socket closed), not just this request.

    An `MCPError` says so only when the stream from the server has really ended. Its code cannot:
    the SDK's own closed-stream error is -32000, which is also the first code JSON-RPC leaves to
    servers for errors of their own, so a server answering -32000 is alive and merely failing.
    """
    leaf = first_leaf(exc)
    if isinstance(leaf, MCPError):
        return stream_ended
    return isinstance(leaf, httpx2.TransportError | ConnectionError | EOFError | BrokenPipeError)


def translate(exc: BaseException, where: Situation) -> ToolshellError:
    """Turn any exception raised while talking to a server into a `ToolshellError`."""
    leaf = first_leaf(exc)
    if isinstance(leaf, ToolshellError):
        return leaf
    name = f"server {where.server!r}"
    if where.http_status in (401, 403):
        return _refused(name, where)
    if isinstance(leaf, OAuthFlowError):
        return ToolshellError(
            ErrorCode.CONNECTION_REQUIRED,
            f"the login to {name} failed while {where.action}: {_text(leaf)}; "
            f"run `toolshell auth login {where.server}` to try again",
        )
    if isinstance(leaf, MCPError):
        return _from_mcp_error(leaf, name, where)
    if isinstance(leaf, httpx2.HTTPStatusError):
        return ToolshellError(
            ErrorCode.UNAVAILABLE,
            f"{name} answered HTTP {leaf.response.status_code} while {where.action}",
            retryable=leaf.response.status_code >= 500,
        )
    if isinstance(leaf, httpx2.TransportError):
        return ToolshellError(
            ErrorCode.UNAVAILABLE, f"cannot reach {name} while {where.action}: {_text(leaf)}", retryable=True
        )
    if isinstance(leaf, TimeoutError):
        return ToolshellError(ErrorCode.UNAVAILABLE, f"{name} timed out while {where.action}", retryable=True)
    if isinstance(leaf, FileNotFoundError | PermissionError):
        return ToolshellError(
            ErrorCode.UNAVAILABLE,
            f"{name} cannot be launched: {_text(leaf)}; check its `command` (and `cwd`) in the config",
        )
    if isinstance(leaf, OSError | EOFError):
        return ToolshellError(
            ErrorCode.UNAVAILABLE, f"{name} connection failed while {where.action}: {_text(leaf)}", retryable=True
        )
    if isinstance(leaf, InputRequiredRoundsExceededError):
        return ToolshellError(ErrorCode.TOOL_ERROR, f"{name} kept asking for input while {where.action}; gave up")
    if isinstance(leaf, ValidationError):
        return ToolshellError(
            ErrorCode.TOOL_ERROR, f"{name} sent a malformed answer while {where.action}: {leaf.error_count()} problems"
        )
    return ToolshellError(
        ErrorCode.UNAVAILABLE,
        f"{name} failed while {where.action}: {type(leaf).__name__}: {_text(leaf)}",
        retryable=True,
    )


def _refused(name: str, where: Situation) -> ToolshellError:
    """An HTTP 401/403: the person has a login (or credentials) to provide."""
    said = f": {where.challenge}" if where.challenge else ""
    refused = f"{name} refused us (HTTP {where.http_status}{said}) while {where.action}"
    if not where.oauth:
        fix = 'it needs authorization: set headers = { Authorization = "Bearer …" } for it in the config'
    elif where.challenge and where.challenge.startswith("insufficient_scope"):
        fix = f"it needs more permission: run `toolshell auth login {where.server}` to grant it"
    else:
        fix = f"it needs a login: run `toolshell auth login {where.server}`"
    return ToolshellError(ErrorCode.CONNECTION_REQUIRED, f"{refused}; {fix}")


def _from_mcp_error(err: MCPError, name: str, where: Situation) -> ToolshellError:
    code, message = err.code, err.message
    if code == types.CONNECTION_CLOSED and where.stream_ended:
        said = f"; its last words on stderr: {where.stderr_line!r}" if where.stderr_line else ""
        return ToolshellError(
            ErrorCode.UNAVAILABLE, f"{name} closed the connection while {where.action}{said}", retryable=True
        )
    if code == types.CONNECTION_CLOSED and message.startswith(STREAM_BROKE):
        broke = f"the answer stream from {name} broke while {where.action}: {message}"
        return ToolshellError(ErrorCode.UNAVAILABLE, broke, retryable=True)
    if code == types.REQUEST_TIMEOUT:
        return ToolshellError(ErrorCode.UNAVAILABLE, f"{name} timed out while {where.action}", retryable=True)
    if code == types.INVALID_REQUEST and message == SESSION_TERMINATED:
        return ToolshellError(
            ErrorCode.UNAVAILABLE, f"{name} ended our session while {where.action}; try again", retryable=True
        )
    if code == types.METHOD_NOT_FOUND:
        return ToolshellError(ErrorCode.UNAVAILABLE, f"{name} does not support what we asked while {where.action}")
    if code == types.INVALID_PARAMS:
        return ToolshellError(ErrorCode.INVALID_INPUT, f"{name} rejected the input while {where.action}: {message}")
    if code == types.MISSING_REQUIRED_CLIENT_CAPABILITY:
        return _missing_capability(err, name, where)
    return ToolshellError(ErrorCode.TOOL_ERROR, f"{name} failed while {where.action}: {message} (code {code})")


def _missing_capability(err: MCPError, name: str, where: Situation) -> ToolshellError:
    """A 2026-07-28 server needs something the request did not offer: for elicitation, someone to answer."""
    data = err.data if isinstance(err.data, dict) else {}
    required = data.get("requiredCapabilities")
    if isinstance(required, dict) and "elicitation" in required:
        return ToolshellError(
            ErrorCode.TOOL_ERROR,
            f"{name} needs someone to answer its questions while {where.action}, and no one answers for this "
            "session (a trigger or other run without a person); call it from an interactive session",
        )
    if isinstance(required, dict) and TASKS in (required.get("extensions") or {}):
        return ToolshellError(
            ErrorCode.TOOL_ERROR,
            f"{name} runs this tool only as a task (the Tasks extension) while {where.action}; toolshell follows"
            " tasks on 2026-07-28 connections only, and this one speaks an older revision (as its config entry's"
            ' `protocol = "2025-11-25"` forces, if it has one)',
        )
    return ToolshellError(
        ErrorCode.TOOL_ERROR,
        f"{name} needs a client feature toolshell does not offer while {where.action}: {err.message}",
    )


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
