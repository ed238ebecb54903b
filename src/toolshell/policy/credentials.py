"""Credentials in tool traffic (`[scan]`): refused in inputs that would leave the machine, masked
in results before the script sees them.

The shapes are `secrets_scan`'s (detect-secrets' vendor patterns on RE2). Only the text of a
result is scanned: image and audio data and resource blobs are passed as they are (a base64
payload is not where a tool returns a token, and decoding megabytes of it per call would put the
scan on the hot path). A masked credential reads `[credential: <kind>]`, so the model knows
something was there and what it was, never its value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar

from toolshell.config.models import Config
from toolshell.config.patterns import ToolPattern, parse_pattern
from toolshell.registry.entry import ToolEntry
from toolshell.secrets_scan import find_credentials, may_hold_credentials

R = TypeVar("R")


@dataclass
class _Masker:
    """The `Redactor` shape `masked_result` takes, masking credential shapes instead of known secrets."""

    kinds: list[str]

    def __bool__(self) -> bool:
        return True

    def pieces(self, texts: list[str]) -> list[str]:
        if not may_hold_credentials(texts):  # the common case: one pass over them all
            return texts
        out = [self._text(t) for t in texts]
        return texts if all(a is b for a, b in zip(out, texts, strict=True)) else out

    def blob(self, data: bytes) -> bytes:
        return data  # binary payloads are not scanned (see the module's docstring)

    def _text(self, text: str) -> str:
        found = find_credentials(text) if len(text) >= 8 else []
        if not found:
            return text
        parts: list[str] = []
        at = 0
        for c in found:
            parts += [text[at : c.start], f"[credential: {c.kind}]"]
            self.kinds.append(c.kind)
            at = c.end
        parts.append(text[at:])
        return "".join(parts)


class CredentialScan:
    """The `[scan]` rules of one host.

    Args:
        config: the host config (`[scan]`, each server's `type`, `trusted` and `scan_results`).
    """

    def __init__(self, config: Config) -> None:
        self.inputs = config.scan.inputs
        self.allowed: list[ToolPattern] = [parse_pattern(p) for p in config.scan.allow_inputs]
        self.remote = frozenset(s.name for s in config.mcp.servers if s.type == "http")
        self.unscanned = frozenset(s.name for s in config.mcp.servers if not s.scan_results)

    def denies(self, entry: ToolEntry, arguments: dict[str, Any]) -> str | None:
        """Why this input may not be sent (it holds a credential and would leave the machine), or None."""
        if not self.inputs or not arguments or not self._leaves(entry):
            return None
        if any(p.matches(entry) for p in self.allowed):
            return None
        text = json.dumps(arguments, ensure_ascii=False, default=str)
        found = find_credentials(text)
        if not found:
            return None
        kinds = ", ".join(sorted({c.kind for c in found}))
        where = "a remote server's tool" if entry.server in self.remote else "a tool that reaches outside this host"
        pattern = f"{entry.server}:{entry.name}" if entry.server else entry.name
        return (
            f"{entry.command}: the input holds a credential ({kinds}), and {where} would send it on; "
            f'take it out of the input, or allow this tool with [scan] allow_inputs = ["{pattern}"]'
        )

    def scans(self, entry: ToolEntry) -> bool:
        """Whether this tool's results are scanned (`scan_results` of its server)."""
        return entry.server not in self.unscanned

    def _leaves(self, entry: ToolEntry) -> bool:
        if entry.server in self.remote or not entry.trusted:
            return True
        return entry.annotations.get("openWorldHint", True) is not False


def mask_credentials(text: str) -> str:
    """`text` with each credential shape replaced by `[credential: <kind>]` (a timeline preview)."""
    return _Masker([])._text(text)


def masker() -> _Masker:
    """A fresh masker for one result; its `kinds` lists what it masked."""
    return _Masker([])


__all__ = ["CredentialScan", "mask_credentials", "masker"]
