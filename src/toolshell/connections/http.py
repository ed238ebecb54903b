"""What a Streamable HTTP server needs beyond the SDK's `streamable_http_client`.

The SDK turns an HTTP 401 into a generic error and does not re-initialize after a session 404,
so the HTTP client we hand it watches response statuses: the connection reads them to report
`connection_required` (with the server's `WWW-Authenticate` reason), or to open a new session and
retry once. The client also carries the server's OAuth (`oauth.py`), if it uses any.
"""

from __future__ import annotations

import httpx2
from mcp.shared._httpx_utils import create_mcp_http_client

from toolshell.connections import auth_params

_SESSION_HEADER = "mcp-session-id"


class StatusWatch:
    """The last error status seen on requests to one server, and its authorization challenge.

    With OAuth, refusals are reported by the auth flow (`on_outcome`), which sees past the 401s
    a refresh or a login recovered from; the response hook then leaves 401/403 alone.
    """

    def __init__(self, oauth: bool = False) -> None:
        self.oauth = oauth
        self.error_status: int | None = None
        self.challenge: str | None = None
        """The `WWW-Authenticate` header of the last 401/403, if it had one."""

    def reset(self) -> None:
        self.error_status = None
        self.challenge = None

    async def on_response(self, response: httpx2.Response) -> None:
        status = response.status_code
        if status in (401, 403) and not self.oauth:
            self.on_outcome(response)
        elif status == 404 and _SESSION_HEADER in response.request.headers:
            self.error_status = 404

    def on_outcome(self, response: httpx2.Response) -> None:
        """How one request ended: a refusal is kept until a call or listing goes through."""
        if response.status_code in (401, 403):
            self.error_status = response.status_code
            self.challenge = auth_params.sent_challenge(response)

    def clear_refusal(self) -> None:
        """A call went through: an earlier 401/403 no longer explains what fails next."""
        if self.error_status in (401, 403):
            self.reset()


def http_client(headers: dict[str, str], watch: StatusWatch, auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
    """An httpx client with the SDK's MCP timeouts, the configured headers, the status watch and OAuth."""
    client = create_mcp_http_client(headers=headers or None, auth=auth)
    client.event_hooks["response"].append(watch.on_response)
    return client


def describe_challenge(header: str | None) -> str | None:
    """A `WWW-Authenticate` header as a short reason: `invalid_token: "expired"; scope "a b"`.

    Read with `auth_params` (one pass, the first 8 KiB); a longer header says so in the reason.
    """
    challenges = auth_params.parse(header)
    fields: dict[str, str] = {}
    for challenge in challenges.items:
        fields = {**challenge.params, **fields}
    parts = [fields["error"]] if fields.get("error") else []
    if fields.get("error_description"):
        parts.append(f'"{fields["error_description"]}"')
    reason = ": ".join(parts)
    if fields.get("scope"):
        reason += f'{"; " if reason else ""}scope "{fields["scope"]}"'
    said = printable(reason) if reason else ""
    if challenges.cut:
        said += f"{'; ' if said else ''}WWW-Authenticate past {auth_params.MAX_HEADER // 1024} KiB ignored"
    return said or None


def printable(text: str, limit: int = 200) -> str:
    """What a remote server wrote, fit for a terminal and a JSON line: printable ASCII, bounded."""
    cleaned = "".join(ch if " " <= ch <= "~" else "?" for ch in text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"
