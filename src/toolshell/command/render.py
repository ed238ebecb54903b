"""Turn a tool's result into what the script sees: stdout text, image files, or one error line.

A single text block prints as is; anything else prints as compact JSON, structured content first.
The SDK's `MCPServer` wraps a primitive or list return as `{"result": …}`; given the tool's
output schema that wrapper is taken off, so `tools x list-things | jq '.[]'` sees the list.
"""

from __future__ import annotations

import base64
import binascii
import json
import string
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolshell.command.masking import masked_result
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.redact import Redactor
from toolshell.safe_text import escape

if TYPE_CHECKING:
    # Blocks are told apart by their `type` field, so importing this module stays cheap (the
    # `mcp_types` import alone takes ~0.3 s and the CLI imports `command` on every start).
    import mcp_types

IMAGE_DIR = "tool-images"
_ERROR_MAX_BYTES = 100_000
"""A tool's error message is one line: cut past this even inside the shell."""
_EXTENSIONS = {"image/jpeg": "jpg", "image/svg+xml": "svg", "image/x-icon": "ico"}
_NAME_FIRST = frozenset(string.ascii_letters + string.digits)
_NAME_REST = _NAME_FIRST | frozenset("!#$&^_.+-")
"""RFC 6838 `type/subtype` names (1–127 of these), nothing else: a MIME type is shown to people and names a file."""
_FILE_CHARS = _NAME_FIRST | frozenset("._-")
_EXT_CHARS = frozenset(string.ascii_lowercase + string.digits)


@dataclass(frozen=True)
class Image:
    """An image to write under `tool-images/`; `suggested_name` is the path relative to the cwd."""

    data: bytes
    mime_type: str
    suggested_name: str


@dataclass(frozen=True)
class Rendered:
    """What one call prints: stdout text (capped only when `max_bytes` was given), images to write, or an error."""

    stdout: str
    images: list[Image] = field(default_factory=list)
    error: ToolshellError | None = None


def render_result(
    result: mcp_types.CallToolResult,
    *,
    max_bytes: int | None = None,
    tool: str = "tool",
    output_schema: dict[str, Any] | None = None,
    taken: Collection[str] = frozenset(),
    redact: Redactor | None = None,
) -> Rendered:
    """Render a tool result for the shell.

    Args:
        result: The tool's result.
        max_bytes: Cap on stdout in UTF-8 bytes (see `cap`), for a result shown to a model directly.
            None (inside the shell): the whole result; the shell call's own output is capped instead.
        tool: Name used for image files, e.g. `github-screenshot` → `tool-images/github-screenshot-1.png`.
        output_schema: The tool's output schema, to recognise the SDK's `{"result": …}` wrapper.
        taken: Image paths already in use, so a second call does not overwrite the first's files.
        redact: Masks the configured secrets in every block first (`masked_result`), the images'
            bytes included, so neither stdout nor a saved file shows one.

    Returns:
        `Rendered` with stdout ending in exactly one newline (or empty when the tool returned
        nothing), the decoded images, and `error` set (stdout empty) for an `is_error` result.

    Raises:
        ToolshellError: `tool_error` when a secret could not be masked (see `masked_result`).
    """
    if redact:
        result = masked_result(result, redact)
    if result.is_error:
        message = _cut(_error_text(result), _ERROR_MAX_BYTES if max_bytes is None else max_bytes)
        return Rendered("", [], ToolshellError(ErrorCode.TOOL_ERROR, message))
    single = _plain_text(result)
    images: list[Image] = []
    if single is not None:  # the common case, decided without converting any block
        text = _one_newline(single)
    else:
        # One text block beside structured content: `_stdout_text` takes the one or the other, never
        # the blocks as JSON, so they are not made (and one text block has no image to save).
        lone = len(result.content) == 1 and _is(result.content[0], "text")
        blocks, images = ([], []) if lone else _blocks_with_files(result.content, tool, taken)
        text = _one_newline(_stdout_text(result, blocks, output_schema))
    return Rendered(text if max_bytes is None else cap(text, max_bytes), images)


def _plain_text(result: mcp_types.CallToolResult) -> str | None:
    """The text of a result that is one text block, with no structured content or only the SDK's
    `{"result": <that same text>}` copy of it; None for anything else (rendered the long way)."""
    content = result.content
    if len(content) != 1 or not _is(content[0], "text"):
        return None
    text = str(content[0].text)  # type: ignore[union-attr]
    data = result.structured_content
    if data is None or (_is_result_wrapper(data) and data["result"] == text):
        return text
    return None


def structured_value(result: mcp_types.CallToolResult, schema: dict[str, Any] | None) -> Any:
    """The result's structured content with the SDK's `{"result": …}` wrapper taken off; None if absent."""
    content = result.content
    single_text = _text_of(content[0]) if len(content) == 1 else None
    data = result.structured_content
    if data is not None and _is_result_wrapper(data) and (_is_sdk_wrapper(schema) or data["result"] == single_text):
        return data["result"]
    return data


def _stdout_text(result: mcp_types.CallToolResult, blocks: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
    content = result.content
    single_text = _text_of(content[0]) if len(content) == 1 else None
    data = structured_value(result, schema)
    if data is not None and (single_text is None or _same_json(single_text, data)):
        # A single plain-text block is the result; structured content beside it is metadata.
        return data if isinstance(data, str) else _compact(data)
    if single_text is not None:
        return single_text
    return _compact(blocks) if blocks else ""


def _same_json(text: str, data: Any) -> bool:
    """Whether a text block is just the JSON of the structured content (the spec's fallback copy)."""
    opening = _OPENING.get(type(data))
    if opening is not None and text.lstrip(_JSON_BLANK)[:1] != opening:
        return False  # an object's (an array's) JSON opens with `{` (`[`): a text that does not is not parsed
    try:
        return bool(json.loads(text) == data)
    except (ValueError, RecursionError):  # not JSON, or too deep to be anything but text
        return False


_OPENING: dict[type, str] = {dict: "{", list: "["}
_JSON_BLANK = " \t\n\r"  # what JSON allows before a value (and all `json.loads` skips)


def _is(block: Any, kind: str) -> bool:
    return getattr(block, "type", None) == kind


def _text_of(block: Any) -> str | None:
    """A text block's text; None for any other kind of block."""
    return str(block.text) if _is(block, "text") else None


def _is_result_wrapper(data: Any) -> bool:
    return isinstance(data, dict) and list(data) == ["result"]


def _is_sdk_wrapper(schema: dict[str, Any] | None) -> bool:
    """The schema `MCPServer` makes for a wrapped return: only `result`, titled `<function>Output`."""
    if not isinstance(schema, dict):
        return False
    props = schema.get("properties")
    return (
        isinstance(props, dict)
        and list(props) == ["result"]
        and schema.get("required") == ["result"]
        and str(schema.get("title", "")).endswith("Output")
    )


def _blocks_with_files(
    content: list[Any], tool: str, taken: Collection[str]
) -> tuple[list[dict[str, Any]], list[Image]]:
    """Content blocks as JSON dicts, with each image swapped for a note naming its file."""
    blocks: list[dict[str, Any]] = []
    images: list[Image] = []
    used = set(taken)
    for block in content:
        if not _is(block, "image"):
            blocks.append(block.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"meta"}))
            continue
        mime_type = _checked_mime(block.mime_type)
        note: dict[str, Any] = {"type": "image", "mimeType": mime_type}
        try:
            data = base64.b64decode(block.data, validate=True)
        except (binascii.Error, ValueError):
            note["error"] = "the image data is not valid base64; nothing was saved"
        else:
            name = _image_name(tool, mime_type, used)
            used.add(name)
            images.append(Image(data, mime_type, name))
            note["file"] = name
        blocks.append(note)
    return blocks, images


def _checked_mime(mime_type: str) -> str:
    """The MIME type when it is a plain `type/subtype`; else its quoted, escaped form (never a
    line break or a control sequence), which `_image_name` saves as `.bin`."""
    return mime_type if _is_mime(mime_type) else escape(repr(mime_type))


def _is_mime(text: str) -> bool:
    kind, slash, subtype = text.partition("/")
    return bool(slash) and _is_mime_name(kind) and _is_mime_name(subtype)


def _is_mime_name(part: str) -> bool:
    return 0 < len(part) <= 127 and part[0] in _NAME_FIRST and all(ch in _NAME_REST for ch in part)


def _file_stem(tool: str) -> str:
    """The tool's name fit for a file name: each run of other characters becomes one `-`."""
    chars: list[str] = []
    other = False
    for ch in tool:
        if ch in _FILE_CHARS:
            chars.append(ch)
        elif not other:
            chars.append("-")
        other = ch not in _FILE_CHARS
    return "".join(chars).strip("-.") or "tool"


def _image_name(tool: str, mime_type: str, used: set[str]) -> str:
    stem = _file_stem(tool)
    subtype = mime_type.partition("/")[2].lower() if _is_mime(mime_type) else ""
    ext = _EXTENSIONS.get(mime_type.lower(), "".join(ch for ch in subtype if ch in _EXT_CHARS) or "bin")
    # Number per tool, not per extension, so one call's images read as -1.png, -2.jpg, ….
    n = 1
    while any(path.startswith(f"{IMAGE_DIR}/{stem}-{n}.") for path in used):
        n += 1
    return f"{IMAGE_DIR}/{stem}-{n}.{ext}"


def _error_text(result: mcp_types.CallToolResult) -> str:
    texts = [text for text in map(_text_of, result.content) if text and text.strip()]
    if texts:
        return "\n".join(t.strip() for t in texts)
    if result.structured_content is not None:
        return _compact(result.structured_content)
    return "the tool reported an error without a message"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _one_newline(text: str) -> str:
    return text.rstrip("\n") + "\n" if text else ""


def _cut(text: str, max_bytes: int) -> str:
    """`text` cut to `max_bytes` UTF-8 bytes without a marker line (for one-line error messages)."""
    kept, dropped, total = _split(text, max_bytes)
    return text if not dropped else f"{kept}… [{dropped:,} of {total:,} bytes dropped]"


def _split(text: str, max_bytes: int) -> tuple[str, int, int]:
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text, 0, len(raw)
    # Decoding the prefix with "ignore" drops a character split by the cut, so the cut lands on a
    # UTF-8 boundary at or below max_bytes.
    kept = raw[: max(max_bytes, 0)].decode("utf-8", "ignore")
    return kept, len(raw) - len(kept.encode("utf-8", "surrogatepass")), len(raw)


def cap(text: str, max_bytes: int) -> str:
    """Cut `text` to at most `max_bytes` UTF-8 bytes and say how much was dropped.

    Args:
        text: The output.
        max_bytes: The most bytes of `text` to keep; the cut never splits a character.

    Returns:
        `text` unchanged when it fits; else the kept part followed by a marker line such as
        `[output cut: 12,345 of 112,345 bytes dropped; narrow the query or filter with jq]`.
    """
    kept, dropped, total = _split(text, max_bytes)
    if not dropped:
        return text
    sep = "" if kept.endswith("\n") or not kept else "\n"
    return f"{kept}{sep}[output cut: {dropped:,} of {total:,} bytes dropped; narrow the query or filter with jq]\n"
