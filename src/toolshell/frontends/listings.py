"""The JSON shape of each listing people and programs read: the CLI's `--json` and the web page's API.

One function per listing, so `toolshell approvals list --json` and `GET /api/approvals` can never
drift apart. Times are ISO 8601 in UTC; the timeline keeps its Unix seconds (`started_at`), as
`toolshell timeline --json` always printed them.
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from typing import Any

from toolshell.config.names import fold
from toolshell.connections.base import ServerStatus
from toolshell.policy.approvals import ApprovalRequest
from toolshell.redact import Redactor, redact_json
from toolshell.scripts.store import SavedScript

NEEDS_APPROVAL = "needs_approval"


def iso(seconds: float) -> str:
    """Unix seconds as `2026-12-01T10:09:29Z`."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def approval_json(request: ApprovalRequest) -> dict[str, Any]:
    """`{id, tool, input, risk, why, status, created}` plus the message and session the card shows."""
    return {
        "id": request.id,
        "tool": request.command,
        "input": request.input,
        "risk": NEEDS_APPROVAL,  # a request is only ever opened for a call whose risk is needs_approval
        "why": request.why,
        "status": request.status,
        "created": iso(request.created_at),
        "message": request.message,
        "session_id": request.session_id,
    }


def grant_json(grant: dict[str, Any]) -> dict[str, Any]:
    """A grant from `Approvals.list_grants`: `{kind, tool, input, created, server, status, note}`."""
    return {
        "kind": grant["kind"],
        "tool": grant["command"],
        "input": grant["input"],
        "created": iso(grant["created_at"]),
        "server": {"name": grant["server"], "program": grant["program"]},
        "status": grant["status"],
        "note": grant["note"],
    }


def script_json(script: SavedScript, *, body: bool = False) -> dict[str, Any]:
    """A saved script: name, description, input schema, times, and its body when asked for."""
    out: dict[str, Any] = {
        "name": script.name,
        "description": script.description,
        "input_schema": script.input_schema,
        "created": iso(script.created_at),
        "updated": iso(script.updated_at),
    }
    if body:
        out["body"] = script.body
    return out


def server_rows(statuses: list[ServerStatus], redact: Redactor) -> list[dict[str, Any]]:
    """Each server's status (`toolshell servers`, `GET /api/servers`), every field redacted: the
    whole row goes through the redactor, so a field added to `ServerStatus` cannot show a secret."""
    return [redact_json(s.to_json(), redact) for s in statuses]


def runs_of(script: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trigger runs of a saved script among timeline rows: a trigger run's script is
    `tools scripts NAME '{input}'` (see `Host.run_saved_script`)."""
    found = []
    for row in rows:
        if row["source"] != "trigger":
            continue
        try:
            words = shlex.split(row["script_preview"])
        except ValueError:  # a preview cut in the middle of a quoted input
            words = row["script_preview"].split()
        if words[:2] == ["tools", "scripts"] and len(words) > 2 and fold(words[2]) == fold(script):
            found.append(
                {
                    k: row[k]
                    for k in ("id", "session_id", "exit_code", "started_at", "duration_ms", "worker", "ended_by")
                }
            )
    return found
