"""A tool result with the configured secrets masked, before anything prints, saves or returns it.

Every string a server chose (texts, resource texts, URIs, names, MIME types, structured content
and `_meta`, keys of the free-form parts too) is read as one text, in order, so a secret split
across two content blocks is masked in both. Base64 payloads (image and audio `data`, resource
`blob`s) are decoded and masked as bytes, so a secret inside a file is caught whatever its
alignment, then encoded again. Schema values (`type`, `audience`…) are left alone: they are not
the server's words, and masking one would make the result unreadable.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import ValidationError

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.redact import Redactor

if TYPE_CHECKING:
    import mcp_types

R = TypeVar("R", bound="mcp_types.CallToolResult")
_FIXED = frozenset({"type", "audience", "priority", "resultType", "isError"})
_BINARY = frozenset({"data", "blob"})
_FREE = frozenset({"_meta", "structuredContent"})
"""Free-form JSON: its keys are the server's words too."""
_WITHHELD = "the result quoted a configured secret where it could not be masked, so it was withheld"


class Masker(Protocol):
    """What masks the strings and payloads of a result: a `Redactor` (the config's secrets), or the
    credential-shape masker of `[scan]`."""

    def __bool__(self) -> bool: ...

    def pieces(self, texts: list[str]) -> list[str]: ...

    def blob(self, data: bytes) -> bytes: ...


def masked_result(result: R, redact: Redactor | Masker) -> R:
    """`result` itself when it holds no secret; else a copy with each one masked.

    Raises:
        ToolshellError: `tool_error` when masking left the result invalid (a secret that equals a
            schema value); nothing of it is shown then.
    """
    if not redact:
        return result
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    strings: list[str] = []
    blobs: list[bytes | None] = []
    _gather(dumped, strings, blobs, free=False)
    masked = redact.pieces(strings)
    new_blobs = [None if b is None else redact.blob(b) for b in blobs]
    if masked is strings and all(n is b for n, b in zip(new_blobs, blobs, strict=True)):
        return result
    rebuilt = _rebuild(dumped, iter(masked), zip(blobs, new_blobs, strict=True), free=False)
    try:
        return type(result).model_validate(rebuilt)
    except ValidationError:
        raise ToolshellError(ErrorCode.TOOL_ERROR, _WITHHELD) from None


def _decoded(text: str) -> bytes | None:
    try:
        return base64.b64decode(text)
    except (binascii.Error, ValueError):  # not base64: masked as text instead
        return None


def _gather(value: Any, strings: list[str], blobs: list[bytes | None], *, free: bool) -> None:
    if free:
        _gather_free(value, strings)
    elif isinstance(value, str):
        strings.append(value)
    elif isinstance(value, list):
        for v in value:
            _gather(v, strings, blobs, free=False)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k in _FIXED:
                continue
            if k in _BINARY and isinstance(v, str):
                raw = _decoded(v)
                blobs.append(raw)
                if raw is not None:
                    continue
            _gather(v, strings, blobs, free=k in _FREE)


def _gather_free(value: Any, strings: list[str]) -> None:
    """The strings of free-form JSON, keys too. String leaves are taken inline, without a call
    each: structured content can hold a million of them."""
    if isinstance(value, str):
        strings.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            strings.append(k)
            if isinstance(v, str):
                strings.append(v)
            elif isinstance(v, dict | list):
                _gather_free(v, strings)
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, str):
                strings.append(v)
            elif isinstance(v, dict | list):
                _gather_free(v, strings)


def _rebuild(
    value: Any, masked: Iterator[str], blobs: Iterator[tuple[bytes | None, bytes | None]], *, free: bool
) -> Any:
    if isinstance(value, str):
        return next(masked)
    if isinstance(value, list):
        return [_rebuild(v, masked, blobs, free=free) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for k, v in value.items():
        if free:
            key = next(masked)  # before the value's strings, in the order `_gather` read them
            out[key] = _rebuild(v, masked, blobs, free=True)
        elif k in _FIXED:
            out[k] = v
        elif k in _BINARY and isinstance(v, str):
            old, new = next(blobs)
            if old is None:
                out[k] = next(masked)
            else:
                out[k] = v if new is old else base64.b64encode(new or b"").decode("ascii")
        else:
            out[k] = _rebuild(v, masked, blobs, free=k in _FREE)
    return out


__all__ = ["Masker", "masked_result"]
