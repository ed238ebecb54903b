"""CPU per request of `serve --http`'s ASGI app in-process, without a socket or HTTP parser.

    python benchmarks/serve_asgi.py [--requests N] [--rounds R] [--auth] [--only KIND] [--profile DIR]

Builds the app `toolshell serve --http` serves (the app handed to uvicorn, caught before it
listens) on a fresh SQLite state dir, runs its lifespan, and sends it N 2026-07-28 requests of
each kind, straight as ASGI messages: a `bash` call refused at once (`script` is not a string:
the request path alone, i.e. the app stack, the SDK's request handling, toolshell's middleware),
and `bash` calls of `true` and of issue 31's script on a kept shell (the shell run included).
It prints this process's CPU per request (`time.process_time`, the median of R rounds) of each
kind, and the Python function calls a request makes (`cProfile`'s count: the work, which a
loaded machine does not blur). `--auth` serves behind the serve token (a bearer token on each
request) instead of `--no-auth`. It resolves what the socket benchmark (`serve_path.py`) cannot
on a loaded machine: parts of a few tens of microseconds. `--profile DIR` writes each kind's
profile there (`bash-true.prof`, …) for `pstats`.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from toolshell.store.keys import new_key

PORT = 8931
SCRIPT = "echo {i} >> log; tools text-metrics text-length text=x{i}; wc -l < log"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "serve-asgi-bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def caught_app(host: Any, gate: Any) -> Any:
    """The ASGI app `_serve_http` would serve, caught before uvicorn starts."""
    from toolshell.frontends.serve import drain, server

    caught: list[Any] = []

    async def catch(self: Any, sockets: Any = None) -> None:
        caught.append(self.config.app)

    original = drain.DrainingServer.serve
    drain.DrainingServer.serve = catch  # type: ignore[method-assign]
    try:
        await server._serve_http(server.build_server(host, []), "127.0.0.1", PORT, gate, None, host, False)
    finally:
        drain.DrainingServer.serve = original  # type: ignore[method-assign]
    return caught[0]


async def request(app: Any, method: str, params: dict[str, Any], token: str | None) -> dict[str, Any]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}).encode()
    headers = [
        (b"host", f"127.0.0.1:{PORT}".encode()),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", method.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    if method == "tools/call":
        headers.append((b"mcp-name", params["name"].encode()))
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", PORT),
    }
    answered, sent, given = anyio.Event(), bytearray(), False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.extend(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    await app(scope, receive, send)
    text = sent.decode()
    if "data:" in text:
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:") and '"id"' in line)
    answer: dict[str, Any] = json.loads(text)
    if "result" not in answer:
        raise SystemExit(f"{method} failed: {answer}")
    return answer["result"]  # type: ignore[no-any-return]


async def measure(requests: int, rounds: int, auth: bool, only: str = "", profile_dir: str = "") -> dict[str, Any]:
    from toolshell.config import Config
    from toolshell.frontends.serve.auth import NO_AUTH, serve_token, token_gate
    from toolshell.host import Host, state_ring

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("TOOLSHELL_STATE_KEYS", new_key())
        config = Config.model_validate({"tools_in_shell": {"call_limit": 10_000_000}})
        async with Host.open(config, state_dir=str(Path(tmp) / "state")) as host:
            token = serve_token(host.state_dir).value if auth else None
            gate = token_gate(serve_token(host.state_dir), state_ring(host)) if auth else NO_AUTH
            app = await caught_app(host, gate)
            startup, stop = anyio.Event(), anyio.Event()
            phase = iter(["lifespan.startup", "lifespan.shutdown"])

            async def receive() -> dict[str, Any]:
                kind = next(phase)
                if kind == "lifespan.shutdown":
                    await stop.wait()
                return {"type": kind}

            async def send(message: dict[str, Any]) -> None:
                if message["type"] == "lifespan.startup.complete":
                    startup.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
                await startup.wait()
                bash = {"name": "bash", "arguments": {"script": "echo start > log"}}
                shell = (await request(app, "tools/call", bash, token))["structuredContent"]["shell"]
                kinds = {
                    "bash refused": lambda i: ("tools/call", {"name": "bash", "arguments": {"script": 1}}),
                    "bash true": lambda i: (
                        "tools/call",
                        {"name": "bash", "arguments": {"script": "true", "shell": shell}},
                    ),
                    "bash issue-31 script": lambda i: (
                        "tools/call",
                        {"name": "bash", "arguments": {"script": SCRIPT.format(i=i), "shell": shell}},
                    ),
                }
                out: dict[str, Any] = {"auth": auth, "requests": requests}
                for name, make in kinds.items():
                    if only and not name.startswith(only):
                        continue
                    for i in range(20):  # warm
                        await request(app, *make(i), token)
                    per: list[float] = []
                    for _ in range(rounds):
                        cpu = time.process_time()
                        for i in range(requests):
                            await request(app, *make(i), token)
                        per.append((time.process_time() - cpu) / requests)
                    out[f"{name} µs"] = round(1e6 * statistics.median(per), 1)
                    profile = cProfile.Profile()  # Python function calls a request: the work, whatever the load
                    profile.enable()
                    for i in range(requests):
                        await request(app, *make(i), token)
                    profile.disable()
                    calls = sum(entry.callcount for entry in profile.getstats())
                    if profile_dir:
                        profile.dump_stats(Path(profile_dir) / f"{name.replace(' ', '-')}.prof")
                    out[f"{name} calls"] = round(calls / requests)
                stop.set()
    return out


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--auth", action="store_true")
    parser.add_argument("--only", default="", help="only the kinds whose name starts so (`bash refused`)")
    parser.add_argument("--profile", default="", metavar="DIR", help="write each kind's cProfile stats there")
    args = parser.parse_args()
    out = anyio.run(measure, args.requests, args.rounds, args.auth, args.only, args.profile)
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    cli()
