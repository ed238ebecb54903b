"""The timeline's rows as `toolshell timeline` shows them: plain text, or JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, tzinfo
from typing import Any

from toolshell.safe_text import escape

MARKS = {"completed": "✓", "failed": "✗", "refused": "⊘", "stopped_for_approval": "⏸"}


def _one_line(text: str) -> str:
    """A multi-line script shown on its row: newlines as ` ⏎ `."""
    return " ⏎ ".join(line.strip() for line in text.splitlines() if line.strip())


def render_timeline(rows: Iterable[dict[str, Any]], tz: tzinfo | None = None) -> str:
    """Plain text for `toolshell timeline`: one line per shell call, one indented line per nested call.

    Args:
        rows: From `query` or `MemorySink.timeline`.
        tz: The time zone to show times in; the local zone when None.
    """
    lines: list[str] = []
    for row in rows:
        when = datetime.fromtimestamp(row["started_at"], tz or datetime.now().astimezone().tzinfo)
        exit_text = "running" if row["exit_code"] is None else f"exit {row['exit_code']}"
        if row.get("ended_by") == "worker_lost":
            exit_text += " (its worker stopped mid-call)"
        took = "" if row["duration_ms"] is None else f"  {_duration(row['duration_ms'])}"
        source = f"{row['source']} from {row['address']}" if row.get("address") else row["source"]
        lines.append(
            f"{when:%Y-%m-%d %H:%M:%S}  {row['session_id']}  [{source}]  {_one_line(row['script_preview'])}  "
            f"{exit_text}{took}"
        )
        for call in row["calls"]:
            error = f"  {call['error_code']}" if call["error_code"] else ""
            mark = MARKS.get(call["outcome"], "?")
            lines.append(
                f"  {mark} {call['command']}  {call['input_preview']}  {_duration(call['duration_ms'])}{error}"
            )
    return "\n".join(map(escape, lines)) + "\n" if lines else "no shell calls recorded yet\n"


def timeline_json(rows: Iterable[dict[str, Any]]) -> str:
    """The rows as JSON (`toolshell timeline --json`): a list of shell calls with their `calls`."""
    return json.dumps(list(rows), indent=2, ensure_ascii=False) + "\n"


def _duration(ms: float) -> str:
    return f"{ms:.0f} ms" if round(ms) < 1000 else f"{ms / 1000:.1f} s"
