"""Network helpers shared by the tests that start servers on loopback."""

from __future__ import annotations

import socket

import anyio
import httpx2


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_until_serving(url: str, seconds: float = 10) -> None:
    """Return once an HTTP server answers at `url` (any status); fail after `seconds`."""
    async with httpx2.AsyncClient() as http:
        with anyio.fail_after(seconds):
            while True:
                try:
                    await http.get(url)
                    return
                except httpx2.TransportError:
                    await anyio.sleep(0.05)  # a poll while the server binds, bounded above
