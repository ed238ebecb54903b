"""OAuth for Streamable HTTP servers, through the SDK's own client (`mcp.client.auth`).

The SDK does the protocol: discovery of protected-resource and authorization-server metadata with
the spec's fallbacks, dynamic registration or a client ID metadata document, PKCE, scope
selection, step-up on `insufficient_scope` (one re-authorization per request), refresh, and client
credentials; and cross-app access (SEP-990), whose SDK provider stands apart (`oauth_assertion`).
What we add around its flow (`ToolshellOAuth._auth_flow`):

- a login only starts where a person can answer (`toolshell auth login`, or `login = "on_call"`);
  elsewhere the 401/403 goes back to the transport, and the connection reports
  `connection_required` naming `toolshell auth login SERVER`;
- before that, a 401 on a token we hold is answered by one refresh, not by a new login;
- a refresh runs under the record's lock and re-reads the record first, so a refresh token is
  redeemed once however many tasks, processes and hosts wanted it (`oauth_store`);
- tokens written by another process (a login, a refresh) are picked up on the next request;
- configured `scopes` are added to the scopes the server's challenge asks for;
- the SDK reads the server's `WWW-Authenticate` only as `auth_params.tame` rewrote it (bounded,
  parsed in one pass);
- with `issuer` set, the flow's registration and token requests go only to that issuer (a refresh
  after a restart first reads the issuer's metadata), and a browser is never sent to another;
- what the flow sent as a credential is masked in its errors (`oauth_guard.Echoes`). Where the
  requests may go (private addresses, plain http) is `oauth_guard.OAuthGuard`, under the client.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.utils import union_scopes
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import AnyUrl

from toolshell.config.models import ServerConfig
from toolshell.config.oauth import OAuthConfig
from toolshell.connections import auth_params
from toolshell.connections.oauth_assertion import AssertionAuth
from toolshell.connections.oauth_guard import Echoes
from toolshell.connections.oauth_login import LoginUI, LoopbackCallback
from toolshell.connections.oauth_pin import IssuerPin
from toolshell.connections.oauth_store import StoredTokens
from toolshell.connections.oauth_tokens import ServerTokens, TokenFile
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.store.protocol import StateStore

REFRESH_MARGIN = 30.0
"""Seconds before expiry at which a request takes the refresh lock (the SDK refreshes at expiry)."""

# The SDK logs every flow error with its traceback; the connection reports the error itself. A
# NullHandler keeps Python's last-resort handler from printing those to a terminal, while a
# logging setup of the application still receives them.
logging.getLogger("mcp.client.auth").addHandler(logging.NullHandler())

_PLACEHOLDER_REDIRECT = "http://127.0.0.1/callback"
"""What the SDK's client metadata holds until a login binds the real loopback port."""


@dataclass(frozen=True)
class AuthSetup:
    """Where tokens live and who answers a login, for every connection of a host."""

    tokens_dir: Path
    """`<state dir>/oauth`: the token files, when there is no `store` (or from before there was one)."""
    ui: LoginUI | None = None
    """Who a login reaches (default: the system browser). Used by servers with `login = "on_call"`."""
    logging_in: bool = False
    """`toolshell auth login`: a person is there, whatever the server's `login` says."""
    store: StateStore | None = None
    """The host's state store: the records live there, sealed (`oauth_store`), shared by its workers."""


def oauth_settings(server: ServerConfig) -> OAuthConfig | None:
    """The OAuth settings in force for `server`, or None when it does not use OAuth.

    An `http` server uses OAuth unless its `headers` carry an Authorization or `oauth.enabled` is false.
    """
    if server.type != "http":
        return None
    if server.oauth is None:
        has_static = any(k.lower() == "authorization" for k in server.headers)
        return None if has_static else OAuthConfig()
    return server.oauth if server.oauth.enabled else None


def token_file(server: ServerConfig, setup: AuthSetup) -> ServerTokens:
    """Where `server`'s record is kept: the store when the setup has one, else its token file."""
    if setup.store is not None:
        return StoredTokens(setup.store, server, setup.tokens_dir.parent)
    return TokenFile(setup.tokens_dir, server.name, server.url or "")


def build_auth(server: ServerConfig, setup: AuthSetup) -> ToolshellOAuth | AssertionAuth | None:
    """The httpx auth for `server`'s requests, or None when it does not use OAuth."""
    settings = oauth_settings(server)
    if settings is None:
        return None
    file = token_file(server, setup)
    file.metadata_url = settings.client_metadata_url
    if settings.token_endpoint_auth_method == "private_key_jwt":
        key = _from_env(server.name, settings.private_key_env, "private key")
        return SignedMachineAuth(server.url or "", file, settings, key or "")
    secret = _from_env(server.name, settings.client_secret_env, "client secret")
    if settings.grant == "client_credentials":
        return MachineAuth(server.url or "", file, settings, secret or "")
    if settings.grant == "identity_assertion":
        return AssertionAuth(server.name, server.url or "", file, settings, secret or "")
    person = setup.logging_in or settings.login == "on_call"
    ui = (setup.ui or LoginUI(timeout_seconds=settings.login_timeout_seconds)) if person else None
    return CodeAuth(server.name, server.url or "", file, settings, secret, ui)


def _from_env(server: str, name: str | None, what: str) -> str | None:
    if name is None:
        return None
    value = os.environ.get(name)
    if not value:
        raise ToolshellError(
            ErrorCode.CONNECTION_REQUIRED,
            f"server {server!r} takes its OAuth {what} from ${name}, which is not set; set it and try again",
        )
    return value


Challenge = Literal["login", "scope"]
_SecretMethod = Literal["client_secret_basic", "client_secret_post"]


def _challenge(response: httpx2.Response) -> Challenge | None:
    """Whether a response asks for authorization: a 401, or a 403 for `insufficient_scope`."""
    if response.status_code == 401:
        return "login"
    if response.status_code == 403 and _bearer_param(response, "error") == "insufficient_scope":
        return "scope"
    return None


def _bearer_param(response: httpx2.Response, name: str) -> str | None:
    return auth_params.parse(response.headers.get("WWW-Authenticate")).param(name)


def _fold_scopes(response: httpx2.Response, wanted: list[str]) -> None:
    """Add the configured scopes to the challenge, which the SDK's scope selection reads first.

    The header is the one `auth_params.tame` wrote, so it is rewritten here the same way.
    """
    if not wanted:
        return
    challenges = auth_params.parse(response.headers.get("WWW-Authenticate"))
    bearer = next((c for c in challenges.items if c.scheme == "bearer"), auth_params.Challenge("bearer"))
    scope = union_scopes(bearer.params.get("scope"), " ".join(wanted)) or ""
    params = {"scope": scope, **{k: v for k, v in bearer.params.items() if k != "scope"}}
    response.headers["WWW-Authenticate"] = auth_params.render(auth_params.Challenge("Bearer", params))


def _registered_for(client: OAuthClientInformationFull, uri: AnyUrl, response: httpx2.Response) -> bool:
    """Whether a registration covers this login's redirect and the scopes the server asks for."""
    if uri not in (client.redirect_uris or []):
        return False
    asked = (_bearer_param(response, "scope") or "").split()
    return client.scope is None or set(asked) <= set(client.scope.split())


class ToolshellOAuth(IssuerPin, OAuthClientProvider):
    """What toolshell adds around the SDK's flow (see the module docstring)."""

    _file: ServerTokens
    _stamp: object | None = None
    _wanted: list[str]
    on_outcome: Callable[[httpx2.Response], None] | None = None
    """Told the response each request ended with (not the refusals a refresh or login got past)."""

    def _report(self, response: httpx2.Response | None) -> None:
        if response is not None and self.on_outcome is not None:
            self.on_outcome(response)

    def _may_authorize(self) -> bool:
        """Whether a 401 may start the SDK's authorization (a person, or a machine grant)."""
        raise NotImplementedError

    def _before_authorizing(self, response: httpx2.Response) -> None:
        _fold_scopes(response, self._wanted)

    def _after_authorizing(self) -> None:
        return None

    def _fixed_client(self) -> OAuthClientInformationFull | None:
        return None

    @functools.cached_property
    def _echoes(self) -> Echoes:
        return Echoes()

    def _vet(self, request: httpx2.Request) -> None:
        """Before the flow sends a request of its own: the pinned issuer, and what it must never show."""
        self._check_issuer(request)
        self._echoes.note(request)

    async def _initialize(self) -> None:
        await super()._initialize()
        self._sync(force=True)  # the SDK's load leaves out the expiry and a configured client

    def _sync(self, force: bool = False) -> None:
        """Take up what another process (a login, a refresh) wrote since we last read the file."""
        stamp = self._file.stamp()
        if stamp == self._stamp and not force:
            return
        self._stamp = stamp
        record = self._file.read()
        self.context.current_tokens = record.tokens
        self.context.token_expiry_time = record.expires_at
        fixed = self._fixed_client()
        self.context.client_info = fixed if fixed is not None else record.client_info

    def _refresh_due(self) -> bool:
        expiry = self.context.token_expiry_time
        return self.context.can_refresh_token() and expiry is not None and time.time() + REFRESH_MARGIN >= expiry

    @contextlib.asynccontextmanager
    async def _refresh_guard(self) -> AsyncIterator[None]:
        if not self._refresh_due():
            yield
            return
        async with self._file.refresh_lock():
            self._sync()
            yield

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if not self._initialized:
            await self._initialize()
        retried = False
        response: httpx2.Response | None = None
        while True:
            self._sync()
            if self._refresh_needs_metadata(self._refresh_due()):
                # A refresh without metadata would go to the MCP server's origin: find the issuer's first.
                for metadata_request in self._issuer_metadata_requests():
                    if await self._take_metadata((yield metadata_request)):
                        break
            flow = super()._auth_flow(request)
            try:
                async with self._refresh_guard():
                    outgoing = await flow.__anext__()
                    if outgoing is not request:  # the SDK refreshes first
                        self._vet(outgoing)
                        response = yield outgoing
                        auth_params.tame(response)
                        outgoing = await flow.asend(response)
                        if self.context.current_tokens is None:
                            self._file.forget_tokens()  # the refresh token is dead: stop redeeming it
                response = yield outgoing
                auth_params.tame(response)
                challenge = _challenge(response)
                if challenge is not None and self._may_authorize():
                    self._before_authorizing(response)
                    while True:
                        outgoing = await flow.asend(response)
                        self._vet(outgoing)
                        response = yield outgoing
                        auth_params.tame(response)
                if challenge != "login" or retried or not self.context.can_refresh_token():
                    self._report(response)  # a 401/403 reaches the transport: connection_required
                    return
                retried = True
                self.context.token_expiry_time = 1.0  # the server says the token is no good: refresh it
            except StopAsyncIteration:
                self._report(response)
                return
            except OAuthFlowError as exc:
                self._echoes.scrub(exc)  # a token endpoint's error may quote what we sent it
                raise
            finally:
                await flow.aclose()
                self._after_authorizing()


class CodeAuth(ToolshellOAuth):
    """Authorization code with PKCE, through a loopback redirect; logins only where a person is."""

    def __init__(
        self,
        server: str,
        url: str,
        file: ServerTokens,
        settings: OAuthConfig,
        secret: str | None,
        ui: LoginUI | None,
    ) -> None:
        # RFC 8414's default for a client with a secret is client_secret_basic; the server's metadata
        # may say otherwise, which `_perform_authorization` reads once discovery has found it.
        self._explicit_method = settings.token_endpoint_auth_method is not None
        method = settings.token_endpoint_auth_method or ("client_secret_basic" if secret else "none")
        metadata = OAuthClientMetadata(
            redirect_uris=[AnyUrl(_PLACEHOLDER_REDIRECT)],
            client_name="toolshell",
            scope=" ".join(settings.scopes) or None,
            token_endpoint_auth_method=method,
        )
        storage: TokenStorage = file
        super().__init__(url, metadata, storage, self._redirect, self._callback, settings.client_metadata_url)
        self._server = server
        self._file = file
        self._wanted = list(settings.scopes)
        self._pinned_issuer = settings.issuer
        self._ui = ui
        self._port = settings.redirect_port
        self._loopback: LoopbackCallback | None = None
        self._url = ""
        self._configured = (
            OAuthClientInformationFull(
                client_id=settings.client_id,
                client_secret=secret,
                token_endpoint_auth_method=method,
                scope=metadata.scope,
                issuer=settings.issuer,
            )
            if settings.client_id
            else None
        )

    def _may_authorize(self) -> bool:
        return self._ui is not None

    async def _perform_authorization(self) -> httpx2.Request:
        metadata = self.context.oauth_metadata
        where = str(metadata.authorization_endpoint) if metadata else self.context.server_url
        self._check_issuer(httpx2.Request("POST", where))  # before the browser is sent there
        self._choose_secret_method()
        return await super()._perform_authorization()

    def _choose_secret_method(self) -> None:
        """For a configured client with a secret: basic, unless the server supports only post."""
        client = self._configured
        if client is None or client.client_secret is None or self._explicit_method:
            return
        metadata = self.context.oauth_metadata
        supported = (metadata.token_endpoint_auth_methods_supported if metadata else None) or []
        post_only = "client_secret_post" in supported and "client_secret_basic" not in supported
        client.token_endpoint_auth_method = "client_secret_post" if post_only else "client_secret_basic"

    def _fixed_client(self) -> OAuthClientInformationFull | None:
        return self._configured

    def _before_authorizing(self, response: httpx2.Response) -> None:
        super()._before_authorizing(response)
        self._after_authorizing()
        self._loopback = loopback = LoopbackCallback(self._port or self._remembered_port())
        uri = AnyUrl(loopback.redirect_uri)
        self.context.client_metadata.redirect_uris = [uri]
        known = self.context.client_info
        if self._configured is None and known is not None and not _registered_for(known, uri, response):
            self.context.client_info = None  # registered for another port or fewer scopes: register again

    def _after_authorizing(self) -> None:
        if self._loopback is not None:
            self._loopback.close()
            self._loopback = None

    def _remembered_port(self) -> int:
        """The port of the stored registration's redirect, so a second login can reuse it."""
        known = self.context.client_info
        for uri in (known.redirect_uris or []) if known else []:
            if uri.host == "127.0.0.1" and uri.port:
                return int(uri.port)
        return 0

    async def _redirect(self, url: str) -> None:
        self._url = url

    async def _callback(self) -> AuthorizationCodeResult:
        if self._loopback is None or self._ui is None:
            raise OAuthFlowError(f"no login is possible here; run `toolshell auth login {self._server}`")
        return await self._loopback.receive(self._url, self._ui, self._server)


class _MachineFlow(ToolshellOAuth):
    """What the machine-to-machine grants share: no person, so the SDK may always fetch a token,
    and the client is the one the SDK provider was built with."""

    _fixed_client_info: OAuthClientInformationFull  # set by the SDK provider's __init__

    def _may_authorize(self) -> bool:
        return True

    def _fixed_client(self) -> OAuthClientInformationFull | None:
        return self._fixed_client_info


class MachineAuth(_MachineFlow, ClientCredentialsOAuthProvider):
    """Client credentials: no person, so the SDK may always fetch a token itself."""

    def __init__(self, url: str, file: ServerTokens, settings: OAuthConfig, secret: str) -> None:
        method: _SecretMethod = "client_secret_basic"
        if settings.token_endpoint_auth_method == "client_secret_post":
            method = "client_secret_post"
        with warnings.catch_warnings():
            # Without `issuer` the SDK warns that it trusts whichever server discovery finds; the
            # docs recommend setting it, and a config without it must still load quietly.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            ClientCredentialsOAuthProvider.__init__(
                self,
                url,
                file,
                settings.client_id or "",
                secret,
                token_endpoint_auth_method=method,
                scope=" ".join(settings.scopes) or None,
                issuer=settings.issuer,
            )
        self._file = file
        self._wanted = list(settings.scopes)
        self._pinned_issuer = settings.issuer


class SignedMachineAuth(_MachineFlow, PrivateKeyJWTOAuthProvider):
    """Client credentials with `private_key_jwt`: each token request carries an assertion signed here."""

    def __init__(self, url: str, file: ServerTokens, settings: OAuthConfig, key: str) -> None:
        client_id = settings.client_id or ""
        signer = SignedJWTParameters(
            issuer=client_id, subject=client_id, signing_key=key, signing_algorithm=settings.signing_algorithm
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # no `issuer`: see MachineAuth
            PrivateKeyJWTOAuthProvider.__init__(
                self,
                url,
                file,
                client_id,
                signer.create_assertion_provider(),
                scope=" ".join(settings.scopes) or None,
                issuer=settings.issuer,
            )
        self._file = file
        self._wanted = list(settings.scopes)
        self._pinned_issuer = settings.issuer
