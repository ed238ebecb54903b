"""The audit trail (`[audit]`): one JSON line per shell call and per nested call.

Each line is written with a single `write(2)` on a descriptor opened with `O_APPEND`, so lines
from several workers sharing the file never interleave, nothing sits in a buffer a crash would
lose, and a crash loses at most the line being written (a reader drops a last line without its
newline). The fields are the span attributes of `telemetry.spans` (the OpenTelemetry GenAI/MCP
names where they exist), so one pipeline reads spans and audit lines. The input is the masked
preview the timeline keeps, its SHA-256 digest, or left out (`[audit] input`); secrets the config
knows are masked in every string field.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from toolshell.config.models import TelemetryConfig
from toolshell.config.operator import AuditConfig
from toolshell.errors import ConfigError
from toolshell.redact import Redactor
from toolshell.timeline.events import preview

logger = logging.getLogger(__name__)
LINE_LIMIT = 60_000
"""The longest line written: a line past it has its input cut (one write stays one line)."""


class AuditLog:
    """Where a host's audit lines go.

    Args:
        config: the `[audit]` section.
        state_dir: the state directory (the default file's folder, and the base of a relative path).
        redact: the config's secrets, masked in every string field.
        worker: this host's id among the workers (`Host.worker_id`).
        skip_servers: servers configured with `audit = false`.
    """

    def __init__(
        self,
        config: AuditConfig,
        state_dir: Path,
        redact: Redactor,
        worker: str,
        skip_servers: frozenset[str] = frozenset(),
        otel: LogSignal | None = None,
    ) -> None:
        self.config, self.redact, self.worker, self.skip = config, redact, worker, skip_servers
        self._otel = otel
        self._fd = -1 if otel is not None else 1 if config.to == "stdout" else _open_private(state_dir, config.path)

    def shell_call(
        self,
        *,
        shell_call_id: str,
        session_id: str,
        caller: str | None,
        address: str | None,
        source: str,
        exit_code: int,
        duration_ms: float,
    ) -> None:
        """The line of a shell call that ended."""
        self._write(
            {
                "event.name": "toolshell.shell_call",
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "bash",
                "toolshell.shell_call.id": shell_call_id,
                "toolshell.session.id": session_id,
                "toolshell.caller": caller,
                "client.address": address,
                "toolshell.source": source,
                "toolshell.exit_code": exit_code,
                "toolshell.outcome": "ok" if exit_code == 0 else "error",
                "toolshell.duration_ms": round(duration_ms, 3),
            }
        )

    def nested_call(
        self,
        *,
        shell_call_id: str,
        session_id: str,
        caller: str | None,
        address: str | None,
        server: str | None,
        tool: str,
        arguments: dict[str, Any],
        outcome: str,
        error_code: str | None,
        duration_ms: float,
        result_bytes: int | None,
    ) -> None:
        """The line of one `tools` call; none for a server with `audit = false`."""
        if server is not None and server in self.skip:
            return
        record: dict[str, Any] = {
            "event.name": "toolshell.nested_call",
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "toolshell.server": server,
            "toolshell.shell_call.id": shell_call_id,
            "toolshell.session.id": session_id,
            "toolshell.caller": caller,
            "client.address": address,
            "toolshell.outcome": outcome,
            "error.type": error_code,
            "toolshell.duration_ms": duration_ms,
            "toolshell.result.bytes": result_bytes,
        }
        if self.config.input == "masked":
            record["gen_ai.tool.call.arguments"] = preview(arguments)
        elif self.config.input == "digest":
            canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
            record["toolshell.arguments.sha256"] = hashlib.sha256(
                canonical.encode("utf-8", "surrogatepass")
            ).hexdigest()
        self._write(record)

    def close(self) -> None:
        """Close the file (stdout stays open); export what the logs signal still holds."""
        if self._otel is not None:
            self._otel.shutdown()
        if self._fd > 2:
            os.close(self._fd)
            self._fd = -1

    def _write(self, record: dict[str, Any]) -> None:
        now = time.time()
        line = {
            "time": datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds"),
            "toolshell.worker": self.worker,
        }
        line.update({k: self.redact(v) if isinstance(v, str) and self.redact else v for k, v in record.items()})
        if self._otel is not None:
            self._otel.emit(line)
            return
        text = json.dumps({k: v for k, v in line.items() if v is not None}, ensure_ascii=False, separators=(",", ":"))
        if len(text) > LINE_LIMIT and "gen_ai.tool.call.arguments" in line:  # one write stays one short line
            line["gen_ai.tool.call.arguments"] = "…(cut)"
            text = json.dumps(
                {k: v for k, v in line.items() if v is not None}, ensure_ascii=False, separators=(",", ":")
            )
        data = (text + "\n").encode("utf-8", "replace")
        try:
            written = os.write(self._fd, data)
        except OSError as e:  # a full disk must not fail the call the line describes; it is logged loudly
            logger.error("the audit line could not be written (%s); calls go on unrecorded", e.strerror or e)
            return
        if written != len(data):
            logger.error("the audit line was written short (%d of %d bytes)", written, len(data))


def _dumps(line: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in line.items() if v is not None}, ensure_ascii=False, separators=(",", ":"))


def _open_private(state_dir: Path, configured: str | None) -> int:
    """The audit file's descriptor: appended to, created 0600, never through a link, never shared wider."""
    path = state_dir / (configured or "audit.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as e:
        why = "a link is never followed" if e.errno == errno.ELOOP else e.strerror or str(e)
        raise ConfigError(
            [
                (
                    "[audit] path",
                    f"{path} cannot be opened for appending ({why}); name a regular file toolshell can write",
                )
            ]
        ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ConfigError([("[audit] path", f"{path} is not a regular file; name a file")])
    if info.st_mode & 0o077:  # a file others could read: tighten it, as its lines name callers and inputs
        os.fchmod(fd, 0o600)
    return fd


def audit_for(
    config: AuditConfig,
    state_dir: Path,
    redact: Redactor,
    worker: str,
    skip_servers: frozenset[str],
    telemetry: TelemetryConfig,
) -> AuditLog | None:
    """The host's audit log, or None when `[audit]` is off.

    Raises:
        ConfigError: `to = "otel"` without the OpenTelemetry SDK (`pip install 'toolshell[otel]'`).
    """
    if not config.enabled:
        return None
    otel: LogSignal | None = None
    if config.to == "otel":
        try:
            # lazy: the OpenTelemetry SDK loads only where the logs signal is configured
            from toolshell.telemetry.audit_logs import OtlpAuditLog
        except ImportError:
            raise ConfigError(
                [("[audit] to", "\"otel\" needs the OpenTelemetry SDK: pip install 'toolshell[otel]'")]
            ) from None
        otel = OtlpAuditLog(telemetry)
    return AuditLog(config, state_dir, redact, worker, skip_servers, otel)


class LogSignal(Protocol):
    """Where records go over the OpenTelemetry logs signal (`telemetry.audit_logs.OtlpAuditLog`)."""

    def emit(self, record: dict[str, Any]) -> None: ...

    def shutdown(self) -> None: ...


__all__ = ["LINE_LIMIT", "AuditLog", "audit_for"]
