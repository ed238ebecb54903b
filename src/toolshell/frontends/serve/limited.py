"""`[[limits]]` and `[[quotas]]` at the transport: a `tools/call` over a limit gets HTTP 429.

Inside the auth gate (the caller is known), before the MCP session manager: the request's body is
read (it is bounded by the SDK's own limit further in, so this reads at most what it would), a
JSON-RPC `tools/call` is counted against the caller's limits, and a refused one is answered here
with `429`, `Retry-After`, the IETF draft's `RateLimit-Policy` and `RateLimit` fields, and a
JSON-RPC error naming the limit and the seconds to wait. Anything else passes untouched. For a
quota, the bytes of each answer are counted to the caller's day once it has been sent.
"""

from __future__ import annotations

import json
from typing import Any

import anyio

from toolshell.errors import ErrorCode
from toolshell.frontends.serve.auth import caller_of
from toolshell.policy.limits import Limits, Refused

Scope = dict[str, Any]
Message = dict[str, Any]
READ_LIMIT = 4 * 1024 * 1024
"""The most of a body read to find its method; a longer one passes on whole, uncounted by a limit
but refused further in by the SDK's own bound."""
RATE_LIMITED_CODE = -32029
"""The JSON-RPC error code of a refusal (an implementation-defined server error)."""


def limited(app: Any, limits: Limits) -> Any:
    """`app` behind the configured limits; `app` itself when none are configured."""
    if not (limits.shell_rules or limits.quotas):
        return app

    async def guarded(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body, more = await _read(receive)
        request = _request(body)
        replay = _replayed(body, more, receive)
        if request is None or request.get("method") != "tools/call":
            await app(scope, replay, send)
            return
        caller = caller_of(scope)
        refused = await anyio.to_thread.run_sync(limits.admit_shell_call, caller)
        if refused is not None:
            await _refuse(send, request.get("id"), refused)
            return
        if not limits.quotas:
            await app(scope, replay, send)
            return
        sent = 0

        async def counting(message: Message) -> None:
            nonlocal sent
            if message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await app(scope, replay, counting)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(limits.count_result, caller, sent)

    return guarded


async def _read(receive: Any) -> tuple[bytes, bool]:
    """The body up to `READ_LIMIT`, and whether more is still to come."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False
        if size >= READ_LIMIT:
            return b"".join(chunks), True


def _replayed(body: bytes, more: bool, receive: Any) -> Any:
    """A `receive` that gives the body already read, then what is left of the request."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()  # type: ignore[no-any-return]

    return replay


def _request(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC request the body holds, or None (not JSON, a batch, a response)."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


async def _refuse(send: Any, request_id: Any, refused: Refused) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": RATE_LIMITED_CODE,
            "message": refused.message,
            "data": {
                "code": str(ErrorCode.RATE_LIMITED),
                "limit": refused.name,
                "retryable": True,
                "retry_after_seconds": refused.retry_after_seconds,
            },
        },
    }
    data = json.dumps(body).encode()
    headers = [(k.lower().encode(), v.encode()) for k, v in refused.headers().items()]
    headers += [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": data})


__all__ = ["RATE_LIMITED_CODE", "limited"]
