"""`[serve.oauth]`: access tokens of an OAuth issuer, checked for `toolshell serve --http`.

The SDK's resource-server side takes any `TokenVerifier`; this module holds the two it lacks:

- `JwtVerifier`: a JWT access token (RFC 9068) signed by one of the issuer's keys. The keys come
  from the `jwks_uri` of the issuer's metadata (RFC 8414, or OpenID discovery), cached for a while
  and fetched again, at most once a minute, when a token names a key not in the cache (rotation).
  Checked: the header's `typ` is `at+jwt` (unless `require_at_jwt = false`: an ID token is no
  access token), the signature with an allowed asymmetric algorithm, `iss`, `aud` (the configured
  audience), `exp` (and `nbf`/`iat` when present), and a `sub`. A `jwks_uri` of plain http to an
  address that is not loopback is refused (keys fetched that way can be swapped on the way).
- `IntrospectionVerifier`: an opaque token asked about at the issuer's RFC 7662 endpoint,
  authenticating as the configured client; `active`, `iss`, `aud`, `exp` and, when the answer has
  one, `token_type` (an access token, not a refresh token) are checked the same. An active answer
  is reused until its `exp` (at most `introspection_cache_seconds`), a refusal for
  `NEGATIVE_CACHE_SECONDS`, so a flood of requests is not a flood of introspections.

A token that fails any check is None (the caller gets 401); the reason is logged, never the token.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import httpx2
import jwt
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from pydantic import AnyHttpUrl
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolshell.config.serve import ServeOAuthConfig, secure_url
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.frontends.serve.auth import CallerToken, Gate
from toolshell.frontends.serve.forwarded import public_origin

log = logging.getLogger("toolshell.serve")

JWKS_TTL_SECONDS = 600.0
"""How long fetched keys are trusted before they are fetched again."""
REFETCH_SECONDS = 60.0
"""An unknown key id fetches the keys again at most this often (a flood of forged ids costs one fetch)."""
MAX_KEYS = 64
"""More keys than this in a JWKS is refused: a set is a handful of keys."""
RETRY_SECONDS = 5.0
"""After a failed fetch of the metadata or the keys, how long tokens are refused without asking again
(so an issuer that is down is not asked once per request)."""
LEEWAY_SECONDS = 30
"""Clock skew allowed on `exp`/`nbf`/`iat`."""
HTTP_TIMEOUT = httpx2.Timeout(10.0)
NEGATIVE_CACHE_SECONDS = 10.0
"""How long an introspection's "not active" (or otherwise refused) answer is reused."""
MAX_CACHED = 10_000
"""Introspection answers kept at most; past it the oldest goes."""
ACCESS_TOKEN_TYPES = frozenset({"bearer", "access_token", "urn:ietf:params:oauth:token-type:access_token"})
"""`token_type` values of an introspection answer that name an access token (case-insensitive)."""


def oauth_identity(issuer: str, subject: str) -> str:
    """`oauth:<issuer>#<subject>`: a subject is unique only per issuer."""
    return f"oauth:{issuer.rstrip('/')}#{subject}"


def _caller_token(claims: Mapping[str, Any], issuer: str, audience: str) -> CallerToken | None:
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        log.warning("serve: refused a token with no subject")
        return None
    client = claims.get("client_id") or claims.get("azp") or subject
    exp = claims.get("exp")
    return CallerToken(
        token="",
        client_id=str(client),
        subject=subject,
        scopes=_scopes(claims.get("scope", claims.get("scp"))),
        expires_at=int(exp) if isinstance(exp, int | float) else None,
        resource=audience,
        claims={"iss": issuer},
        caller=oauth_identity(issuer, subject),
    )


def _scopes(value: Any) -> list[str]:
    """`scope` is a space-separated string (RFC 9068, RFC 7662); some issuers send a list as `scp`."""
    if isinstance(value, str):
        return value.split()
    return [str(v) for v in value] if isinstance(value, list) else []


class _Issuer:
    """The issuer's metadata, fetched once (by the first token that needs it)."""

    def __init__(self, issuer: str, http: Callable[[], httpx2.AsyncClient]) -> None:
        self.issuer = issuer
        self._http = http
        self._metadata: dict[str, Any] | None = None
        self._failed: tuple[float, Exception] | None = None
        self._lock = anyio.Lock()

    async def metadata(self) -> dict[str, Any]:
        async with self._lock:
            if self._metadata is None:
                if self._failed and time.monotonic() - self._failed[0] < RETRY_SECONDS:
                    raise self._failed[1]
                try:
                    self._metadata = await self._discover()
                except (httpx2.HTTPError, LookupError, ValueError) as e:
                    self._failed = (time.monotonic(), e)
                    raise
            return self._metadata

    async def _discover(self) -> dict[str, Any]:
        urls = build_oauth_authorization_server_metadata_discovery_urls(self.issuer, self.issuer)
        async with self._http() as http:
            for url in urls:
                response = await http.get(url)
                if response.status_code != 200:
                    continue
                document = response.json()
                if isinstance(document, dict) and str(document.get("issuer", "")).rstrip("/") == self.issuer.rstrip(
                    "/"
                ):
                    return document
                log.warning("serve: %s names another issuer; ignored", url)
        raise LookupError(f"no authorization server metadata for {self.issuer} (tried {', '.join(urls)})")


class JwtVerifier(TokenVerifier):
    """JWT access tokens of one issuer for one audience (see the module docstring)."""

    def __init__(self, config: ServeOAuthConfig, http: Callable[[], httpx2.AsyncClient] | None = None) -> None:
        self.config = config
        self._http = http or (lambda: httpx2.AsyncClient(timeout=HTTP_TIMEOUT))
        self._issuer = _Issuer(config.issuer, self._http)
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = self._tried_at = -float("inf")
        self._lock = anyio.Lock()

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            header = jwt.get_unverified_header(token)
            if self.config.require_at_jwt and str(header.get("typ", "")).lower() not in (
                "at+jwt",
                "application/at+jwt",
            ):
                log.warning(
                    "serve: refused a JWT typed %r, not at+jwt (an ID token or another JWT is no access token; "
                    "for an issuer that does not type its access tokens set [serve.oauth] require_at_jwt = false)",
                    header.get("typ"),
                )
                return None
            if header.get("alg") not in self.config.algorithms:
                log.warning("serve: refused a token signed with %r", header.get("alg"))
                return None
            key = await self._key(str(header.get("kid", "")))
            if key is None:
                return None
            metadata = await self._issuer.metadata()
            claims = jwt.decode(
                token,
                key,
                algorithms=self.config.algorithms,
                audience=self.config.audience,
                issuer=str(metadata["issuer"]),
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.InvalidTokenError as e:
            log.warning("serve: refused a token: %s", e)
            return None
        except (httpx2.HTTPError, LookupError, ValueError) as e:
            log.warning("serve: cannot check tokens against %s: %s", self.config.issuer, e)
            return None
        return _caller_token(claims, self.config.issuer, self.config.audience)

    async def _key(self, kid: str) -> jwt.PyJWK | None:
        async with self._lock:
            now = time.monotonic()
            stale = now - self._fetched_at > JWKS_TTL_SECONDS and now - self._tried_at > RETRY_SECONDS
            unknown = kid not in self._keys and now - self._tried_at > REFETCH_SECONDS
            if stale or unknown:
                self._tried_at = now
                self._keys = await self._fetch_keys()  # on failure the keys fetched before stay in use
                self._fetched_at = now
        found = self._keys.get(kid) or (next(iter(self._keys.values())) if not kid and len(self._keys) == 1 else None)
        if found is None:
            log.warning("serve: refused a token signed by an unknown key %r", kid)
        return found

    async def _fetch_keys(self) -> dict[str, jwt.PyJWK]:
        uri = (await self._issuer.metadata()).get("jwks_uri")
        if not isinstance(uri, str):
            raise LookupError(f"the metadata of {self.config.issuer} has no jwks_uri")
        if not secure_url(uri):
            raise LookupError(
                f"the jwks_uri {uri} is plain http to an address that is not loopback; keys come only over https"
            )
        async with self._http() as http:
            response = await http.get(uri)
        response.raise_for_status()
        keys = response.json().get("keys")
        if not isinstance(keys, list) or len(keys) > MAX_KEYS:
            raise LookupError(f"{uri} is not a JWKS of at most {MAX_KEYS} keys")
        found: dict[str, jwt.PyJWK] = {}
        for data in keys:
            try:
                key = jwt.PyJWK.from_dict(data)
            except (jwt.PyJWKError, jwt.InvalidKeyError):
                continue  # a key of a type this host cannot use: tokens signed by it are refused
            found[str(data.get("kid", ""))] = key
        return found


class IntrospectionVerifier(TokenVerifier):
    """Opaque tokens, asked about at the issuer's RFC 7662 endpoint."""

    def __init__(
        self, config: ServeOAuthConfig, client_secret: str, http: Callable[[], httpx2.AsyncClient] | None = None
    ) -> None:
        assert config.introspection_endpoint and config.client_id  # the config model checks both
        self.config = config
        self._endpoint = config.introspection_endpoint
        self._auth = httpx2.BasicAuth(config.client_id, client_secret)
        self._http = http or (lambda: httpx2.AsyncClient(timeout=HTTP_TIMEOUT))
        self._answers: dict[bytes, tuple[float, AccessToken | None]] = {}
        """Answers by the token's SHA-256 (the token itself is not kept): until when, and what."""

    async def verify_token(self, token: str) -> AccessToken | None:
        key = hashlib.sha256(token.encode()).digest()
        cached = self._answers.get(key)
        if cached is not None and time.time() < cached[0]:
            return cached[1]
        try:
            async with self._http() as http:
                response = await http.post(self._endpoint, data={"token": token}, auth=self._auth)
            response.raise_for_status()
            claims = response.json()
        except (httpx2.HTTPError, ValueError) as e:
            log.warning("serve: cannot introspect at %s: %s", self._endpoint, e)
            return None  # not cached: the issuer's trouble says nothing about the token
        reason = self._refusal(claims)
        if reason:
            log.warning("serve: refused a token: %s", reason)
            self._keep(key, time.time() + NEGATIVE_CACHE_SECONDS, None)
            return None
        found = _caller_token(claims, self.config.issuer, self.config.audience)
        self._keep(key, self._until(claims), found)
        return found

    def _until(self, claims: dict[str, Any]) -> float:
        """An active answer holds until the token's `exp`, at most `introspection_cache_seconds`."""
        until = time.time() + self.config.introspection_cache_seconds
        exp = claims.get("exp")
        return min(until, float(exp)) if isinstance(exp, int | float) else until

    def _keep(self, key: bytes, until: float, answer: AccessToken | None) -> None:
        if until <= time.time():
            return
        self._answers.pop(key, None)
        self._answers[key] = (until, answer)
        while len(self._answers) > MAX_CACHED:
            del self._answers[next(iter(self._answers))]  # the oldest answer (dicts keep insertion order)

    def _refusal(self, claims: Any) -> str | None:
        if not isinstance(claims, dict) or claims.get("active") is not True:
            return "not active"
        if str(claims.get("iss", self.config.issuer)).rstrip("/") != self.config.issuer.rstrip("/"):
            return "issued by another issuer"
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.config.audience not in audiences:
            return "issued for another audience"
        exp = claims.get("exp")
        if isinstance(exp, int | float) and exp + LEEWAY_SECONDS < time.time():
            return "expired"
        kind = claims.get("token_type")
        if kind is not None and str(kind).lower() not in ACCESS_TOKEN_TYPES:
            return f"its token_type is {str(kind)[:40]!r}, not an access token"
        return None


def oauth_gate(config: ServeOAuthConfig, bind: str, port: int, env: Mapping[str, str]) -> Gate:
    """The gate of `[serve.oauth]`: its verifier, and the public protected-resource metadata (RFC 9728)
    that a 401's `WWW-Authenticate` points clients to.

    Raises:
        ToolshellError: `unavailable` when the introspection client's secret variable is unset.
    """
    verifier: TokenVerifier
    if config.introspection_endpoint:
        assert config.client_secret_env  # the config model requires it with an endpoint
        secret = env.get(config.client_secret_env)
        if not secret:
            raise ToolshellError(
                ErrorCode.UNAVAILABLE,
                f"[serve.oauth] takes the introspection secret from ${config.client_secret_env}, which is not set; "
                f"export {config.client_secret_env}=… before starting",
            )
        verifier = IntrospectionVerifier(config, secret)
    else:
        verifier = JwtVerifier(config)
    host = f"[{bind}]" if ":" in bind else bind
    resource = AnyHttpUrl(config.resource_url or f"http://{host}:{port}/mcp")
    metadata = build_resource_metadata_url(resource)
    routes = _metadata_routes(config, resource)
    how = (
        f"send 'Authorization: Bearer <access token>' with a token from {config.issuer} for {config.audience} "
        f"(how to get one: {metadata})"
    )
    return Gate(verifier, how, metadata, list(config.required_scopes), routes, follows_proxy=not config.resource_url)


def _metadata_routes(config: ServeOAuthConfig, resource: AnyHttpUrl) -> list[Route]:
    """The metadata route. Without `resource_url`, its `resource` is the `/mcp` URL a trusted
    proxy says the client used (`frontends.serve.forwarded`), else the bound address's."""
    issuers, scopes = [AnyHttpUrl(config.issuer)], config.required_scopes or None
    [route] = create_protected_resource_routes(resource, issuers, scopes_supported=scopes)
    if config.resource_url:
        return [route]
    at: dict[str, ASGIApp] = {}

    async def metadata(scope: Scope, receive: Receive, send: Send) -> None:
        origin = public_origin(scope)
        app = route.app if origin is None else at.get(origin)
        if app is None:
            [other] = create_protected_resource_routes(AnyHttpUrl(f"{origin}/mcp"), issuers, scopes_supported=scopes)
            app = other.app
            if len(at) < MAX_ORIGINS:  # a proxy passes on what clients send: keep a few, build the rest
                at[origin or ""] = app
        await app(scope, receive, send if origin is None else _uncached(send))

    return [Route(route.path, endpoint=_Asgi(metadata), methods=["GET", "OPTIONS"])]


MAX_ORIGINS = 16
"""Public origins whose metadata is kept built."""
_VARY = b"Host, Forwarded, X-Forwarded-Proto, X-Forwarded-Host"


def _uncached(send: Send) -> Send:
    """`send` with the answer marked for this request alone: its origin came from the request's
    headers, and a shared cache must not hand it to a client that sent others (the SDK's own
    `Cache-Control: public` would)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in (b"cache-control", b"vary")]
            message = {**message, "headers": [*kept, (b"cache-control", b"no-store"), (b"vary", _VARY)]}
        await send(message)

    return sending


class _Asgi:
    """A plain ASGI callable as a Starlette endpoint (a class, so Starlette passes scope, receive, send)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
