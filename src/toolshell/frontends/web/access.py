"""Who may use the web page: the Host and Origin checks, and the token every request carries.

Checks in order, each refusing with the JSON error shape of a `tools` error line:
1. Host: a loopback name unless `--allow-remote` named another (against DNS rebinding: a page on
   `evil.example` that resolves to 127.0.0.1 sends `Host: evil.example`).
2. Origin, when a browser sends one: it must be this page's own origin (a page elsewhere, even on
   another loopback port, must not drive it).
3. The token, for everything but the page itself (`/`, `/favicon.ico` and `/static/…`, which hold
   no data and no secret): the page token (under `serve`, one for every worker of a store:
   `frontends.web.serve`), or in `[serve.oauth]` mode an access token of the configured issuer,
   checked by the serve gate's own verifier. Only in a header, `Authorization: Bearer …` or
   `X-Toolshell-Token`, compared in constant time, never logged. Never a cookie: cookies are not
   scoped by port, so any other app on 127.0.0.1 would receive it. Never the query string, which
   servers and proxies log. The printed URL carries the token in its fragment (`#token=…`), which
   the browser never sends; the page reads it from there, keeps it in `sessionStorage` and sends
   it as a header.

Every answer forbids framing (a framed page could be clicked into "always") and caching, and sends
no Referer.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.provider import TokenVerifier
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolshell.errors import ErrorCode, ToolshellError

TOKEN_HEADER = "x-toolshell-token"
PAGE_METHODS = frozenset({"GET", "HEAD"})
_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
]


@dataclass(frozen=True)
class Access:
    """The tokens and the host names this page answers to.

    Args:
        token: The secret in the printed URL ("" when only `verifier` admits).
        hosts: Host names accepted besides loopback ones (`--host` with `--allow-remote`); `"*"`
            accepts any Host (a wildcard bind), leaving the token as the only check.
        also: Older tokens still accepted (the page token of a key being rotated out).
        verifier: Under `[serve.oauth]`: the serve gate's verifier, so an access token of the
            configured issuer (with `scopes`) is what opens the API.
    """

    token: str
    hosts: Collection[str] = ()
    also: Collection[str] = ()
    verifier: TokenVerifier | None = None
    scopes: Collection[str] = ()
    how: str = "open the URL toolshell web printed, or send 'Authorization: Bearer <token>'"
    """Where the token is found, for the 401 answer (never the token)."""

    def refusal(
        self, method: str, path: str, headers: Headers, scheme: str = "http"
    ) -> tuple[int, ToolshellError] | None:
        """Why this request is refused before its token is looked at (status, error), or None.

        Args:
            method: The HTTP method.
            path: The path inside the app (without the prefix it is mounted under).
            headers: The request's headers.
            scheme: The scheme the page was opened with: `https` only when a trusted proxy said
                so (`frontends.serve.forwarded`), so the page's own origin is `https://<host>`.
        """
        host = headers.get("host", "")
        if not self._host_ok(host_name(host)):
            return 403, _denied(f"host {host!r} is not served here; open the URL toolshell web printed")
        origin = headers.get("origin")
        if origin is not None and origin.strip().lower() != f"{scheme}://{host}".lower():
            return 403, _denied(f"origin {origin!r} is not this page; only the page itself may call its API")
        return None

    async def admits(self, method: str, path: str, headers: Headers) -> bool:
        """Whether the request may go on: the page itself always, anything else with a token."""
        if method in PAGE_METHODS and is_page(path):
            return True
        given = [t for t in (_bearer(headers), headers.get(TOKEN_HEADER)) if t]
        if any(self._matches(t) for t in given):
            return True
        if self.verifier is None:
            return False
        for token in given:
            checked = await self.verifier.verify_token(token)
            if checked is not None and set(self.scopes) <= set(checked.scopes):
                return True
        return False

    def _matches(self, given: str) -> bool:
        # Every candidate is compared (in constant time), so timing tells nothing about which one matched.
        found = [hmac.compare_digest(given.encode(), t.encode()) for t in (self.token, *self.also) if t]
        return any(found)

    def _host_ok(self, name: str) -> bool:
        return "*" in self.hosts or name in {h.lower() for h in self.hosts} or is_loopback_name(name)


def _bearer(headers: Headers) -> str | None:
    scheme, _, given = headers.get("authorization", "").partition(" ")
    return given.strip() if scheme.lower() == "bearer" else None


def is_page(path: str) -> bool:
    """The page, its icon and its static files: the same for everyone, so served without the token."""
    return path in ("", "/", "/favicon.ico") or path.startswith("/static/")


def is_loopback_name(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name in a Host header: `[::1]:8766` → `::1`, `localhost:8766` → `localhost`."""
    if header.startswith("["):
        return header[1:].partition("]")[0].lower()
    return (header.rsplit(":", 1)[0] if header.count(":") == 1 else header).lower()


def _inner_path(scope: Scope) -> str:
    """The path inside this app: under `serve --http` it is mounted at `/ui`, its `root_path`."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def _denied(message: str) -> ToolshellError:
    return ToolshellError(ErrorCode.DENIED, message)


class AccessMiddleware:
    """ASGI middleware: refuse what `Access` refuses, and add the protective headers to every answer."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        headers = Headers(scope=scope)
        refused = self.access.refusal(scope["method"], _inner_path(scope), headers, scope.get("scheme", "http"))
        if refused is None and not await self.access.admits(scope["method"], _inner_path(scope), headers):
            refused = 401, _denied(f"this page needs its token: {self.access.how}")
        if refused is not None:
            status, error = refused
            extra: dict[str, Any] = {"www-authenticate": "Bearer"} if status == 401 else {}
            await JSONResponse(error.to_json(), status, headers=extra)(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)
