"""Where a server's OAuth may send us: no private address it was not given, no secret over plain http.

The remote server names the URLs the SDK's OAuth flow fetches: its `WWW-Authenticate` and
protected-resource metadata name the authorization server, whose metadata names the registration
and token endpoints. Without a guard, a hostile server makes toolshell GET and POST to loopback
and link-local addresses (cloud metadata, local admin ports), and makes it post the client secret
over plain http to wherever it likes. This transport sits under the HTTP client, so it sees every
request the flow sends (and each redirect hop), on the address it will really connect to:

- a request to a host other than the configured ones (the server's `url`, and its `issuer` if
  set) is resolved here and follows the `web_fetch` rule (`private_address`): a non-public
  address is refused unless the server's `[mcp.servers.oauth] allow_private` names it. The
  request then goes to the checked address.
- a request that carries a credential (a client secret, in the body or as Basic auth, a client
  assertion, an ID-JAG, a client-credentials grant) goes only over https, or plain http to a
  loopback address.

Requests to a configured host without a credential pass untouched: the user named that host.
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import parse_qs

import httpx2

from toolshell.connections.private_address import (
    IPAddress,
    Unresolvable,
    is_loopback,
    normalise,
    refusal,
    resolve,
)
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.redact import MASK, guard_logs

_DEFAULT_PORTS = {"http": 80, "https": 443}
_CREDENTIAL_FIELDS = ("client_secret", "client_assertion", "assertion", "subject_token", "actor_token")


def _form(request: httpx2.Request) -> dict[str, list[str]]:
    if "application/x-www-form-urlencoded" not in request.headers.get("Content-Type", ""):
        return {}
    try:
        body = request.content
    except httpx2.RequestNotRead:  # a streamed body: not one the OAuth flow builds
        return {}
    return parse_qs(body.decode("utf-8", "replace"))


def _basic(request: httpx2.Request) -> str | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "basic" else None


def carries_credential(request: httpx2.Request) -> bool:
    """Whether the request holds a client credential: Basic auth, or one in a form body."""
    form = _form(request)
    basic = _basic(request) is not None
    return basic or any(k in form for k in _CREDENTIAL_FIELDS) or form.get("grant_type") == ["client_credentials"]


def credentials_in(request: httpx2.Request) -> set[str]:
    """The credential values a request carries (a Basic header both encoded and decoded)."""
    values = {v for k, vs in _form(request).items() if k in _CREDENTIAL_FIELDS for v in vs}
    basic = _basic(request)
    if basic:
        values.add(basic)
        try:
            values.add(base64.b64decode(basic, validate=True).decode("utf-8", "replace").partition(":")[2])
        except (binascii.Error, ValueError):
            pass
    return {v for v in values if v}


class Echoes:
    """The credentials one flow sent, so an authorization server's echo of them is never shown.

    A token endpoint's error body reaches the SDK's error message (`Token exchange failed: ...`);
    a secret from the config is masked by the host's redactor, but an assertion is made per
    request: each is remembered here and masked in the flow's errors and in log records.
    """

    def __init__(self) -> None:
        self._values: set[str] = set()

    def note(self, request: httpx2.Request) -> None:
        new = credentials_in(request) - self._values
        if new:
            self._values |= new
            guard_logs(new)

    def scrub(self, exc: BaseException) -> None:
        """Mask every remembered value in the exception's message (in place)."""
        longest_first = sorted(self._values, key=len, reverse=True)

        def mask(arg: object) -> object:
            if not isinstance(arg, str):
                return arg
            for value in longest_first:
                arg = arg.replace(value, MASK)
            return arg

        exc.args = tuple(mask(a) for a in exc.args)


class OAuthGuard(httpx2.AsyncBaseTransport):
    """The transport under one server's HTTP client (see the module docstring)."""

    def __init__(
        self, inner: httpx2.AsyncBaseTransport, server: str, configured: list[str], allow_private: list[str]
    ) -> None:
        self._inner = inner
        self._server = server
        self._own_hosts = {_host(httpx2.URL(url)) for url in configured}
        self._allowed = normalise(allow_private)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        host = _host(url)
        credential = carries_credential(request)
        own = host in self._own_hosts
        if own and not credential:
            return await self._inner.handle_async_request(request)
        port = url.port or _DEFAULT_PORTS.get(url.scheme, 443)
        try:
            addresses = await resolve(host, port)
        except Unresolvable as e:
            raise httpx2.ConnectError(str(e), request=request) from None
        if not own:
            self._check_private(host, port, addresses)
        if credential and url.scheme != "https" and not all(is_loopback(a) for a in addresses):
            raise ToolshellError(
                ErrorCode.DENIED,
                f"denied: server {self._server!r}'s OAuth would send a client credential over plain http to "
                f"{host}; credentials go only over https (or to a loopback address): use an https "
                f"issuer and server url",
            )
        return await self._inner.handle_async_request(_pinned(request, addresses[0]))

    def _check_private(self, host: str, port: int, addresses: list[IPAddress]) -> None:
        refused = refusal(host, port, addresses, self._allowed)
        if refused is not None:
            raise ToolshellError(
                ErrorCode.DENIED,
                f"denied: server {self._server!r}'s OAuth discovery points to {refused.named}, a {refused.kind} "
                f"address, which toolshell does not reach by default; if you trust it, add "
                f'"{refused.entry}" to allow_private in that server\'s [mcp.servers.oauth]',
            )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _host(url: httpx2.URL) -> str:
    """The host as it goes on the wire (IDNA-encoded, lower case, IPv6 without brackets)."""
    return url.raw_host.decode("ascii").lower()


def _pinned(request: httpx2.Request, address: IPAddress) -> httpx2.Request:
    """The request sent to the checked address; the `Host` header and TLS name keep the host name."""
    url = request.url
    if _host(url) == str(address):
        return request
    headers = httpx2.Headers(request.headers)
    headers["Host"] = url.netloc.decode("ascii")
    extensions = dict(request.extensions)
    if url.scheme == "https":
        extensions["sni_hostname"] = _host(url)
    return httpx2.Request(
        request.method, url.copy_with(host=str(address)), headers=headers, stream=request.stream, extensions=extensions
    )


def guard_client(client: httpx2.AsyncClient, server: str, configured: list[str], allow_private: list[str]) -> None:
    """Put the guard under every transport the client may use (its own, and any proxy mounts).

    `configured`: the URLs the user wrote (the server's, its issuer's), whose hosts are allowed.
    """
    client._transport = OAuthGuard(client._transport, server, configured, allow_private)
    client._mounts = {
        pattern: None if mount is None else OAuthGuard(mount, server, configured, allow_private)
        for pattern, mount in client._mounts.items()
    }
