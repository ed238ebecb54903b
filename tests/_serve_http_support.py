"""`serve --http`'s app served in the test's own process and event loop, on a free loopback port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from _net_support import free_port, wait_until_serving
from toolshell.frontends.serve.auth import NO_AUTH
from toolshell.frontends.serve.server import _serve_http, build_server
from toolshell.host import Host


@asynccontextmanager
async def http_serving(host: Host, gate: Any = NO_AUTH) -> AsyncIterator[str]:
    """The `/mcp` URL of `host` served over HTTP until the block ends."""
    port = free_port()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_serve_http, build_server(host, []), "127.0.0.1", port, gate)
        url = f"http://127.0.0.1:{port}/mcp"
        await wait_until_serving(url)
        yield url
        tg.cancel_scope.cancel()
