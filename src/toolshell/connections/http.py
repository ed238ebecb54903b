"""What a Streamable HTTP server needs beyond the SDK's `streamable_http_client`.

The SDK turns an HTTP 401 into a generic error and does not re-initialize after a session 404,
so the HTTP client we hand it watches response statuses: the connection reads them to report
`connection_required`, or to open a new session and retry once.
"""

from __future__ import annotations

import httpx2
from mcp.shared._httpx_utils import create_mcp_http_client

_SESSION_HEADER = "mcp-session-id"


class StatusWatch:
    """The last error status seen on requests to one server."""

    def __init__(self) -> None:
        self.error_status: int | None = None

    def reset(self) -> None:
        self.error_status = None

    async def on_response(self, response: httpx2.Response) -> None:
        status = response.status_code
        if status in (401, 403):
            self.error_status = status
        elif status == 404 and _SESSION_HEADER in response.request.headers:
            self.error_status = 404


def http_client(headers: dict[str, str], watch: StatusWatch) -> httpx2.AsyncClient:
    """An httpx client with the SDK's MCP timeouts, the configured headers, and the status watch."""
    client = create_mcp_http_client(headers=headers or None)
    client.event_hooks["response"].append(watch.on_response)
    return client
