"""`Forwarded` and `X-Forwarded-For/-Proto/-Host`, believed only from `[serve] trusted_proxies`.

Behind a proxy the peer of every request is the proxy, and the client's address, scheme and
host arrive in these headers; anyone can write them, so they count only when the peer is a proxy
named as trusted. Then the request's scope says what the client sent: `client` is its address,
`scheme` its scheme, the `Host` header the host it asked for (so the Host check judges the public
name, `frontends.serve.hosts`), and `public_origin(scope)` gives the origin to print in URLs.
From any other peer the headers are dropped, so nothing after this sees them.

The client is the rightmost address of the chain that is not a trusted proxy (a client can
prepend anything, but not append). Only the family `[serve] forwarded_header` names is read:
proxies set one family and pass the other on as the client wrote it, so believing both would let
a client name itself. With `Forwarded` (RFC 7239) the client's element gives the scheme and host;
`X-Forwarded-Proto` and `-Host` are taken as the nearest proxy set them (their last value). A
header that does not parse, or names a hop that is not an IP address, is ignored whole: the
request is the peer's, since a part that parsed may be the client's and the proxy's be lost.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
from starlette.types import ASGIApp, Receive, Scope, Send

from toolshell.config.serve import HOST_NAME

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_HEADERS = {b"forwarded", b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host"}
_PAIR = re2.compile(  # linear time: these headers come from the network
    r'\s*([A-Za-z]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;,\s"]*)\s*'
)
_PUBLIC = "toolshell.public_origin"


class ForwardedHeaders:
    """ASGI middleware: the forwarded headers of trusted proxies applied to the scope, others dropped."""

    def __init__(
        self, app: ASGIApp, trusted: Sequence[str], family: Literal["x-forwarded", "forwarded"] = "x-forwarded"
    ) -> None:
        self.app = app
        self.trusted: list[Network] = [ipaddress.ip_network(t, strict=False) for t in trusted]
        self.family = family

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = self.applied(scope)
        await self.app(scope, receive, send)

    def applied(self, scope: Scope) -> Scope:
        for key, _ in scope.get("headers", ()):
            if key in _HEADERS:
                break
        else:  # most requests: nothing to apply or drop, so nothing copied
            return scope
        headers = [(k, v) for k, v in scope.get("headers", []) if k not in _HEADERS]
        peer, peer_port = scope.get("client") or ("", 0)
        if not self._trusts(peer):
            return {**scope, "headers": headers}
        read = _forwarded if self.family == "forwarded" else _x_forwarded
        hops = read(scope.get("headers", []))
        if hops is None:
            return {**scope, "headers": headers}
        client, port, proto, host = self._client(hops, (peer, peer_port))
        out: dict[str, Any] = {**scope, "client": (client, port)}
        if proto in ("http", "https"):
            out["scheme"] = proto if scope["type"] == "http" else {"http": "ws", "https": "wss"}[proto]
        if host and HOST_NAME.fullmatch(host):
            headers = [(k, v) for k, v in headers if k != b"host"] + [(b"host", host.lower().encode())]
        else:
            host = _header(scope.get("headers", []), b"host")
        out["headers"] = headers
        secure = out.get("scheme") in ("https", "wss")
        out[_PUBLIC] = f"{'https' if secure else 'http'}://{host}" if host else None
        return out

    def _trusts(self, address: str) -> bool:
        if not self.trusted:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.trusted)

    def _client(self, hops: list[_Hop], peer: tuple[str, int]) -> tuple[str, int, str, str]:
        """The rightmost hop whose address is not a trusted proxy (the leftmost when all are):
        its address, port, scheme and host. Hops left of it were written by the client and are
        never read; an unreadable hop where a trusted proxy wrote leaves the nearest proxy's
        address (the peer when it is the first)."""
        nearest = peer
        for index in range(len(hops) - 1, -1, -1):
            address, port = hops[index].address, hops[index].port
            if not address:
                return *nearest, hops[index].proto, hops[index].host
            if index == 0 or not self._trusts(address):
                return address, port, hops[index].proto, hops[index].host
            nearest = (address, port)
        return *peer, "", ""


def public_origin(scope: Scope) -> str | None:
    """`https://mcp.example.com` as a trusted proxy said the client asked for it, else None."""
    origin = scope.get(_PUBLIC)
    return origin if isinstance(origin, str) else None


def _header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> str:
    return next((v.decode("latin-1") for k, v in headers if k == name), "")


def _values(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> list[str]:
    """Every comma-separated value of every header `name`, in order."""
    joined = ",".join(v.decode("latin-1") for k, v in headers if k == name)
    return [part.strip() for part in joined.split(",") if part.strip()]


@dataclass(frozen=True)
class _Hop:
    address: str
    """Who sent the request to this hop's proxy (`for`), an IP address."""
    port: int = 0
    proto: str = ""
    host: str = ""


def _forwarded(headers: Sequence[tuple[bytes, bytes]]) -> list[_Hop] | None:
    """The hops the proxies recorded in `Forwarded`, oldest first, or None when none came or any
    element is malformed or names no IP address."""
    if not any(k == b"forwarded" for k, _ in headers):
        return None
    elements = _elements(",".join(v.decode("latin-1") for k, v in headers if k == b"forwarded"))
    if not elements:
        return None
    hops = []
    for element in elements:
        node = _node(element.get("for", ""))
        if node is None:
            return None
        hops.append(_Hop(*node, element.get("proto", "").lower(), element.get("host", "")))
    return hops


def _x_forwarded(headers: Sequence[tuple[bytes, bytes]]) -> list[_Hop] | None:
    """The hops of `X-Forwarded-For`, oldest first, each with the scheme and host the nearest
    proxy set; None when no such header came. An entry that is not an IP address is a hop with
    no address (`_client` reads from the right and stops there): proxies append, so what a
    client wrote of its own is left of where the reading stops, and cannot hide its address."""
    entries = _values(headers, b"x-forwarded-for")
    if not entries:
        return None
    protos, hosts = _values(headers, b"x-forwarded-proto"), _values(headers, b"x-forwarded-host")
    proto, host = (protos[-1] if protos else "").lower(), hosts[-1] if hosts else ""
    return [_Hop(*(_node(entry) or ("", 0)), proto, host) for entry in entries]


def _elements(text: str) -> list[dict[str, str]] | None:
    """RFC 7239 elements: `for=a;proto=https, for="[2001:db8::1]:4711"` → a dict per element;
    None when any part does not parse (or an element is empty)."""
    elements: list[dict[str, str]] = [{}]
    position = 0
    while position < len(text):
        if text[position] == ",":
            elements.append({})
            position += 1
            continue
        if text[position] in "; \t":
            position += 1
            continue
        pair = _PAIR.match(text, position)
        if pair is None or pair.end() == position:
            return None
        value = pair.group(2)
        if value.startswith('"'):
            value = re2.sub(r"\\(.)", r"\1", value[1:-1])
        elements[-1].setdefault(pair.group(1).lower(), value)
        position = pair.end()
    return None if any(not e for e in elements) else elements


def _node(node: str) -> tuple[str, int] | None:
    """`192.0.2.1:4711`, `[2001:db8::1]:4711` or `2001:db8::1` → (address, port); None for
    anything that is not an IP address (`unknown`, a name, markup)."""
    if node.startswith("["):
        address, _, rest = node[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif node.count(":") == 1:
        address, port = node.split(":")
    else:
        address, port = node, ""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    return str(ip), int(port) if port.isdigit() and int(port) < 65536 else 0
