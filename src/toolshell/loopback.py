"""Whether a host name, as written, is this machine's loopback: no name is ever resolved."""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str) -> bool:
    """`localhost`, 127.0.0.0/8 or ::1 (an IPv6 address may keep its brackets)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = ["is_loopback_host"]
