"""What every API endpoint shares: errors as JSON with an HTTP status, and reading a JSON body.

Every endpoint that takes a body reads it with `json_body`, so every one refuses the same bad
bodies the same way: too large, not JSON, not an object, a number JSON does not have (`NaN`,
`Infinity`), or a string with a lone UTF-16 surrogate (`"\\ud800"`), which Python parses but no
store, log or answer can encode.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from toolshell.errors import ErrorCode, ToolshellError

MAX_BODY_BYTES = 1_000_000
_STATUS = {
    ErrorCode.UNKNOWN_COMMAND: 404,
    ErrorCode.INVALID_INPUT: 400,
    ErrorCode.DENIED: 403,
    ErrorCode.UNAVAILABLE: 503,
}

Endpoint = Callable[[Request], Awaitable[Any]]


class ApiError(Exception):
    """A refusal with its own HTTP status (404 for a missing request, 409 for one already answered)."""

    def __init__(self, status: int, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = ToolshellError(code, message)


def endpoint(fn: Endpoint) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a handler returning JSON-able data: errors become `{"error": …}` with a status, never a traceback."""

    async def handle(request: Request) -> Response:
        try:
            return JSONResponse(await fn(request))
        except ApiError as e:
            return JSONResponse(e.error.to_json(), e.status)
        except ToolshellError as e:
            return JSONResponse(e.to_json(), _STATUS.get(e.code, 400))

    return handle


async def json_body(request: Request, *, required: bool = True, example: str = "{}") -> dict[str, Any] | None:
    """The request's JSON object body (sent as `application/json`, at most `MAX_BODY_BYTES`).

    Returns None for an empty body when `required` is False.
    """
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(413, ErrorCode.INVALID_INPUT, f"the body is larger than {MAX_BODY_BYTES} bytes")
    if not body.strip():
        if required:
            raise ApiError(400, ErrorCode.INVALID_INPUT, f"send a JSON object body, e.g. {example}")
        return None
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise ApiError(415, ErrorCode.INVALID_INPUT, "send the body with the header 'Content-Type: application/json'")
    try:
        value = json.loads(body, parse_constant=_not_json)
    except (ValueError, RecursionError):  # JSONDecodeError, bad UTF-8, NaN; nesting past the parser's depth
        value = None
    if not isinstance(value, dict):
        raise ApiError(400, ErrorCode.INVALID_INPUT, f"the body must be a JSON object, e.g. {example}")
    where = _lone_surrogate(value)
    if where is not None:
        raise ApiError(
            400,
            ErrorCode.INVALID_INPUT,
            f"{where} holds a lone UTF-16 surrogate (like \\ud800), which is not text; send valid Unicode: "
            "the character itself in UTF-8, or both halves of its surrogate pair",
        )
    return value


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _lone_surrogate(body: dict[str, Any]) -> str | None:
    """Which string of a parsed body holds a lone surrogate (`the value at /items/2`, `a key in
    /user`), or None. Walks with a list, not recursion: the parser allows deeper nesting than a
    recursive walk has stack for."""
    todo: list[tuple[str, Any]] = [("", body)]
    while todo:
        path, item = todo.pop()
        if isinstance(item, str) and not _encodes(item):
            return f"the value at {path}"
        if isinstance(item, dict):
            for key, child in item.items():
                if not _encodes(key):
                    return f"a key in {path or 'the body'}"
                todo.append((f"{path}/{json.dumps(key)[1:-1]}", child))
        elif isinstance(item, list):
            todo.extend((f"{path}/{i}", child) for i, child in enumerate(item))
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
