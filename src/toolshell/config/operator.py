"""The operator's controls: the audit trail (`[audit]`) and the call limits (`[[limits]]`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from toolshell.config.base import _Model
from toolshell.config.patterns import parse_pattern
from toolshell.errors import ConfigError


class AuditConfig(_Model):
    """One JSON line per shell call and per nested call, for a compliance log store.

    Off by default. `to = "file"` appends to `path` (default: `audit.jsonl` in the state
    directory), created 0600, one `write` per line so workers sharing the file never interleave and
    a crash loses at most the line being written; `"stdout"` writes the same lines to standard
    output (a container's log collector), never with `serve`'s stdio transport, whose stdout is the
    protocol; `"otel"` sends each line as an OpenTelemetry log record over OTLP/HTTP to the
    `[telemetry]` collector (batched: a crash can lose the last batch). A server with
    `audit = false` leaves out its nested calls.
    """

    enabled: bool = False
    to: Literal["file", "stdout", "otel"] = "file"
    path: str | None = None
    """The file for `to = "file"`; relative paths are taken from the state directory."""
    input: Literal["masked", "digest", "none"] = "masked"
    """A nested call's input: the masked preview the timeline shows, its SHA-256 digest, or nothing."""


class LimitRule(_Model):
    """A rate limit: `per_minute` calls, `burst` of them at once, counted in the shared store so a
    fleet holds it together (a generic cell rate algorithm: one row a counter, one statement a check).

    `applies_to = "shell_calls"` counts `bash` calls (refused at the transport: HTTP 429 with
    `Retry-After`); `"nested_calls"` counts the `tools` calls a script makes, those whose tool
    matches `tool` (a `server:tool` pattern as in `[approval]`), refused with a `rate_limited` error
    line the script can branch on. `caller` is a caller id (as the timeline shows it) or `*`; `per`
    keeps one counter for each caller, or one for every caller the rule matches together.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """Named in the refusal and in the `RateLimit` header fields."""
    applies_to: Literal["shell_calls", "nested_calls"] = "shell_calls"
    caller: str = "*"
    tool: str | None = None
    """For nested calls: the tools it counts (`github:*`, `github:search-*`); unset: every tool."""
    per_minute: float = Field(gt=0, le=1_000_000)
    burst: int | None = Field(default=None, ge=1, le=1_000_000)
    """The calls that may come at once; unset: a minute's worth (`per_minute`, at least 1)."""
    per: Literal["caller", "all"] = "caller"

    @field_validator("tool")
    @classmethod
    def _pattern(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                parse_pattern(v)
            except ConfigError as e:
                raise ValueError(e.problems[0][1]) from None
        return v

    @model_validator(mode="after")
    def _tool_for_nested_calls(self) -> LimitRule:
        if self.tool is not None and self.applies_to != "nested_calls":
            raise ValueError(f'limit {self.name!r}: tool applies to nested calls; add applies_to = "nested_calls"')
        return self

    @property
    def allowed_at_once(self) -> int:
        return self.burst if self.burst is not None else max(1, int(self.per_minute))


class QuotaRule(_Model):
    """A daily quota for each caller it matches (the UTC day): `bash` calls, and bytes of their results."""

    caller: str = "*"
    calls_per_day: int | None = Field(default=None, ge=0)
    result_bytes_per_day: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _something_to_count(self) -> QuotaRule:
        if self.calls_per_day is None and self.result_bytes_per_day is None:
            raise ValueError("a quota needs calls_per_day, result_bytes_per_day or both")
        return self


class ScanConfig(_Model):
    """Credential shapes in tool traffic (`toolshell.secrets_scan`: detect-secrets' patterns on RE2).

    Results are masked per server (`scan_results`, on by default). An input holding a credential is
    refused (`denied`) when it would leave the machine: a tool that does not declare
    `openWorldHint: false` (MCP's default is open-world), a tool of an untrusted server, or any tool
    of a remote (`http`) server; `allow_inputs` names the tools that may receive one.
    """

    inputs: bool = True
    allow_inputs: list[str] = Field(default_factory=list)

    @field_validator("allow_inputs")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        for pattern in v:
            try:
                parse_pattern(pattern)
            except ConfigError as e:
                raise ValueError(e.problems[0][1]) from None
        return v


def caller_matches(pattern: str, caller: str | None) -> bool:
    """`*` matches every caller (the local user too); a trailing `*` a prefix; else the exact id."""
    if pattern == "*":
        return True
    if caller is None:
        return False
    if pattern.endswith("*"):
        return caller.startswith(pattern[:-1])
    return pattern == caller


__all__ = ["AuditConfig", "LimitRule", "QuotaRule", "ScanConfig", "caller_matches"]
