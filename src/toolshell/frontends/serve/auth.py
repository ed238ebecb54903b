"""Who may call `toolshell serve --http`, and who they are.

Every request to `/mcp` carries `Authorization: Bearer <token>`; anything else gets 401 with one
JSON error saying how to authenticate. The token is one of:

- the serve token: `$TOOLSHELL_SERVE_TOKEN`, else `<state-dir>/serve-token` (generated on first
  start, 0600). An environment token estimated under 128 bits is refused at start. The caller's
  identity is `token:<first 16 hex digits of HMAC-SHA256(token)>`, keyed with a key derived from
  the state key ring, never the token itself: a bare hash of a short token is reversed by trying
  candidates, a keyed one only by whoever holds the ring;
- with `[serve.oauth]`, an access token of that issuer for that audience (`serve_oauth`); the
  identity is `oauth:<issuer>#<subject>`.

`--no-auth` (loopback only) serves without either, and the caller has no identity (None), as
over stdio. The identity goes on every shell call and approval request, and an HTTP session is
usable only by the caller that opened it (the SDK's session manager compares the principal).
Built on the SDK's server-side auth: `BearerAuthBackend`, `RequireAuthMiddleware`, the
protected-resource metadata routes.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import math
import os
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url
from pydantic import AnyHttpUrl
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from toolshell.errors import ErrorCode, ToolshellError, error_body
from toolshell.frontends.serve.forwarded import public_origin
from toolshell.store.keys import for_purpose
from toolshell.store.private_file import private_secret

TOKEN_ENV = "TOOLSHELL_SERVE_TOKEN"
TOKEN_FILE = "serve-token"
MIN_BITS = 128
_MAKE_ONE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


class CallerToken(AccessToken):
    """An `AccessToken` that knows the caller's identity string (what the timeline records)."""

    caller: str


def token_identity(token: str, ring: list[bytes]) -> str:
    """`token:<16 hex>`: names the token's holder without revealing the token, keyed with the ring's
    newest key (for the "caller-id" purpose), so whoever reads the id cannot test guesses against it."""
    key = for_purpose(ring, "caller-id")[0]
    return "token:" + hmac.new(key, token.encode(), hashlib.sha256).hexdigest()[:16]


def caller_of(scope: Mapping[str, Any]) -> str | None:
    """The identity the auth middleware put on this request's scope, or None (unauthenticated)."""
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser) and isinstance(user.access_token, CallerToken):
        return user.access_token.caller
    return None


# --- the serve token ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ServeToken:
    value: str
    where: str
    """Where a client finds it: the file's path, or `$TOOLSHELL_SERVE_TOKEN`."""


def serve_token(state_dir: Path, env: Mapping[str, str] | None = None) -> ServeToken:
    """`$TOOLSHELL_SERVE_TOKEN` when set, else the token in `<state_dir>/serve-token`, made on first use.

    Raises:
        ToolshellError: `unavailable` when the file is readable or writable by others (with the
            chmod that fixes it), belongs to another user, is empty, or cannot be written.
    """
    env = os.environ if env is None else env
    if env.get(TOKEN_ENV):
        return ServeToken(_strong(env[TOKEN_ENV]), f"${TOKEN_ENV}")
    path = state_dir / TOKEN_FILE
    token = private_secret(path, "the serve token", "anyone who read it can call this server", _new_token)
    return ServeToken(token, str(path))


def _new_token() -> str:
    return secrets.token_urlsafe(32)


_CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits)


def token_bits(token: str) -> float:
    """An upper bound of a token's strength: its length times log2 of the alphabet its character
    classes span (lower, upper, digits; 33 for the rest; 16 for hex). A random token of that
    alphabet has this many bits; a word or a pattern has fewer, which no count can see."""
    if token and all(ch in "0123456789abcdef" for ch in token.lower()):
        return len(token) * 4.0
    pool = sum(len(c) for c in _CLASSES if any(ch in c for ch in token))
    pool += 33 if any(not any(ch in c for c in _CLASSES) for ch in token) else 0
    return len(token) * math.log2(pool) if pool > 1 else 0.0


def _strong(token: str) -> str:
    """The environment's token, refused when it is too weak to stand against guessing."""
    bits = token_bits(token)
    if bits < MIN_BITS:
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"${TOKEN_ENV} is too weak to guard this server (at most {bits:.0f} bits; it needs {MIN_BITS}): "
            f"make one with {_MAKE_ONE}, or unset it to use the token generated in <state-dir>/{TOKEN_FILE}",
        )
    return token


def _unavailable(message: str) -> ToolshellError:
    return ToolshellError(ErrorCode.UNAVAILABLE, message)


class StaticTokenVerifier(TokenVerifier):
    """Accepts exactly one token, compared in constant time."""

    def __init__(self, token: str, ring: list[bytes]) -> None:
        self._expected = token.encode()
        self.identity = token_identity(token, ring)
        # The principal the session manager compares is (client_id, issuer, subject); one token, one
        # caller: made once, not validated anew on every request (nothing changes it after).
        self._accepted = CallerToken(
            token="", client_id=self.identity, subject=self.identity, scopes=[], caller=self.identity
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        if not hmac.compare_digest(token.encode(), self._expected):
            return None
        return self._accepted


# --- the gate in front of /mcp --------------------------------------------------------------------


@dataclass(frozen=True)
class Gate:
    """How `/mcp` is guarded. `verifier=None` is `--no-auth`."""

    verifier: TokenVerifier | None
    how: str
    """How to authenticate, for the 401 body and the start line (never the token)."""
    resource_metadata_url: AnyHttpUrl | None = None
    required_scopes: list[str] = field(default_factory=list)
    public_routes: list[Route] = field(default_factory=list)
    """Served without a token: the protected-resource metadata (RFC 9728)."""
    follows_proxy: bool = False
    """The metadata URL a 401 names is at the public origin a trusted proxy gives, when it gives one."""

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """`app` behind the bearer check; unchanged with `--no-auth`."""
        if self.verifier is None:
            return app
        required = _Required(app, self.required_scopes, self.resource_metadata_url, self.how, self.follows_proxy)
        return AuthenticationMiddleware(required, backend=BearerAuthBackend(self.verifier))


NO_AUTH = Gate(None, "no authentication: --no-auth")


def token_gate(token: ServeToken, ring: list[bytes]) -> Gate:
    """The serve token's gate; `ring` (the state key ring) keys the caller id."""
    where = f"the token is in {token.where}" if not token.where.startswith("$") else f"the token is {token.where}"
    return Gate(StaticTokenVerifier(token.value, ring), f"send 'Authorization: Bearer <token>'; {where}")


class _Required(RequireAuthMiddleware):
    """The SDK's check, answering with one JSON error in toolshell's shape that says what to do."""

    def __init__(
        self, app: ASGIApp, scopes: list[str], metadata: AnyHttpUrl | None, how: str, follows_proxy: bool
    ) -> None:
        super().__init__(app, scopes, metadata)
        self.how = how
        self.follows_proxy = follows_proxy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = public_origin(scope) if self.follows_proxy else None
        if origin is None:
            await super().__call__(scope, receive, send)
            return
        public = copy.copy(self)  # this request's challenge names the metadata at the client's origin
        public.resource_metadata_url = build_resource_metadata_url(AnyHttpUrl(f"{origin}/mcp"))
        await RequireAuthMiddleware.__call__(public, scope, receive, send)

    async def _send_auth_error(self, send: Send, status_code: int, error: str, description: str) -> None:
        if status_code == 401:
            message = f"this server needs a bearer token: {self.how} (a missing or unaccepted token gets this answer)"
        else:
            message = f"the token lacks a scope this server needs ({description}); get a token with it"
        code = ErrorCode.CONNECTION_REQUIRED if status_code == 401 else ErrorCode.DENIED
        body = json.dumps(error_body(ToolshellError(code, message))).encode()
        challenge = f'Bearer error="{error}", error_description="{description}"'
        if self.resource_metadata_url:
            challenge += f', resource_metadata="{self.resource_metadata_url}"'
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", challenge.encode()),
        ]
        await send({"type": "http.response.start", "status": status_code, "headers": headers})
        await send({"type": "http.response.body", "body": body})
