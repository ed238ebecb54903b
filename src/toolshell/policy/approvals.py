"""Approval requests and the person's answers, in SQLite.

A request is opened when a call needs approval and the script stops. The person answers it:
- `grant(id, always=False)`: a one-off grant for that exact call — the tool, its input (compared as
  canonical JSON) and the tool as it was then (its fingerprint) — used up by one call;
- `grant(id, always=True)`: the tool is allowed from now on, as long as its description, input
  schema and annotations stay the same; a changed tool voids the grant for good;
- `deny(id)`: recorded; the next call asks again.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.policy.canonical import canonical_json, fingerprint, server_key
from toolshell.registry.entry import ToolEntry
from toolshell.store.sqlite import Store

_SCHEMA = """
CREATE TABLE IF NOT EXISTS approval_requests (
    id TEXT PRIMARY KEY,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    command TEXT NOT NULL,
    input TEXT NOT NULL,
    session_id TEXT NOT NULL,
    why TEXT,
    message TEXT NOT NULL DEFAULT '',
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL,           -- pending | granted_once | granted_always | denied
    created_at REAL NOT NULL,
    decided_at REAL,
    caller TEXT                     -- who made the call (`Session.caller`); NULL: this machine's user
);
CREATE INDEX IF NOT EXISTS approval_requests_open ON approval_requests (status, server, tool, input);
CREATE TABLE IF NOT EXISTS approval_grants (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT,
    kind TEXT NOT NULL,             -- once | always
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    input TEXT,                     -- canonical JSON, for `once`
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL,            -- active | used | voided
    created_at REAL NOT NULL,
    ended_at REAL
);
CREATE INDEX IF NOT EXISTS approval_grants_tool ON approval_grants (server, tool, kind, state);
"""

PENDING, GRANTED_ONCE, GRANTED_ALWAYS, DENIED = "pending", "granted_once", "granted_always", "denied"


@dataclass(frozen=True)
class ApprovalRequest:
    """One question to a person about one call."""

    id: str
    server: str | None
    tool: str
    command: str
    input: dict[str, Any]
    session_id: str
    why: str | None
    status: str
    created_at: float
    message: str = ""
    """The `Risk.message` the card shows, e.g. "… may delete or overwrite data …"."""
    caller: str | None = None
    """Who made the call: the identity `toolshell serve` authenticated, or None (this machine's user)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool": self.command,
            "input": self.input,
            "why": self.why,
            "message": self.message,
            "session_id": self.session_id,
            "caller": self.caller,
            "status": self.status,
        }


def _request_from(row: Any) -> ApprovalRequest:
    return ApprovalRequest(
        id=row["id"],
        server=row["server"] or None,
        tool=row["tool"],
        command=row["command"],
        input=json.loads(row["input"]),
        session_id=row["session_id"],
        why=row["why"],
        status=row["status"],
        created_at=row["created_at"],
        message=row["message"],
        caller=row["caller"],
    )


class Approvals:
    """Approval requests and grants kept in a `Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        store.ensure(_SCHEMA)
        store.ensure_column("approval_requests", "caller", "TEXT")  # a state made before callers were recorded

    def request(
        self,
        entry: ToolEntry,
        input: dict[str, Any],
        session_id: str,
        why: str | None,
        message: str = "",
        caller: str | None = None,
    ) -> ApprovalRequest:
        """Open a request for this call, or return the identical one still open (same tool, input, session).

        Args:
            entry: the tool the call is to.
            input: the call's input as it would be sent.
            session_id: the session whose script stopped.
            why: the `Risk.why` the card shows.
            message: the `Risk.message`, shown to the person with the request.
            caller: who made the call (`Session.caller`), recorded with the request.
        """
        key = (server_key(entry), entry.name, canonical_json(input), session_id)
        rows = self.store.query(
            "SELECT * FROM approval_requests WHERE status=? AND server=? AND tool=? AND input=? AND session_id=?",
            (PENDING, *key),
        )
        if rows:
            return _request_from(rows[0])
        rid = "apr_" + secrets.token_hex(6)
        self.store.execute(
            "INSERT INTO approval_requests (id, server, tool, command, input, session_id, why, message, "
            "fingerprint, status, created_at, caller) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                rid,
                *key[:2],
                entry.command,
                key[2],
                session_id,
                why,
                message,
                fingerprint(entry),
                PENDING,
                time.time(),
                caller,
            ),
        )
        return self.get(rid)

    def get(self, request_id: str) -> ApprovalRequest:
        """The request with this id. Raises `ToolshellError(INVALID_INPUT)` for an unknown id."""
        rows = self.store.query("SELECT * FROM approval_requests WHERE id=?", (request_id,))
        if not rows:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"there is no approval request {request_id!r}; `toolshell approvals` lists the pending ones",
            )
        return _request_from(rows[0])

    def list_pending(self) -> list[ApprovalRequest]:
        """Open requests, oldest first."""
        rows = self.store.query("SELECT * FROM approval_requests WHERE status=? ORDER BY created_at, rowid", (PENDING,))
        return [_request_from(r) for r in rows]

    def grant(self, request_id: str, always: bool = False) -> ApprovalRequest:
        """Answer yes: once (this exact call, one time) or always (this tool while it stays the same)."""
        req = self._open(request_id)
        row = self.store.query("SELECT fingerprint FROM approval_requests WHERE id=?", (request_id,))[0]
        now = time.time()
        self.store.execute(
            "INSERT INTO approval_grants (request_id, kind, server, tool, input, fingerprint, state, "
            "created_at) VALUES (?,?,?,?,?,?,?,?)",
            (
                request_id,
                "always" if always else "once",
                req.server or "",
                req.tool,
                None if always else canonical_json(req.input),
                row["fingerprint"],
                "active",
                now,
            ),
        )
        self._decide(request_id, GRANTED_ALWAYS if always else GRANTED_ONCE, now)
        return self.get(request_id)

    def deny(self, request_id: str) -> ApprovalRequest:
        """Answer no. Recorded; a later identical call asks again."""
        self._open(request_id)
        self._decide(request_id, DENIED, time.time())
        return self.get(request_id)

    def has_once(self, entry: ToolEntry, input: dict[str, Any]) -> bool:
        """True when an unused one-off grant covers this exact call (without using it up)."""
        return self._once_grant(entry, input) is not None

    def consume_once(self, entry: ToolEntry, input: dict[str, Any]) -> bool:
        """Use up a one-off grant for this exact call; False when there is none."""
        grant_id = self._once_grant(entry, input)
        if grant_id is None:
            return False
        cur = self.store.execute(
            "UPDATE approval_grants SET state='used', ended_at=? WHERE id=? AND state='active'", (time.time(), grant_id)
        )
        return cur.rowcount == 1

    def is_always(self, entry: ToolEntry) -> bool:
        """True when an "always" grant covers the tool as it is now; a changed tool voids the grant."""
        rows = self.store.query(
            "SELECT id, fingerprint FROM approval_grants WHERE server=? AND tool=? "
            "AND kind='always' AND state='active'",
            (server_key(entry), entry.name),
        )
        current = fingerprint(entry)
        stale = [r["id"] for r in rows if r["fingerprint"] != current]
        for gid in stale:
            self.store.execute("UPDATE approval_grants SET state='voided', ended_at=? WHERE id=?", (time.time(), gid))
        return len(stale) < len(rows)

    def revoke_always(self, entry: ToolEntry) -> int:
        """Withdraw the tool's "always" grants; returns how many there were."""
        cur = self.store.execute(
            "UPDATE approval_grants SET state='voided', ended_at=? WHERE server=? AND tool=? "
            "AND kind='always' AND state='active'",
            (time.time(), server_key(entry), entry.name),
        )
        return cur.rowcount

    def list_grants(self) -> list[dict[str, Any]]:
        """The grants still in force: `{"kind", "command", "input", "created_at"}`, oldest first."""
        rows = self.store.query(
            "SELECT kind, server, tool, input, created_at FROM approval_grants WHERE state='active' ORDER BY id"
        )
        return [
            {
                "kind": r["kind"],
                "command": ToolEntry(r["server"] or None, r["tool"]).command,
                "input": json.loads(r["input"]) if r["input"] else None,
                "created_at": r["created_at"],
            }
            for r in rows
        ]

    def revoke(self, command: str) -> int:
        """Withdraw every grant in force for a tool, named as a script writes it (`tools github
        delete-branch`, or without `tools`); returns how many were withdrawn."""
        words = command.split()
        words = words[1:] if words[:1] == ["tools"] else words
        wanted = " ".join(["tools", *words]).replace("_", "-").lower()
        active = self.store.query("SELECT id, server, tool FROM approval_grants WHERE state='active'")
        ids = [r["id"] for r in active if ToolEntry(r["server"] or None, r["tool"]).command.lower() == wanted]
        for grant_id in ids:
            self.store.execute(
                "UPDATE approval_grants SET state='voided', ended_at=? WHERE id=?", (time.time(), grant_id)
            )
        return len(ids)

    def _once_grant(self, entry: ToolEntry, input: dict[str, Any]) -> int | None:
        rows = self.store.query(
            "SELECT id FROM approval_grants WHERE server=? AND tool=? AND kind='once' "
            "AND state='active' AND input=? AND fingerprint=? ORDER BY id LIMIT 1",
            (server_key(entry), entry.name, canonical_json(input), fingerprint(entry)),
        )
        return rows[0]["id"] if rows else None

    def _open(self, request_id: str) -> ApprovalRequest:
        req = self.get(request_id)
        if req.status != PENDING:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"approval request {request_id!r} was already answered "
                f"({req.status}); only pending requests can be answered",
            )
        return req

    def _decide(self, request_id: str, status: str, now: float) -> None:
        self.store.execute("UPDATE approval_requests SET status=?, decided_at=? WHERE id=?", (status, now, request_id))
