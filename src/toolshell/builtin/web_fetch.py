"""`web`: the `web_fetch` tool, which reads a web page as text (`tools web-fetch` in the shell).

Redirects are followed here, not by the HTTP client, so the SSRF guard (`web_guard`) checks every
hop. The body is read only up to the byte cap; HTML is reduced to text lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import anyio
import httpx2
from mcp.server import Server

from toolshell.builtin.functions import Function, FunctionCall, ToolResult, function_server
from toolshell.builtin.host import HostHandle
from toolshell.builtin.html_text import html_to_text
from toolshell.builtin.web_guard import BadURL, Denied, Target, check
from toolshell.config import Config, WebFetchConfig

SERVER = "web"
MAX_REDIRECTS = 5
_USER_AGENT = "toolshell-web-fetch/0.1"
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript", "application/x-ndjson")

FUNCTIONS = [
    Function(
        name="web_fetch",
        description="Fetch an http(s) URL and return its content as readable text (HTML reduced to text lines).",
        parameters={
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The http:// or https:// URL to read", "minLength": 1},
                "max_bytes": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Read at most this many bytes of the body (capped by the config)",
                },
            },
            "required": ["url"],
            "additionalProperties": False,
        },
        annotations={"readOnlyHint": True, "openWorldHint": True},
    )
]


@dataclass
class _Page:
    url: httpx2.URL
    status: int
    reason: str
    content_type: str
    body: bytes
    truncated: bool
    encoding: str


class _WebFetch:
    def __init__(self, config: WebFetchConfig) -> None:
        self.config = config

    async def execute(self, call: FunctionCall) -> ToolResult:
        if call.tool_name != "web_fetch":
            return ToolResult.error(f"Unknown tool: {call.tool_name}")
        if not self.config.enabled:
            return ToolResult.error("web_fetch is turned off in the config ([web_fetch] enabled = false)")
        url = call.parameters.get("url")
        if not isinstance(url, str) or not url.strip():
            return ToolResult.error('url must be an http:// or https:// URL, e.g. {"url": "https://example.com"}')
        cap = call.parameters.get("max_bytes", self.config.max_bytes)
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            return ToolResult.error(f"max_bytes must be a positive integer (at most {self.config.max_bytes})")
        cap = min(cap, self.config.max_bytes)
        try:
            with anyio.fail_after(self.config.timeout_seconds):
                page = await self._fetch(url.strip(), cap)
        except (Denied, BadURL) as e:  # a Denied message starts with `denied:`, which the host maps to `denied`
            return ToolResult.error(str(e))
        except TimeoutError:
            return ToolResult.error(f"web_fetch timed out after {self.config.timeout_seconds:g}s reading {url}")
        except httpx2.HTTPError as e:
            return ToolResult.error(f"web_fetch could not read {url}: {str(e) or type(e).__name__}")
        return self._render(page, cap)

    async def _fetch(self, url: str, cap: int) -> _Page:
        timeout = httpx2.Timeout(self.config.timeout_seconds)
        # trust_env=False: a proxy from the environment would connect on our behalf, past the guard.
        async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as client:
            current = url
            for _hop in range(MAX_REDIRECTS + 1):
                target = await check(current, self.config.allow_private)
                got = await self._get(client, target, cap)
                if isinstance(got, _Page):
                    return got
                current = urljoin(str(target.url), got)
        raise BadURL(f"web_fetch stopped after {MAX_REDIRECTS} redirects from {url}")

    async def _get(self, client: httpx2.AsyncClient, target: Target, cap: int) -> _Page | str:
        """One GET to the checked address: the page (body read up to `cap`), or a redirect's Location."""
        headers = {
            "Host": target.host_header,
            "User-Agent": _USER_AGENT,
            "Accept": "text/html, text/*;q=0.9, */*;q=0.5",
        }
        extensions = {"sni_hostname": target.host} if target.url.scheme == "https" else None
        async with client.stream("GET", target.pinned_url, headers=headers, extensions=extensions) as resp:
            if resp.is_redirect:
                return resp.headers["location"]
            body, truncated = bytearray(), False
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > cap:
                    truncated = True
                    break
            content_type = resp.headers.get("content-type", "").split(";")[0].strip().lower()
            encoding = resp.charset_encoding or "utf-8"
            return _Page(
                target.url, resp.status_code, resp.reason_phrase, content_type, bytes(body[:cap]), truncated, encoding
            )

    def _render(self, page: _Page, cap: int) -> ToolResult:
        url = str(page.url)
        is_html = page.content_type in _HTML_TYPES or (not page.content_type and _looks_like_html(page.body))
        if not is_html and page.content_type and not page.content_type.startswith(_TEXT_TYPES):
            if not page.content_type.endswith(("+json", "+xml")):
                return ToolResult.error(f"{url} is {page.content_type}, not text; web_fetch reads text and HTML pages")
        try:
            raw = page.body.decode(page.encoding, errors="replace")
        except LookupError:  # an unknown charset name from the server
            raw = page.body.decode("utf-8", errors="replace")
        text = html_to_text(raw, url) if is_html else raw
        if page.truncated:
            more = f"; pass a larger max_bytes (up to {self.config.max_bytes})" if cap < self.config.max_bytes else ""
            text += f"\n\n[truncated: the response is longer than {cap} bytes{more}]"
        if page.status >= 400:
            return ToolResult.error(f"HTTP {page.status} {page.reason} from {url}\n\n{text}".rstrip())
        metadata: dict[str, Any] = {
            "url": url,
            "status": page.status,
            "content_type": page.content_type,
            "bytes": len(page.body),
            "truncated": page.truncated,
        }
        return ToolResult.success_with_metadata(text, metadata)


def _looks_like_html(body: bytes) -> bool:
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


def create(host: HostHandle | None = None, config: WebFetchConfig | None = None) -> Server[Any]:
    """The `web` server with its `web_fetch` tool.

    Args:
        host: The host; when `config` is not given, its `config.web_fetch` is used if it has one.
        config: The `[web_fetch]` settings (allow_private, max_bytes, timeout_seconds).
    """
    if config is None:
        host_config = getattr(host, "config", None)
        config = host_config.web_fetch if isinstance(host_config, Config) else WebFetchConfig()
    return function_server(SERVER, FUNCTIONS, _WebFetch(config).execute)
