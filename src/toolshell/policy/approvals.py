"""Approval requests and the person's answers, in SQLite.

A request is opened when a call needs approval and the script stops. The person answers it:
- `grant(id, always=False)`: a one-off grant for that exact call — the tool, its input (compared as
  canonical JSON) and the tool as it was then (its fingerprint) — used up by one call;
- `grant(id, always=True)`: the tool is allowed from now on, as long as its description, input
  schema and annotations stay the same; a changed tool voids the grant for good;
- `deny(id)`: recorded; the next call asks again.

Every answer records who gave it (`by`: the person through the MCP client, at the terminal, with
`toolshell approvals deny`, on the web page), so a denied call can say who denied it.

One pending request per identical call: the same tool of the same program with the same input,
asked for by the same caller (None: this machine's user), shares one request across sessions, so
the same script run twice leaves one request. Different callers get their own: the card names
who asked. A request nobody answered expires `expire_seconds` after it was opened (the config's
`[approval] wait_seconds`, 900 s by default): it leaves the pending list, is listed as `expired`,
and answering it says so; the next identical call opens a new one.

One answer, one call. Answering is one atomic transition (pending → answered, the grant, and a
notification on the store's `approvals` channel naming the request, in one transaction): of two
answers given at once, one is refused as "already answered"; a call waiting for the answer in any
process on the store (`wait_answered`) wakes when it commits. Using up a
once-grant is one conditional `UPDATE`; the call whose update changed the row is the one call it
covers.

Grants belong to the program serving the tool (`ToolEntry.server_id`, see
`registry.server_identity`), not to the server's name: another program configured under the same
name is asked again, and the grant applies again when the config goes back to the program it was
given for. A grant stored before grants recorded the program (`server_id` NULL) applies to no
program: it is listed as "server identity unknown — grant again".
"""

from __future__ import annotations

import difflib
import json
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.policy.approval_tables import NEWER_COLUMNS, SCHEMA
from toolshell.policy.canonical import canonical_json, fingerprint, server_key
from toolshell.registry.entry import ToolEntry
from toolshell.registry.naming import parse_flat_name
from toolshell.registry.server_identity import ServerIdentity
from toolshell.store.protocol import StateStore

PENDING, GRANTED_ONCE, GRANTED_ALWAYS, DENIED = "pending", "granted_once", "granted_always", "denied"
EXPIRED = "expired"
DEFAULT_EXPIRE_SECONDS = 900.0
"""How long a request waits for an answer when no config says (`[approval] wait_seconds`'s default)."""
CHANNEL = "approvals"
"""The store channel an answer is announced on; the payload is the request's id."""
IN_FORCE, OTHER_PROGRAM, NOT_CONFIGURED, IDENTITY_UNKNOWN = "in_force", "other_program", "not_configured", "unknown"


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
    decided_by: str | None = None
    """Who answered it (e.g. "the person through the MCP client"), None while pending or not recorded."""

    @property
    def answer(self) -> str:
        """The recorded answer for people: `denied by the person at the terminal`, `pending`, …"""
        if self.status in (PENDING, EXPIRED):
            return self.status
        return f"{self.status} by {self.decided_by}" if self.decided_by else self.status

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
            "decided_by": self.decided_by,
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
        decided_by=row["decided_by"],
    )


class Approvals:
    """Approval requests and grants kept in a `StateStore` (SQLite or PostgreSQL)."""

    def __init__(self, store: StateStore, expire_seconds: float = DEFAULT_EXPIRE_SECONDS) -> None:
        self.store = store
        self.expire_seconds = expire_seconds
        self._opening = threading.Lock()
        """Held while a request is looked up and opened: the calls of one process ask from worker
        threads, and two identical ones at once must open one request (PostgreSQL's transaction,
        at READ COMMITTED, would let both insert)."""
        store.migrate("approvals", [SCHEMA])
        for table, column in NEWER_COLUMNS:
            store.ensure_column(table, column, "TEXT")

    def request(
        self,
        entry: ToolEntry,
        input: dict[str, Any],
        session_id: str,
        why: str | None,
        message: str = "",
        caller: str | None = None,
    ) -> ApprovalRequest:
        """Open a request for this call, or return the identical one still pending: the same tool of
        the same program, the same input and the same caller, from any session.

        Args:
            entry: the tool the call is to.
            input: the call's input as it would be sent.
            session_id: the session whose script stopped.
            why: the `Risk.why` the card shows.
            message: the `Risk.message`, shown to the person with the request.
            caller: who made the call (`Session.caller`), recorded with the request.
        """
        key = (server_key(entry), entry.server_id, entry.name, canonical_json(input))
        self.expire()
        with self._opening, self.store.transaction():  # two identical calls at once open one request
            rows = self.store.query(
                "SELECT * FROM approval_requests WHERE status=? AND server=? AND server_id=? AND tool=? "
                "AND input=? AND COALESCE(caller, '')=? ORDER BY created_at, id",
                (PENDING, *key, caller or ""),
            )
            if rows:
                return _request_from(rows[0])
            rid = "apr_" + secrets.token_hex(6)
            self.store.execute(
                "INSERT INTO approval_requests (id, server, server_id, server_label, tool, command, input, session_id, "
                "why, message, fingerprint, status, created_at, caller) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    rid,
                    *key[:2],
                    entry.server_label,
                    entry.name,
                    entry.command,
                    key[3],
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
        self.expire()
        rows = self.store.query("SELECT * FROM approval_requests WHERE id=?", (request_id,))
        if not rows:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"there is no approval request {request_id!r}; `toolshell approvals` lists the pending ones",
            )
        return _request_from(rows[0])

    def list_pending(self) -> list[ApprovalRequest]:
        """Open requests, oldest first (the expired ones have left)."""
        self.expire()
        rows = self.store.query("SELECT * FROM approval_requests WHERE status=? ORDER BY created_at, id", (PENDING,))
        return [_request_from(r) for r in rows]

    def list_expired(self, limit: int = 50) -> list[ApprovalRequest]:
        """The requests that expired unanswered, newest first (at most `limit`)."""
        self.expire()
        rows = self.store.query(
            "SELECT * FROM approval_requests WHERE status=? ORDER BY created_at DESC, id DESC LIMIT ?",
            (EXPIRED, limit),
        )
        return [_request_from(r) for r in rows]

    def expire(self) -> int:
        """Mark the requests pending for longer than `expire_seconds` as expired; returns how many."""
        now = time.time()
        cur = self.store.execute(
            "UPDATE approval_requests SET status=?, decided_at=? WHERE status=? AND created_at<?",
            (EXPIRED, now, PENDING, now - self.expire_seconds),
        )
        return cur.rowcount

    def grant(self, request_id: str, always: bool = False, by: str | None = None) -> ApprovalRequest:
        """Answer yes: once (this exact call, one time) or always (this tool while it stays the same).

        Raises:
            ToolshellError: `invalid_input` for an unknown id, or a request already answered
                (also when another answer was given at the same moment: only one counts).
        """
        return self._answer(request_id, GRANTED_ALWAYS if always else GRANTED_ONCE, by)

    def deny(self, request_id: str, by: str | None = None) -> ApprovalRequest:
        """Answer no. Recorded with who said it (`by`); a later identical call asks again."""
        return self._answer(request_id, DENIED, by)

    async def wait_answered(self, request_id: str) -> ApprovalRequest:
        """The request once it is answered, here or in any process on the store; bound the wait
        with `anyio.move_on_after`. The store's row is the truth: it is read, and read again each
        time a notification names the request (or some may have been missed)."""
        with self.store.subscribe(CHANNEL) as subscription:  # before the read: no answer slips between
            while (found := await anyio.to_thread.run_sync(self.get, request_id)).status == PENDING:
                while not (await subscription.wait()).concerns(request_id):
                    pass
            return found

    def has_once(self, entry: ToolEntry, input: dict[str, Any]) -> bool:
        """True when an unused one-off grant covers this exact call (without using it up)."""
        return bool(self.store.query(_ONCE_GRANT, self._once_key(entry, input)))

    def consume_once(self, entry: ToolEntry, input: dict[str, Any]) -> bool:
        """Use up a one-off grant for this exact call; False when there is none left.

        One conditional `UPDATE`: of two calls (or processes) using the same grant at once, exactly
        one gets True. Only the call that got True may run on it.
        """
        with self.store.transaction():
            cur = self.store.execute(
                f"UPDATE approval_grants SET state='used', ended_at=? WHERE state='active' AND id=({_ONCE_GRANT})",
                (time.time(), *self._once_key(entry, input)),
            )
        return cur.rowcount == 1

    def withdraw_once(self, request_id: str) -> int:
        """Withdraw the once-grant that answered this request, if it is still unused."""
        cur = self.store.execute(
            "UPDATE approval_grants SET state='voided', ended_at=? WHERE request_id=? AND kind='once' "
            "AND state='active'",
            (time.time(), request_id),
        )
        return cur.rowcount

    def is_always(self, entry: ToolEntry) -> bool:
        """True when an "always" grant covers the tool as it is now, served by the program it was
        given for; a changed tool voids the grant for good, another program is not covered."""
        rows = self.store.query(
            "SELECT id, fingerprint FROM approval_grants WHERE server=? AND server_id=? AND tool=? "
            "AND kind='always' AND state='active'",
            (server_key(entry), entry.server_id, entry.name),
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

    def list_grants(self, current: Mapping[str, ServerIdentity] | None = None) -> list[dict[str, Any]]:
        """The grants not used up or withdrawn, oldest first: `{"kind", "command", "input",
        "created_at", "server", "program", "status", "note"}`.

        `program` is the command line, URL or module the grant was given for (secrets masked).
        `status` says whether it applies: `in_force`; `other_program` (the config's server of that
        name runs another program now: the grant does not apply to it); `not_configured`;
        `unknown` (made before grants recorded the program: it applies to none; grant again).
        `note` says the same for people (None when in force).

        Args:
            current: the configured servers' identities by name, to tell which grants apply;
                None: not checked against a config.
        """
        rows = self.store.query(
            "SELECT kind, server, server_id, server_label, tool, input, created_at FROM approval_grants "
            "WHERE state='active' ORDER BY id"
        )
        return [_grant_json(r, current) for r in rows]

    def revoke(self, command: str) -> int:
        """Withdraw every grant in force for a tool, named in any form a listing or script shows it
        (see `tool_command`); returns how many were withdrawn."""
        wanted = tool_command(command)
        active = self.store.query("SELECT id, server, tool FROM approval_grants WHERE state='active'")
        ids = [r["id"] for r in active if _command_of(r) == wanted]
        for grant_id in ids:
            self.store.execute(
                "UPDATE approval_grants SET state='voided', ended_at=? WHERE id=?", (time.time(), grant_id)
            )
        return len(ids)

    def nearest_grants(self, command: str, n: int = 3) -> list[str]:
        """The tools with grants in force whose names are nearest to `command` (for "nothing matched")."""
        active = {
            _command_of(r) for r in self.store.query("SELECT server, tool FROM approval_grants WHERE state='active'")
        }
        return difflib.get_close_matches(tool_command(command), sorted(active), n=n, cutoff=0.5)

    def _once_key(self, entry: ToolEntry, input: dict[str, Any]) -> tuple[str, ...]:
        return (server_key(entry), entry.server_id, entry.name, canonical_json(input), fingerprint(entry))

    def _answer(self, request_id: str, status: str, by: str | None) -> ApprovalRequest:
        """Pending → `status` and, for a yes, its grant: one transaction, so one answer counts."""
        self.expire()
        now = time.time()
        with self.store.transaction():
            cur = self.store.execute(
                "UPDATE approval_requests SET status=?, decided_at=?, decided_by=? WHERE id=? AND status=?",
                (status, now, by, request_id, PENDING),
            )
            if cur.rowcount != 1:
                raise _not_pending(self.get(request_id), self.expire_seconds)
            if status != DENIED:
                kind = "always" if status == GRANTED_ALWAYS else "once"
                self.store.execute(
                    "INSERT INTO approval_grants (request_id, kind, server, server_id, server_label, tool, input, "
                    "fingerprint, state, created_at) SELECT id, ?, server, server_id, server_label, tool, "
                    "CASE WHEN ?='once' THEN input END, fingerprint, 'active', ? FROM approval_requests WHERE id=?",
                    (kind, kind, now, request_id),
                )
            self.store.notify(CHANNEL, request_id)  # sent at commit, to every process on the store
        return self.get(request_id)


def _not_pending(found: ApprovalRequest, expire_seconds: float) -> ToolshellError:
    if found.status == EXPIRED:
        return ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"approval request {found.id!r} expired: nobody answered it within {expire_seconds:g} s "
            "(`[approval] wait_seconds`); run the script again to ask again",
        )
    return ToolshellError(
        ErrorCode.INVALID_INPUT,
        f"approval request {found.id!r} was already answered ({found.answer}); only pending requests can be answered",
    )


def tool_command(named: str) -> str:
    """A tool as `tools <server> <tool>`, folded (lower case, `-` for `_`), from any form people
    copy: `tools fs write-file`, `fs write_file`, `fs:write_file`, `mcp_fs__write_file`, or a grant
    line of `toolshell approvals grants` (`always  tools fs write-file  (server fs: …)`)."""
    words = named.split()
    words = words[1:] if words[:1] in (["once"], ["always"]) else words
    words = words[1:] if words[:1] == ["tools"] else words
    words = words[:2] if len(words) > 1 and not words[1].startswith(("(", "{")) else words[:1]
    if len(words) == 1:
        server, tool = parse_flat_name(words[0])
        if server is None and ":" in words[0]:
            server, _, tool = words[0].partition(":")
        words = [w for w in (server, tool) if w]
    return " ".join(["tools", *words]).replace("_", "-").lower()


def _command_of(row: Any) -> str:
    return ToolEntry(row["server"] or None, row["tool"]).command.lower()


_ONCE_GRANT = (
    "SELECT id FROM approval_grants WHERE server=? AND server_id=? AND tool=? AND kind='once' "
    "AND state='active' AND input=? AND fingerprint=? ORDER BY id LIMIT 1"
)


def _grant_json(row: Any, current: Mapping[str, ServerIdentity] | None) -> dict[str, Any]:
    server: str | None = row["server"] or None
    now = current.get(server) if current is not None and server is not None else None
    if row["server_id"] is None:
        status, note = IDENTITY_UNKNOWN, "server identity unknown (granted before grants recorded it): grant again"
    elif current is None or server is None or (now is not None and now.id == row["server_id"]):
        status, note = IN_FORCE, None
    elif now is None:
        status, note = NOT_CONFIGURED, f"not in force: no server {server} is configured"
    else:
        status, note = OTHER_PROGRAM, f"not in force: {server} now runs {now.label}, another program"
    return {
        "kind": row["kind"],
        "command": ToolEntry(server, row["tool"]).command,
        "input": json.loads(row["input"]) if row["input"] else None,
        "created_at": row["created_at"],
        "server": server,
        "program": row["server_label"] or None,
        "status": status,
        "note": note,
    }
