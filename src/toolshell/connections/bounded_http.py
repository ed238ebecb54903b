"""`max_message_bytes` for Streamable HTTP servers, as an httpx transport under the SDK's client.

The SDK reads a JSON answer whole (`response.aread()`), and an SSE event over its own 1 MiB cap
ends the stream as "connection closed". This transport sits between the httpx client and the
network and bounds what reaches the SDK without parsing MCP:

- a JSON answer to a JSON-RPC request is refused from its `Content-Length`, or read only up to
  the bound, and replaced by a JSON-RPC error for that request's `id` (which we sent, so we know it);
- an SSE stream is passed on event by event (its bytes unchanged); an event over the bound is
  never held whole: on a POST's stream it fails that POST's request at once and ends the stream,
  on the GET stream it is dropped and counted.

The answer to a `tools/list` request (JSON or its POST's events) is cut to `max_tools` entries
before the SDK builds models of it (`list_cut`). Either way the connection goes on. Memory stays
within the bound plus one network chunk, plus what the SDK makes of an answer that fits. Bounded
requests ask for no content-encoding, so the bytes counted are the bytes the SDK decodes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx2
import mcp_types as types

from toolshell.connections.list_cut import SMALL, cut_listing

RequestId = int | str
_BOUNDARY_MAX = 4


_BLANK_PAIRS = (b"\n\n", b"\n\r", b"\r\r")
"""Every empty line holds one of these: the last byte of a line ending, then the first of the next
(CRLF-CR, CRLF-LF, LF-CR, LF-LF, CR-CR; a lone CR is never followed by LF)."""


def blank_line_end(buf: bytearray, start: int) -> int | None:
    """Just past the first empty line at or after `start`: the end of an SSE event, or None.

    Found by byte search, in linear time (no regex runs on what the server sends).
    """
    found = [i for i in (buf.find(pair, start) for pair in _BLANK_PAIRS) if i >= 0]
    if not found:
        return None
    second = min(found) + 1  # where the second line ending starts
    return second + 2 if buf[second : second + 2] == b"\r\n" else second + 1


@dataclass
class Dropped:
    """Server-sent events over the bound on the GET stream, which no request was waiting for."""

    events: int = 0

    def notes(self) -> list[str]:
        return [f"skipped server-sent events: {self.events} over max_message_bytes"] if self.events else []


def too_big(size: int | None, limit: int) -> str:
    """The same words as the stdio bound's, so both kinds of server fail alike."""
    said = f"{size:,} bytes" if size is not None else f"more than {limit:,} bytes"
    return (
        f"its answer was {said}, over max_message_bytes = {limit:,}; ask for less "
        "(a smaller page, a filter) or raise max_message_bytes for this server"
    )


def _error_json(request_id: RequestId, message: str) -> bytes:
    error = types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=types.INTERNAL_ERROR, message=message)
    )
    return error.model_dump_json(by_alias=True, exclude_unset=True).encode()


def _request_id(request: httpx2.Request) -> tuple[RequestId | None, bool]:
    """The `id` of the JSON-RPC request this POST carries (our own small body), if it is one, and
    whether it asks for `tools/list`."""
    if request.method != "POST":
        return None, False
    try:
        body = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):
        return None, False
    if not isinstance(body, dict) or "method" not in body:
        return None, False
    rid = body.get("id")
    if not isinstance(rid, int | str) or isinstance(rid, bool):
        return None, False
    return rid, body["method"] == "tools/list"


def cut_json(body: bytes, rid: RequestId, keep: int) -> bytes:
    """A `tools/list` answer with at most `keep` tools (`list_cut`); `body` itself when not cut."""
    try:
        cut = cut_listing(body.decode("utf-8"), keep) if len(body) >= SMALL else None
    except UnicodeDecodeError:
        return body
    if cut is None or cut.get("id") != rid:
        return body
    return json.dumps(cut, ensure_ascii=False).encode()


def cut_event(event: bytes, rid: RequestId, keep: int) -> bytes:
    """A server-sent event whose data is a `tools/list` answer, with at most `keep` tools; the
    other lines (`event:`, `id:`) as they were."""
    if len(event) < SMALL:
        return event
    lines = event.splitlines()
    data = b"\n".join(line[5:].removeprefix(b" ") for line in lines if line.startswith(b"data:"))
    cut = cut_json(data, rid, keep)
    if cut is data:
        return event
    kept = [line for line in lines if line and not line.startswith(b"data:")]
    return b"\n".join([*kept, b"data: " + cut]) + b"\n\n"


def _media_type(response: httpx2.Response) -> str:
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """Wraps the client's transport; bounds JSON-RPC answers and server-sent events."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int, dropped: Dropped, max_tools: int) -> None:
        self._inner = inner
        self._limit = limit
        self._dropped = dropped
        self._max_tools = max_tools

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        rid, listing = _request_id(request)
        if rid is not None or request.method == "GET":
            request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        media = _media_type(response)
        keep = self._max_tools if listing else None
        if media == "application/json" and rid is not None:
            return await self._bounded_json(response, rid, keep)
        if media == "text/event-stream":
            events = _BoundedEvents(response, self._limit, rid, self._dropped, keep)
            return httpx2.Response(
                response.status_code, headers=response.headers, stream=events, extensions=response.extensions
            )
        return response

    async def _bounded_json(self, response: httpx2.Response, rid: RequestId, keep: int | None) -> httpx2.Response:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self._limit:
            await response.aclose()  # never read: the size is known up front
            return self._refusal(response, rid, int(length))
        body = bytearray()
        try:
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > self._limit:
                    return self._refusal(response, rid, None)
        finally:
            await response.aclose()
        content = bytes(body) if keep is None else cut_json(bytes(body), rid, keep)
        headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
        return httpx2.Response(response.status_code, headers=headers, content=content, extensions=response.extensions)

    def _refusal(self, response: httpx2.Response, rid: RequestId, size: int | None) -> httpx2.Response:
        """A JSON-RPC error for the request, in place of its oversized answer."""
        headers = {k: v for k, v in response.headers.items() if k.lower() == "mcp-session-id"}
        headers["content-type"] = "application/json"
        return httpx2.Response(200, headers=headers, content=_error_json(rid, too_big(size, self._limit)))

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedEvents(httpx2.AsyncByteStream):
    """An SSE body re-chunked into whole events no larger than the bound (bytes unchanged)."""

    def __init__(
        self,
        response: httpx2.Response,
        limit: int,
        request_id: RequestId | None,
        dropped: Dropped,
        keep: int | None = None,
    ) -> None:
        self._response = response
        self._limit = limit
        self._request_id = request_id
        self._dropped = dropped
        self._keep = keep
        """For the events of a `tools/list` POST: the tools its answer may keep."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        buf = bytearray()
        skipping = False  # inside an oversized event on the GET stream: drop up to its end
        async for chunk in self._response.aiter_raw():
            scan = max(0, len(buf) - _BOUNDARY_MAX)
            buf += chunk
            while (end := blank_line_end(buf, scan)) is not None:
                event = bytes(buf[:end])
                del buf[:end]
                scan = 0
                if skipping:
                    skipping = False
                elif len(event) <= self._limit:
                    yield (
                        event
                        if self._keep is None or self._request_id is None
                        else cut_event(event, self._request_id, self._keep)
                    )
                elif (refusal := self._oversized(len(event))) is not None:
                    yield refusal
                    return
            if not skipping and len(buf) > self._limit:
                if (refusal := self._oversized(None)) is not None:
                    yield refusal
                    return
                skipping = True
            if skipping:
                del buf[:-_BOUNDARY_MAX]  # keep only what may start the blank line that ends it
        if buf and not skipping:
            yield bytes(buf)

    def _oversized(self, size: int | None) -> bytes | None:
        """The event that fails this stream's request, or None (counted) on the GET stream."""
        if self._request_id is None:
            self._dropped.events += 1
            return None
        return b"event: message\ndata: " + _error_json(self._request_id, too_big(size, self._limit)) + b"\n\n"

    async def aclose(self) -> None:
        await self._response.aclose()


def bound_client(client: httpx2.AsyncClient, limit: int, dropped: Dropped, max_tools: int) -> None:
    """Put the bound under every transport the client may use (its own, and any proxy mounts).

    Wrapping after construction keeps httpx's choice of transports (proxies from the
    environment included), which passing `transport=` would turn off.
    """
    client._transport = BoundedTransport(client._transport, limit, dropped, max_tools)
    client._mounts = {
        pattern: None if mount is None else BoundedTransport(mount, limit, dropped, max_tools)
        for pattern, mount in client._mounts.items()
    }
