"""`web_fetch`: readable text from a local HTTP server, the SSRF guard on every hop, the size cap."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client

from toolshell.builtin.html_text import html_to_text
from toolshell.builtin.web_fetch import create
from toolshell.builtin.web_guard import Denied, check, non_public_kind
from toolshell.config import WebFetchConfig

PAGE = b"""<!doctype html><html><head><title>Docs &amp; notes</title><style>p {color: red}</style>
<script>alert("no")</script></head><body>
<h1>Install</h1><p>Run   the <b>installer</b>, then read the <a href="/guide">guide</a>.</p>
<ul><li>fast</li><li>small</li></ul><noscript>enable js</noscript></body></html>"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        path, _, query = self.path.partition("?")
        if path == "/page":
            self._send(200, "text/html; charset=utf-8", PAGE)
        elif path == "/plain":
            self._send(200, "text/plain", b"a" * 5000)
        elif path == "/host":
            self._send(200, "text/plain", f"host={self.headers['Host']}".encode())
        elif path == "/hop":  # one redirect to a page on the same server
            self._redirect("/page")
        elif path == "/away":  # a redirect to wherever the query says
            self._redirect(query)
        elif path == "/loop":
            self._redirect("/loop")
        elif path == "/png":
            self._send(200, "image/png", b"\x89PNG\r\n")
        else:
            self._send(404, "text/plain", b"no such page")

    def _send(self, status: int, ctype: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def origin() -> Iterator[str]:
    """`127.0.0.1:PORT` of a local HTTP server running in a thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    # A short poll interval: `shutdown()` waits for the serving loop to notice it.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def fetch(config: WebFetchConfig, **arguments: Any) -> types.CallToolResult:
    with anyio.fail_after(5):
        async with Client(create(config=config)) as client:
            return await client.call_tool("web_fetch", arguments)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.anyio
async def test_web_fetch_is_listed_read_only_and_open_world() -> None:
    async with Client(create(config=WebFetchConfig())) as client:
        (tool,) = (await client.list_tools()).tools
    assert (tool.name, tool.input_schema["required"]) == ("web_fetch", ["url"])
    assert tool.annotations == types.ToolAnnotations(read_only_hint=True, open_world_hint=True)


@pytest.mark.anyio
async def test_an_allowed_local_page_comes_back_as_readable_text(origin: str) -> None:
    result = await fetch(WebFetchConfig(allow_private=[origin]), url=f"http://{origin}/page")
    assert not result.is_error
    assert text_of(result) == (
        "Docs & notes\n\n"
        "# Install\n\n"
        f"Run the installer, then read the [guide](http://{origin}/guide).\n\n"
        "- fast\n"
        "- small"
    )
    assert result.structured_content == {
        "url": f"http://{origin}/page", "status": 200, "content_type": "text/html", "bytes": len(PAGE),
        "truncated": False,
    }  # fmt: skip


@pytest.mark.anyio
async def test_a_loopback_address_that_is_not_allowed_is_denied_with_how_to_allow_it(origin: str) -> None:
    result = await fetch(WebFetchConfig(), url=f"http://{origin}/page")
    assert result.is_error
    assert text_of(result) == (
        f"denied: 127.0.0.1 is a loopback address, which web_fetch does not reach by default; "
        f'to allow it, add "{origin}" to [web_fetch] allow_private in the config'
    )


@pytest.mark.anyio
async def test_allowing_another_port_of_the_same_host_does_not_allow_this_one(origin: str) -> None:
    result = await fetch(WebFetchConfig(allow_private=["127.0.0.1:1"]), url=f"http://{origin}/page")
    assert text_of(result).startswith("denied: 127.0.0.1 is a loopback address")


@pytest.mark.anyio
async def test_a_redirect_between_allowed_pages_is_followed(origin: str) -> None:
    result = await fetch(WebFetchConfig(allow_private=[origin]), url=f"http://{origin}/hop")
    assert not result.is_error
    assert text_of(result).startswith("Docs & notes\n\n# Install")
    assert result.structured_content["url"] == f"http://{origin}/page"


@pytest.mark.anyio
async def test_a_redirect_from_an_allowed_host_to_a_disallowed_one_is_denied(origin: str) -> None:
    result = await fetch(WebFetchConfig(allow_private=[origin]), url=f"http://{origin}/away?http://127.0.0.1:9/admin")
    assert result.is_error
    assert text_of(result) == (
        "denied: 127.0.0.1 is a loopback address, which web_fetch does not reach by default; "
        'to allow it, add "127.0.0.1:9" to [web_fetch] allow_private in the config'
    )


@pytest.mark.anyio
async def test_a_redirect_to_another_scheme_is_denied(origin: str) -> None:
    result = await fetch(WebFetchConfig(allow_private=[origin]), url=f"http://{origin}/away?file:///etc/passwd")
    assert (
        text_of(result) == "denied: web_fetch reads only http:// and https:// URLs, not file ones (file:///etc/passwd)"
    )


@pytest.mark.anyio
async def test_redirects_stop_after_five_hops(origin: str) -> None:
    result = await fetch(WebFetchConfig(allow_private=[origin]), url=f"http://{origin}/loop")
    assert (result.is_error, text_of(result)) == (
        True,
        f"web_fetch stopped after 5 redirects from http://{origin}/loop",
    )


@pytest.mark.anyio
async def test_a_body_over_max_bytes_is_cut_with_a_marker(origin: str) -> None:
    result = await fetch(WebFetchConfig(allow_private=[origin]), url=f"http://{origin}/plain", max_bytes=100)
    assert text_of(result) == (
        "a" * 100 + "\n\n[truncated: the response is longer than 100 bytes; pass a larger max_bytes (up to 200000)]"
    )
    assert result.structured_content is not None
    assert (result.structured_content["bytes"], result.structured_content["truncated"]) == (100, True)


@pytest.mark.anyio
async def test_max_bytes_cannot_exceed_the_configured_cap(origin: str) -> None:
    config = WebFetchConfig(allow_private=[origin], max_bytes=1000)
    result = await fetch(config, url=f"http://{origin}/plain", max_bytes=10_000_000)
    assert text_of(result) == "a" * 1000 + "\n\n[truncated: the response is longer than 1000 bytes]"


@pytest.mark.anyio
async def test_an_http_error_status_is_a_tool_error_with_the_body(origin: str) -> None:
    result = await fetch(WebFetchConfig(allow_private=[origin]), url=f"http://{origin}/missing")
    assert (result.is_error, text_of(result)) == (
        True,
        f"HTTP 404 Not Found from http://{origin}/missing\n\nno such page",
    )


@pytest.mark.anyio
async def test_a_binary_response_is_refused_as_not_text(origin: str) -> None:
    result = await fetch(WebFetchConfig(allow_private=[origin]), url=f"http://{origin}/png")
    assert text_of(result) == f"http://{origin}/png is image/png, not text; web_fetch reads text and HTML pages"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, 'url must be an http:// or https:// URL, e.g. {"url": "https://example.com"}'),
        ({"url": 5}, 'url must be an http:// or https:// URL, e.g. {"url": "https://example.com"}'),
        ({"url": "http://x", "max_bytes": 0}, "max_bytes must be a positive integer (at most 200000)"),
        ({"url": "http://x", "max_bytes": True}, "max_bytes must be a positive integer (at most 200000)"),
        ({"url": "ftp://example.com/f"}, "denied: web_fetch reads only http:// and https:// URLs, not ftp ones (ftp://example.com/f)"),
    ],
)  # fmt: skip
async def test_bad_arguments_are_soft_errors(arguments: dict[str, Any], message: str) -> None:
    result = await fetch(WebFetchConfig(), **arguments)
    assert (result.is_error, text_of(result)) == (True, message)


@pytest.mark.anyio
async def test_web_fetch_turned_off_in_the_config_says_so() -> None:
    result = await fetch(WebFetchConfig(enabled=False), url="https://example.com")
    assert text_of(result) == "web_fetch is turned off in the config ([web_fetch] enabled = false)"


# --- the guard ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"), ("10.1.2.3", "private"), ("192.168.0.10", "private"),
        ("169.254.169.254", "link-local"), ("0.0.0.0", "unspecified"), ("224.0.0.1", "multicast"),
        ("100.64.0.1", "non-public"), ("::1", "loopback"), ("fe80::1", "link-local"), ("fd00::1", "private"),
        ("::ffff:127.0.0.1", "loopback"), ("2002:7f00:1::", "loopback"), ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)  # fmt: skip
def test_non_public_addresses_are_classified(address: str, kind: str | None) -> None:
    assert non_public_kind(ipaddress.ip_address(address)) == kind


@pytest.mark.anyio
async def test_a_name_is_resolved_once_and_the_fetch_connects_to_that_address_keeping_the_host_header(
    origin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = int(origin.rsplit(":", 1)[1])

    async def resolve(host: str, port: int, **kwargs: Any) -> list[Any]:
        assert host == "intranet.test"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(anyio, "getaddrinfo", resolve)
    allowed = await fetch(
        WebFetchConfig(allow_private=[f"intranet.test:{port}"]), url=f"http://intranet.test:{port}/host"
    )
    denied = await fetch(WebFetchConfig(), url=f"http://intranet.test:{port}/host")
    assert (allowed.is_error, text_of(allowed)) == (False, f"host=intranet.test:{port}")
    assert text_of(denied) == (
        "denied: intranet.test (127.0.0.1) is a loopback address, which web_fetch does not reach by default; "
        f'to allow it, add "intranet.test:{port}" to [web_fetch] allow_private in the config'
    )


@pytest.mark.anyio
async def test_a_name_with_any_private_answer_is_denied(monkeypatch: pytest.MonkeyPatch) -> None:
    async def resolve(host: str, port: int, **kwargs: Any) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in ("93.184.216.34", "10.0.0.5")]

    monkeypatch.setattr(anyio, "getaddrinfo", resolve)
    with pytest.raises(Denied, match=r'^denied: mixed\.test \(10\.0\.0\.5\) is a private address.*"mixed\.test:443"'):
        await check("https://mixed.test/", [])


@pytest.mark.anyio
async def test_a_public_address_passes_the_guard_without_any_allow_entry() -> None:
    target = await check("https://8.8.8.8/dns", [])
    assert (str(target.address), target.port, str(target.pinned_url)) == ("8.8.8.8", 443, "https://8.8.8.8/dns")


@pytest.mark.anyio
async def test_an_ipv6_loopback_is_denied_with_a_bracketed_suggestion() -> None:
    with pytest.raises(Denied) as info:
        await check("http://[::1]:8123/", [])
    assert str(info.value).endswith('add "[::1]:8123" to [web_fetch] allow_private in the config')
    assert (await check("http://[::1]:8123/", ["[::1]:8123"])).host_header == "[::1]:8123"


# --- HTML to text -------------------------------------------------------------------------------


def test_html_to_text_keeps_preformatted_text_nested_lists_and_line_breaks() -> None:
    html = (
        "<h2>Usage</h2><pre>  tools list\n    --json</pre><ol><li>one<ul><li>inner</li></ul></li></ol>"
        "<p>a<br>b</p><p><a href='javascript:void(0)'>js</a> <a href='#top'>top</a> <a href='mailto:x@y.z'>mail</a></p>"
    )
    assert html_to_text(html, "https://h.example/docs/") == (
        "## Usage\n\n  tools list\n    --json\n\n- one\n  - inner\n\na\nb\n\njs top [mail](mailto:x@y.z)"
    )


def test_html_to_text_survives_broken_markup() -> None:
    assert html_to_text("<p>open <b>bold <script>x", "") == "open bold"
