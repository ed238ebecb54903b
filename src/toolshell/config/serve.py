"""`[serve]` and `[serve.oauth]`: how `toolshell serve` keeps shells and streams, and who may call it."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal
from urllib.parse import urlsplit

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
from pydantic import Field, field_validator, model_validator

from toolshell.config.base import _YEAR, _Model
from toolshell.loopback import is_loopback_host

ASYMMETRIC_JWT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""What `[serve.oauth] algorithms` may list: signatures checked with the issuer's public keys.
`none` and the shared-secret `HS*` family are never accepted (anyone holding the JWKS could forge)."""


class ServeOAuthConfig(_Model):
    """`[serve.oauth]`: `toolshell serve --http` as an OAuth resource server (docs/configuration.md).

    Access tokens are JWTs checked against the issuer's JWKS, or, with `introspection_endpoint`,
    opaque tokens asked about at the issuer (RFC 7662)."""

    issuer: str
    """The authorization server's issuer URL; its metadata is read from the RFC 8414 / OpenID well-known URL."""
    audience: str
    """The audience a token must be issued for (its `aud`), usually this server's public `/mcp` URL."""
    resource_url: str | None = None
    """This server's public `/mcp` URL in the protected-resource metadata; default `http://<host>:<port>/mcp`."""
    required_scopes: list[str] = Field(default_factory=list)
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256"])
    introspection_endpoint: str | None = None
    """Ask this RFC 7662 endpoint about each token instead of checking it as a JWT."""
    client_id: str | None = None
    """Introspection: the client id toolshell authenticates as (HTTP Basic)."""
    client_secret_env: str | None = None
    """Introspection: the environment variable holding that client's secret (never the secret itself)."""
    require_at_jwt: bool = True
    """Accept only JWTs whose header says `typ: at+jwt` (RFC 9068), so an ID token or another JWT of
    the issuer is not taken for an access token. Off for an issuer that does not type its tokens."""
    introspection_cache_seconds: float = Field(default=300.0, ge=0, le=86_400)
    """How long an active introspection answer is reused (never past the token's `exp`); 0: ask every time."""

    @field_validator("issuer", "introspection_endpoint", "resource_url")
    @classmethod
    def _an_http_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"https?://[^/\s]+", v):
            raise ValueError(f"{v!r} is not an http(s) URL, e.g. https://login.example.com")
        return v

    @field_validator("issuer", "introspection_endpoint")
    @classmethod
    def _https(cls, v: str | None) -> str | None:
        if v is not None and not secure_url(v):
            raise ValueError(
                f"{v!r} is plain http to an address that is not loopback: keys, tokens and the introspection "
                "secret would travel readable and forgeable; use https"
            )
        return v

    @field_validator("algorithms")
    @classmethod
    def _asymmetric(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if a not in ASYMMETRIC_JWT_ALGORITHMS]
        if bad or not v:
            raise ValueError(f"algorithms takes some of {', '.join(ASYMMETRIC_JWT_ALGORITHMS)} (not {bad or 'none'})")
        return v

    @field_validator("client_secret_env")
    @classmethod
    def _names_a_variable(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError(f"client_secret_env names an environment variable (e.g. SERVE_CLIENT_SECRET), not {v!r}")
        return v

    @model_validator(mode="after")
    def _introspection_client(self) -> ServeOAuthConfig:
        if self.introspection_endpoint and not (self.client_id and self.client_secret_env):
            raise ValueError("introspection_endpoint needs client_id and client_secret_env to authenticate with")
        return self


class ServeTasksConfig(_Model):
    """`[serve.tasks]`: `bash` calls of clients that declare the Tasks extension (docs/tasks.md)."""

    after_seconds: float = Field(default=1.0, ge=0, le=3600)
    """A call still running this long (or asking a person sooner) becomes a task; 0: every call does."""
    poll_milliseconds: int = Field(default=1000, ge=100, le=60_000)
    """The `pollIntervalMs` a task starts with (five times it once the task waits for a person or is old)."""
    keep_seconds: float = Field(default=3600.0, ge=10, le=_YEAR)
    """How long a finished task's result stays for `tasks/get` (its `ttlMs` counts to then)."""


def secure_url(url: str) -> bool:
    """Whether `url` is https, or plain http to a loopback address (127.0.0.0/8, ::1, localhost)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return False
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and is_loopback_host(host)


class ServeConfig(_Model):
    """`toolshell serve --http`: where the SSE events of each stream are kept, so a client that
    reconnects with `Last-Event-ID` gets the rest of its result; and how callers authenticate
    (the serve token unless `oauth` is set)."""

    event_store: Literal["memory", "state"] = "memory"
    oauth: ServeOAuthConfig | None = None
    shell_idle_seconds: float = Field(default=3600.0, gt=0, le=_YEAR)
    """A shell handle unused this long is gone."""
    max_shells_per_caller: int = Field(default=32, ge=1, le=100_000)
    """Shells one caller keeps; past it, that caller's shell idle longest goes."""
    max_shell_bytes: int = Field(default=64 * 1024 * 1024, ge=4096, le=1 << 34)
    """The most a shell's saved state may take; past it the state is not kept (the result says so)."""
    live_shell_bytes: int = Field(default=1 << 30, ge=1 << 20, le=1 << 40)
    """The bytes of files the shells one serving process keeps live between calls may hold; past it
    the least recently used are closed (their state stays in the store, the next call checks it out)."""
    live_shells: int = Field(default=1024, ge=1, le=1_000_000)
    """The shells one serving process keeps live between calls; past it the least recently used idle
    one is closed (its state stays in the store). Their memory is bounded by `live_shell_bytes`: a
    shell's files and 256 bytes an entry count there."""
    tasks: ServeTasksConfig = Field(default_factory=ServeTasksConfig)
    yield_seconds: float = Field(default=25.0, ge=0, le=3600)
    """A `bash` call of a client without Tasks still running this long returns its output so far;
    the next call on its shell collects the rest first (docs/tasks.md). 0: never yield. The default
    is below every common client's tool timeout (docs/tasks.md lists them) and not after the drain."""
    list_wait_seconds: float = Field(default=5.0, ge=0, le=60)
    """How long, from the start, a `tools/list` waits for the startup servers still connecting, so
    the first `bash` description names their tools. 0: answer at once."""
    heartbeat_seconds: float = Field(default=5.0, ge=0.5, le=3600)
    """How often a serving worker says it is alive; one silent for three beats counts as dead, and
    another worker ends the shell calls it left running."""
    web: bool = True
    """Serve the web page under `/ui/` on `serve --http` (approvals, the timeline of every worker)."""
    state_keys_env: str = "TOOLSHELL_STATE_KEYS"
    """The environment variable holding the state key ring (base64url keys, newest first) that seals
    shells and `requestState` for every worker; without it, a local store uses `<state-dir>/state-key`."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Public host names (`name` or `name:port`) this worker answers to besides loopback ones and
    its `--host`; a `Host` or `Origin` naming anything else is refused (DNS-rebinding protection)."""
    trusted_proxies: list[str] = Field(default_factory=list)
    """Addresses or CIDRs of the proxies whose `Forwarded` / `X-Forwarded-*` headers are believed;
    from any other peer those headers are ignored. A CIDR trusts every host in it."""
    forwarded_header: Literal["x-forwarded", "forwarded"] = "x-forwarded"
    """The one header family the trusted proxies set: `X-Forwarded-For/-Proto/-Host` or RFC 7239
    `Forwarded`. The other is ignored, since a proxy passes on the one it does not set as the
    client wrote it."""
    drain_seconds: float = Field(default=25.0, ge=0, le=3600)
    """After SIGTERM, how long requests in flight and parked runs may take to finish before the
    worker exits; give Kubernetes' `terminationGracePeriodSeconds` at least this plus 5."""

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not HOST_NAME.fullmatch(name):
                raise ValueError(
                    f"allowed_hosts takes host names as a browser sends them in Host (mcp.example.com, "
                    f"mcp.example.com:8443, [2001:db8::1]), not {name!r}; a wildcard would turn the "
                    "DNS-rebinding protection off, so list each name"
                )
        return [name.lower() for name in v]

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, v: list[str]) -> list[str]:
        for entry in v:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"trusted_proxies takes IP addresses or CIDRs (10.0.0.5, 10.0.0.0/8, fd00::/8), not {entry!r}"
                ) from None
        return v


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOST_NAME = re2.compile(  # linear time: forwarded Host headers are checked with it too
    rf"(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{{1,5}})?"
)
"""A Host header's value: a DNS name or IPv4 address, or a bracketed IPv6 address; an optional port."""
