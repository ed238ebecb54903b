"""Tool statistics from the timeline (`toolshell stats`, the web page's table): per server and
tool, the calls, the errors by code, the approvals asked, and the p50/p95/max duration."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from toolshell.errors import ErrorCode
from toolshell.safe_text import escape
from toolshell.store.protocol import Row, StateStore
from toolshell.timeline.sinks import STEPS

_RAN = ("completed", "failed")
"""Outcomes of calls that were made: only their durations say how long a tool takes."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re2.compile(r"^(?:(\d{1,9})([smhdw]))+$")
_PART = re2.compile(r"(\d{1,9})([smhdw])")


@dataclass
class ToolStats:
    """One row: a server's tool (server None: a top-level tool such as `web-fetch`)."""

    server: str | None
    tool: str
    calls: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    approvals_asked: int = 0
    p50_ms: float | None = None
    """None when no call of it ran (all refused or stopped): no duration to tell, not 0 ms."""
    p95_ms: float | None = None
    max_ms: float | None = None


def parse_duration(text: str) -> float:
    """Seconds in `30s`, `15m`, `2h`, `7d`, `1w` or a sum such as `1h30m`.

    Raises:
        ValueError: with the form to write instead.
    """
    cleaned = text.strip().lower()
    if not _DURATION.match(cleaned):
        raise ValueError(f"{text!r} is not a duration; write a number and a unit: 30s, 15m, 2h, 7d, 1w or 1h30m")
    return float(sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(cleaned)))


def split_command(command: str) -> tuple[str | None, str]:
    """`tools github get-pull` → ("github", "get-pull"); `tools web-fetch` → (None, "web-fetch")."""
    words = command.split()[1:]
    if len(words) >= 2:
        return words[0], words[1]
    return None, words[0] if words else command


def summarize(calls: Iterable[Row | Mapping[str, Any]], asked: Iterable[Row | Mapping[str, Any]]) -> list[ToolStats]:
    """Rows from timeline `nested_calls` rows and `approval_requests` rows (both name the call's
    `command`). A call refused as `unknown_command` named no tool (a typo): it stays in the timeline
    but makes no row."""
    rows: dict[tuple[str | None, str], ToolStats] = {}
    durations: dict[tuple[str | None, str], list[float]] = defaultdict(list)
    for call in calls:
        if call["error_code"] == ErrorCode.UNKNOWN_COMMAND:
            continue
        key = split_command(str(call["command"]))
        row = rows.setdefault(key, ToolStats(*key))
        row.calls += 1
        if call["error_code"]:
            row.errors[call["error_code"]] = row.errors.get(call["error_code"], 0) + 1
        if call["outcome"] in _RAN:
            durations[key].append(float(call["duration_ms"]))
    for request in asked:
        key = split_command(str(request["command"]))
        rows.setdefault(key, ToolStats(*key)).approvals_asked += 1
    for key, row in rows.items():
        taken = sorted(durations[key])
        row.p50_ms, row.p95_ms = _rank(taken, 50), _rank(taken, 95)
        row.max_ms = taken[-1] if taken else None
    return sorted(rows.values(), key=lambda r: (r.server or "", r.tool))


def _rank(sorted_ms: list[float], percent: int) -> float | None:
    """The nearest-rank percentile (None for no calls)."""
    if not sorted_ms:
        return None
    return sorted_ms[max(math.ceil(percent / 100 * len(sorted_ms)) - 1, 0)]


def tool_stats(store: StateStore, since: float | None = None, server: str | None = None) -> list[ToolStats]:
    """The rows from a store's timeline and approval requests since `since` (unix seconds).

    The `approval_requests` table must exist (`policy.approvals.Approvals(store)` makes it).
    """
    store.migrate("timeline", STEPS)
    start = 0.0 if since is None else since
    calls = store.query(
        "SELECT command, outcome, error_code, duration_ms FROM nested_calls WHERE started_at >= ?", [start]
    )
    asked = store.query("SELECT command FROM approval_requests WHERE created_at >= ?", [start])
    rows = summarize(calls, asked)
    return [r for r in rows if server is None or r.server == server]


def stats_json(rows: Iterable[ToolStats], since: float | None) -> dict[str, Any]:
    """`toolshell stats --json` and `GET /api/stats`: `{"since": …, "rows": […]}`."""
    return {"since": since, "rows": [asdict(r) for r in rows]}


def render_stats(rows: list[ToolStats]) -> str:
    """A plain-text table for people."""
    if not rows:
        return "no tool calls recorded in that time\n"
    head = ("server", "tool", "calls", "errors", "approvals", "p50", "p95", "max")
    lines = [
        (
            r.server or "-",
            r.tool,
            str(r.calls),
            ", ".join(f"{code} {n}" for code, n in sorted(r.errors.items())) or "-",
            str(r.approvals_asked),
            _ms(r.p50_ms),
            _ms(r.p95_ms),
            _ms(r.max_ms),
        )
        for r in rows
    ]
    widths = [max(len(escape(line[i])) for line in [head, *lines]) for i in range(len(head))]
    return "".join(
        "  ".join(escape(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() + "\n"
        for line in [head, *lines]
    )


def _ms(value: float | None) -> str:
    if value is None:  # no call ran: nothing to measure
        return "-"
    return f"{value / 1000:.2f}s" if value >= 1000 else f"{value:.1f}ms"


__all__ = ["ToolStats", "parse_duration", "render_stats", "split_command", "stats_json", "summarize", "tool_stats"]
