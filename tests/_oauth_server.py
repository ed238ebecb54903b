"""A local OAuth authorization server with a protected MCP server, for the tests (one app, loopback).

Built from the SDK's own pieces: `MCPServer(auth=..., auth_server_provider=...)` serves the
authorization-server routes (metadata, registration, authorize, token), the protected-resource
metadata and the bearer-gated `/mcp`. The provider approves every authorization at once (the
test's "browser" is an HTTP GET that follows the redirect to the client's loopback), rotates
refresh tokens and counts what it issues. `Shim` adds what the SDK's server has no handler for:
the client-credentials grant, and a tool (`write`) that needs a scope the login did not grant,
answered with 403 `insufficient_scope` so the client must step up.

For another resource server (`toolshell serve --http` with `[serve.oauth]`) the provider can issue
JWT access tokens instead (`Provider.issue_jwts(audience)`): signed with a test key (ES256), whose
JWKS the Shim serves at `/jwks` (named `jwks_uri` in the metadata), and answered about at the RFC
7662 endpoint `/introspect` (for a machine client, HTTP Basic).
"""

from __future__ import annotations

import base64
import json
import secrets
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import anyio
import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import ec
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl

from _connections_support import wait_until

MACHINE_ID = "robot"
MACHINE_SECRET = "robot-secret-value"
WRITE_SCOPE = "files:write"


class Provider(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """In-memory, auto-approving; knobs and counters for the tests."""

    def __init__(self, resource: str, expires_in: int = 3600) -> None:
        self.resource = resource
        self.expires_in = expires_in
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh_tokens: dict[str, RefreshToken] = {}
        self.access_tokens: dict[str, AccessToken] = {}
        self.authorizations: list[AuthorizationParams] = []
        self.refreshes = 0
        self.refused_refreshes = 0
        self.machine_grants = 0
        self.deny = False
        """The person says no: every authorization is refused with `access_denied`."""
        self.signing_keys: dict[str, str] = {}
        """Public keys (PEM) of machine clients that sign their token requests (`private_key_jwt`)."""
        self.metadata_documents: dict[str, OAuthClientInformationFull] = {}
        """Client ID metadata documents by URL, as if fetched (the server then advertises support)."""
        self.machines: dict[str, str] = {MACHINE_ID: MACHINE_SECRET}
        """Machine clients (client-credentials grant, introspection) and their secrets."""
        self.issuer = ""
        """The issuer URL as the metadata names it (set by `serve_oauth`)."""
        self.jwt_audience: str | None = None
        """When set, access tokens are JWTs for this audience (`issue_jwts`)."""
        self.jwt_key = ec.generate_private_key(ec.SECP256R1())
        self.jwt_kid = f"test-{secrets.token_hex(4)}"
        self.introspections = 0
        self.jwks_fetches = 0
        self.jwks_uri: str | None = None
        """The `jwks_uri` the metadata names instead of this server's own `/jwks`."""
        self.jwks_down = False
        """The JWKS endpoint answers 503 (the issuer is having a bad day)."""

    def issue_jwts(self, audience: str) -> None:
        """From now on access tokens are ES256 JWTs (RFC 9068) for `audience`, subject the client."""
        self.jwt_audience = audience

    def sign(
        self, claims: dict[str, Any], key: Any = None, kid: str | None = None, alg: str = "ES256", typ: str = "at+jwt"
    ) -> str:
        """A JWT of `claims`, signed with the provider's key (or `key`, to forge one), typed as an
        access token (RFC 9068) unless `typ` says otherwise (an ID token is `JWT`)."""
        headers = {"kid": kid or self.jwt_kid, "typ": typ}
        return jwt.encode(claims, key or self.jwt_key, algorithm=alg, headers=headers)

    def jwt_claims(self, subject: str, scopes: list[str], **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": subject, "aud": self.jwt_audience, "exp": now + 3600, "iat": now}
        return {**claims, "client_id": subject, "scope": " ".join(scopes), "jti": secrets.token_hex(8), **overrides}

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.jwt_key.public_key()))
        return {"keys": [{**public, "kid": self.jwt_kid, "alg": "ES256", "use": "sig"}]}

    def mint(self, client_id: str, scopes: list[str]) -> str:
        access = f"access_{secrets.token_hex(16)}"
        if self.jwt_audience is not None:
            access = self.sign(self.jwt_claims(client_id, scopes))
        self.access_tokens[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=int(time.time()) + 3600, resource=self.resource
        )
        return access

    def expire_access_tokens(self) -> None:
        """The server forgets every access token (as if they expired): requests with them get 401."""
        self.access_tokens.clear()

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id) or self.metadata_documents.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        assert client.client_id is not None
        self.authorizations.append(params)
        if self.deny:
            return construct_redirect_uri(
                str(params.redirect_uri),
                error="access_denied",
                error_description="the person said no",
                state=params.state,
            )
        code = AuthorizationCode(
            code=f"code_{secrets.token_hex(16)}",
            client_id=client.client_id,
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 300,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.codes[code.code] = code
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        assert client.client_id is not None
        del self.codes[authorization_code.code]
        return self._tokens(client.client_id, authorization_code.scopes)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        found = self.refresh_tokens.get(refresh_token)
        if found is None:
            self.refused_refreshes += 1
        return found

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        assert client.client_id is not None
        self.refreshes += 1
        del self.refresh_tokens[refresh_token.token]  # rotated: a second redemption fails
        return self._tokens(client.client_id, scopes or refresh_token.scopes)

    def _tokens(self, client_id: str, scopes: list[str]) -> OAuthToken:
        refresh = f"refresh_{secrets.token_hex(16)}"
        self.refresh_tokens[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        access = self.mint(client_id, scopes)
        return OAuthToken(
            access_token=access, expires_in=self.expires_in, scope=" ".join(scopes), refresh_token=refresh
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access_tokens.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access_tokens.pop(token.token, None)
        self.refresh_tokens.pop(token.token, None)


class Shim:
    """ASGI middleware: the client-credentials grant at /token, and the `write` tool's scope check."""

    def __init__(self, app: Any, provider: Provider, base: str) -> None:
        self.app = app
        self.provider = provider
        self.base = base

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/.well-known/oauth-authorization-server":
            await self.app(scope, receive, self._advertising_documents(send))
            return
        if scope["type"] == "http" and scope["path"] == "/jwks":
            self.provider.jwks_fetches += 1
            if self.provider.jwks_down:
                await _respond(send, 503, b'{"error":"temporarily_unavailable"}', [])
                return
            await _respond(send, 200, json.dumps(self.provider.jwks()).encode(), [])
            return
        if scope["type"] == "http" and scope["path"] == "/introspect" and scope["method"] == "POST":
            body, _ = await _buffer(receive)
            await self._introspect(scope, body, send)
            return
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, replay = await _buffer(receive)
        if scope["path"] == "/token" and parse_qs(body.decode()).get("grant_type") == ["client_credentials"]:
            await self._machine_token(scope, body, send)
            return
        if scope["path"] == "/mcp" and self._lacks_write_scope(scope, body):
            challenge = (
                f'Bearer error="insufficient_scope", scope="{WRITE_SCOPE}", '
                f'resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"'
            )
            await _respond(send, 403, b"{}", [(b"www-authenticate", challenge.encode())])
            return
        await self.app(scope, replay, send)

    def _advertising_documents(self, send: Any) -> Any:
        """Add `client_id_metadata_document_supported` to the metadata when documents are known."""
        start: dict[str, Any] = {}

        async def patched(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            document = json.loads(message["body"])
            if self.provider.metadata_documents:
                document["client_id_metadata_document_supported"] = True
            if self.provider.jwt_audience is not None:
                document["jwks_uri"] = self.provider.jwks_uri or f"{self.base}/jwks"
                document["introspection_endpoint"] = f"{self.base}/introspect"
            body = json.dumps(document).encode()
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        return patched

    def _lacks_write_scope(self, scope: dict[str, Any], body: bytes) -> bool:
        try:
            message = json.loads(body)
        except ValueError:
            return False
        params = message.get("params") if isinstance(message, dict) else None
        if message.get("method") != "tools/call" or not isinstance(params, dict) or params.get("name") != "write":
            return False
        token = dict(scope["headers"]).get(b"authorization", b"").decode().removeprefix("Bearer ")
        access = self.provider.access_tokens.get(token)
        return access is None or WRITE_SCOPE not in access.scopes

    async def _machine_token(self, scope: dict[str, Any], body: bytes, send: Any) -> None:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        client = self._signed_client(form) if "client_assertion" in form else self._basic_client(scope)
        if client is None:
            await _respond(send, 401, b'{"error":"invalid_client"}', [])
            return
        self.provider.machine_grants += 1
        requested = form.get("scope", "mcp").split()
        access = self.provider.mint(client, requested)
        token = OAuthToken(access_token=access, expires_in=3600, scope=" ".join(requested))
        await _respond(send, 200, token.model_dump_json(exclude_none=True).encode(), [])

    def _basic_client(self, scope: dict[str, Any]) -> str | None:
        basic = dict(scope["headers"]).get(b"authorization", b"").decode().removeprefix("Basic ")
        client, _, secret = base64.b64decode(basic or "Og==").decode().partition(":")
        return client if client in self.provider.machines and self.provider.machines[client] == secret else None

    async def _introspect(self, scope: dict[str, Any], body: bytes, send: Any) -> None:
        """RFC 7662: what the token is, for a machine client that authenticates."""
        if self._basic_client(scope) is None:
            await _respond(send, 401, b'{"error":"invalid_client"}', [])
            return
        self.provider.introspections += 1
        token = parse_qs(body.decode()).get("token", [""])[0]
        if token in self.provider.refresh_tokens:  # RFC 7662 answers about refresh tokens too
            await _respond(send, 200, json.dumps(self._about_refresh(token)).encode(), [])
            return
        access = self.provider.access_tokens.get(token)
        if access is None or (access.expires_at or 0) < time.time():
            await _respond(send, 200, b'{"active":false}', [])
            return
        answer = {
            "active": True,
            "iss": self.provider.issuer,
            "sub": access.client_id,
            "client_id": access.client_id,
            "aud": self.provider.jwt_audience or access.resource,
            "scope": " ".join(access.scopes),
            "exp": access.expires_at,
        }
        await _respond(send, 200, json.dumps(answer).encode(), [])

    def _about_refresh(self, token: str) -> dict[str, Any]:
        refresh = self.provider.refresh_tokens[token]
        audience = self.provider.jwt_audience or self.provider.resource
        expires = int(time.time()) + 3600
        answer = {"active": True, "iss": self.provider.issuer, "sub": refresh.client_id, "aud": audience}
        return {**answer, "client_id": refresh.client_id, "exp": expires, "token_type": "refresh_token"}

    def _signed_client(self, form: dict[str, str]) -> str | None:
        """RFC 7523: a JWT signed by the client's key, issued by and about the client, for this server."""
        if form.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            return None
        claims = jwt.decode(form["client_assertion"], options={"verify_signature": False})
        key = self.provider.signing_keys.get(str(claims.get("iss")))
        if key is None:
            return None
        try:
            jwt.decode(form["client_assertion"], key, algorithms=["ES256"], audience=[self.base, f"{self.base}/"])
        except jwt.InvalidTokenError:
            return None
        return str(claims["iss"]) if claims.get("sub") == claims.get("iss") else None


async def _buffer(receive: Any) -> tuple[bytes, Any]:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


async def _respond(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    headers = [(b"content-type", b"application/json"), *headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def protected_server(base: str, provider: Provider) -> MCPServer:
    settings = AuthSettings(
        issuer_url=AnyHttpUrl(base),
        resource_server_url=AnyHttpUrl(f"{base}/mcp"),
        required_scopes=["mcp"],
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=["mcp", WRITE_SCOPE], default_scopes=["mcp"]
        ),
        validate_token_resource=True,
    )
    server = MCPServer("secure", auth=settings, auth_server_provider=provider, log_level="WARNING")

    @server.tool()
    def whoami() -> str:
        """Who the token belongs to, and its scopes."""
        token = get_access_token()
        assert token is not None
        return json.dumps({"client": token.client_id, "scopes": sorted(token.scopes)})

    @server.tool()
    def write(text: str) -> str:
        """Needs the files:write scope."""
        return f"wrote {text}"

    return server


@dataclass
class Running:
    base: str
    url: str
    provider: Provider


@asynccontextmanager
async def serve_oauth(expires_in: int = 3600) -> AsyncIterator[Running]:
    """The authorization server and protected MCP server on 127.0.0.1 (a free port), in this loop."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    provider = Provider(f"{base}/mcp", expires_in)
    provider.issuer = f"{base}/"  # as the SDK's metadata spells it
    app = Shim(protected_server(base, provider).streamable_http_app(), provider, base)
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        await wait_until(lambda: server.started)
        try:
            yield Running(base, f"{base}/mcp", provider)
        finally:
            server.should_exit = True
    sock.close()
