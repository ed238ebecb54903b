"""Helpers shared by the connection tests: configs, a fake clock, answerers, an HTTP server."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn

from toolshell.config import ServerConfig

SERVERS = Path(__file__).parent / "servers"
STDIO_SERVER = str(SERVERS / "stdio_server.py")


def stdio_config(name: str, *modes: str, **kw: Any) -> ServerConfig:
    """A config entry for `tests/servers/stdio_server.py` run with `modes`."""
    return ServerConfig(name=name, type="stdio", command=sys.executable, args=[STDIO_SERVER, *modes], **kw)


def builtin_config(name: str = "b", **kw: Any) -> ServerConfig:
    return ServerConfig(name=name, type="builtin", **kw)


class FakeClock:
    """A monotonic clock the test moves by hand (restart backoff is measured with it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def wait_until(condition: Callable[[], bool], limit: float = 5.0) -> None:
    """Wait (bounded) for a condition another process brings about (no event crosses processes)."""
    with anyio.fail_after(limit):
        while not condition():  # noqa: ASYNC110 - a subprocess's state has no event to wait on
            await anyio.sleep(0.01)


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie has exited and only waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def processes_with_env(marker: str) -> list[int]:
    """Live processes whose environment contains `marker` (e.g. `KEY=value`)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if marker.encode() in (entry / "environ").read_bytes().split(b"\0") and alive(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return [p for p in found if p != os.getpid()]


class Answers:
    """An `Answerer` that records questions and answers from a script (or waits forever)."""

    def __init__(self, *answers: types.ElicitResult, block: bool = False, delay: float = 0.0) -> None:
        self.answers = list(answers)
        self.block = block
        self.delay = delay
        self.questions: list[tuple[str, str]] = []
        self.asked = anyio.Event()

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questions.append((server, params.message))
        self.asked.set()
        if self.block:
            await anyio.sleep_forever()
        if self.delay:
            await anyio.sleep(self.delay)  # a person taking their time, longer than the idle timeout
        return self.answers.pop(0)


@asynccontextmanager
async def serve_http(app: Any) -> AsyncIterator[str]:
    """Serve an ASGI app on 127.0.0.1 (a free port) in this event loop; yields its /mcp URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        await wait_until(lambda: server.started)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.should_exit = True
    sock.close()
