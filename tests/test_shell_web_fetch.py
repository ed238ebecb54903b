"""`tools web-fetch`, the seed's example of a top-level tool, from a script against a local page."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = b"<html><body><h1>Release notes</h1><p>Version 2 is out.</p><script>x()</script></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/notes"
    server.shutdown()
    server.server_close()


async def test_web_fetch_returns_readable_text_when_config_allows_the_local_address(url: str) -> None:
    port = url.split(":")[2].split("/")[0]
    config = Config.model_validate({"web_fetch": {"allow_private": [f"127.0.0.1:{port}"]}})
    async with Host.open(config) as host:
        result = await host.run(
            f"tools web-fetch url={url} | grep -c 'Version 2'; tools web_fetch --url {url} | head -1"
        )
    assert result.stderr == ""
    assert result.stdout == "1\n# Release notes\n"


async def test_web_fetch_refuses_a_loopback_address_with_denied_and_how_to_allow_it(url: str) -> None:
    async with Host.open() as host:
        result = await host.run(f"tools web-fetch url={url}")
    err = json.loads(result.stderr)["error"]
    assert result.exit_code == 1
    assert err["code"] == "denied"
    assert "allow_private" in err["message"] and "Version 2" not in result.stdout


async def test_web_fetch_is_listed_among_the_other_tools() -> None:
    async with Host.open() as host:
        result = await host.run("tools --help")
    assert "Other tools" in result.stdout and "web-fetch" in result.stdout
