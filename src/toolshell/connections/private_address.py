"""Which addresses toolshell reaches only when told to: the rule `web_fetch` and OAuth discovery share.

Loopback, private, link-local, unspecified, multicast and other non-public addresses are not
reached unless the host, `host:port`, or the address is in an `allow_private` list. A host is
resolved here and every address it resolves to is judged; the caller then connects to a judged
address itself, so a DNS answer that changes between check and connect (rebinding) cannot slip
a private address through.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

import anyio

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Unresolvable(Exception):
    """The host has no address (the message says which host and why)."""


@dataclass(frozen=True)
class Refusal:
    """A non-public address that no `allow_private` entry names."""

    host: str
    port: int
    address: IPAddress
    kind: str

    @property
    def named(self) -> str:
        """`127.0.0.1`, or `name (127.0.0.1)` when the host is a name."""
        return self.host if self.host == str(self.address) else f"{self.host} ({self.address})"

    @property
    def entry(self) -> str:
        """The `allow_private` entry that would allow it: `host:port`."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def non_public_kind(ip: IPAddress) -> str | None:
    """Why `ip` is not a public address ("loopback", "private", ...), or None when it is public."""
    candidates: list[IPAddress] = []
    if isinstance(ip, ipaddress.IPv6Address):
        # An IPv6 address that embeds an IPv4 one reaches that IPv4 host: judge (and name) it first.
        candidates += [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
        if ip.teredo:
            candidates.append(ip.teredo[1])
    candidates.append(ip)
    for addr in candidates:
        for attr, kind in (
            ("is_loopback", "loopback"),
            ("is_link_local", "link-local"),
            ("is_unspecified", "unspecified"),
            ("is_multicast", "multicast"),
            ("is_private", "private"),
        ):
            if getattr(addr, attr):
                return kind
        if not addr.is_global:
            return "non-public"
    return None


def is_loopback(ip: IPAddress) -> bool:
    return non_public_kind(ip) == "loopback"


def _allow_keys(host: str, port: int, address: IPAddress) -> set[str]:
    ip = str(address)
    ip_port = f"[{ip}]:{port}" if address.version == 6 else f"{ip}:{port}"
    host_port = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return {host, host_port, ip, ip_port}


def normalise(entries: list[str]) -> set[str]:
    return {e.strip().lower() for e in entries if e.strip()}


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address of `host` (an IP literal is its own), in the resolver's order.

    Raises:
        Unresolvable: The name does not resolve, or resolves to nothing.
    """
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise Unresolvable(f"cannot resolve host {host!r}: {e.strerror or e}") from None
    seen: dict[IPAddress, None] = {}
    for info in infos:
        # The scope of a link-local IPv6 answer ("fe80::1%eth0") is not part of the address.
        seen.setdefault(ipaddress.ip_address(str(info[4][0]).split("%")[0]), None)
    if not seen:
        raise Unresolvable(f"host {host!r} has no address")
    return list(seen)


def refusal(host: str, port: int, addresses: list[IPAddress], allowed: set[str]) -> Refusal | None:
    """The first address of `host` that is not public and not allowed (`allowed` is `normalise`d)."""
    for address in addresses:
        kind = non_public_kind(address)
        if kind and not (_allow_keys(host, port, address) & allowed):
            return Refusal(host, port, address, kind)
    return None
