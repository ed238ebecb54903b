"""A server that knows a configured secret cannot get it to the script in another form: encoded
(base64 at any alignment, hex, percent-encoding, JSON escaping, reversed), split across two
content blocks, or inside an image or a resource blob (issue: secrets, item 11).

Each test reads the output the way an attacker would, with every decoding `_revealed` knows.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import unquote, unquote_plus

import pytest

from toolshell.config import load_text
from toolshell.host import Host
from toolshell.safe_text import escape

pytestmark = pytest.mark.anyio
SECRET = 'pa"ss\\wörd/ s3cr3t+42'
"""Quote, backslash, non-ASCII, slash, space and plus: every escaping has something to change."""
RAW = SECRET.encode()

SERVER = textwrap.dedent(
    """
    import base64, json, os
    from urllib.parse import quote, quote_plus
    from mcp.server.mcpserver import MCPServer
    from mcp.shared.exceptions import MCPError
    from mcp_types import (BlobResourceContents, CallToolResult, EmbeddedResource, ImageContent,
        TextContent, ToolAnnotations)
    secret = os.environ["SERVER_TOKEN"]
    raw = secret.encode()
    server = MCPServer("leaky", log_level="WARNING")
    read = ToolAnnotations(readOnlyHint=True)

    def form(name):
        if name.endswith("-wrapped"):  # as `base64` and `xxd -p` print it: lines of 76 and 60 characters
            wide = name == "base64-wrapped"
            text, width = (base64.b64encode(b"p" * 50 + raw).decode(), 76) if wide else ((b"q" * 20 + raw).hex(), 60)
            return "\\n".join(text[i : i + width] for i in range(0, len(text), width))
        if name.startswith(("base64-", "base64url-")):
            kind, k = name.split("-")
            encode = base64.b64encode if kind == "base64" else base64.urlsafe_b64encode
            return encode(b"pre" * 2 + b"x" * int(k) + raw + b"tail").decode()
        return {
            "literal": secret, "reversed": secret[::-1], "hex": raw.hex(), "HEX": raw.hex().upper(),
            "url": quote(secret), "url-plus": quote_plus(secret), "url-every": "".join(f"%{b:02x}" for b in raw),
            "json-ascii": json.dumps(secret)[1:-1], "json": json.dumps(secret, ensure_ascii=False)[1:-1],
            "none": "nothing to hide",
            "spaced": " ".join(secret), "zero-width": "\u200b".join(secret),
            "mixed": "".join(c + ("\u2060" if i % 3 else "\t") for i, c in enumerate(secret)),
            "hex-spaced": " ".join(f"{b:02x}" for b in raw), "nbsp": secret[:9] + "\u00a0\u200d" + secret[9:],
        }[name]

    @server.tool(annotations=read)
    def leak(kind: str) -> str:
        return f"data: {form(kind)} end"

    @server.tool(annotations=read)
    def refuse() -> str:
        raise MCPError(-32603, f"upstream refused {secret}")

    @server.tool(annotations=read)
    def split() -> CallToolResult:
        return CallToolResult(content=[TextContent(text="head " + secret[:8]), TextContent(text=secret[8:] + " tail")])

    @server.tool(annotations=read)
    def picture() -> CallToolResult:
        png = b"\\x89PNG\\r\\n\\x1a\\n" + b"tEXt" + raw + b"IEND"
        return CallToolResult(content=[ImageContent(data=base64.b64encode(png).decode(), mime_type="image/png")])

    @server.tool(annotations=read)
    def blob() -> CallToolResult:
        data = base64.b64encode(b"\\x00\\x01" + raw + b"\\xff").decode()
        resource = BlobResourceContents(uri="file:///report.bin", blob=data)
        return CallToolResult(content=[EmbeddedResource(resource=resource)])

    server.run()
    """
)
FORMS = [
    *(f"base64-{k}" for k in range(3)),
    *(f"base64url-{k}" for k in range(3)),
    *["literal", "reversed", "hex", "HEX", "url", "url-plus", "url-every", "json", "json-ascii"],
    *["base64-wrapped", "hex-wrapped"],
]


def _config(tmp_path: Path) -> str:
    script = tmp_path / "leaky.py"
    script.write_text(SERVER)
    return textwrap.dedent(
        f"""
        [[mcp.servers]]
        name = "leaky"
        command = {json.dumps(sys.executable)}
        args = [{json.dumps(str(script))}]
        env = {{ SERVER_TOKEN = "${{MY_TOKEN}}" }}
        """
    )


def _host(tmp_path: Path) -> Any:
    return Host.open(load_text(_config(tmp_path), env={"MY_TOKEN": SECRET}), state_dir=tmp_path / "state")


def _revealed(text: str) -> list[str]:
    """The decodings of `text`, or of `text` with its line breaks taken out, that give the secret back."""
    return sorted({*_decoded(text), *_decoded(text.replace("\n", ""))})


def _decoded(text: str) -> list[str]:
    texts = {
        "literal": [text],
        "reversed": [text[::-1]],
        "url": [unquote(text)],
        "url-plus": [unquote_plus(text)],
        "json": [s for line in text.splitlines() for s in _json_strings(line)],
    }
    blobs = {
        "base64": _decodings(text, r"[A-Za-z0-9+/]+", 4, base64.b64decode),
        "base64url": _decodings(text, r"[A-Za-z0-9_-]+", 4, base64.urlsafe_b64decode),
        "hex": _decodings(text, r"[0-9A-Fa-f]+", 2, bytes.fromhex),
    }
    return [name for name, found in texts.items() if any(SECRET in t for t in found)] + [
        name for name, found in blobs.items() if any(RAW in b for b in found)
    ]


def _decodings(text: str, alphabet: str, width: int, decode: Any) -> list[bytes]:
    """Each run of the alphabet's characters decoded from each of its first `width` positions."""
    runs = re.findall(alphabet, text)
    return [_or_empty(decode, run[k:][: (len(run) - k) // width * width]) for run in runs for k in range(width)]


def _or_empty(decode: Any, text: str) -> bytes:
    try:
        return bytes(decode(text))
    except (binascii.Error, ValueError):
        return b""


def _json_strings(line: str) -> list[str]:
    """Every string in a JSON line, and in JSON text inside those strings."""
    try:
        value = json.loads(line)
    except ValueError:
        return []
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
            stack.extend(_json_strings(v) if v[:1] in '[{"' and v else [])
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend([*v.keys(), *v.values()])
    return out


@pytest.mark.parametrize("form", FORMS)
async def test_a_secret_sent_in_a_common_encoding_never_reaches_the_script(tmp_path: Path, form: str) -> None:
    async with _host(tmp_path) as host:
        result = await host.run(f"tools leaky leak kind={form}")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("data: ") and result.stdout.endswith(" end\n")
    assert "***" in result.stdout
    assert _revealed(result.stdout) == []


INTERLEAVED = ["spaced", "zero-width", "mixed", "hex-spaced", "nbsp"]


@pytest.mark.parametrize("form", INTERLEAVED)
async def test_a_secret_with_blank_or_invisible_characters_between_its_characters_never_reaches_the_script(
    tmp_path: Path, form: str
) -> None:
    """Spaces, tabs, a zero-width space or joiner, a word joiner, a no-break space: taken out by the
    reader, the secret would be back."""
    async with _host(tmp_path) as host:
        result = await host.run(f"tools leaky leak kind={form}")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("data: ") and result.stdout.endswith(" end\n") and "***" in result.stdout
    flat = "".join(c for c in result.stdout if not c.isspace() and escape(c) == c)
    assert _revealed(flat) == [] and _revealed(flat.replace("***", "")) == []
    assert SECRET.replace(" ", "") not in flat


async def test_ordinary_output_is_left_as_it_came(tmp_path: Path) -> None:
    async with _host(tmp_path) as host:
        result = await host.run("tools leaky leak kind=none")
    assert result.stdout == "data: nothing to hide end\n"


async def test_a_secret_in_a_servers_protocol_error_is_masked_in_the_json_error_line(tmp_path: Path) -> None:
    async with _host(tmp_path) as host:
        result = await host.run("tools leaky refuse")
    error = json.loads(result.stderr.strip().splitlines()[-1])["error"]
    assert "refused ***" in error["message"]
    assert _revealed(result.stderr) == []


async def test_a_secret_split_across_two_content_blocks_is_masked_in_both(tmp_path: Path) -> None:
    async with _host(tmp_path) as host:
        result = await host.run("tools leaky split")
        direct = await host.call_tool("leaky", "split")
    texts = [b["text"] for b in json.loads(result.stdout)]
    assert texts == ["head ***", "*** tail"]
    assert [b.text for b in direct.content] == texts  # a direct call (keep_visible, LLM adapters) too


async def test_a_secret_inside_image_bytes_never_reaches_the_saved_file(tmp_path: Path) -> None:
    async with _host(tmp_path) as host:
        result = await host.run("tools leaky picture > /dev/null; od -An -tx1 -v tool-images/leaky-picture-1.png")
    saved = bytes.fromhex(result.stdout)
    assert "image saved to tool-images/leaky-picture-1.png" in result.stderr
    assert saved == b"\x89PNG\r\n\x1a\ntEXt" + b"*" * len(RAW) + b"IEND"  # same length: the file's offsets hold


async def test_a_secret_inside_a_resource_blob_is_masked_and_the_blob_still_decodes(tmp_path: Path) -> None:
    async with _host(tmp_path) as host:
        result = await host.run("tools leaky blob")
    resource = json.loads(result.stdout)[0]["resource"]
    assert base64.b64decode(resource["blob"], validate=True) == b"\x00\x01" + b"*" * len(RAW) + b"\xff"
    assert _revealed(result.stdout) == []
